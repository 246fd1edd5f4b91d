"""Shared timing and reporting for the in-process benchmarks.

Every case is a function ``run(n)`` that makes *n* calls and then writes
out what it buffered (the floor its last partial 64 KiB block, a session its
writer's buffer, without fsync on either side): the bytes reaching the file
are part of the cost. Cases are timed in alternation, each repeat runs every
case once, so a change in the machine's load hits all of them alike; the best
repeat of each is kept, as wall time and as the CPU time of the whole process
(all threads: ststrace's background flusher counts).

A target line is printed as ``TARGET <id> | <what> | <figure> | <target> | MET``
(or ``MISSED``); ``run_all.py`` collects those lines into its summary. A ratio
target is judged on the worse of the wall and the CPU ratios.
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path
from typing import Callable

Run = Callable[[int], None]

#: The floor's write size (what a hand-written JSONL tracer would use).
BLOCK = 65536


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def machine_line() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"CPU: {cpu_model()}, {os.cpu_count()} CPUs, load average {load:.1f}"


def best_of(cases: dict[str, Run], number: int, repeat: int) -> dict[str, tuple[float, float]]:
    """Per call, best (wall ns, process CPU ns) of each case over *repeat* alternating runs."""
    best = {name: (float("inf"), float("inf")) for name in cases}
    for _ in range(repeat):
        for name, run in cases.items():
            gc.collect()
            cpu = time.process_time_ns()
            start = time.perf_counter_ns()
            run(number)
            wall = (time.perf_counter_ns() - start) / number
            cpu_used = (time.process_time_ns() - cpu) / number
            w, c = best[name]
            best[name] = (min(w, wall), min(c, cpu_used))
    return best


def ratio(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return a[0] / b[0], a[1] / b[1]


def target(tid: str, what: str, r: tuple[float, float], limit: float) -> bool:
    """Print a ratio target line; judged on the worse of wall and CPU."""
    worst = max(r)
    met = worst <= limit
    print(f"TARGET {tid} | {what} | {r[0]:.2f}x wall, {r[1]:.2f}x CPU | <= {limit:g}x | {'MET' if met else 'MISSED'}", flush=True)
    return met


def target_line(tid: str, what: str, figure: str, limit: str, met: bool) -> None:
    print(f"TARGET {tid} | {what} | {figure} | {limit} | {'MET' if met else 'MISSED'}", flush=True)
