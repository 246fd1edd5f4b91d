"""Cost of recording one message (issue 16, target 2), and the writer's sustained throughput.

Run: ``python benchmarks/bench_core.py [--number N] [--repeat R] [--mb MB]``

In one process:

1. ``s.user(TEXT)`` against the floor of the same line by hand: the message
   dict (role, content, ms timestamp), ``orjson.dumps`` of its envelope into
   a buffer written to the file every 64 KiB. Each run ends by writing out
   what is buffered (no fsync on either side). Target: at most 1.5x the
   floor with the default guard (redaction + size caps), on both wall and
   process CPU time. Printed beside: ``redact=False`` and no guard.
2. The writer's sustained throughput (``Writer.append`` of ready lines, with
   the background flusher writing, until the last byte is written) against a
   raw loop of ``f.write(line)`` over the same bytes. Twice: to disk (both
   end with ``fsync``; the disk dominates) and to the page cache (no fsync;
   the CPU cost of the writer shows). Target: at least 70% of the raw loop.

Timings are the best of R alternating runs (see ``_harness.py``).
"""

from __future__ import annotations

import argparse
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

import orjson  # noqa: E402
from _harness import BLOCK, Run, best_of, machine_line, ratio, target, target_line  # noqa: E402

from ststrace import Session  # noqa: E402
from ststrace._context import current  # noqa: E402
from ststrace._writer import Writer, create_exclusive  # noqa: E402

TEXT = "What is the weather in Paris today, and should I take an umbrella?"


def floor_user(path: Path) -> Run:
    dumps, now = orjson.dumps, time.time_ns
    f = open(path, "wb", buffering=0)
    buf = bytearray()

    def run(n: int) -> None:
        nonlocal buf
        for _ in range(n):
            msg = {"role": "user", "content": TEXT, "timestamp": now() // 1_000_000}
            buf += dumps({"type": "message", "message": msg})
            buf += b"\n"
            if len(buf) >= BLOCK:
                f.write(buf)
                buf = bytearray()
        f.write(buf)
        buf = bytearray()

    return run


def session_user(path: Path, **kwargs: Any) -> tuple[Run, Session]:
    s = Session(path, **kwargs).open()
    s._restore_context()  # open, not current (nothing here needs it)
    user = s.user

    def run(n: int) -> None:
        for _ in range(n):
            user(TEXT)
        writer = s._writer
        assert writer is not None
        writer.write_out()

    return run, s


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
    parser.add_argument("--number", type=int, default=2000, help="calls per run")
    parser.add_argument("--repeat", type=int, default=60, help="runs per case; the best is kept")
    parser.add_argument("--mb", type=int, default=64, help="MB written per throughput run")
    parser.add_argument("--tp-repeat", type=int, default=5, help="throughput runs per side")
    args = parser.parse_args(argv)
    n, r = args.number, args.repeat
    print(machine_line())

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        default, s1 = session_user(tmp / "default.jsonl")
        noredact, s2 = session_user(tmp / "noredact.jsonl", redact=False)
        noguard, s3 = session_user(tmp / "noguard.jsonl", redact=False, max_field_chars=0)
        t = best_of(
            {"floor": floor_user(tmp / "floor.jsonl"), "default": default, "redact=False": noredact, "no guard": noguard},
            n,
            r,
        )
        for s in (s1, s2, s3):
            s.close()
        tp_disk = throughput(tmp, args.mb, args.tp_repeat, fsync=True)
        tp_cache = throughput(tmp, args.mb, args.tp_repeat, fsync=False)

    print(f"recording one message ({n} calls per run, best of {r}), per call, wall (process CPU):")
    for label, (wall, cpu) in t.items():
        print(f"  {label:14s} {wall:7.0f} ns  ({cpu:7.0f} ns)")
    for label in ("redact=False", "no guard"):
        rr = ratio(t[label], t["floor"])
        print(f"  {label} / floor: {rr[0]:.2f}x wall, {rr[1]:.2f}x CPU")
    target("2", "s.user() / floor, default redaction", ratio(t["default"], t["floor"]), 1.5)
    for title, (raw_mbs, writer_mbs, total) in (
        ("to disk, incl. the final fsync", tp_disk),
        ("to the page cache, no fsync", tp_cache),
    ):
        print(f"writer throughput, {title} ({total / 1e6:.0f} MB of JSONL lines, best of {args.tp_repeat}):")
        print(f"  raw f.write loop                     {raw_mbs:8.0f} MB/s")
        print(f"  ststrace Writer.append               {writer_mbs:8.0f} MB/s")
        target_line("tp", f"writer throughput / raw write loop, {title}", f"{writer_mbs / raw_mbs:.2f}", ">= 0.70", writer_mbs / raw_mbs >= 0.70)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
