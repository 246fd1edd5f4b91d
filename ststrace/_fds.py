"""Trace file descriptors: how they are opened, locked and pooled.

Moved out of ``_writer`` (issue 32): the writer appends through these. A
descriptor is opened with ``O_APPEND`` and without following a symlink;
writers append under a shared ``flock`` and a resume reads and cuts a torn
tail under an exclusive one. Descriptors are pooled (:class:`_FdPool`):
thousands of idle sessions do not pin thousands of file descriptors.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | _O_NOFOLLOW | _O_CLOEXEC


def lock(fd: int, exclusive: bool) -> bool:
    """``flock`` *fd*: writers append under a shared lock, and a resume reads
    and cuts a torn tail under an exclusive one, so it never cuts lines another
    process appended between its read and its cut. False where there are no
    such locks (Windows, a file system without them): then it goes on unlocked."""
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    except OSError:
        return False
    return True


def unlock(fd: int) -> None:
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            pass


def _last_byte(fd: int, size: int) -> bytes:
    """The file's last byte; b"" when *fd* cannot read (a trace created here
    is opened write-only): then the torn start is taken to be still last."""
    try:
        return os.pread(fd, 1, size - 1)
    except (OSError, AttributeError):  # AttributeError: no pread (Windows)
        return b""


def create_exclusive(path: Path) -> int:
    """Create *path* (mode 0600) without following a symlink; FileExistsError if present."""
    return os.open(path, _APPEND_FLAGS | os.O_CREAT | os.O_EXCL, 0o600)


def open_append(path: Path) -> int:
    return os.open(path, _APPEND_FLAGS)


def open_resume(path: Path) -> int:
    """Open an existing trace to read and append, refusing anything but a regular file.

    ``O_NONBLOCK``: opening a FIFO must not wait for its other end. ``O_RDWR``
    (not ``O_RDONLY``): the same descriptor reads the file, cuts a torn tail
    and appends, so nothing can swap the file between two opens.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NONBLOCK | _O_NOFOLLOW | _O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.EISDIR, errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            raise ValueError(f"{path} is not a regular file; cannot resume it") from None
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{path} is a symlink; ststrace does not follow it") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a regular file; cannot resume it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


class _FileReplaced(OSError):
    """The path of an evicted descriptor now names another file."""


class _FdPool:
    """Bounded set of open descriptors, least recently used closed first."""

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._lock = threading.RLock()  # reentrant: see "Signals" above
        self._open: dict[int, Any] = {}  # id(writer) -> writer, in LRU order

    def touch(self, writer: Any) -> None:
        """Mark *writer* (whose io lock the caller holds) as holding an fd."""
        victims: list[Any] = []
        with self._lock:
            key = id(writer)
            self._open.pop(key, None)
            self._open[key] = writer
            excess = len(self._open) - self.limit
            if excess > 0:
                for k in list(self._open):
                    if excess <= 0:
                        break
                    w = self._open[k]
                    if w is writer:
                        continue
                    victims.append(w)
                    excess -= 1
        for w in victims:
            # Only close a descriptor whose owner is not writing right now;
            # a busy one stays open and is tried again next time.
            if w._io_lock.acquire(blocking=False):
                try:
                    w._close_fd()
                finally:
                    w._io_lock.release()

    def forget(self, writer: Any) -> None:
        with self._lock:
            self._open.pop(id(writer), None)

    def reset(self) -> None:
        self._lock = threading.RLock()
        self._open = {}


_fd_pool = _FdPool()
