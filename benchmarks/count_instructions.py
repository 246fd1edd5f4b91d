"""Instructions per ``@tool`` call, counted by valgrind's callgrind (issue 32).

Run: ``python benchmarks/count_instructions.py [--calls 100,1100] [--case tool|tool-no-redact|tool-no-session|user]``
(issue 32's screen: ``--case user-code|user-command|user-diff|user-traceback|result-code``, ``-off`` appended
for ``redact=False``: bench_redact.py's texts)

Runs this script under ``valgrind --tool=callgrind`` once per number of calls
and prints the difference divided by the difference of calls, so start-up and
one-time compiles cancel. Needs valgrind (``apt-get install valgrind``). The
case is the ``kwargs`` case of ``bench_decorators.py``:
``search(query="weather in Paris", units="metric", limit=3)`` in a ``Session``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _calls(case: str, n: int) -> None:
    sys.path.insert(0, os.path.join(HERE, ".."))
    from ststrace import Session, tool

    @tool
    def search(query: str, units: str = "metric", limit: int = 5) -> str:
        return "Paris: 18 C, light rain, wind 12 km/h"

    if case == "tool-no-session":
        search(query="warm up", units="metric", limit=1)
        for _ in range(n):
            search(query="weather in Paris", units="metric", limit=3)
        return
    if case.startswith(("user-", "result-")):
        _texts(case, n)
        return
    with tempfile.TemporaryDirectory() as tmp:
        with Session(path=os.path.join(tmp, "t.jsonl"), redact=case != "tool-no-redact") as s:
            search(query="warm up", units="metric", limit=1)
            if case == "user":
                for _ in range(n):
                    s.user("Please fix the failing test in src/app.py and run pytest -q")
            else:
                for _ in range(n):
                    search(query="weather in Paris", units="metric", limit=3)


def _texts(case: str, n: int) -> None:
    """``s.user()`` of bench_redact.py's agent text (``user-<name>``), or ``@tool``
    returning its 2 KB code result (``result-code``); ``-off`` for ``redact=False``."""
    sys.path.insert(0, HERE)
    from bench_redact import AGENT_TEXTS, TEXTS

    from ststrace import Session, tool

    kind, _, name = case.partition("-")
    redact = not name.endswith("-off")
    name = name.removesuffix("-off")
    with tempfile.TemporaryDirectory() as tmp:
        with Session(path=os.path.join(tmp, "t.jsonl"), redact=redact) as s:
            if kind == "user":
                text = AGENT_TEXTS[f"agent {name}"]
                s.user(text)
                for _ in range(n):
                    s.user(text)
            else:
                result = TEXTS[name]

                @tool
                def fetch(page: int) -> str:
                    return result

                fetch(0)
                for i in range(n):
                    fetch(i)


_TEXT_CASES = [f"user-{t}{off}" for t in ("code", "command", "diff", "traceback") for off in ("", "-off")] + [
    "result-code",
    "result-code-off",
]


def _count(case: str, n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
             "--run", case, str(n)],
            capture_output=True, text=True, check=True,
            # A fixed hash seed: with a random one, dict probing moves the
            # count by up to 2,000 instructions per call from run to run.
            env={**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")},
        )
        found = re.search(r"Collected : (\d+)", proc.stderr)
        if found is None:
            raise SystemExit(proc.stderr[-2000:])
        return int(found.group(1))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--run":
        _calls(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", default="100,1100")
    parser.add_argument("--case", default="tool", choices=["tool", "tool-no-redact", "tool-no-session", "user", *_TEXT_CASES])
    opts = parser.parse_args()
    low, high = (int(x) for x in opts.calls.split(","))
    a, b = _count(opts.case, low), _count(opts.case, high)
    print(f"{opts.case}: {(b - a) / (high - low):,.0f} instructions per call")


if __name__ == "__main__":
    main()
