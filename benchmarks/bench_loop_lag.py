"""Event-loop lag while many tasks record with ``durable=True``.

Run: ``python benchmarks/bench_loop_lag.py [--tasks 200] [--messages 10000]``

A 1 ms ticker measures how late each of its wake-ups is while ``--tasks``
asyncio tasks, each in its own ``Session(durable=True)``, record
``--messages`` messages each (yielding to the loop after every message, as an
agent awaiting its model would). The same workload without recording runs
first as the baseline. Recording happens on the loop thread, but the writes
and fsyncs happen on ststrace's flusher thread, so the loop should barely
notice. Target: worst lag under 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ststrace import Session  # noqa: E402

TEXT = "tool output: 42 rows, the first is {'id': 1, 'name': 'Ada'}"


async def ticker(stop: asyncio.Event, lags: list[tuple[float, float]]) -> None:
    """Appends (wake-up time, lateness) for every 1 ms tick."""
    loop = asyncio.get_running_loop()
    period = 0.001
    while not stop.is_set():
        due = loop.time() + period
        await asyncio.sleep(period)
        now = loop.time()
        lags.append((now, now - due))


async def episode(i: int, messages: int, out: Path | None, opened: asyncio.Barrier, go: asyncio.Event) -> None:
    if out is None:
        await opened.wait()
        await go.wait()
        for j in range(messages):
            f"{i}:{j} {TEXT}"  # noqa: B018 - the same string work, no recording
            await asyncio.sleep(0)
        return
    async with Session(out, id=f"task{i}", durable=True) as s:
        await opened.wait()
        await go.wait()
        for j in range(messages):
            s.user(f"{i}:{j} {TEXT}")
            await asyncio.sleep(0)


async def measure(tasks: int, messages: int, out: Path | None) -> tuple[list[float], list[float], float]:
    """Lags over the whole run and over the recording phase only, and its duration."""
    stop, go = asyncio.Event(), asyncio.Event()
    opened = asyncio.Barrier(tasks + 1)
    lags: list[tuple[float, float]] = []
    tick = asyncio.create_task(ticker(stop, lags))
    await asyncio.sleep(0.01)
    episodes = asyncio.gather(*(episode(i, messages, out, opened, go) for i in range(tasks)))
    await opened.wait()  # every session is open
    start = asyncio.get_running_loop().time()
    go.set()
    await episodes
    end = asyncio.get_running_loop().time()
    stop.set()
    await tick
    recording = [lag for t, lag in lags if start < t <= end]
    return [lag for _, lag in lags], recording, end - start


def summary(label: str, lags: list[float], elapsed: float | None = None) -> str:
    ms = sorted(x * 1000 for x in lags)
    p99 = ms[int(len(ms) * 0.99)] if ms else 0.0
    tail = f", {elapsed:.1f} s" if elapsed is not None else ""
    return (
        f"  {label:34s} worst {max(ms, default=0):7.2f} ms   p99 {p99:6.2f} ms   "
        f"median {statistics.median(ms) if ms else 0:5.2f} ms   ({len(ms)} ticks{tail})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--messages", type=int, default=10_000, help="messages per task")
    args = parser.parse_args(argv)

    _, base, base_time = asyncio.run(measure(args.tasks, args.messages, None))
    with tempfile.TemporaryDirectory() as d:
        whole, recording, elapsed = asyncio.run(measure(args.tasks, args.messages, Path(d)))
        files = sum(1 for _ in Path(d).iterdir())
    total = args.tasks * args.messages
    print(f"event-loop lag of a 1 ms ticker: {args.tasks} tasks x {args.messages} messages, durable=True")
    print(summary("baseline, no recording", base, base_time))
    print(summary("ststrace, recording phase", recording, elapsed))
    print(summary("ststrace, incl. opening sessions", whole))
    print(f"  {files} trace files, {total / elapsed:,.0f} messages/s while recording")
    worst = max(recording, default=0) * 1000
    print(f"  worst lag while recording {worst:.2f} ms   target < 5 ms   {'OK' if worst < 5 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
