"""Cost of a decorated ``@tool`` call against the hand-written floor (issue 16, target 1).

Run: ``python benchmarks/bench_decorators.py [--number N] [--repeat R] [--profile]``

Two argument shapes, each as a plain ``def`` and as an ``async def``:

- ``kwargs``: ``search(query="weather in Paris", units="metric", limit=3)``
  returning a short string (the arguments recorded are
  ``{"query": "weather in Paris", "units": "metric", "limit": 3}``);
- ``int``: ``f(i)`` returning ``i``.

The **floor** is the least a JSONL tracer built on wrapt must do per call,
written by hand for that one function: a ``wrapt.FunctionWrapper`` whose
wrapper builds the assistant message holding the call (a fresh id, the
arguments as JSON text, a ms timestamp) and the tool message holding the
result, ``orjson.dumps`` of each envelope into a buffer that is written to
the file every 64 KiB (async: the result is recorded in a coroutine that
awaits the call, as ststrace does). ``@tool`` runs inside a ``Session`` with
its defaults (redaction and size caps on; the background flusher writes).
Each run ends by writing out what is buffered (no fsync on either side).

Target (issue 32): ``@tool`` in a session <= 1.5x the floor, for all four
cases, on both the wall and the process CPU time (issue 16's was 2.0x). Printed beside: ``redact=False``,
and ``@tool`` with no session against a bare wrapt wrapper (<= 1.5x).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import orjson  # noqa: E402
import wrapt  # noqa: E402
from _harness import BLOCK, Run, best_of, machine_line, ratio, target  # noqa: E402

from ststrace import Session, tool  # noqa: E402

KWARGS = {"query": "weather in Paris", "units": "metric", "limit": 3}
RESULT = "Paris: 18 C, light rain, wind 12 km/h"


def search(query: str, units: str = "metric", limit: int = 5) -> str:
    return RESULT


async def asearch(query: str, units: str = "metric", limit: int = 5) -> str:
    return RESULT


def f(x: int) -> int:
    return x


async def af(x: int) -> int:
    return x


_ids = itertools.count(1)
_prefix = os.urandom(6).hex()


class FloorFile:
    """The floor's buffer: a bytearray written to the file every 64 KiB."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "wb", buffering=0)
        self.buf = bytearray()

    def add(self, line: bytes) -> None:
        buf = self.buf
        buf += line
        if len(buf) >= BLOCK:
            self.file.write(buf)
            self.buf = bytearray()

    def write_out(self) -> None:
        if self.buf:
            self.file.write(self.buf)
            self.buf = bytearray()


