"""Context variables shared by the session, the decorators and the integrations."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

#: The session that decorated calls in this context record into (a
#: ``Session`` or ``None``; typed ``Any`` because this module sits below
#: ``_session``: the adapters and ``_links`` read it, ``_session`` sets it).
current: ContextVar[Any] = ContextVar("ststrace.current_session", default=None)

#: A tool-call id bound by ``with tool_call_id(...)`` for the next @tool call.
bound_tool_call_id: ContextVar[str | None] = ContextVar("ststrace.tool_call_id", default=None)

#: Set while an @llm call (or an instrumented client call) is recording, so a
#: client call inside a decorated function is recorded once, not twice.
in_llm_call: ContextVar[bool] = ContextVar("ststrace.in_llm_call", default=False)


#: The ``@tool`` call (or integration tool scope) running in this context, so a
#: Session opened inside it links to it as a sub-agent (see ``_subagents``).
current_tool_call: ContextVar[Any] = ContextVar("ststrace.current_tool_call", default=None)

#: Set by ``ststrace.testing.replay(..., tools="recorded")`` while its server
#: runs: ``take(name, call_id, arguments)`` gives ``(True, recorded result)`` for
#: a ``@tool`` call the recording answers, so the function does not run. A
#: plain global, not a context variable: worker threads and tasks started
#: anywhere see it. ``None`` (the rule) costs the wrapper one attribute read.
replayed_tools: Any = None
