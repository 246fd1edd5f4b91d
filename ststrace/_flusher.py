"""The one background thread per process that writes due buffers (:class:`_Flusher`).

Moved out of ``_writer`` (issue 32). Writers register here; the flusher wakes
on a lock-free flag (:class:`_Wake`), runs the main thread's flush and close
jobs (:meth:`_Flusher.run_for_main`), and takes the GIL lent by a recording
thread whose buffer keeps growing (:meth:`_Flusher.lend`). After ``fork()``
the child resets the pool, the flusher and every writer (see the end).
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
import weakref
from typing import Callable, Protocol

from ._errors import internal_error
from ._fds import _fd_pool


class _Writer(Protocol):
    """What the flusher needs of a writer (``_writer.Writer``, which imports
    this module: not imported here)."""

    flush_interval: float
    _last_write: float
    _lock: threading.RLock

    @property
    def closed(self) -> bool: ...

    def due(self, now: float) -> bool: ...

    def write_out(self, *, fsync: bool = False, deadline: float | None = None) -> BaseException | None: ...

    def _after_fork_in_child(self) -> None: ...

# All open sessions together buffer about this much at most: each may hold its
# share (at least _MIN_SHARE), or its max_buffer if that is less. Thousands of
# sessions on a stalled or failing disk must not each fill 64 MiB first.
_TOTAL_BUFFER = 1 << 30
_MIN_SHARE = 128 * 1024


class _Wake:
    """A wake-up flag set without taking a lock (``threading.Event.set`` takes
    one, so a signal handler setting it while the main thread was inside
    ``set`` would deadlock). A plain lock stands for "not set":
    ``Lock.release`` is one C call, which a signal handler cannot interrupt."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:
            pass  # already set

    def wait(self, timeout: float) -> bool:
        """Wait until set (or *timeout*); clears the flag."""
        return self._lock.acquire(timeout=timeout)

    def clear(self) -> None:
        self._lock.acquire(blocking=False)