def floor_tool(fn: Any, name: str, arguments: Callable[[Any, Any], Any], out: FloorFile) -> Any:
    """*fn* wrapped by hand, recording exactly what @tool records."""
    dumps, now, add = orjson.dumps, time.time_ns, out.add

    def record_call(args: Any, kwargs: Any) -> str:
        call_id = f"call_{_prefix}{next(_ids):06x}"
        msg = {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": call_id, "function": {"name": name, "arguments": dumps(arguments(args, kwargs)).decode()}}],
            "timestamp": now() // 1_000_000,
        }
        add(dumps({"type": "message", "message": msg}) + b"\n")
        return call_id

    def record_result(call_id: str, result: Any) -> None:
        content = result if type(result) is str else dumps(result).decode()
        msg = {"role": "tool", "content": content, "toolCallId": call_id, "timestamp": now() // 1_000_000}
        add(dumps({"type": "message", "message": msg}) + b"\n")

    if asyncio.iscoroutinefunction(fn):

        async def finish(coro: Any, call_id: str) -> Any:
            result = await coro
            record_result(call_id, result)
            return result

        def awrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            coro = wrapped(*args, **kwargs)
            return finish(coro, record_call(args, kwargs))

        return wrapt.FunctionWrapper(fn, awrapper)

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        call_id = record_call(args, kwargs)
        result = wrapped(*args, **kwargs)
        record_result(call_id, result)
        return result

    return wrapt.FunctionWrapper(fn, wrapper)


def _passthrough(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    return wrapped(*args, **kwargs)


def caller(fn: Any, shape: str, is_async: bool, finish: Callable[[], Any]) -> Run:
    """``run(n)``: *n* calls of *fn* with the shape's arguments, then *finish*."""
    if is_async:
        loop = asyncio.new_event_loop()

        async def drive(n: int) -> None:
            if shape == "kwargs":
                for _ in range(n):
                    await fn(query="weather in Paris", units="metric", limit=3)
            else:
                for i in range(n):
                    await fn(i)

        def run_async(n: int) -> None:
            loop.run_until_complete(drive(n))
            finish()

        return run_async

    def run(n: int) -> None:
        if shape == "kwargs":
            for _ in range(n):
                fn(query="weather in Paris", units="metric", limit=3)
        else:
            for i in range(n):
                fn(i)
        finish()

    return run


def _write_out(session: Session) -> Callable[[], Any]:
    def finish() -> None:
        writer = session._writer
        if writer is not None:
            writer.write_out()

    return finish


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per run")
    parser.add_argument("--repeat", type=int, default=40, help="runs per case; the best is kept")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the kwargs case in a session")
    args = parser.parse_args(argv)
    n, r = args.number, args.repeat
    print(machine_line())
    print(f"{n} calls per run, best of {r} alternating runs; per call, wall (process CPU):")

    functions = {
        ("kwargs", False): (search, lambda a, k: dict(k)),
        ("kwargs", True): (asearch, lambda a, k: dict(k)),
        ("int", False): (f, lambda a, k: {"x": a[0]}),
        ("int", True): (af, lambda a, k: {"x": a[0]}),
    }
    all_met = True
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for (shape, is_async), (fn, arguments) in functions.items():
            label = f"{'async def' if is_async else 'def'}, {shape}"
            slug = f"{shape}-{'async' if is_async else 'sync'}"
            floor_out = FloorFile(tmp / f"floor-{slug}.jsonl")
            traced = tool(fn)
            default = Session(tmp / f"default-{slug}.jsonl").open()
            default._restore_context()  # open, not current: each run makes it current
            noredact = Session(tmp / f"noredact-{slug}.jsonl", redact=False).open()
            noredact._restore_context()

            def in_session(session: Session) -> Run:
                inner = caller(traced, shape, is_async, _write_out(session))

                def run(k: int) -> None:
                    token = _context_set(session)
                    try:
                        inner(k)
                    finally:
                        _context_reset(token)

                return run

            cases: dict[str, Run] = {
                "floor": caller(floor_tool(fn, fn.__name__, arguments, floor_out), shape, is_async, floor_out.write_out),
                "default": in_session(default),
                "redact=False": in_session(noredact),
            }
            if not is_async and shape == "int":
                cases["bare wrapt"] = caller(wrapt.FunctionWrapper(fn, _passthrough), shape, False, lambda: None)
                cases["no session"] = caller(traced, shape, False, lambda: None)
            t = best_of(cases, n, r)
            default.close()
            noredact.close()
            floor_out.write_out()
            print(f"  {label}:")
            for name, (wall, cpu) in t.items():
                print(f"    {name:14s} {wall:7.0f} ns  ({cpu:7.0f} ns)")
            rr = ratio(t["redact=False"], t["floor"])
            print(f"    redact=False / floor: {rr[0]:.2f}x wall, {rr[1]:.2f}x CPU")
            all_met &= target("1", f"@tool in a session / floor, {label}", ratio(t["default"], t["floor"]), 1.5)
            if "no session" in t:
                target("1b", "@tool with no session / bare wrapt wrapper", ratio(t["no session"], t["bare wrapt"]), 1.5)
        if args.profile:
            traced = tool(search)
            with Session(tmp / "profile.jsonl"):
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(n * 10):
                    traced(query="weather in Paris", units="metric", limit=3)
                prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(18)
    return 0


def _context_set(session: Session) -> Any:
    from ststrace._context import current

    return current.set(session)


def _context_reset(token: Any) -> None:
    from ststrace._context import current

    current.reset(token)


if __name__ == "__main__":
    raise SystemExit(main())
