"""Sub-agent links: a ``Session`` opened while another is current is its child.

The child's header carries ``parentSessionId`` and, when it was opened inside a
tool call of that parent, ``parentToolCallId``. Which tool call is running is
kept in the context variable :data:`ststrace._context.current_tool_call`, set by
``@tool`` around the user's function (sync and async tools) and by
:func:`tool_scope`.

Hook for framework integrations (OpenAI Agents SDK handoffs and agents-as-tools,
smolagents managed agents, ...): run the sub-agent inside
``with tool_scope(session, call_id) as scope:``; a ``Session`` the sub-agent
opens there is linked to that call, and ``scope.children`` lists the ids of
the child sessions opened inside it afterwards (an integration may mention them
in the tool result when the tool itself returned nothing, as ``@tool`` does
through :func:`mention`). An integration that opens the child ``Session``
itself can instead pass ``Session(parent=parent_session)`` from inside the scope,
or call :func:`ststrace._subagents.new_child`, which also gives the child its parent's settings and
puts its file beside the parent's.

This module sits below ``_session``, which calls :func:`check_parent` and
:func:`links_for`; it never imports ``_session`` (a session is ``Any`` here).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from ._context import current, current_tool_call

__all__ = ["AUTO", "ToolScope", "check_parent", "links_for", "mention", "tool_scope"]


class _Auto(enum.Enum):
    """``Session(parent=...)``'s default: whatever session is current when it opens.

    A sentinel, not ``None``, because ``parent=None`` is the explicit opt-out."""

    AUTO = "auto"

    def __repr__(self) -> str:
        return "<the current session>"


AUTO = _Auto.AUTO

class _ScopeLike(Protocol):
    session: Any
    call_id: str
    children: list[str] | None


class ToolScope:
    """A running tool call that sub-agent sessions can be linked to."""

    __slots__ = ("session", "call_id", "children")

    def __init__(self, session: Any, call_id: str) -> None:
        self.session = session
        self.call_id = call_id
        self.children: list[str] | None = None


@contextmanager
def tool_scope(session: Any, call_id: str) -> Iterator[ToolScope]:
    """Code in this block runs inside tool call *call_id* of *session*: sessions
    opened in it become children of *session* with ``parentToolCallId``."""
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"tool_scope needs a non-empty tool call id, got {call_id!r}")
    scope = ToolScope(session, call_id)
    token = current_tool_call.set(scope)
    try:
        yield scope
    finally:
        current_tool_call.reset(token)


def check_parent(parent: Any, session_type: type) -> Any:
    """Validate ``Session(parent=...)`` at construction (*session_type* is
    ``Session``, passed in by it: this module sits below ``_session``)."""
    if parent is AUTO or parent is None or isinstance(parent, session_type):
        return parent
    if isinstance(parent, str) and parent:
        return parent  # a parent session id (e.g. from another process)
    raise ValueError(
        f"parent must be a Session, a parent session id, or None (no parent), not {type(parent).__name__}"
    )


def links_for(child: Any, parent: Any) -> dict[str, str]:
    """The header fields linking *child* to its parent, registering it with the
    running tool call it was opened in. Called once, when the header is written."""
    if parent is None:
        return {}
    if isinstance(parent, str):
        return {"parentSessionId": parent}
    if parent is AUTO:
        parent = current.get()
        if parent is None:
            return {}
    if parent is child:
        return {}
    links = {"parentSessionId": str(parent.id)}
    running = current_tool_call.get()
    if type(running) is tuple:
        # @tool's lean path: (session, call id); the session keeps the
        # children by call id (a tuple costs a quarter of a scope object).
        if running[0] is parent:
            links["parentToolCallId"] = running[1]
            parent._call_children.setdefault(running[1], []).append(child.id)  # safe from any thread
        return links
    scope: _ScopeLike | None = running
    if scope is not None and scope.session is parent:
        links["parentToolCallId"] = scope.call_id
        if scope.children is None:
            scope.children = []
        scope.children.append(child.id)  # list.append: safe from any thread
    return links


def scope_session(scope: Any) -> Any:
    """The session of a running tool call's scope (a scope object, or the
    ``(session, call id)`` tuple of ``@tool``'s lean path)."""
    return scope[0] if type(scope) is tuple else scope.session


def mention(children: list[str]) -> str:
    """The tool result recorded for a tool that returned nothing but ran sub-agents."""
    if len(children) == 1:
        return f"[sub-agent session {children[0]}]"
    return "[sub-agent sessions " + ", ".join(children) + "]"
