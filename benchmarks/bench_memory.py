"""Peak memory while one session records 1,000,000 messages.

Run: ``python benchmarks/bench_memory.py [--messages 1000000]``

One ``Session`` records a realistic mix: user turns, assistant replies with a
tool call (every other call is never answered, so the table of calls waiting
for a result is exercised up to its cap), tool results and plain assistant
text. RSS is sampled ten times along the way. It must stay flat: the buffer
is bounded, the pending tool-call table is capped, nothing grows with the
message count.

Then, in a fresh process, one session with ``buffer_size=64 MiB`` records
about 100 MB: the flusher writes each 64 MiB batch in slices of about 1 MiB,
so the peak stays near one buffer (its lines take about 1.4x their bytes in
memory), not two: a buffer joined whole would be copied once more before it
is written.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _harness import target_line  # noqa: E402

from ststrace import Session  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


BIG_BUFFER = 64 << 20


def big_buffer(messages: int) -> int:
    """One session with a 64 MiB buffer: peak RSS above the start, against the buffer size."""
    text = "x" * 60
    with tempfile.TemporaryDirectory() as d:
        start_rss = rss_mib()
        with Session(Path(d), id="big", buffer_size=BIG_BUFFER, max_buffer=2 * BIG_BUFFER) as s:
            for i in range(messages):
                s.user(f"question {i}: what is in row {i}? {text}")
            stats = s.stats()
        size = (Path(d) / "big.jsonl").stat().st_size
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    growth = peak - start_rss
    buffer_mib = BIG_BUFFER / 2**20
    print(
        f"one session, buffer_size={buffer_mib:.0f} MiB, {messages:,} messages, {size / 2**20:.0f} MiB written, "
        f"lost: {stats['lost']}"
    )
    print(
        f"  peak RSS {peak:.1f} MiB, {growth:+.1f} MiB over the start; "
        f"{'OK' if growth < 2 * buffer_mib else 'NO'} (target: under 2x the buffer, {2 * buffer_mib:.0f} MiB; "
        "small lines take about 1.4x their bytes in memory, and a buffer joined whole adds a copy)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--big-buffer", type=int, default=0, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.big_buffer:
        return big_buffer(args.big_buffer)
    total = args.messages
    step = max(1, total // 10)

    samples: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory() as d:
        start_rss = rss_mib()
        start = time.perf_counter()
        last = ""
        with Session(Path(d), id="memory") as s:
            for i in range(total):
                k = i % 4
                if k == 0:
                    s.user(f"question {i}: what is in row {i}?")
                elif k == 1:
                    (last,) = s.assistant("", tool_calls=[{"name": "lookup", "arguments": {"row": i}}], model="m")
                elif i % 8 == 2:
                    s.tool(last, {"row": i, "value": "x" * 40})
                else:
                    s.assistant(f"row {i} holds 40 x's", model="m")
                if (i + 1) % step == 0:
                    samples.append((i + 1, rss_mib()))
            stats = s.stats()
        elapsed = time.perf_counter() - start
        size = (Path(d) / "memory.jsonl").stat().st_size
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"one session, {total:,} messages, {size / 1e6:.0f} MB written in {elapsed:.1f} s ({total / elapsed:,.0f} msg/s)")
    print(f"  RSS before: {start_rss:6.1f} MiB")
    for n, rss in samples:
        print(f"  after {n:>9,}: {rss:6.1f} MiB")
    first, end = samples[0][1], samples[-1][1]
    print(f"  peak RSS {peak:.1f} MiB; growth from the first sample to the last: {end - first:+.1f} MiB")
    print(f"  pending tool calls at the end: {stats['pending_tool_calls']} (capped), lost: {stats['lost']}")
    print(f"  flat: {'OK' if end - first < 16 else 'NO'} (target: no growth with the message count)")
    target_line("mem", f"RSS growth over {total:,} messages in one session", f"{end - first:+.1f} MiB", "flat (< 16 MiB)", end - first < 16)
    sys.stdout.flush()
    # ru_maxrss is a high-water mark for the whole process: measure in a fresh one.
    return subprocess.call([sys.executable, __file__, "--big-buffer", "600000"])


if __name__ == "__main__":
    raise SystemExit(main())
