"""File work for ``async with Session()`` off the event loop, batched.

Opening a session creates its file and writes its header; closing writes the
rest and fsyncs. Neither may run on the event loop thread. ``asyncio.to_thread``
per session costs the loop tens of microseconds of executor bookkeeping each,
and its worker threads start competing with the loop for the GIL while the
loop is still busy: a loop that opens thousands of sessions in one iteration
stalled for seconds.

Here a session's ``__aenter__`` queues its job and awaits a plain future
(a few microseconds of loop time). The workers are woken by a callback the
loop runs in its *next* iteration, after everything that iteration had to do,
so they do not fight the loop for the GIL while it is queueing; they take
jobs in chunks and settle each chunk's futures with one
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import deque
from typing import Any, Callable

from ._errors import internal_error

#: Worker threads, started on first use: several, so that durable sessions'
#: fsyncs overlap.
THREADS = 2
#: Jobs a worker takes at once (and settles with one loop wake-up).
CHUNK = 32

_Job = tuple[Callable[[], Any], "asyncio.AbstractEventLoop | None", "asyncio.Future[Any] | None", "Callable[[], Any] | None"]


class _Workers:
    def __init__(self) -> None:
        # The lock guards the queue (taken as a plain lock on the loop thread:
        # Condition.__enter__ is a Python-level call); workers wait on the condition.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._jobs: deque[_Job] = deque()
        self._threads = 0
        self._idle = 0
        # Loops that have a wake-up scheduled and not yet run.
        self._kicks: set[asyncio.AbstractEventLoop] = set()

    def run(self, fn: Callable[[], Any], on_cancel: Callable[[], Any] | None = None) -> asyncio.Future[Any]:
        """A future (of the running loop) for ``fn()`` run on a worker thread.

        If the future is cancelled before *fn* finishes, *on_cancel* runs on a
        worker afterwards (to undo what *fn* did for a caller that gave up)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:
            self._jobs.append((fn, loop, fut, on_cancel))
            if loop in self._kicks:
                return fut
            self._kicks.add(loop)
        loop.call_soon(self._kick, loop)
        return fut

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._kicks.discard(loop)
            new = self._wake_locked()
        self._start(new)

    def _background(self, fn: Callable[[], Any]) -> None:
        """Queue *fn* with nobody waiting for it."""
        with self._lock:
            self._jobs.append((fn, None, None, None))
            new = self._wake_locked()
        self._start(new)

    def _wake_locked(self) -> int:
        """Wake idle workers; return how many more to start (up to THREADS, one per CHUNK jobs)."""
        if self._idle:
            self._cond.notify(self._idle)
        uncovered = len(self._jobs) - self._idle * CHUNK
        if uncovered <= 0:
            return 0
        new = min(THREADS - self._threads, -(-uncovered // CHUNK))
        self._threads += new
        return new

    def _start(self, new: int) -> None:
        for _ in range(new):
            try:
                threading.Thread(target=self._work, name="ststrace-files", daemon=True).start()
            except RuntimeError:  # interpreter shutting down: no new threads
                with self._cond:
                    self._threads -= 1
                    alone = self._threads == 0
                if alone:
                    self._drain_here()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._jobs:
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
                chunk = [self._jobs.popleft() for _ in range(min(CHUNK, len(self._jobs)))]
            self._do(chunk)

    def _drain_here(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    return
                chunk = list(self._jobs)
                self._jobs.clear()
            self._do(chunk)

    def _do(self, chunk: list[_Job]) -> None:
        done: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None, Callable[[], Any] | None]]] = {}
        for fn, loop, fut, on_cancel in chunk:
            result: Any = None
            error: BaseException | None = None
            try:
                result = fn()
            except Exception as exc:
                error = exc
            except BaseException as exc:  # never let one job kill the worker
                error = RuntimeError(f"ststrace file work interrupted: {exc!r}")
            if loop is None or fut is None:
                if error is not None:
                    internal_error(error, "background file work")
                continue
            done.setdefault(loop, []).append((fut, result, error, on_cancel))
        for loop, outcomes in done.items():
            try:
                loop.call_soon_threadsafe(self._settle, outcomes)
            except RuntimeError:
                # The loop is closed: nobody waits; undo what was done for them.
                for _fut, _result, error, on_cancel in outcomes:
                    if error is None and on_cancel is not None:
                        self._background(on_cancel)

    def _settle(
        self, outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None, Callable[[], Any] | None]]
    ) -> None:
        for fut, result, error, on_cancel in outcomes:
            if fut.cancelled():
                if error is None and on_cancel is not None:
                    self._background(on_cancel)
            elif error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(result)

    def _after_fork_in_child(self) -> None:
        # The parent's threads do not exist here; its queued jobs are its own.
        self.__init__()  # type: ignore[misc]


workers = _Workers()
run = workers.run

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=workers._after_fork_in_child)
