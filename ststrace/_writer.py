"""Buffered, thread-safe, fork-safe JSONL writer with one background flusher.

Design:

* Callers hand over finished lines (bytes ending in ``\\n``). ``append``
  adds the line to a list and takes no lock, so recording from an event loop
  never touches the disk.
* One daemon thread per process (:class:`_Flusher`, in ``_flusher``) writes buffers that are due
  (size reached, ``flush_interval`` elapsed, or ``durable``). ``flush()`` and
  ``close()`` write in the caller's thread.
* Writes go to a descriptor opened with ``O_APPEND``, in slices of about
  _SLICE_BYTES. A short or failed write keeps the unwritten remainder for the
  next write, so a line is never broken or written twice.
* A recording thread that keeps the GIL busy (an event loop that never
  idles) lends it to the flusher now and then (:meth:`_Flusher.lend`).
* Descriptors are pooled (:class:`_FdPool`, in ``_fds`` with the opening and
  ``flock`` helpers): thousands of idle sessions do not
  pin thousands of file descriptors.
* After ``fork()`` the child drops the parent's unwritten bytes (they are the
  parent's to write), gets fresh locks (every writer's, open or closed), and
  starts its own flusher on demand.
* Signals: Python runs signal handlers on the main thread, between two
  bytecodes of whatever it was doing, possibly ststrace code holding a lock.
  So the locks a handler's recording may need are reentrant, the flusher is
  woken without a lock (:class:`_Wake`), and the main thread never writes:
  its ``flush()`` and ``close()`` are run by the flusher while it waits
  (:meth:`_Flusher.run_for_main`). Ctrl-C then interrupts only the wait; the
  write finishes, and a close interrupted that way is completed by the next
  ``close()`` or at exit. A reopened descriptor must be the same file
  (device and inode), and a close after failed writes cuts a torn last line.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path
from typing import Any

from ._errors import WriteError, logger
# The descriptors and the flusher live in their own modules; the names are
# imported here too, where the code and tests have always found them.
from ._fds import _APPEND_FLAGS as _APPEND_FLAGS
from ._fds import _FileReplaced, _fd_pool, _last_byte
from ._fds import create_exclusive as create_exclusive
from ._fds import lock as lock
from ._fds import open_append as open_append
from ._fds import open_resume as open_resume
from ._fds import unlock as unlock
from ._flusher import _DEFERRED, _RUN_HERE, _Job, _all_writers, _holds_locks, _wait
from ._flusher import _MIN_SHARE as _MIN_SHARE
from ._flusher import _TOTAL_BUFFER as _TOTAL_BUFFER
from ._flusher import _flusher as _flusher


DEFAULT_MAX_BUFFER = 64 * 1024 * 1024
# A buffer that grew by this much after it woke the flusher, without being
# written in between, lends the flusher the GIL (see _Flusher.lend).
_LEND_STEP = 32 * 1024

# A large buffer goes out in slices of about this many bytes, with a write
# call (which releases the GIL) between two. Taking a slice holds the GIL,
# while an event loop on another thread may be waiting for it: a slice is also
# cut to about _SLICE_SECONDS of work. (Lines made a while ago on another CPU
# can cost the writer microseconds each to join and free, against 0.1 us for
# fresh ones; joining them in the recording thread instead was measured to
# lengthen the loop's own stalls more than it saved.)
_SLICE_BYTES = 1 << 18
_SLICE_SECONDS = 0.0005

# A closed writer's _limit: below any _size, which racing appends can leave
# negative for a moment (the writer subtracts what it wrote).
_CLOSED = -(1 << 62)


class _Slice:
    # Lines per slice, tuned as slices are written: one figure for the
    # process, as the cost of a line depends more on the machine and on the
    # age of the lines than on the file.
    lines = 64


_slice = _Slice()


class Writer:
    """Append-only line writer for one trace file."""

    # Slots: append() reads and writes a few of these on every record, and an
    # instance with this many attributes in a __dict__ gets the slower
    # dict-hinted attribute access (more than 30 keys are not shared).
    __slots__ = (
        "path", "flush_interval", "buffer_size", "durable", "max_buffer", "_fd", "_lock", "_space",
        "_io_lock", "_chunks", "_size", "_rest", "_drained", "_waiting", "_wake_sent", "_limit",
        "_wake_threshold", "_wake_at", "_last_write", "_failing", "_last_error", "_error_logged",
        "_closed", "_close_job", "_warned_closed", "_lost_closed", "_file_id", "_replaced", "_torn",
        "_pid", "bytes_written", "flushes", "write_errors", "lost", "__weakref__",
    )

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
        # Appends take no lock: list.append is atomic, and the writer only
        # removes a prefix (``del chunks[:n]``) while appends add at the end.
        # The lock and condition serve the slow paths (backpressure, close).
        # Reentrant: a signal handler may record while the main thread,
        # interrupted, holds it (see "Signals" above).
        self._lock = threading.RLock()
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
        # _limit is max_buffer (_CLOSED once closed), _wake_at the size that wakes
        # the flusher (then, each _LEND_STEP further, lends it the GIL).
        self._limit = self.max_buffer
        self._wake_threshold = 0 if durable else self.buffer_size
        self._wake_at = min(self._wake_threshold, _LEND_STEP)
        self._last_write = time.monotonic()
        self._failing = False
        self._last_error: BaseException | None = None
        self._error_logged = False
        self._closed = False
        self._close_job: _Job | None = None
        self._warned_closed = False
        #: Of ``lost``, records refused because the writer was closed (another
        #: task or thread still recording while close() ran). Counted and
        #: logged, but not a write failure: close() raises only for the rest.
        self._lost_closed = 0
        # (st_dev, st_ino) of the file, taken when the descriptor is first
        # closed early: a reopen by path must find the same file.
        self._file_id: tuple[int, int] | None = None
        self._replaced = False
        # Bytes of an unfinished line at the end of the file (a short write
        # that failed): a close that cannot finish the line cuts them off.
        self._torn = 0
        self._pid = os.getpid()
        # Counters reported by Session.stats().
        self.bytes_written = 0
        self.flushes = 0
        self.write_errors = 0
        self.lost = 0
        _all_writers.add(self)
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
            self._grown(size)
        return True

    def _grown(self, size: int) -> None:
        """Past the flush size, wake the flusher; each _LEND_STEP further
        without a write in between, lend it the GIL. Past this session's share
        of the process-wide buffer, send appends to the backpressure path."""
        self._wake_at = size + _LEND_STEP
        if size >= _flusher.share:
            cap = self._cap()
            if cap < self._limit:
                self._limit = cap  # put back when the buffer is written
        if size < self._wake_threshold:
            return
        if self._wake_sent:
            if not self._failing:  # a failing disk needs no GIL, only time
                _flusher.lend()
        else:
            self._wake_sent = True
            _flusher.wake()

    def _append_slow(self, line: bytes) -> bool:
        """Closed, or the buffer is full: wait for the flusher (backpressure)
        while the disk accepts writes; drop (counted) when it does not."""
        with self._lock:
            if not self._closed and self._wait_for_space():
                self._chunks.append(line)
                self._size += len(line)
                return True
            self.lost += 1
            if self._closed:
                self._lost_closed += 1
                self._say_closed()
            return False

    def _say_closed(self) -> None:
        if not self._warned_closed:
            self._warned_closed = True
            logger.warning(
                "ststrace: %s is closed; a record made after close() was not written "
                "(counted in stats()['lost']; this is said once per session)",
                self.path,
            )

    def _cap(self) -> int:
        """The most this buffer may hold now (see _TOTAL_BUFFER)."""
        return max(min(self.max_buffer, _flusher.share), self.buffer_size)

    @property
    def records(self) -> int:
        """Lines recorded so far (written, buffered or lost on a failed disk)."""
        return self._drained + len(self._chunks)

    def _wait_for_space(self) -> bool:
        # Called with self._lock held.
        self._waiting += 1
        _flusher.blocked += 1  # under a writer's lock only: may race, see must_pause
        _flusher.wake()
        try:
            while self._size >= self._cap():
                if self._failing or self._closed:
                    return False
                if threading.current_thread() is _flusher.thread:
                    return False
                self._space.wait(0.05)
        finally:
            self._waiting -= 1
            _flusher.blocked -= 1
        # Closed while this waited (close() empties the buffer, so the loop
        # ends): the line must be counted lost, not appended after the end.
        return not self._closed

    # -- writing side ----------------------------------------------------

    def due(self, now: float) -> bool:
        return (self._size > 0 or bool(self._rest)) and (
            self._wake_sent or self.durable or now - self._last_write >= self.flush_interval
        )

    def write_out(self, *, fsync: bool = False, deadline: float | None = None) -> BaseException | None:
        """Write what is buffered; returns the error instead of raising.

        With a *deadline* (``time.monotonic()``), stop taking lines once it
        has passed: the rest stays buffered, in order, and the buffer stays due.
        """
        with self._io_lock:
            return self._write_locked(fsync, deadline)

    def _write_locked(self, fsync: bool, deadline: float | None = None) -> BaseException | None:
        chunks = self._chunks
        # Only what is buffered now: lines appended while this runs wait for
        # next time, so a fast producer cannot keep the writer here forever.
        left = len(chunks)
        self._wake_sent = False
        self._wake_at = min(self._wake_threshold, _LEND_STEP)
        self._last_write = time.monotonic()
        if not left and not self._rest:
            if fsync and self._fd is not None and not self._failing:
                try:
                    os.fsync(self._fd)
                except OSError as exc:  # pragma: no cover - fsync on a healthy fd
                    return self._failed(exc)
            return None
        data = self._rest  # the unwritten tail of a failed write goes first
        self._rest = b""
        written = 0
        step = _slice.lines
        locked = -1
        try:
            fd = self._get_fd()
            while True:
                if data:
                    if locked < 0 and lock(fd, exclusive=False):
                        locked = fd
                    view = memoryview(data)
                    try:
                        while written < len(data):
                            k = os.write(fd, view[written:])
                            if k <= 0:  # pragma: no cover - regular files never return 0
                                raise OSError(errno.EIO, "write returned 0")
                            written += k
                    finally:
                        view.release()
                    self.bytes_written += written
                    self._size -= written
                    data, written = b"", 0
                    self._torn = 0  # data always ends with a whole line
                    if self._waiting:
                        with self._lock:
                            self._space.notify_all()
                if not left:
                    break
                if deadline is not None and _flusher.must_pause(deadline):
                    self._wake_sent = True  # what is left is still due
                    break
                start = time.thread_time()
                k = min(left, step)
                part = chunks[:k]
                del chunks[:k]  # a prefix only: appends racing with this go to the end
                self._drained += k
                left -= k
                data = part[0] if k == 1 else b"".join(part)
                del part  # frees the lines: part of the slice's cost
                # The next slice: about _SLICE_SECONDS of CPU at this one's
                # cost per line (growing at most 2x at a time), and about
                # _SLICE_BYTES.
                spent = max(time.thread_time() - start, 1e-7)
                by_time = max(16, min(2 * step, int(k * _SLICE_SECONDS / spent)))
                step = _slice.lines = max(1, min(by_time, k * _SLICE_BYTES // max(len(data), 1)))
            if fsync or self.durable:
                os.fsync(fd)
        except _FileReplaced as exc:
            # Never into another program's file: what was meant for ours is lost.
            n = len(chunks)
            self.lost += data.count(b"\n") + sum(c.count(b"\n") for c in chunks[:n])
            del chunks[:n]
            self._drained += n
            self._rest = b""
            self._size = 0
            return self._failed(exc)
        except OSError as exc:
            # Keep exactly the unwritten bytes: a line is never split or
            # written twice, however short the write was. Lines not taken yet
            # stay in the buffer, behind this tail.
            if written:
                nl = data.rfind(b"\n", 0, written)
                self._torn = written - nl - 1 if nl >= 0 else self._torn + written
            self.bytes_written += written
            self._size -= written
            self._rest = data[written:]
            return self._failed(exc)
        finally:
            if locked >= 0:
                unlock(locked)
        if self._size < 0:  # lost increments of racing appends
            self._size = 0
        if not self._closed:
            self._limit = self.max_buffer  # _grown lowers it again if need be
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
            if isinstance(exc, _FileReplaced):
                logger.error(
                    "ststrace: %s was replaced or moved by another program; not writing into that file: "
                    "records of this session are lost from now on (counted in stats()['lost'])",
                    self.path,
                )
            else:
                logger.error("ststrace: cannot write %s: %s (keeping records buffered, will retry)", self.path, exc)
        return exc

    def _get_fd(self) -> int:
        fd = self._fd
        if fd is None:
            if self._replaced:
                raise _FileReplaced(errno.ESTALE, "the file was replaced", str(self.path))
            fd = open_append(self.path)
            # The descriptor was closed early (pool, fork): the path must
            # still name our file, not one put in its place since.
            if self._file_id is not None:
                try:
                    st = os.fstat(fd)
                    same = (st.st_dev, st.st_ino) == self._file_id
                except OSError:
                    same = False
                if not same:
                    os.close(fd)
                    self._replaced = True
                    raise _FileReplaced(errno.ESTALE, "the file was replaced", str(self.path))
            self._fd = fd
        _fd_pool.touch(self)
        return fd

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        _fd_pool.forget(self)
        if fd is not None:
            self._remember_file(fd)
            try:
                os.close(fd)
            except OSError:
                pass

    def _remember_file(self, fd: int) -> None:
        if self._file_id is None:
            try:
                st = os.fstat(fd)
                self._file_id = (st.st_dev, st.st_ino)
            except OSError:
                pass

    # -- user-facing flush / close -----------------------------------------

    def flush(self, *, fsync: bool = False) -> None:
        """Write everything buffered; raise :class:`WriteError` if the disk refuses.

        On the main thread the flusher writes while this waits (see "Signals"
        above); from a signal handler that interrupted ststrace, or one that
        interrupted a flush, it only wakes the flusher and returns.
        """
        job = _Job(lambda: self.write_out(fsync=fsync))
        how = _flusher.run_for_main(job, self, nested=False)
        if how == _DEFERRED:
            self._wake_sent = True  # due: the flusher writes it on its next pass
            _flusher.wake()
            return
        if how == _RUN_HERE:
            job.run()
        else:
            _wait(job)
        err = job.outcome()
        if err is not None:
            raise WriteError(self.path, err, self.lost) from err

    def close(self) -> BaseException | None:
        """Flush, fsync and close. Returns a :class:`WriteError` instead of raising.

        Interrupted (Ctrl-C while the main thread waits for the flusher), the
        close goes on in the flusher; calling ``close()`` again (``close_all``
        does, at exit) waits for it and returns its outcome.
        """
        with self._lock:
            job = self._close_job
            new = job is None
            if job is None:
                job = self._close_job = _Job(self._close_now)
        if new:
            how = _flusher.run_for_main(job, self, nested=True)
            if how == _DEFERRED:
                return None  # not done: see close_done
            if how == _RUN_HERE:
                job.run()
        if not job.done.is_set():
            if threading.current_thread() is not threading.main_thread():
                job.done.wait()
            elif _holds_locks(self):
                return None  # a signal handler inside ststrace: the flusher finishes it
            else:
                _wait(job)
        return job.outcome()

    @property
    def close_done(self) -> bool:
        """Whether close() has finished its work (written, counted, descriptor closed)."""
        job = self._close_job
        return job is not None and job.done.is_set()

    def _close_now(self) -> BaseException | None:
        with self._io_lock:
            if self._closed:
                return None
            with self._lock:
                # Mark closed before the last write: a record appended while it
                # runs is then refused and counted lost, never silently dropped.
                self._closed = True
                # Sends every later append() to the slow path: -1 did not
                # while racing appends' lost increments left _size below it.
                self._limit = _CLOSED
                self._space.notify_all()
            err = self._write_locked(fsync=True)
            if err is not None:
                # What could not be written by now is lost; say how much.
                self.lost += self._rest.count(b"\n")
                self._rest = b""
                if self._torn:
                    self._cut_torn_line()
            n = len(self._chunks)
            if n and err is not None:
                # Not reached before the write failed: lost on a failing disk.
                self.lost += sum(c.count(b"\n") for c in self._chunks[:n])
                del self._chunks[:n]
                self._drained += n
            elif n:
                self._refuse_late(n)
            self._size = 0
            self._close_fd()
        _flusher.unregister(self)
        if err is not None:
            return WriteError(self.path, err, self.lost)
        if self.lost > self._lost_closed:
            # Records dropped by a failing disk. Those refused because close()
            # had begun are logged once (above) and counted, but raising for
            # them would turn a healthy disk into an exception in the user's
            # ``with Session`` block.
            return WriteError(self.path, self._last_error, self.lost)
        return None

    def _cut_torn_line(self) -> None:
        """Cut the start of a line a failed write left unfinished: the file ends
        in whole lines (``validate`` passes, readers and uploads take it as
        closed). The line itself is already counted lost."""
        try:
            fd = self._get_fd()
            locked = lock(fd, exclusive=True)
            try:
                size = os.fstat(fd).st_size
                # A whole line at the end: another process appended after the
                # torn start, which is now mid-file; cutting would take theirs.
                if size and _last_byte(fd, size) != b"\n":
                    os.ftruncate(fd, max(size - self._torn, 0))
                    self.bytes_written -= self._torn
            finally:
                if locked:
                    unlock(fd)
            self._torn = 0
        except OSError as exc:
            logger.error("ststrace: %s ends in an unfinished line that could not be cut off: %s", self.path, exc)

    @property
    def closed(self) -> bool:
        return self._closed

    def _refuse_late(self, n: int) -> None:
        """The first *n* buffered lines came from records that passed append()'s
        unlocked check just before close() began, and landed after its last
        write took the buffer: refused like any record after close (counted
        lost, not recorded, said once), and not a write failure."""
        late = sum(c.count(b"\n") for c in self._chunks[:n])
        del self._chunks[:n]
        self.lost += late
        self._lost_closed += late
        self._say_closed()

    def stats(self) -> dict[str, Any]:
        if self._closed and self._chunks and self._io_lock.acquire(blocking=False):
            # One that landed even after close() had finished; while close()
            # runs (it holds _io_lock), close() itself takes them.
            try:
                with self._lock:
                    if self._chunks:
                        self._refuse_late(len(self._chunks))
            finally:
                self._io_lock.release()
        return {
            "messages": self.records,
            "bytes": self.bytes_written,
            "flushes": self.flushes,
            "write_errors": self.write_errors,
            "lost": self.lost,
            "buffered_bytes": self._size,  # includes _rest
        }

    def _after_fork_in_child(self) -> None:
        self._lock = threading.RLock()
        self._space = threading.Condition(self._lock)
        self._io_lock = threading.Lock()
        self._close_job = None if self._close_job is None or not self._close_job.done.is_set() else self._close_job
        self._drained += len(self._chunks)
        self._chunks = []
        self._rest = b""
        self._size = 0
        self._waiting = 0
        self._wake_sent = False
        self._wake_at = min(self._wake_threshold, _LEND_STEP)
        if not self._closed:
            self._limit = self.max_buffer
        self._pid = os.getpid()
        # The descriptor is shared with the parent; reopen on demand instead.
        fd, self._fd = self._fd, None
        if fd is not None:
            self._remember_file(fd)
            try:
                os.close(fd)
            except OSError:
                pass
