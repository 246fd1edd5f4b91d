"""Instructions per ``@tool`` call, counted by valgrind's callgrind (issue 32).

Run: ``python benchmarks/count_instructions.py [--calls 100,1100] [--case tool|tool-no-redact|tool-no-session|user|tool-int|tool-int-no-redact]``
(issue 32's screen: ``--case user-code|user-command|user-diff|user-traceback|result-code``, ``-off`` appended
for ``redact=False``: bench_redact.py's texts)
or ``python benchmarks/count_instructions.py --stages`` (per stage, below).

Runs this script under ``valgrind --tool=callgrind`` once per number of calls
and prints the difference divided by the difference of calls, so start-up and
one-time compiles cancel. Needs valgrind (``apt-get install valgrind``). The
case is the ``kwargs`` case of ``bench_decorators.py``:
``search(query="weather in Paris", units="metric", limit=3)`` in a ``Session``;
the ``tool-int`` cases are ``compare.py``'s ``tool(x)`` returning ``x``.

``--stages``: one valgrind run, each stage a loop of calls between two
``os.getppid()`` calls (``--dump-before=getppid`` closes a profile part at
each), so the parts are the stages; before each stage, a part of its own
writes every buffer out. A stage is a zero-argument function
called ``--n`` times after ``--n // 10`` warm-up calls; the count of an empty
function is subtracted. The whole calls (``@tool`` in a session) include
whatever the background flusher did meanwhile; "append + write out" is the
writer's share of one line done in the calling thread (the lines appended,
then written out at the end of the part).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))


def _calls(case: str, n: int) -> None:
    sys.path.insert(0, os.path.join(HERE, ".."))
    from ststrace import Session, tool

    @tool
    def search(query: str, units: str = "metric", limit: int = 5) -> str:
        return "Paris: 18 C, light rain, wind 12 km/h"

    @tool
    def f(x: int) -> int:
        return x

    if case.startswith("tool-int"):
        with tempfile.TemporaryDirectory() as tmp:
            with Session(path=os.path.join(tmp, "t.jsonl"), redact=case != "tool-int-no-redact"):
                f(0)
                for i in range(n):
                    f(i)
        return
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
def _stage_list() -> list[tuple[str, Callable[[], Any]]]:
    """(label, fn) for --stages; built inside the valgrind run."""
    sys.path.insert(0, os.path.join(HERE, ".."))
    from ststrace import Session, tool
    from ststrace import _context

    def f(x: int) -> int:
        return x

    def search(query: str, units: str = "metric", limit: int = 5) -> str:
        return "Paris: 18 C, light rain, wind 12 km/h"

    tmp = tempfile.mkdtemp()
    tf, ts = tool(f), tool(search)
    out: list[tuple[str, Callable[[], Any]]] = [
        ("empty function (subtracted from all)", lambda: None),
        ("int: the undecorated function", lambda: f(5)),
        ("int: @tool, no session", lambda: tf(5)),
        ("int: compare.py's floor (two lines by hand, no wrapt)", _compare_floor(tmp, f)),
    ]
    sessions = {}
    for label, redact in (("Session(redact=False)", False), ("Session()", True)):
        s = Session(path=os.path.join(tmp, f"{redact}.jsonl"), redact=redact).open()
        s._restore_context()
        sessions[redact] = s

        def in_session(fn: Callable[[], Any], s: Any = s) -> Callable[[], Any]:
            def run() -> Any:
                token = _context.current.set(s)
                try:
                    return fn()
                finally:
                    _context.current.reset(token)

            return run

        # The context set/reset around each call is measured alone below.
        out.append((f"int: @tool in {label} (+ context set/reset)", in_session(lambda: tf(5))))
        out.append((f"kwargs: @tool in {label} (+ context set/reset)",
                    in_session(lambda: ts(query="weather in Paris", units="metric", limit=3))))
    out.append(("context set/reset (the harness, in each whole call above)",
                lambda: _context.current.reset(_context.current.set(sessions[True]))))
    out.extend(_pieces(sessions[True], f))
    return out


def _pieces(s: Any, f: Callable[[int], int]) -> list[tuple[str, Callable[[], Any]]]:
    """The parts of one ``f(5)`` call in ``Session()``, each alone (the code as it is now)."""
    from ststrace import _context, _ids, _records, _text, _tool_calls

    spec = _tool_calls._ToolSpec(f, None, True, True)
    guard, writer = s._guard, s._writer
    cid = _ids.new_tool_call_id()
    line = _records.tool_result_line(cid, "5")
    appended = [0]

    def append() -> None:
        writer.append(line)
        appended[0] += 1
        if appended[0] % 2000 == 0:
            writer.write_out()

    call = _tool_calls._ToolCall(s, cid, spec)
    import time

    import orjson

    dumps, time_ns = orjson.dumps, time.time_ns
    pieces = [
        ("  context lookups (session, bound id, replay flag)",
         lambda: (_context.current.get(), _context.bound_tool_call_id.get(), _context.replayed_tools)),
        ("  bind the arguments", lambda: spec.binder.bind(None, (5,), {})),
        ("  arguments as JSON text (json_text)", lambda: _text.json_text({"x": 5})),
        ("  a new call id", _ids.new_tool_call_id),
        ("  the call's line (single_call_line: dumps of the id)",
         lambda: _records.single_call_line(cid, spec.name_json, '{"x":5}')),
        ("  the result as text (content_text)", lambda: _text.content_text(5)),
        ("  the result's line (tool_result_line)", lambda: _records.tool_result_line(cid, "5")),
        ("  the tool scope (context set/reset)",
         lambda: _context.current_tool_call.reset(_context.current_tool_call.set(call))),
        ("  the scope object (_ToolCall)", lambda: _tool_calls._ToolCall(s, cid, spec)),
        ("  the screen of a field (guard.screen)", lambda: guard.screen("Paris: 18 C, light rain, wind 12 km/h")),
        ("  writer: append + write out, per line", append),
        ("  _begin_tool (the general path: bind, JSON, id, line, append)",
         lambda: _tool_calls._begin_tool(spec, s, None, (5,), {})),
        ("  _finish_tool (the general path: text, line, append)",
         lambda: _tool_calls._finish_tool(spec, s, cid, 5, None)),
    ]
    if hasattr(_tool_calls, "_lean_call"):  # since issue 32, third round
        pieces += [
            ("  the call's line with the name in place (call_format %)",
             lambda: spec.call_format % (cid.encode(), dumps('{"x":5}'), time_ns() // 1_000_000)),
            ("  the result's line, own id (RESULT_LINE_OWN_ID %)",
             lambda: _records.RESULT_LINE_OWN_ID % (dumps("5"), cid.encode(), time_ns() // 1_000_000)),
            ("  _lean_call (bind, JSON, screen, id, line, append)",
             lambda: _tool_calls._lean_call(spec, s, writer.append, (5,), {})),
            ("  _lean_result (text, screen, line, append)",
             lambda: _tool_calls._lean_result(spec, s, cid, 5, None)),
        ]
    return pieces


def _compare_floor(tmp: str, tool: Callable[[int], int]) -> Callable[[], Any]:
    """compare.py's ``floor`` case, as a zero-argument stage."""
    sys.path.insert(0, HERE)
    from pathlib import Path

    from compare import case_floor

    call, _finish = case_floor(Path(tmp))
    return lambda: call(5)


