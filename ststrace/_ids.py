"""Identifiers: time-ordered session ids and cheap unique tool-call ids."""

from __future__ import annotations

import itertools
import os
import re
import threading
import time

from ._errors import BadArgument
from ._redact import default_redactor

_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")

_uuid7_lock = threading.Lock()
_last_ms = 0
_last_seq = 0


def new_session_id() -> str:
    """A UUIDv7-style id: 48-bit ms timestamp, version 7, monotonic within a process."""
    global _last_ms, _last_seq
    with _uuid7_lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            # Same millisecond (or clock went back): bump a 12-bit sequence so
            # ids made in one process still sort in creation order.
            ms = _last_ms
            _last_seq += 1
            if _last_seq > 0xFFF:
                ms += 1
                _last_seq = 0
        else:
            _last_seq = 0
        _last_ms = ms
        seq = _last_seq
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (seq << 64) | (0b10 << 62) | rand
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def check_id(value: object) -> str:
    """Validate a user-given session id (it becomes a file name)."""
    if not isinstance(value, str) or not _ID_RE.fullmatch(value) or value in (".", ".."):
        # The id may be a token pasted in the wrong place: never quoted raw.
        shown = default_redactor().redact(repr(value))[0]
        raise BadArgument(
            f"invalid session id {shown}: use 1-128 characters from A-Z a-z 0-9 . _ - "
            "(it becomes the file name)"
        )
    return value


_BAD_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def file_stem(shown_id: str) -> str:
    """The file name (without ``.jsonl``) of a session whose header holds *shown_id*:
    the id itself, or a redacted id (``[REDACTED:github_token]~3f9a...``) made
    file-safe, its digest keeping distinct ids apart."""
    if _ID_RE.fullmatch(shown_id):
        return shown_id
    return _BAD_FILE_CHARS.sub("_", shown_id).strip("._") or "session"


# A random per-process prefix plus a counter: unique across processes and
# sessions without calling os.urandom on every tool call.
_prefix = os.urandom(6).hex()
_counter = itertools.count(1)
#: The ids themselves, made in C (``next`` of a map of ``str.__mod__`` over
#: the counter: atomic under the GIL; a fifth fewer instructions than an
#: f-string with a format spec). Replaced in the child of a fork.
call_ids = map(f"call_{_prefix}%06x".__mod__, _counter)


def _reseed_after_fork() -> None:
    global _prefix, _counter, _uuid7_lock, call_ids
    # A thread that held the lock at fork time does not exist in the child.
    _uuid7_lock = threading.Lock()
    _prefix = os.urandom(6).hex()
    _counter = itertools.count(1)
    call_ids = map(f"call_{_prefix}%06x".__mod__, _counter)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed_after_fork)


def new_tool_call_id() -> str:
    return next(call_ids)
