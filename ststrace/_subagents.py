"""Sub-agent sessions for framework integrations: :func:`new_child` and its file.

The links themselves (``Session(parent=...)``, :func:`tool_scope`, the header's
``parentSessionId`` / ``parentToolCallId``) are in :mod:`ststrace._links`,
below ``_session``, which uses them; this module sits above ``_session`` (it
builds a ``Session``) and re-exports them, so integrations import one place.
"""

from __future__ import annotations

from pathlib import Path

from ._ids import new_session_id
from ._links import AUTO, ToolScope, check_parent, links_for, mention, tool_scope
from ._session import Session

__all__ = ["AUTO", "ToolScope", "check_parent", "child_path", "links_for", "mention", "new_child", "tool_scope"]


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
