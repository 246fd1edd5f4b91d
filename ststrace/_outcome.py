"""``ststrace.outcome``: how a session went, live or after the fact.

Live, it goes to the current session (:meth:`Session.outcome`). After the fact
(a CI result attached to a coding agent's session), one outcome line is
appended to the closed trace file with a single ``write`` on an ``O_APPEND``
descriptor: no byte already in the file changes, and a reader sees the line
whole or not at all. A file a live session still holds is refused: its writer
appends too, and the outcome could land between two halves of its buffer.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import _records
from ._encode import dumps
from ._errors import BadArgument
from ._writer import _APPEND_FLAGS

__all__ = ["append_outcome", "outcome"]


def outcome(
    target: float | str | os.PathLike[str] | None = None,
    reward: float | None = None,
    *,
    rewards: Mapping[str, float] | None = None,
    labels: Mapping[str, str] | None = None,
    success: bool | None = None,
) -> Path | None:
    """Set the outcome of the current session, or of the trace file *target*.

    ``ststrace.outcome(0.8, rewards={"tests": 1.0})`` records into the session
    this code runs in (:class:`RuntimeError` outside one);
    ``ststrace.outcome("traces/run.jsonl", 0.8, success=True)`` appends to a
    closed trace and returns its path. Each key's last value stands; *rewards*
    and *labels* merge key by key with earlier outcomes."""
    if isinstance(target, (str, os.PathLike)):
        return append_outcome(target, reward, rewards=rewards, labels=labels, success=success)
    if target is not None:
        if reward is not None:
            raise BadArgument("give the reward once: outcome(reward) or outcome(path, reward)")
        reward = target  # type: ignore[assignment]  # checked as a number by _records.outcome
    from ._session import current_session

    session = current_session()
    if session is None:
        raise RuntimeError(
            "ststrace.outcome() outside a session: call it inside `with Session(...)`, "
            "use session.outcome(...), or pass the trace file: ststrace.outcome(path, ...)"
        )
    session.outcome(reward, rewards=rewards, labels=labels, success=success)
    return None


def append_outcome(
    path: str | os.PathLike[str],
    reward: float | None = None,
    *,
    rewards: Mapping[str, float] | None = None,
    labels: Mapping[str, str] | None = None,
    success: bool | None = None,
) -> Path:
    """Append one outcome line to the closed trace *path* (see the module docstring).

    :class:`ValueError` (naming the file) for a file that is not an STS trace,
    ends in a torn line, or is still held by a live session."""
    obj = _records.outcome(reward, rewards, labels, success)
    p = Path(path)
    from ._guard import make_guard

    guard = make_guard(True)
    if guard is not None and "labels" in obj:
        obj["labels"] = {k: guard.text(v) for k, v in obj["labels"].items()}
    line = _records.outcome_line(obj, dumps)
    try:
        fd = os.open(p, _APPEND_FLAGS)
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such trace file") from None
    except OSError as exc:
        if os.path.islink(p):
            raise ValueError(f"{p} is a symlink; ststrace does not follow it") from None
        raise OSError(exc.errno, f"{p}: cannot open for appending: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{p} is not a regular file")
        with open(p, "rb") as f:
            first = f.readline(1 << 20)
            if st.st_size:
                f.seek(st.st_size - 1)
                last = f.read(1)
            else:
                last = b""
        _check_header(p, first)
        if last != b"\n":
            raise ValueError(f"{p}: the last line is not finished (a crash mid-write, or a session still writing it); not appended")
        from ._hub import is_open

        # ignore_self: the descriptor above is ours; this process's own
        # sessions are still seen (through the registry).
        if is_open(p, ignore_self=True):
            raise ValueError(f"{p}: a live session still holds this file; set its outcome with Session.outcome() or after it closes")
        written = os.write(fd, line)
        if written != len(line):  # a full disk: never leave half a line
            os.ftruncate(fd, st.st_size)
            raise OSError(f"{p}: the outcome line was not written whole ({written} of {len(line)} bytes); the file is unchanged")
        os.fsync(fd)
    finally:
        os.close(fd)
    return p


def _check_header(path: Path, first: bytes) -> None:
    import orjson

    try:
        header: Any = orjson.loads(first)
    except orjson.JSONDecodeError:
        header = None
    if not (isinstance(header, dict) and header.get("type") == "session" and isinstance(header.get("id"), str)):
        raise ValueError(f"{path}:1: not an STS trace (no session header); not appended")