def _stages(n: int, labels_path: str) -> None:
    stages = _stage_list()
    with open(labels_path, "w") as fh:
        fh.write("\n".join(label for label, _ in stages))
    for _label, fn in stages:
        for _ in range(max(n // 10, 10)):
            fn()
    try:
        from ststrace._flusher import _flusher
    except ImportError:  # before issue 32's split (to count an older tree)
        from ststrace._writer import _flusher  # type: ignore[attr-defined,no-redef]

    for _label, fn in stages:
        # A part of its own: every buffer written out, so no stage pays for
        # the lines of the one before it.
        os.getppid()  # closes the part before: see --stages above
        for w in _flusher.writers():
            w.write_out()
        os.getppid()
        for _ in range(n):
            fn()
    os.getppid()


def _count_stages(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--dump-before=getppid", f"--callgrind-out-file={out}",
             sys.executable, __file__, "--run-stages", str(n), os.path.join(tmp, "labels")],
            capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")},
        )
        parts = {}
        for name in os.listdir(tmp):
            m = re.fullmatch(r"cg\.out\.(\d+)", name)
            if m:
                with open(os.path.join(tmp, name)) as fh:
                    total = re.search(r"^totals: (\d+)", fh.read(), re.M)
                parts[int(m.group(1))] = int(total.group(1)) if total else 0
        with open(os.path.join(tmp, "labels")) as fh:
            labels = fh.read().split("\n")
    # Part 1 is start-up; part 2k + 2 writes the buffers out, 2k + 3 is stage k.
    counts = [parts.get(2 * k + 3, 0) / n for k in range(len(labels))]
    base = counts[0]
    print(f"instructions per call, {n} calls per stage, PYTHONHASHSEED=0:")
    for label, c in zip(labels, counts):
        print(f"  {c - base:9,.0f}  {label}")


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
    if len(sys.argv) == 4 and sys.argv[1] == "--run-stages":
        _stages(int(sys.argv[2]), sys.argv[3])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", default="100,1100")
    parser.add_argument("--case", default="tool",
                        choices=["tool", "tool-no-redact", "tool-no-session", "user", "tool-int", "tool-int-no-redact",
                                 *_TEXT_CASES])
    parser.add_argument("--stages", action="store_true", help="instructions per call of each stage (one valgrind run)")
    parser.add_argument("--n", type=int, default=2000, help="calls per stage with --stages")
    opts = parser.parse_args()
    if opts.stages:
        _count_stages(opts.n)
        return
    low, high = (int(x) for x in opts.calls.split(","))
    a, b = _count(opts.case, low), _count(opts.case, high)
    print(f"{opts.case}: {(b - a) / (high - low):,.0f} instructions per call")


if __name__ == "__main__":
    main()
