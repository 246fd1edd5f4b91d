"""The open sessions of this process, and the hooks run around them.

This module sits below ``_session``: the SIGTERM handler (``_signals``) and the
Hub sync (``_hub``) need the open sessions, and a session needs to be closed at
exit and uploaded after close. They meet here, so every import arrow points
down: ``_session`` -> ``_signals`` -> ``_registry`` and ``_hub`` -> ``_registry``.
"""

from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path
from typing import Any, Callable, Protocol

from ._errors import internal_error, logger

__all__ = [
    "AfterClose",
    "after_close",
    "close_all",
    "ended_empty",
    "is_open_here",
    "on_after_close",
    "on_ended_empty",
    "register",
    "unregister",
]


class _Closable(Protocol):
    @property
    def path(self) -> Path | None: ...

    @property
    def closed(self) -> bool: ...

    def _close_file(self) -> BaseException | None: ...


#: Called as ``hook(path, sync_to)`` after a session with ``sync_to`` closed cleanly.
AfterClose = Callable[[Path, str, str], None]

_open: set[Any] = set()
_lock = threading.RLock()  # reentrant: a signal handler may open a session while it is held
_exit_hook_installed = False
_after_close: list[AfterClose] = []
#: Called as ``hook(session_id)`` when a session closes without a message.
_ended_empty: list[Callable[[str], None]] = []


def register(session: _Closable) -> None:
    """Track an open session so ``close_all`` (atexit, SIGTERM) can flush it."""
    global _exit_hook_installed
    with _lock:
        _open.add(session)
        if not _exit_hook_installed:
            _exit_hook_installed = True
            atexit.register(close_all)


def unregister(session: _Closable) -> None:
    with _lock:
        _open.discard(session)


def open_sessions() -> list[Any]:
    with _lock:
        return list(_open)


def is_open_here(path: Path) -> bool:
    """Whether a session of this process has *path* open."""
    resolved = path.resolve()
    return any(s.path is not None and s.path.resolve() == resolved and not s.closed for s in open_sessions())


def close_all() -> None:
    """Flush and close every session still open (run at interpreter exit and on SIGTERM)."""
    for s in open_sessions():
        try:
            err = s._close_file()
            if err is not None:
                logger.error("%s", err)
        except Exception as exc:
            internal_error(exc, "close_all")


def on_after_close(hook: AfterClose) -> None:
    """Register *hook* to run after a session with ``sync_to`` closes (used by the Hub sync)."""
    if hook not in _after_close:
        _after_close.append(hook)


def after_close(path: Path, sync_to: str, layout: str = "sts") -> None:
    for hook in list(_after_close):
        try:
            hook(path, sync_to, layout)
        except Exception as exc:
            internal_error(exc, "sync_to")


def on_ended_empty(hook: Callable[[str], None]) -> None:
    """Register *hook* to run when a session closes having recorded no message."""
    if hook not in _ended_empty:
        _ended_empty.append(hook)


def ended_empty(session_id: str) -> None:
    for hook in list(_ended_empty):
        try:
            hook(session_id)
        except Exception as exc:
            internal_error(exc, "empty session check")


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