class _Job:
    """Work the flusher runs for the main thread (see :meth:`_Flusher.run_for_main`)."""

    __slots__ = ("fn", "done", "result", "error", "delivered")

    def __init__(self, fn: Callable[[], BaseException | None]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: BaseException | None = None
        self.error: BaseException | None = None
        self.delivered = False

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # handed to the thread that waits
            self.error = exc
        finally:
            self.done.set()

    def outcome(self) -> BaseException | None:
        """The result, once: a close interrupted by Ctrl-C and finished by
        ``close_all`` reports its error there, not twice."""
        if self.delivered:
            return None
        self.delivered = True
        if self.error is not None:
            raise self.error
        return self.result


# Every writer, closed ones too, so the child of a fork can reset their locks.
_all_writers: weakref.WeakSet[_Writer] = weakref.WeakSet()


class _Flusher:
    """The one background thread per process that writes due buffers."""

    TICK = 0.1
    LEND_BUDGET = 0.0005
    LEND_GAP = 0.004
    PASS_BUDGET = 0.001
    BUSY_WINDOW = 0.05

    def __init__(self) -> None:
        self._lock = threading.RLock()  # reentrant: see "Signals" above
        self._writers: set[_Writer] = set()
        self._event = _Wake()  # buffers are due
        self._lent = _Wake()  # a recording thread lends the GIL
        self._jobs: collections.deque[_Job] = collections.deque()  # flush/close for the main thread
        self.thread: threading.Thread | None = None
        self._ident = 0  # the flusher thread's, once it runs
        self._pid = os.getpid()
        self._loan: threading.Event | None = None
        self._next_loan = 0.0
        self._lent_at = -1.0
        self._ran_at = 0.0  # when the flusher thread last held the GIL, roughly
        self.loans = 0  # times a recording thread lent the flusher the GIL
        self.blocked = 0  # recording threads waiting for buffer space
        self.share = _TOTAL_BUFFER  # what each open session may buffer (see _TOTAL_BUFFER)
        self._cut = False  # the last pass stopped early

    def register(self, writer: _Writer) -> None:
        with self._lock:
            self._writers.add(writer)
            self.share = max(_MIN_SHARE, _TOTAL_BUFFER // len(self._writers))
            self._ensure_thread()

    def _ensure_thread(self) -> bool:
        # Called with self._lock held.
        if self.thread is None or not self.thread.is_alive():
            thread = threading.Thread(target=self._run, name="ststrace-flusher", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # no new threads at interpreter shutdown
                return False
            self.thread = thread
        return True

    def run_for_main(self, job: _Job, writer: _Writer, *, nested: bool) -> int:
        """Hand *job* (a flush or close of *writer*) to the flusher if called on
        the main thread, where signal handlers run: Ctrl-C then interrupts the
        wait, never a write half accounted for, and a handler never blocks on
        a lock the code it interrupted holds.

        Returns _RUN_HERE (not the main thread, or no flusher: run it in this
        thread), _SUBMITTED (wait for it), or _DEFERRED: the main thread holds
        a lock the job needs (a handler interrupted ststrace), or, unless
        *nested*, is already waiting for a job (a handler interrupted that
        wait: under a fast timer, waiting again would nest without end).
        """
        if threading.current_thread() is not threading.main_thread():
            return _RUN_HERE
        deferred = _holds_locks(writer) or (_main_waits > 0 and not nested)
        with self._lock:
            if not self._ensure_thread():
                return _RUN_HERE
            if deferred and not nested:
                return _DEFERRED
            self._jobs.append(job)
        self.wake()
        self._lent.set()
        return _DEFERRED if deferred else _SUBMITTED

    def unregister(self, writer: _Writer) -> None:
        with self._lock:
            self._writers.discard(writer)
            self.share = max(_MIN_SHARE, _TOTAL_BUFFER // max(1, len(self._writers)))

    def wake(self) -> None:
        self._event.set()
        if self.blocked > 0:
            self._lent.set()  # a busy flusher may be waiting for a loan

    def _tick(self) -> float:
        with self._lock:
            if not self._writers:
                return 1.0
            return max(0.005, min(self.TICK, min(w.flush_interval for w in self._writers) / 2))

    def lend(self) -> None:
        """Give the flusher the GIL for a moment, from a recording thread whose
        buffer keeps growing while the flusher does not write it.

        CPython hands the GIL to a waiting thread once the switch interval
        (5 ms) passes *without any switch*. An event loop that never idles
        releases the GIL for an instant at every iteration (its ``select``
        call) and takes it straight back: each time, the flusher's wait starts
        over, and it may not run for seconds while buffers grow. So the
        recording thread waits here, the GIL released, while the flusher
        writes for up to LEND_BUDGET, at most once every LEND_GAP: the thread
        keeps most of its time, and the flusher gets enough to keep up.
        """
        now = time.monotonic()
        if now < self._next_loan or threading.get_ident() == self._ident:
            return
        # A thread that never releases the GIL on its own is made to by
        # CPython after a switch interval: when the flusher has run since,
        # there is no need to lend.
        if now - self._ran_at < sys.getswitchinterval():
            return
        self._next_loan = now + self.LEND_GAP
        self._lent_at = now
        loan = threading.Event()
        self._loan = loan
        self._lent.set()
        self._event.set()
        loan.wait(self.LEND_BUDGET)
        self.loans += 1

    def must_pause(self, deadline: float) -> bool:
        """Whether a pass past *deadline* should stop and give the GIL back.

        Only while recording threads lend the GIL (they keep it busy, and the
        flusher is behind). Then the flusher must not hold on to it: coming
        back from each short write call, it would take the GIL again before
        the thread waiting for it (an event loop) wakes up. Never while a
        recording thread waits for buffer space: it needs the writes, not
        the GIL. (``blocked`` may be off by one after racing updates from two
        writers; it is only a hint, and its worst effect is a cut pass.)
        """
        now = time.monotonic()
        return now >= deadline and now - self._lent_at < self.BUSY_WINDOW and self.blocked <= 0

    def _run(self) -> None:
        self._ident = threading.get_ident()
        while True:
            # While recording threads lend the GIL, write when they do (or on
            # the tick), rather than compete with them for it.
            busy = time.monotonic() - self._lent_at < self.BUSY_WINDOW and self.blocked <= 0
            (self._lent if busy else self._event).wait(self._tick())
            self._event.clear()
            self._lent.clear()
            while self._jobs:
                self._jobs.popleft().run()
            loan, self._loan = self._loan, None
            now = self._ran_at = time.monotonic()
            deadline = now + (self.LEND_BUDGET if loan is not None else self.PASS_BUDGET)
            with self._lock:
                writers = list(self._writers)
            if self._cut:  # longest waiting first, so a pass cut short moves on
                writers.sort(key=_last_write)
            self._cut = False
            for w in writers:
                try:
                    if not w.due(now) or w.closed:
                        continue
                    w.write_out(deadline=deadline)
                except Exception as exc:  # never let the flusher die
                    internal_error(exc, "flusher")
                self._ran_at = time.monotonic()
                if self.must_pause(deadline):
                    self._event.set()  # the rest is still due
                    self._cut = True
                    break
            if loan is not None:
                loan.set()

    def writers(self) -> list[_Writer]:
        with self._lock:
            return list(self._writers)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.RLock()
        self._event = _Wake()
        self._lent = _Wake()
        self._jobs = collections.deque()  # the parent's to run
        self.thread = None
        self._ident = 0
        self._loan = None
        self._next_loan = 0.0
        self._lent_at = -1.0
        self._ran_at = 0.0
        self.blocked = 0
        self._cut = False
        for w in list(_all_writers):
            w._after_fork_in_child()
        if self._writers:
            self.thread = threading.Thread(target=self._run, name="ststrace-flusher", daemon=True)
            self.thread.start()


def _last_write(w: _Writer) -> float:
    return w._last_write


# How run_for_main wants a job run.
_RUN_HERE, _SUBMITTED, _DEFERRED = 0, 1, 2
# Jobs the main thread is waiting for (touched by the main thread only).
_main_waits = 0


def _wait(job: _Job) -> None:
    """Wait, on the main thread, for the flusher to run *job*. Ctrl-C ends the
    wait, not the job."""
    global _main_waits
    _main_waits += 1
    try:
        job.done.wait()
    finally:
        _main_waits -= 1


def _holds_locks(writer: _Writer) -> bool:
    """Whether this thread holds a lock the flusher needs to write *writer*:
    only true in a signal handler that interrupted ststrace."""
    return any(lock._is_owned() for lock in (writer._lock, _flusher._lock, _fd_pool._lock))  # type: ignore[attr-defined]


_flusher = _Flusher()


def _after_fork_in_child() -> None:
    _fd_pool.reset()
    _flusher._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
