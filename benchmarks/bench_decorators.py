"""Cost of a decorated no-op ``@tool`` call, against what it cannot avoid.

Run: ``python benchmarks/bench_decorators.py [--number N] [--repeat R]``

In one process it times, per call of ``f(x) -> x``:

- ``bare``: a ``wrapt.FunctionWrapper`` whose wrapper just calls through;
- ``no session``: ``@tool`` with no current session (target: <= 1.5x bare);
- ``floor``: the same recording work done by hand -- two STS envelopes
  (assistant call with a fresh id and the arguments as JSON text, then the
  tool result), ms timestamps, ``orjson.dumps`` of the arguments and of each
  envelope, appended to a list;
- ``session``: ``@tool`` inside a ``Session`` -- two lines written per call
  (nobody asked for the call, so ststrace records the call, then the result)
  -- with the default guard (redaction + caps), with ``redact=False`` (caps
  only) and with no guard at all (target: <= 2.5x floor).

Timings use ``time.perf_counter_ns``, best of R repeats of N calls, so a busy
machine distorts them less. ``--profile`` prints a cProfile of the session path.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import itertools
import os
import pstats
import sys
import tempfile
import time
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import orjson  # noqa: E402
import wrapt  # noqa: E402

from ststrace import Session, tool  # noqa: E402


def f(x: int) -> int:
    return x


def _passthrough(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    return wrapped(*args, **kwargs)


bare = wrapt.FunctionWrapper(f, _passthrough)
traced = tool(f)

_ids = itertools.count(1)
_prefix = os.urandom(6).hex()


def make_floor(buf: list[bytes]) -> Callable[[int], int]:
    def floor(x: int) -> int:
        call_id = f"call_{_prefix}{next(_ids):06x}"
        arguments = orjson.dumps({"x": x}).decode()
        call = {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": call_id, "function": {"name": "f", "arguments": arguments}}],
            "timestamp": time.time_ns() // 1_000_000,
        }
        buf.append(orjson.dumps({"type": "message", "message": call}) + b"\n")
        result = f(x)
        answer = {
            "role": "tool",
            "content": orjson.dumps(result).decode(),
            "toolCallId": call_id,
            "timestamp": time.time_ns() // 1_000_000,
        }
        buf.append(orjson.dumps({"type": "message", "message": answer}) + b"\n")
        return result

    return floor


def best_ns(fn: Callable[[int], Any], number: int, repeat: int) -> tuple[float, float]:
    """Best per-call (wall, thread CPU) time in ns over *repeat* runs of *number* calls.

    Wall time (``perf_counter_ns``) is the figure; thread CPU time is printed
    beside it because on a loaded machine a long run is often descheduled.
    """
    rng = range(number)
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        gc.collect()
        cpu = time.thread_time_ns()
        start = time.perf_counter_ns()
        for i in rng:
            fn(i)
        end = time.perf_counter_ns()
        cpu = time.thread_time_ns() - cpu
        best_wall = min(best_wall, (end - start) / number)
        best_cpu = min(best_cpu, cpu / number)
    return best_wall, best_cpu


def in_session(tmp: str, name: str, number: int, repeat: int, **kwargs: Any) -> tuple[float, float]:
    # A long flush interval and a large buffer keep the background flusher
    # (real disk writes) out of the timed loop as far as possible; it still
    # runs when the buffer fills.
    with Session(os.path.join(tmp, f"{name}.jsonl"), flush_interval=3600, buffer_size=1 << 26, **kwargs):
        return best_ns(traced, number, repeat)


def profile_session(tmp: str, number: int, **kwargs: Any) -> None:
    with Session(os.path.join(tmp, "profile.jsonl"), flush_interval=3600, buffer_size=1 << 26, **kwargs):
        prof = cProfile.Profile()
        prof.enable()
        for i in range(number):
            traced(i)
        prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=500, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=200, help="repeats; the best is kept")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the session path")
    args = parser.parse_args(argv)
    n, r = args.number, args.repeat

    buf: list[bytes] = []
    t_plain = best_ns(f, n, r)
    t_bare = best_ns(bare, n, r)
    t_nosession = best_ns(traced, n, r)
    t_floor = best_ns(make_floor(buf), n, r)
    with tempfile.TemporaryDirectory() as tmp:
        t_default = in_session(tmp, "default", n, r)
        t_noredact = in_session(tmp, "noredact", n, r, redact=False)
        t_noguard = in_session(tmp, "noguard", n, r, redact=False, max_field_chars=0)
        if args.profile:
            profile_session(tmp, n)

    print(f"calls per repeat: {n}, repeats: {r} (best kept); per call, wall (thread CPU):")
    rows = [
        ("plain function", t_plain),
        ("bare wrapt wrapper", t_bare),
        ("@tool, no session", t_nosession),
        ("floor (by hand)", t_floor),
        ("@tool, session, default guard", t_default),
        ("@tool, session, redact=False", t_noredact),
        ("@tool, session, no guard", t_noguard),
    ]
    for label, (wall, cpu) in rows:
        print(f"  {label:32s} {wall:9.0f} ns  ({cpu:6.0f} ns)")

    def ratio(a: tuple[float, float], b: tuple[float, float]) -> str:
        return f"{a[0] / b[0]:5.2f}x  ({a[1] / b[1]:4.2f}x)"

    print("ratios, wall (thread CPU):")
    print(f"  no session / bare wrapt            {ratio(t_nosession, t_bare)}  target <= 1.5x")
    print(f"  session (default) / floor          {ratio(t_default, t_floor)}  target <= 2.5x")
    print(f"  session (redact=False) / floor     {ratio(t_noredact, t_floor)}")
    print(f"  session (no guard) / floor         {ratio(t_noguard, t_floor)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
