"""Buffered, thread-safe, fork-safe JSONL writer with one background flusher.

Design:

* Callers hand over finished lines (bytes ending in ``\\n``). ``append`` only
  takes a lock and appends to a list, so recording from an event loop never
  touches the disk.
* One daemon thread per process (:class:`_Flusher`) writes buffers that are due
  (size reached, ``flush_interval`` elapsed, or ``durable``). ``flush()`` and
  ``close()`` write in the caller's thread.
* Writes go to a descriptor opened with ``O_APPEND``. A short or failed write
  puts the unwritten remainder back at the front of the buffer, so a line is
  never broken or written twice.
* Descriptors are pooled (:class:`_FdPool`): thousands of idle sessions do not
  pin thousands of file descriptors.
* After ``fork()`` the child drops the parent's unwritten bytes (they are the
  parent's to write), gets fresh locks, and starts its own flusher on demand.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path
from typing import Any

from ._errors import WriteError, internal_error, logger

DEFAULT_MAX_BUFFER = 64 * 1024 * 1024
_NEVER = 1 << 62

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | _O_NOFOLLOW | _O_CLOEXEC


def create_exclusive(path: Path) -> int:
    """Create *path* (mode 0600) without following a symlink; FileExistsError if present."""
    return os.open(path, _APPEND_FLAGS | os.O_CREAT | os.O_EXCL, 0o600)


def open_append(path: Path) -> int:
    return os.open(path, _APPEND_FLAGS)


class _FdPool:
    """Bounded set of open descriptors, least recently used closed first."""

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._open: dict[int, Writer] = {}  # id(writer) -> writer, in LRU order

    def touch(self, writer: Writer) -> None:
        """Mark *writer* (whose io lock the caller holds) as holding an fd."""
        victims: list[Writer] = []
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

    def forget(self, writer: Writer) -> None:
        with self._lock:
            self._open.pop(id(writer), None)

    def reset(self) -> None:
        self._lock = threading.Lock()
        self._open = {}


_fd_pool = _FdPool()


class Writer:
    """Append-only line writer for one trace file."""

    def __init__(
        self,
        path: Path,
        fd: int,
        *,
        flush_interval: float = 1.0,
        buffer_size: int = 65536,
        durable: bool = False,
        max_buffer: int = DEFAULT_MAX_BUFFER,
    ) -> None:
        self.path = path
        self.flush_interval = max(float(flush_interval), 0.001)
        self.buffer_size = max(int(buffer_size), 1)
        self.durable = durable
        self.max_buffer = max(int(max_buffer), self.buffer_size)
        self._fd: int | None = fd
        # Appends take no lock: list.append is atomic, and the drain below only
        # removes a prefix (``del chunks[:n]``) while appends add at the end.
        # The lock and condition serve the slow paths (backpressure, close).
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._io_lock = threading.Lock()  # one writer to the file at a time, in order
        self._chunks: list[bytes] = []
        # Bytes buffered. Updated without a lock, so concurrent appends may
        # lose an increment: it only decides *when* to flush, and each drain
        # subtracts what it took, so the error never accumulates past a line.
        self._size = 0
        # The unwritten tail of a failed write (whole lines, or the rest of
        # one): written before anything else; owned by whoever holds _io_lock.
        self._rest = b""
        self._drained = 0  # lines taken out of _chunks so far
        self._waiting = 0  # appenders blocked on backpressure (under _lock)
        self._wake_sent = False
        # append() compares the buffer size with these two numbers only:
        # _limit is max_buffer (-1 once closed), _wake_at the size that wakes
        # the flusher (_NEVER once it has been woken for this batch).
        self._limit = self.max_buffer
        self._wake_threshold = 0 if durable else self.buffer_size
        self._wake_at = self._wake_threshold
        self._last_write = time.monotonic()
        self._failing = False
        self._last_error: BaseException | None = None
        self._error_logged = False
        self._closed = False
        self._pid = os.getpid()
        # Counters reported by Session.stats().
        self.bytes_written = 0
        self.flushes = 0
        self.write_errors = 0
        self.lost = 0
        _fd_pool.touch(self)
        _flusher.register(self)

    # -- recording side -------------------------------------------------

    def append(self, line: bytes) -> bool:
        """Buffer one whole line. Never raises for disk trouble; False if dropped."""
        # The hot path of every record: no lock, two comparisons.
        if self._size >= self._limit:
            return self._append_slow(line)
        self._chunks.append(line)
        size = self._size = self._size + len(line)
        if size >= self._wake_at:
            self._wake_at = _NEVER
            self._wake_sent = True
            _flusher.wake()
        return True

    def _append_slow(self, line: bytes) -> bool:
        """Closed, or the buffer is full: wait for the flusher (backpressure)
        while the disk accepts writes; drop (counted) when it does not."""
        with self._lock:
            if not self._closed and self._wait_for_space():
                self._chunks.append(line)
                self._size += len(line)
                return True
            self.lost += 1
            return False

    @property
    def records(self) -> int:
        """Lines recorded so far (written, buffered or lost on a failed disk)."""
        return self._drained + len(self._chunks)

    def _wait_for_space(self) -> bool:
        # Called with self._lock held.
        _flusher.wake()
        self._waiting += 1
        try:
            while self._size >= self.max_buffer:
                if self._failing or self._closed:
                    return False
                if threading.current_thread() is _flusher.thread:
                    return False
                self._space.wait(0.05)
        finally:
            self._waiting -= 1
        return True

    # -- writing side ----------------------------------------------------

    def due(self, now: float) -> bool:
        return (self._size > 0 or bool(self._rest)) and (
            self._wake_sent or self.durable or now - self._last_write >= self.flush_interval
        )

    def write_out(self, *, fsync: bool = False) -> BaseException | None:
        """Write everything buffered; returns the error instead of raising."""
        with self._io_lock:
            return self._write_locked(fsync)

    def _write_locked(self, fsync: bool) -> BaseException | None:
        chunks = self._chunks
        n = len(chunks)
        taken = chunks[:n]
        del chunks[:n]  # appends racing with this land after index n: kept
        self._drained += n
        self._wake_sent = False
        self._wake_at = self._wake_threshold
        self._last_write = time.monotonic()
        rest = self._rest
        if not taken and not rest:
            if fsync and self._fd is not None and not self._failing:
                try:
                    os.fsync(self._fd)
                except OSError as exc:  # pragma: no cover - fsync on a healthy fd
                    return self._failed(exc)
            return None
        if rest:
            taken.insert(0, rest)
            self._rest = b""
        data = taken[0] if len(taken) == 1 else b"".join(taken)
        del taken
        view = memoryview(data)
        written = 0
        try:
            fd = self._get_fd()
            while written < len(data):
                k = os.write(fd, view[written:])
                if k <= 0:  # pragma: no cover - regular files never return 0
                    raise OSError(errno.EIO, "write returned 0")
                written += k
            if fsync or self.durable:
                os.fsync(fd)
        except OSError as exc:
            # Keep exactly the unwritten bytes: a line is never split or
            # written twice, however short the write was.
            self._rest = bytes(view[written:])
            self.bytes_written += written
            self._size -= written
            return self._failed(exc)
        finally:
            view.release()
        self.bytes_written += written
        self._size -= written
        if self._size < 0:  # lost increments of racing appends
            self._size = 0
        self.flushes += 1
        if self._waiting:
            with self._lock:
                self._space.notify_all()
        if self._failing:
            logger.warning("ststrace: writing %s works again", self.path)
        self._failing = False
        self._error_logged = False
        self._last_error = None
        return None

    def _failed(self, exc: OSError) -> OSError:
        self.write_errors += 1
        self._failing = True
        self._last_error = exc
        with self._lock:
            self._space.notify_all()
        if not self._error_logged:
            self._error_logged = True
            logger.error("ststrace: cannot write %s: %s (keeping records buffered, will retry)", self.path, exc)
        return exc

    def _get_fd(self) -> int:
        fd = self._fd
        if fd is None:
            fd = self._fd = open_append(self.path)
        _fd_pool.touch(self)
        return fd

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        _fd_pool.forget(self)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    # -- user-facing flush / close -----------------------------------------

    def flush(self, *, fsync: bool = False) -> None:
        """Write everything buffered; raise :class:`WriteError` if the disk refuses."""
        err = self.write_out(fsync=fsync)
        if err is not None:
            raise WriteError(self.path, err, self.lost) from err

    def close(self) -> BaseException | None:
        """Flush, fsync and close. Returns a :class:`WriteError` instead of raising."""
        with self._io_lock:
            if self._closed:
                return None
            with self._lock:
                # Mark closed before the last write: a record appended while it
                # runs is then refused and counted lost, never silently dropped.
                self._closed = True
                self._limit = -1  # sends every later append() to the slow path
                self._space.notify_all()
            err = self._write_locked(fsync=True)
            if err is not None:
                # What could not be written by now is lost; say how much.
                self.lost += self._rest.count(b"\n")
                self._rest = b""
            stragglers = len(self._chunks)  # appended while the last write ran
            if stragglers:
                self.lost += stragglers
                del self._chunks[:stragglers]
            self._size = 0
            self._close_fd()
        _flusher.unregister(self)
        if err is not None:
            return WriteError(self.path, err, self.lost)
        if self.lost:
            return WriteError(self.path, self._last_error, self.lost)
        return None

    @property
    def closed(self) -> bool:
        return self._closed

    def stats(self) -> dict[str, Any]:
        return {
            "messages": self.records,
            "bytes": self.bytes_written,
            "flushes": self.flushes,
            "write_errors": self.write_errors,
            "lost": self.lost,
            "buffered_bytes": self._size,
        }

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._io_lock = threading.Lock()
        self._drained += len(self._chunks)
        self._chunks = []
        self._rest = b""
        self._size = 0
        self._waiting = 0
        self._wake_sent = False
        self._wake_at = self._wake_threshold
        self._pid = os.getpid()
        # The descriptor is shared with the parent; reopen on demand instead.
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


class _Flusher:
    """The one background thread per process that writes due buffers."""

    TICK = 0.1

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writers: set[Writer] = set()
        self._event = threading.Event()
        self.thread: threading.Thread | None = None
        self._pid = os.getpid()

    def register(self, writer: Writer) -> None:
        with self._lock:
            self._writers.add(writer)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="ststrace-flusher", daemon=True)
                self.thread.start()

    def unregister(self, writer: Writer) -> None:
        with self._lock:
            self._writers.discard(writer)

    def wake(self) -> None:
        self._event.set()

    def _tick(self) -> float:
        with self._lock:
            if not self._writers:
                return 1.0
            return max(0.005, min(self.TICK, min(w.flush_interval for w in self._writers) / 2))

    def _run(self) -> None:
        event = self._event
        while True:
            event.wait(self._tick())
            event.clear()
            now = time.monotonic()
            with self._lock:
                writers = list(self._writers)
            for w in writers:
                try:
                    if w.due(now) and not w.closed:
                        w.write_out()
                except Exception as exc:  # never let the flusher die
                    internal_error(exc, "flusher")

    def writers(self) -> list[Writer]:
        with self._lock:
            return list(self._writers)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self.thread = None
        for w in list(self._writers):
            w._after_fork_in_child()
        if self._writers:
            self.thread = threading.Thread(target=self._run, name="ststrace-flusher", daemon=True)
            self.thread.start()


_flusher = _Flusher()


def _after_fork_in_child() -> None:
    _fd_pool.reset()
    _flusher._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
