"""Resuming a trace (``Session(resume=True)`` on an existing file): moved out
of ``_session`` (issue 32). One descriptor, opened without following a
symlink or blocking on a FIFO, reads the header and every whole line (the
tool calls still waiting for a result are rebuilt from them), cuts a torn
last line under an exclusive lock, and then appends."""

from __future__ import annotations

import os
from typing import Any

import orjson

from . import _pairing
from ._errors import BadArgument, logger
from ._fds import lock, open_resume, unlock


def open_for_resume(session: Any) -> int:
    """Open *session*'s existing file to append to it: checked, its header read,
    its pending tool calls rebuilt, a torn last line cut (see ``Session(resume=True)``)."""
    if session._trace_path.is_symlink():
        raise BadArgument(f"{session._trace_path} is a symlink; ststrace does not follow it")
    # One descriptor, opened without blocking and checked to be a regular
    # file, reads, cuts and appends (a FIFO would block a plain open).
    fd = open_resume(session._trace_path)
    try:
        # Exclusive across the read and the cut: lines other processes
        # append (under a shared lock) land before the read or after the cut.
        locked = lock(fd, exclusive=True)
        try:
            _read_for_resume(session, fd)
        finally:
            if locked:
                unlock(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd

def _read_for_resume(session: Any, fd: int) -> None:
    with os.fdopen(os.dup(fd), "rb") as f:
        first = f.readline()
        try:
            header = orjson.loads(first)
        except orjson.JSONDecodeError:
            header = None
        if not (
            isinstance(header, dict)
            and header.get("type") == "session"
            and isinstance(header.get("id"), str)
            and isinstance(header.get("harness"), str)
        ):
            raise BadArgument(f"{session._trace_path}:1: not an STS session header; cannot resume this file")
        # The header holds the id as redaction left it.
        if session._given_id is not None and header["id"] != session._shown_id:
            raise BadArgument(
                f"{session._trace_path}: session id is {session._guard.ident(header['id']) if session._guard is not None else header['id']!r}, "
                f"not {session._shown_id!r}; cannot resume"
            )
        session.id = session._shown_id = header["id"]
        if "name" in header and session.name is None and isinstance(header["name"], str):
            session.name = header["name"]
        good_end = len(first) if first.endswith(b"\n") else 0
        offset = len(first)
        for line in f:
            offset += len(line)
            if not line.endswith(b"\n"):
                break
            good_end = offset
            _replay(session, line)
    size = os.fstat(fd).st_size
    if good_end < size:
        # A crash left a torn last line: cut it so appended lines stay valid.
        logger.warning("ststrace: %s ended in a torn line; cut it off before resuming", session._trace_path)
        os.ftruncate(fd, good_end)

def _replay(session: Any, line: bytes) -> None:
    """Rebuild the pending tool calls of a resumed session from its file."""
    try:
        env = orjson.loads(line)
        msg = env.get("message") if isinstance(env, dict) else None
        if not isinstance(msg, dict):
            return
        _pairing.replay(session._pending, msg)
    except Exception:
        return
