"""What opening sessions costs an event loop (issue 16, target 5).

Run: ``python benchmarks/bench_open.py [--sessions 5000] [--runs 2]``

``--sessions`` tasks are created together, so every one of them runs its
first step in the same loop iteration: ``async with Session(dir, id=...)``,
one ``s.user()`` once inside, then they wait for an event and all leave their
blocks at once. A 1 ms ticker measures how late each of its wake-ups is.
The baseline, in the same process, runs the same tasks with
``await asyncio.sleep(0)`` in place of the session.

Reported per run:

- loop cost per session: the CPU time of the loop thread from creating the
  tasks until every task is inside its block, minus the baseline's, divided
  by the number of sessions (construction, ``__aenter__``, and the wake-up
  when the file is ready: everything ststrace adds to the loop thread),
  measured in a run without the ticker. Target: under 20 us.
- the longest tick from creating the tasks until all are inside (and the
  baseline's), with the loop thread's CPU time within that tick. Target: no
  stall over 100 ms. On a shared machine the wall clock also counts time the
  process waited for a CPU: the load average, the baseline and the CPU time
  within the tick show how much.
- how long until every file existed, and the same two figures for closing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _harness import machine_line, target_line  # noqa: E402

from ststrace import Session  # noqa: E402


async def phase(n: int, directory: Path | None, tick: bool, given_ids: bool = True) -> dict[str, float]:
    """Open *n* sessions in one iteration (or, with *directory* None, the
    baseline), wait until all tasks are inside, then let them all leave.

    Without *tick* the loop sleeps while it waits (every task that gets
    inside checks whether it was the last): its CPU time is then only the
    work done for the tasks. With *tick* a 1 ms ticker records how late each
    of its wake-ups is (its own CPU time grows with the wait, so the two are
    measured in separate runs).
    """
    ticks: list[tuple[float, float, float]] = []  # (when, lag, loop-thread CPU during the tick)
    stop = False

    async def ticker() -> None:
        last, last_cpu = time.perf_counter(), time.thread_time()
        while not stop:
            await asyncio.sleep(0.001)
            now, cpu = time.perf_counter(), time.thread_time()
            ticks.append((now, now - last - 0.001, cpu - last_cpu))
            last, last_cpu = now, cpu

    tick_task = asyncio.create_task(ticker()) if tick else None
    await asyncio.sleep(0.05)
    leave = asyncio.Event()
    all_inside = asyncio.Event()
    inside = 0

    async def episode(i: int) -> None:
        nonlocal inside
        if directory is None:
            await asyncio.sleep(0)
            inside += 1
            if inside == n:
                all_inside.set()
            await leave.wait()
            return
        async with Session(directory, id=f"s{i}") if given_ids else Session(directory):
            inside += 1
            if inside == n:
                all_inside.set()
            await leave.wait()

    gc.collect()
    cpu0 = time.thread_time()
    t0 = time.perf_counter()
    tasks = [asyncio.create_task(episode(i)) for i in range(n)]
    await all_inside.wait()
    t1 = time.perf_counter()
    cpu1 = time.thread_time()
    open_ticks = [(lag, cpu) for at, lag, cpu in ticks if t0 <= at <= t1 + 0.005]
    await asyncio.sleep(0.05)
    t2 = time.perf_counter()
    leave.set()
    await asyncio.gather(*tasks)
    t3 = time.perf_counter()
    close_ticks = [(lag, cpu) for at, lag, cpu in ticks if t2 <= at <= t3 + 0.005]
    stop = True
    if tick_task is not None:
        await tick_task
    return {
        "cpu": cpu1 - cpu0,
        "open_s": t1 - t0,
        "open_worst": max(open_ticks, default=(t1 - t0, 0.0))[0],
        "open_worst_cpu": max(open_ticks, default=(0.0, 0.0))[1],
        "close_s": t3 - t2,
        "close_worst": max(close_ticks, default=(t3 - t2, 0.0))[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--generated-ids", action="store_true", help="let every Session() generate its id (+~1 us each)")
    args = parser.parse_args(argv)
    n = args.sessions
    print(machine_line())
    print(f"{n} tasks enter `async with Session()` in one loop iteration; per run (baseline: the same tasks without sessions):")
    costs: list[float] = []
    worsts: list[float] = []
    for run in range(args.runs):
        base_cpu = asyncio.run(phase(n, None, tick=False))
        base = asyncio.run(phase(n, None, tick=True))
        with tempfile.TemporaryDirectory() as d:
            cpu_run = asyncio.run(phase(n, Path(d), tick=False, given_ids=not args.generated_ids))
            files = len(os.listdir(d))
        assert files == n, files
        with tempfile.TemporaryDirectory() as d:
            res: dict[str, Any] = asyncio.run(phase(n, Path(d), tick=True, given_ids=not args.generated_ids))
        cost = (cpu_run["cpu"] - base_cpu["cpu"]) / n * 1e6
        costs.append(cost)
        worsts.append(res["open_worst"])
        print(
            f"  run {run + 1}: loop CPU {cpu_run['cpu'] * 1e3:6.1f} ms (baseline {base_cpu['cpu'] * 1e3:5.1f} ms) = {cost:5.1f} us per session; "
            f"all inside after {res['open_s'] * 1e3:6.0f} ms; worst tick {res['open_worst'] * 1e3:6.1f} ms "
            f"(of which loop-thread CPU {res['open_worst_cpu'] * 1e3:5.1f} ms) "
            f"(baseline {base['open_worst'] * 1e3:5.1f} ms); closing: {res['close_s'] * 1e3:5.0f} ms, "
            f"worst tick {res['close_worst'] * 1e3:6.1f} ms (baseline {base['close_worst'] * 1e3:5.1f} ms)"
        )
    cost, worst = min(costs), min(worsts)
    target_line("5", "opening a session: loop-thread CPU per session (best run)", f"{cost:.1f} us", "< 20 us", cost < 20)
    target_line("5b", f"{n} sessions opened in one iteration: worst tick (best run)", f"{worst * 1e3:.1f} ms", "<= 100 ms", worst <= 0.1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
