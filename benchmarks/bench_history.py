"""Per-call cost of ``@llm`` given the whole conversation, by its length (issue 32).

Run: ``python benchmarks/bench_history.py [--sizes 10,1000,10000] [--calls N] [--repeat R]``

An agent loop resends the whole history with every model call. Here an
``@llm`` function (a fake model returning a constant reply dict) is called in a
``Session`` (defaults: redaction and caps on) with a history already *N*
messages long; each timed call adds one user message and the reply, so the
history grows by two per call. Two styles of loop:

- ``append``: one list, ``messages.append(...)`` (the common case);
- ``copy``: a new list each call, ``messages = [*messages, msg]`` holding the
  same message dicts.

Printed: microseconds per call (best of *repeat* runs of *calls* calls) for each
size and style. The cost should not grow with *N*.
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

from _harness import machine_line  # noqa: E402

from ststrace import Session, llm  # noqa: E402

REPLY = {"role": "assistant", "content": "Sure: the tests pass now, I ran `pytest -q tests/test_app.py`."}


@llm(model="fake-model")
def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return REPLY


def history(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful coding agent."}]
    for i in range(n - 1):
        if i % 2 == 0:
            out.append({"role": "user", "content": f"Step {i}: please fix the failing test in src/mod_{i}.py"})
        else:
            out.append({"role": "assistant", "content": f"Done with step {i}; the diff touches 3 lines."})
    return out


def per_call(directory: Path, n: int, calls: int, style: str) -> float:
    """Microseconds per call at a history of *n* messages."""
    messages = history(n)
    with Session(path=directory / f"h{n}-{style}-{time.perf_counter_ns()}.jsonl"):
        model(messages=messages)  # the session records the whole history once
        messages.append(dict(REPLY))
        gc.collect()
        start = time.perf_counter_ns()
        for i in range(calls):
            msg = {"role": "user", "content": f"next step {i}"}
            if style == "append":
                messages.append(msg)
                model(messages=messages)
                messages.append({"role": "assistant", "content": REPLY["content"]})
            else:
                messages = [*messages, msg]
                model(messages=messages)
                messages = [*messages, {"role": "assistant", "content": REPLY["content"]}]
        elapsed = time.perf_counter_ns() - start
    return elapsed / calls / 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    print(machine_line())
    print(f"{'messages':>9} {'append µs/call':>15} {'copy µs/call':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in opts.sizes.split(",")):
            calls = max(10, min(opts.calls, opts.calls * 100 // max(n, 100)))
            best = {s: min(per_call(Path(tmp), n, calls, s) for _ in range(opts.repeat)) for s in ("append", "copy")}
            print(f"{n:>9} {best['append']:>15.1f} {best['copy']:>13.1f}", flush=True)


if __name__ == "__main__":
    main()
