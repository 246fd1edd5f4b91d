"""Secrets exported after a session opened.

The default redactor knows the secret-looking environment variables as they were when it
was built. One set later (``monkeypatch.setenv`` in a traced test, ``load_dotenv()`` or a key
fetched from a vault mid-run) must be redacted in what is recorded after it appears, and
the hot path must not look at the environment per record: ``os.environ``'s ``__setitem__``
(which setdefault, update, load_dotenv and monkeypatch all go through) is wrapped once,
and a set of a secret-looking name adds that one value to the redactor of every guard
that follows the environment (an open session's with ``redact=True``). The cost is that of
the one value, not of the environment; with no session open, one emptiness test.
``os.putenv()`` alone does not change ``os.environ`` (nor what Python code reads). The next
``Session()`` builds its default redactor afresh from the environment (see
``_redact.default_redactor``).
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Callable, Protocol

from ._errors import internal_error
from ._redact import MIN_LITERAL, Redactor, is_secret_env_name


class Follower(Protocol):
    """What the watch needs of a guard (``_guard.MessageGuard``): this module
    sits below the guard and never imports it."""

    redactor: Redactor | None
    screen: Callable[[str], bool]
    _short: int
    _cap: int
    _media: bool

    def _use(self, redactor: Redactor | None) -> None: ...


_environ_watched = False
# The guards of open sessions that follow the environment (see stop_following).
_followers: weakref.WeakSet[Follower] = weakref.WeakSet()
# Two threads setting two secrets at once must not each drop the other's
# value; reentrant, as a signal handler may set a variable mid-update.
_follow_lock = threading.RLock()


def watch_environ() -> None:
    global _environ_watched
    if _environ_watched:
        return
    _environ_watched = True
    cls = type(os.environ)
    # Only the standard mapping (a test may have swapped os.environ for a dict).
    if not isinstance(os.environ, os._Environ):
        return
    original = cls.__setitem__
    if getattr(original, "_ststrace_wrapped", False):
        return

    def __setitem__(self: Any, key: Any, value: Any) -> None:
        original(self, key, value)
        if not _followers:
            return
        try:
            environ_set(key, value)
        except Exception as exc:  # never the caller's problem
            internal_error(exc, "watching the environment for secrets")

    __setitem__._ststrace_wrapped = True  # type: ignore[attr-defined]
    __setitem__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__setitem__ = __setitem__  # type: ignore[method-assign]


def environ_set(key: Any, value: Any) -> None:
    if isinstance(key, bytes):
        key = os.fsdecode(key)
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    if not isinstance(key, str) or not isinstance(value, str):
        return
    if len(value.strip()) < MIN_LITERAL or not is_secret_env_name(key):
        return
    with _follow_lock:
        # Guards share redactors (most the default one) and caps: each
        # redactor is extended once, and each new state (redactor, screen,
        # short) is computed once and handed to every guard that had the old one.
        done: dict[tuple[int, int, bool], tuple[Redactor, Redactor, Callable[[str], bool], int]] = {}
        for guard in list(_followers):
            old = guard.redactor
            if old is None:
                continue
            slot = (id(old), guard._cap, guard._media)
            hit = done.get(slot)
            if hit is None:
                new = old.with_env_value(key, value)
                if new is not old:
                    guard._use(new)
                hit = done[slot] = (old, new, guard.screen, guard._short)
            elif hit[1] is not old:
                # The order _use follows: a thread mid-call keeps what it read.
                guard.screen, guard._short, guard.redactor = hit[2], hit[3], hit[1]


def follow(guard: Follower) -> None:
    """*guard* takes secret-looking environment values set from now on."""
    _followers.add(guard)


def unfollow(guard: Follower) -> None:
    _followers.discard(guard)
