"""What redaction costs (issue 16, target 3), and what it costs against encoding.

Run: ``python benchmarks/bench_redact.py [--number N] [--repeat R]``

Target 3: for a 2 KB tool result of each kind below (assistant prose, code,
a JSON tool result, a mix), ``@tool`` inside a ``Session`` with the default
redaction costs at most 1.5x the same call in a session with
``redact=False`` (size caps on in both; the tool takes an int and returns the
2 KB text; each run writes out what it buffered; see ``_harness.py``).

Target 3u (issue 32): ``s.user(text)`` of ordinary agent text (about 500
characters each: code with backticks and snake_case names, a shell session
with a test command and a URL, a git diff hunk, a stack trace; no secret)
costs at most 1.5x the same call in a session with ``redact=False``.

For context it also times, per 2 KB message (and per agent text):

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
#: About 500 characters each of what an agent's turns hold most (issue 32):
#: code in backticks, snake_case names, paths, a test command, a URL
#: without credentials, a git diff hunk, a stack trace. No secret.
AGENT_TEXTS = {
"agent code": (
    "I found the bug in `load_config()`: `src/app/config.py` reads `max_retries` before "
    "`retry_policy` is set, so `RetryPolicy.from_dict(data)` gets `None`. The fix moves the "
    "`_apply_defaults(data)` call above it:\n\n```python\ndef load_config(path: str) -> Config:\n"
    "    data = _read_yaml(path)\n    _apply_defaults(data)\n    policy = RetryPolicy.from_dict(data[\"retry_policy\"])\n"
    "    return Config(max_retries=data[\"max_retries\"], policy=policy)\n```\n\n"
    "Then I ran `pytest -q tests/test_config.py::test_defaults_applied_first` and it passed."
),
"agent command": (
    "$ cd /home/dev/projects/web-api && git status --short\n M src/web_api/handlers/user_profile.py\n"
    "?? tests/handlers/test_user_profile.py\n$ python -m pytest -q tests/handlers/test_user_profile.py::test_update_email -x\n"
    "..F\n=================================== FAILURES ===================================\n"
    "___________________________ test_update_email ___________________________\n"
    "E   AssertionError: assert 404 == 200\nE    +  where 404 = <Response [404]>.status_code\n"
    "1 failed, 2 passed in 0.84s\nSee https://docs.pytest.org/en/stable/how-to/failures.html for details."
),
"agent diff": (
    "diff --git a/src/web_api/handlers/user_profile.py b/src/web_api/handlers/user_profile.py\n"
    "index 3f2a91c..8b7d0e4 100644\n--- a/src/web_api/handlers/user_profile.py\n+++ b/src/web_api/handlers/user_profile.py\n"
    "@@ -41,9 +41,11 @@ async def update_email(request: Request, user_id: int) -> Response:\n"
    "-    user = await db.get_user(user_id)\n+    user = await db.get_user_by_id(user_id)\n"
    "     if user is None:\n-        raise HTTPException(status_code=404)\n"
    "+        raise HTTPException(status_code=404, detail=f\"no user {user_id}\")\n"
    "+    new_email = payload.get(\"email\", \"\").strip().lower()\n     user.email = new_email\n"
),
"agent traceback": (
    "Traceback (most recent call last):\n  File \"/usr/lib/python3.11/site-packages/uvicorn/protocols/http/h11_impl.py\", line 408, in run_asgi\n"
    "    result = await app(self.scope, self.receive, self.send)\n"
    "  File \"/home/dev/projects/web-api/src/web_api/handlers/user_profile.py\", line 44, in update_email\n"
    "    user = await db.get_user(user_id)\n  File \"/home/dev/projects/web-api/src/web_api/db.py\", line 17, in get_user\n"
    "    return await self._pool.fetchrow(SELECT_USER, user_id)\nKeyError: 'user_id'\n"
),
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


def _user_run(session: Session, text: str) -> Run:
    user = session.user

    def run(n: int) -> None:
        for _ in range(n):
            user(text)
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
    for name, text in {**TEXTS, **AGENT_TEXTS}.items():
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

    print("s.user() of ordinary agent text (about 500 characters), default redaction and redact=False:")
    with tempfile.TemporaryDirectory() as d:
        for name, text in AGENT_TEXTS.items():
            cases = {}
            sessions = []
            for label, redact in (("redact=False", False), ("default", True)):
                s = Session(os.path.join(d, f"user-{name}-{redact}.jsonl"), redact=redact).open()
                s._restore_context()
                sessions.append(s)
                cases[label] = _user_run(s, text)
            t = best_of(cases, 2000, max(10, args.repeat * 3))
            for s in sessions:
                s.close()
            print(f"  {name:16s} redact=False {t['redact=False'][0]:6.0f} ns, default {t['default'][0]:6.0f} ns (wall)")
            target("3u", f"s.user() of {name} ({len(text)} chars): default / redact=False", ratio(t["default"], t["redact=False"]), 1.5)
    print()

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
