"""What redaction costs (issue 16, target 3), and what it costs against encoding.

Run: ``python benchmarks/bench_redact.py [--number N] [--repeat R]``

Target 3: for a 2 KB tool result of each kind below (assistant prose, code,
a JSON tool result, a mix), ``@tool`` inside a ``Session`` with the default
redaction costs at most 1.5x the same call in a session with
``redact=False`` (size caps on in both; the tool takes an int and returns the
2 KB text; each run writes out what it buffered; see ``_harness.py``).

For context it also times, per 2 KB message:

- ``orjson.dumps(msg)``: what writing the message costs anyway;
- ``MessageGuard.message(msg)`` with the default redactor: what redaction,
  media checks and caps add on top (the no-secret path, the one that matters);
- the same with one secret in the content (the rare path).

and prints the ratio guard / encode (the first round's target, < 1, which
the standard library's ``re`` cannot meet: see benchmarks/README.md).
Timings are the best of R repeats, so a busy machine distorts them less.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import timeit
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import orjson  # noqa: E402

from _harness import Run, best_of, machine_line, ratio, target  # noqa: E402

from ststrace import Session, tool  # noqa: E402
from ststrace._context import current  # noqa: E402
from ststrace._guard import MessageGuard  # noqa: E402
from ststrace._redact import Redactor  # noqa: E402

PROSE = (
    "I read the configuration file and found that the retry policy is too aggressive. "
    "It retries every failed request immediately, up to ten times, which turns a short outage "
    "into a flood of requests. I suggest lowering the maximum number of attempts to three and "
    "adding exponential backoff with jitter. Next, I ran the test suite: 142 passed, 3 skipped "
    "and none failed in 12.4 seconds. The skipped tests need a running database, so I left them. "
)
CODE = (
    "def load_config(path: str) -> dict[str, object]:\n"
    '    """Read the YAML file at *path* and check its top-level keys."""\n'
    '    with open(path, encoding="utf-8") as fh:\n'
    "        data = yaml.safe_load(fh) or {}\n"
    "    if not isinstance(data, dict):\n"
    '        raise ValueError(f"bad config in {path!r}: expected a mapping")\n'
    "    unknown = set(data) - KNOWN_KEYS\n"
    "    if unknown:\n"
    '        logger.warning("ignoring unknown keys %s", sorted(unknown))\n'
    "    return data\n\n"
)
TOOL_JSON = orjson.dumps(
    [
        {"id": 1042, "title": "Fix flaky retry test", "state": "open", "labels": ["bug", "ci"], "comments": 4},
        {"id": 1043, "title": "Document backoff settings", "state": "closed", "labels": ["docs"], "comments": 0},
        {"id": 1045, "title": "Bump dependencies", "state": "open", "labels": [], "comments": 12},
    ]
).decode()


def _two_kb(unit: str) -> str:
    return (unit * (2048 // len(unit) + 1))[:2048]


TEXTS = {
    "prose": _two_kb(PROSE),
    "code": _two_kb(CODE),
    "tool json": _two_kb(TOOL_JSON),
    "mixed": _two_kb(PROSE + "```python\n" + CODE + "```\n"),
}
SECRET = "sk-proj-Ab3dEf6hIj9kLmN0pQrStUvWxYz12345678abcDEFghiJKL"


def _best(fn: Callable[[], Any], number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def _tool_run(session: Session, text: str) -> Run:
    @tool
    def fetch(page: int) -> str:
        return text

    def run(n: int) -> None:
        token = current.set(session)
        try:
            for i in range(n):
                fetch(i)
        finally:
            current.reset(token)
        writer = session._writer
        assert writer is not None
        writer.write_out()

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)

    print(machine_line())
    print("@tool returning 2 KB, in a session with default redaction and with redact=False (2000 calls per run):")
    with tempfile.TemporaryDirectory() as d:
        for name, text in TEXTS.items():
            cases: dict[str, Run] = {}
            sessions = []
            for label, redact in (("redact=False", False), ("default", True)):
                s = Session(os.path.join(d, f"tool-{name}-{redact}.jsonl"), redact=redact).open()
                s._restore_context()
                sessions.append(s)
                cases[label] = _tool_run(s, text)
            t = best_of(cases, 2000, max(10, args.repeat * 3))
            for s in sessions:
                s.close()
            print(f"  {name:10s} redact=False {t['redact=False'][0]:6.0f} ns, default {t['default'][0]:6.0f} ns (wall)")
            target("3", f"@tool with a 2 KB {name} result: default / redact=False", ratio(t["default"], t["redact=False"]), 1.5)
    print()

    guard = MessageGuard(Redactor(env=False))
    print(f"{'content (2 KB)':<12} {'encode':>9} {'guard':>9} {'ratio':>6}   {'with a secret':>13}")
    worst = 0.0
    for name, text in TEXTS.items():
        msg = {"role": "assistant", "content": text, "model": "gpt-4o", "timestamp": 1767225600000}
        assert guard.message(msg) is msg, f"{name}: benchmark text must hold no secret"
        encode = _best(lambda: orjson.dumps(msg), args.number, args.repeat)
        redact = _best(lambda: guard.message(msg), args.number, args.repeat)
        cut = len(text) // 2
        secret_msg = dict(msg, content=text[:cut] + " " + SECRET + " " + text[cut:])
        with_secret = _best(lambda: guard.message(secret_msg), args.number // 10, args.repeat)
        worst = max(worst, redact / encode)
        print(
            f"{name:<12} {encode * 1e9:7.0f}ns {redact * 1e9:7.0f}ns {redact / encode:6.2f}   "
            f"{with_secret * 1e9:11.0f}ns"
        )
    print(f"worst ratio guard/encode: {worst:.2f} (target < 1)")

    print(f"\n{'Session.user':<12} {'redact off':>11} {'redact on':>10} {'added':>7}")
    with tempfile.TemporaryDirectory() as d:
        for name, text in TEXTS.items():
            times = []
            for redact in (False, True):
                with Session(os.path.join(d, f"{name}-{redact}.jsonl"), redact=redact, flush_interval=60) as s:
                    times.append(_best(lambda: s.user(text), args.number // 4, args.repeat))
            off, on = times
            print(f"{name:<12} {off * 1e9:9.0f}ns {on * 1e9:8.0f}ns {(on - off) / off:6.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
