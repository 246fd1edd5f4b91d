"""Sub-agent sessions: a ``Session`` opened while another is current is its child.

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
or call :func:`new_child`, which also gives the child its parent's settings and
puts its file beside the parent's.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ._context import current, current_tool_call
from ._ids import new_session_id

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["AUTO", "ToolScope", "check_parent", "child_path", "links_for", "mention", "new_child", "tool_scope"]


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
def tool_scope(session: Session, call_id: str) -> Iterator[ToolScope]:
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


def check_parent(parent: Any) -> Any:
    """Validate ``Session(parent=...)`` at construction."""
    from ._session import Session

    if parent is AUTO or parent is None or isinstance(parent, Session):
        return parent
    if isinstance(parent, str) and parent:
        return parent  # a parent session id (e.g. from another process)
    raise ValueError(
        f"parent must be a Session, a parent session id, or None (no parent), not {type(parent).__name__}"
    )


def links_for(child: Session, parent: Any) -> dict[str, str]:
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
    scope: _ScopeLike | None = current_tool_call.get()
    if scope is not None and scope.session is parent:
        links["parentToolCallId"] = scope.call_id
        if scope.children is None:
            scope.children = []
        scope.children.append(child.id)  # list.append: safe from any thread
    return links


def mention(children: list[str]) -> str:
    """The tool result recorded for a tool that returned nothing but ran sub-agents."""
    if len(children) == 1:
        return f"[sub-agent session {children[0]}]"
    return "[sub-agent sessions " + ", ".join(children) + "]"


#: Longest file-name stem :func:`child_path` builds from a parent's stem (file
#: systems cap names at 255 bytes; a deep chain of sub-agents falls back to the id).
_MAX_STEM = 160


def child_path(parent: Session, child_id: str) -> Path:
    """``<parent's stem>.<child id>.jsonl`` beside the parent's file, so a run's
    files sort together (``ststrace view DIR`` links them by header, not name)."""
    path = parent._trace_path
    directory, stem = path.parent, path.stem
    if len(stem.encode("utf-8", "surrogateescape")) + len(child_id) + 1 > _MAX_STEM:
        return directory / f"{child_id}.jsonl"
    return directory / f"{stem}.{child_id}.jsonl"


def new_child(parent: Session, name: str | None = None) -> Session:
    """A child ``Session`` of *parent* for a framework's sub-agent run, not yet open.

    It writes beside the parent's file (:func:`child_path`), under the parent's
    harness and recording settings (redaction, field cap, usage, prices,
    flushing, durability, sync target). Its header links to *parent*, and to the
    tool call of the :func:`tool_scope` it is opened in. The caller opens and
    closes it."""
    from ._session import Session

    child_id = new_session_id()
    child = Session(
        child_path(parent, child_id),
        harness=parent.harness,
        id=child_id,
        name=name if isinstance(name, str) and name else None,
        flush_interval=parent.flush_interval,
        buffer_size=parent.buffer_size,
        durable=parent.durable,
        redact=False,  # replaced by the parent's guard just below
        max_field_chars=None,
        sync_to=parent.sync_to,
        max_buffer=parent._max_buffer,
        usage=parent._keep_usage,
        prices=parent._prices,
        parent=parent,
    )
    # The very guard object: same redactor (also a user's own) and field cap.
    child._guard = parent._guard
    return child
