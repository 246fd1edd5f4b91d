"""Google ADK (``google-adk``): what only the agent runtime knows.

The model calls themselves are recorded by the model's client library: the
google_genai integration for ADK's default Gemini models (``LiteLlm`` models
by the litellm one), so ``instrument()`` (or ``instrument("google_adk",
"google_genai")``) covers a run, and no model call is recorded twice. A run
(``Runner.run_async``, ``InMemoryRunner``, plain or ``StreamingMode.SSE``)
records into the current session; this module adds:

* tool results as ADK produces them (each ``function_response`` of the run's
  events, paired with the waiting call by id, else by name and order: the
  Gemini API sends calls without ids), so results that never reach a model
  are there too: ``transfer_to_agent``'s, or a last tool's whose output ends
  the run;
* transfers between agents (``sub_agents``) in the one session, as handoffs:
  the transfer call and its result, then the new agent's instructions where
  they start to apply. ADK shows the new agent the earlier agents' turns as
  user text ("For context: [agent] said ..."); those relays are not recorded
  as user turns, since the turns they repeat are in the trace already;
* agents as tools (``AgentTool``): the inner agent's run records into a child
  session of its own (:func:`ststrace._subagents.new_child`: beside the
  parent's file, named after the agent, header ``parentSessionId`` /
  ``parentToolCallId``), open for exactly that run; the parent keeps the call
  and its result.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import Any

from ststrace import _records
from ststrace._adapters import gemini
from ststrace._adapters._common import get
from ststrace._context import current
from ststrace._errors import internal_error
from ststrace._session import Session
from ststrace._subagents import new_child, tool_scope

LIBRARY = "google.adk"
DISTRIBUTION = "google-adk"
MIN_VERSION = (1, 30)

_Wrapper = Any
#: How ADK opens its relay of another agent's turn (stable across ADK versions).
_RELAY = "For context:"

#: The calls an agent tool is running as, per session: two parallel calls of
#: one agent link to two calls.
_claimed: weakref.WeakKeyDictionary[Session, set[str]] = weakref.WeakKeyDictionary()


def _waiting_call(session: Session, call_id: Any, name: Any) -> str | None:
    """The session's unanswered call a function response or tool run answers:
    the one with its id, else the oldest of its name not claimed by a running
    agent tool (ADK's own ids differ from the recorded ones when the model
    sent none)."""
    with session._state_lock:
        pending = session._pending
        if isinstance(call_id, str) and call_id in pending:
            return call_id
        claimed = _claimed.get(session, ())
        return next((c for c, p in pending.items() if p.name == name and c not in claimed), None)


# -- the run's events: tool results ---------------------------------------------------


def _record_results(session: Session, event: Any) -> None:
    content = get(event, "content")
    for part in get(content, "parts") or ():
        response = get(part, "function_response")
        if response is None:
            continue
        call_id = _waiting_call(session, get(response, "id"), get(response, "name"))
        if call_id is not None and session._answer(call_id):
            session._emit(_records.tool_result(call_id, gemini.result_text(get(response, "response"))))


async def _events(events: Any, session: Session) -> AsyncIterator[Any]:
    try:
        async for event in events:
            if not session.closed:
                try:
                    _record_results(session, event)
                except Exception as exc:
                    internal_error(exc, "google-adk event")
            yield event
    finally:
        # Leaving early (Aclosing, a break) closes the run as ADK expects.
        await events.aclose()


def run_wrapper(patch: Any) -> _Wrapper:
    """``Runner.run_async`` (an async generator of events)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        events = wrapped(*args, **kwargs)
        session = current.get()
        if session is None or not patch.active or not hasattr(events, "__anext__"):
            return events
        return _events(events, session)

    return wrapper


# -- model requests: other agents' turns relayed as user text --------------------------


def _mark_relays(session: Session, request: Any) -> None:
    for content in get(request, "contents") or ():
        if get(content, "role") != "user":
            continue
        parts = get(content, "parts") or ()
        first = get(parts[0], "text") if parts else None
        if isinstance(first, str) and first.startswith(_RELAY):
            # Matched like a message recorded by s.user(): skipped once
            # when the model call's inputs are recorded.
            session._direct.extend(m for m in gemini.input_messages([content], None) if m["role"] == "user")


def call_llm_wrapper(patch: Any) -> _Wrapper:
    """``BaseLlmFlow._call_llm_async``: the request is final, the model not yet called."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        session = current.get()
        if session is not None and patch.active:
            try:
                request = kwargs.get("llm_request", args[1] if len(args) > 1 else None)
                _mark_relays(session, request)
            except Exception as exc:
                internal_error(exc, "google-adk model request")
        return wrapped(*args, **kwargs)

    return wrapper


# -- agents as tools: child sessions ------------------------------------------------------


class _Child:
    """The child session of an agent run as a tool, for the parent's call *call_id*."""

    __slots__ = ("parent", "call_id", "session")

    def __init__(self, parent: Session, call_id: str, agent: Any) -> None:
        self.parent = parent
        self.call_id = call_id
        name = getattr(agent, "name", None)
        self.session = new_child(parent, name if isinstance(name, str) else None)

    def open(self) -> None:
        # In the scope of the parent's call: the header gets parentToolCallId.
        with tool_scope(self.parent, self.call_id):
            self.session._open_file()

    def close(self) -> None:
        err = self.session._close_file()
        if err is not None:
            internal_error(err, "google-adk child session close")


def _child_for(patch: Any, instance: Any, kwargs: dict[str, Any]) -> _Child | None:
    session = current.get()
    if session is None or not patch.active or session.disabled or session.closed:
        return None
    try:
        call_id = _waiting_call(
            session, getattr(kwargs.get("tool_context"), "function_call_id", None), getattr(instance, "name", None)
        )
        if call_id is None:
            return None
        with session._state_lock:
            claimed = _claimed.get(session)
            if claimed is None:
                claimed = _claimed[session] = set()
            claimed.add(call_id)
        return _Child(session, call_id, getattr(instance, "agent", None))
    except Exception as exc:
        internal_error(exc, "google-adk agent tool")
        return None


def agent_tool_wrapper(patch: Any) -> _Wrapper:
    """``AgentTool.run_async``: runs the agent with a Runner of its own."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        child = _child_for(patch, instance, kwargs)
        if child is None:
            return wrapped(*args, **kwargs)
        return _run_child(wrapped, args, kwargs, child)

    return wrapper


async def _run_child(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], child: _Child) -> Any:
    try:
        try:
            await asyncio.to_thread(child.open)  # file creation off the event loop
        except Exception as exc:
            # Recorded in the parent session then, as without sub-agent sessions.
            internal_error(exc, "google-adk child session open")
            return await wrapped(*args, **kwargs)
        token = current.set(child.session)
        try:
            return await wrapped(*args, **kwargs)
        finally:
            current.reset(token)
            await asyncio.to_thread(child.close)
    finally:
        with child.parent._state_lock:
            _claimed.get(child.parent, set()).discard(child.call_id)


TARGETS = [
    ("google.adk.runners", "Runner.run_async", run_wrapper),
    ("google.adk.flows.llm_flows.base_llm_flow", "BaseLlmFlow._call_llm_async", call_llm_wrapper),
    ("google.adk.tools.agent_tool", "AgentTool.run_async", agent_tool_wrapper),
]
