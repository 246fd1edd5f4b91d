"""Cost of recording one message, and the writer's sustained throughput.

Run: ``python benchmarks/bench_core.py [--number N] [--repeat R] [--mb MB]``

In one process:

1. ``s.user(TEXT)`` against the floor of the same work done by hand:
   ``orjson.dumps`` of the same envelope (role, content, ms timestamp) and an
   append to a list. Target: at most 2x the floor. Printed with the default
   guard (redaction + size caps), with ``redact=False`` and with no guard.
2. The writer's sustained throughput (``Writer.append`` of ready lines, with
   the background flusher writing, until the last byte is written) against a
   raw loop of ``f.write(line)`` over the same bytes. Twice: to disk (both
   end with ``fsync``; the disk dominates) and to the page cache (no fsync;
   the CPU cost of the writer shows). Target: at least 70% of the raw loop.

Timings are the best of R repeats (wall time; thread CPU time beside it), so
a busy machine distorts them less.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import orjson  # noqa: E402

from ststrace import Session  # noqa: E402
from ststrace._writer import Writer, create_exclusive  # noqa: E402

TEXT = "What is the weather in Paris today, and should I take an umbrella?"


def best_ns(fn: Callable[[], Any], number: int, repeat: int) -> tuple[float, float]:
    """Best per-call (wall, thread CPU) ns over *repeat* runs of *number* calls."""
    rng = range(number)
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        gc.collect()
        cpu = time.thread_time_ns()
        start = time.perf_counter_ns()
        for _i in rng:
            fn()
        end = time.perf_counter_ns()
        cpu = time.thread_time_ns() - cpu
        best_wall = min(best_wall, (end - start) / number)
        best_cpu = min(best_cpu, cpu / number)
    return best_wall, best_cpu


def floor_user(buf: list[bytes]) -> Callable[[], None]:
    dumps, now, append = orjson.dumps, time.time_ns, buf.append

    def floor() -> None:
        msg = {"role": "user", "content": TEXT, "timestamp": now() // 1_000_000}
        append(dumps({"type": "message", "message": msg}) + b"\n")
        if len(buf) > 100_000:
            buf.clear()

    return floor


def session_user(tmp: Path, name: str, number: int, repeat: int, **kwargs: Any) -> tuple[float, float]:
    # The flusher still writes in the background when the buffer fills, as in real use.
    with Session(tmp / f"{name}.jsonl", **kwargs) as s:
        user = s.user
        return best_ns(lambda: user(TEXT), number, repeat)


def make_lines(mb: int) -> list[bytes]:
    lines = []
    size = 0
    i = 0
    while size < mb << 20:
        msg = {"role": "assistant" if i % 2 else "user", "content": f"{i} {TEXT} " * (1 + i % 7), "timestamp": 1_700_000_000_000 + i}
        line = orjson.dumps({"type": "message", "message": msg}) + b"\n"
        lines.append(line)
        size += len(line)
        i += 1
    return lines


def raw_loop(path: Path, lines: list[bytes], fsync: bool) -> float:
    start = time.perf_counter()
    with open(path, "wb") as f:
        write = f.write
        for line in lines:
            write(line)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
        elapsed = time.perf_counter() - start
    return elapsed


def writer_loop(path: Path, lines: list[bytes], fsync: bool) -> float:
    start = time.perf_counter()
    w = Writer(path, create_exclusive(path))
    append = w.append
    for line in lines:
        append(line)
    if fsync:
        err = w.close()  # writes the rest, fsyncs, closes
        elapsed = time.perf_counter() - start
    else:
        err = w.write_out()
        elapsed = time.perf_counter() - start
        err = err or w.close()
    if err is not None:
        raise err
    return elapsed


def throughput(tmp: Path, mb: int, repeat: int, fsync: bool) -> tuple[float, float, int]:
    """(raw MB/s, writer MB/s, bytes), best of *repeat* alternating runs."""
    lines = make_lines(mb)
    total = sum(map(len, lines))
    best = {"raw": float("inf"), "writer": float("inf")}
    for r in range(repeat):
        for kind, fn in (("raw", raw_loop), ("writer", writer_loop)):
            path = tmp / f"{kind}{r}.jsonl"
            gc.collect()
            elapsed = fn(path, lines, fsync)
            assert path.stat().st_size == total, (kind, path.stat().st_size, total)
            path.unlink()
            best[kind] = min(best[kind], elapsed)
    return total / best["raw"] / 1e6, total / best["writer"] / 1e6, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=100, help="repeats; the best is kept")
    parser.add_argument("--mb", type=int, default=64, help="MB written per throughput run")
    parser.add_argument("--tp-repeat", type=int, default=5, help="throughput runs per side")
    args = parser.parse_args(argv)
    n, r = args.number, args.repeat

    buf: list[bytes] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        t_floor = best_ns(floor_user(buf), n, r)
        t_default = session_user(tmp, "default", n, r)
        t_noredact = session_user(tmp, "noredact", n, r, redact=False)
        t_noguard = session_user(tmp, "noguard", n, r, redact=False, max_field_chars=0)
        tp_disk = throughput(tmp, args.mb, args.tp_repeat, fsync=True)
        tp_cache = throughput(tmp, args.mb, args.tp_repeat, fsync=False)

    print(f"recording one message ({n} calls x {r} repeats, best kept), per call, wall (thread CPU):")
    rows = [
        ("floor: orjson.dumps + list.append", t_floor),
        ("s.user(), default guard", t_default),
        ("s.user(), redact=False", t_noredact),
        ("s.user(), no guard", t_noguard),
    ]
    for label, (wall, cpu) in rows:
        print(f"  {label:36s} {wall:8.0f} ns  ({cpu:6.0f} ns)")
    print("ratios to the floor, wall (thread CPU):")
    for label, t in rows[1:]:
        print(f"  {label:36s} {t[0] / t_floor[0]:5.2f}x  ({t[1] / t_floor[1]:4.2f}x)  target <= 2x")
    for title, (raw_mbs, writer_mbs, total) in (
        ("to disk, incl. the final fsync", tp_disk),
        ("to the page cache, no fsync", tp_cache),
    ):
        print(f"writer throughput, {title} ({total / 1e6:.0f} MB of JSONL lines, best of {args.tp_repeat}):")
        print(f"  raw f.write loop                     {raw_mbs:8.0f} MB/s")
        print(f"  ststrace Writer.append               {writer_mbs:8.0f} MB/s")
        print(f"  ratio                                {writer_mbs / raw_mbs:8.2f}     target >= 0.70")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
