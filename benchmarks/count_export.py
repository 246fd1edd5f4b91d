"""Instructions per stage of ``ststrace export``, counted by valgrind's callgrind (issue 32).

Run: ``python benchmarks/count_export.py [--sessions 300] [STAGE ...]``

Writes ``--sessions`` sessions shaped as in ``bench_export.py``, then runs
this script under ``valgrind --tool=callgrind`` twice per stage, with and
without the stage, and prints the difference (set-up and imports cancel).
A fixed hash seed keeps dict probing the same from run to run. Needs
valgrind (``apt-get install valgrind``). Stages ``row+texts`` and ``screen``
exist from issue 32 on; the others also run on the code before it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))


def _setup(src: Path, stage: str) -> dict[str, Any]:
    sys.path.insert(0, os.path.join(HERE, ".."))
    import ststrace
    import ststrace._encode
    import ststrace._export  # imported here, not counted in the stage (it imports the converters)
    from ststrace._guard import make_guard
    from ststrace._reader import read

    files = sorted(src.glob("*.jsonl"))
    ctx: dict[str, Any] = {"files": files, "ststrace": ststrace, "read": read}
    if stage not in ("iter_messages", "read", "export", "export-no-redact"):
        guard = make_guard(True)
        traces = [read(f, strict=False) for f in files]
        # The guard's caches warm, as after an export's first file.
        [guard.message(m) for m in traces[0].messages]
        ctx.update(guard=guard, traces=traces)
    if stage == "screen":
        from ststrace._export import _row, _screen, _Texts

        ctx["texts"] = []
        for t in ctx["traces"]:
            collected = _Texts(guard)
            _row(t, "sft", Counter(), collected)
            ctx["texts"].append(collected)
        _screen(guard, ctx["texts"][0])  # the detectors' patterns compiled
    if stage == "dumps":
        from ststrace._export import trace_row

        ctx["rows"] = [trace_row(t) for t in ctx["traces"]]
    return ctx


def _stage(name: str) -> Callable[[dict[str, Any]], Any]:
    def export(c: dict[str, Any], redact: bool) -> Any:
        return c["ststrace"].export(c["files"], tempfile.mktemp(suffix=".jsonl"), redact=redact)

    def row(c: dict[str, Any]) -> Any:
        from ststrace._export import trace_row

        return [trace_row(t) for t in c["traces"]]

    def row_texts(c: dict[str, Any]) -> Any:
        from ststrace._export import _row, _Texts

        return [_row(t, "sft", Counter(), _Texts(c["guard"])) for t in c["traces"]]

    def screen(c: dict[str, Any]) -> Any:
        from ststrace._export import _screen

        return [_screen(c["guard"], t) for t in c["texts"]]

    def dumps(c: dict[str, Any]) -> Any:
        from ststrace._encode import dumps

        return [dumps(r) for r in c["rows"]]

    stages: dict[str, Callable[[dict[str, Any]], Any]] = {
        "iter_messages": lambda c: [None for f in c["files"] for _ in c["ststrace"].iter_messages(f)],
        "read": lambda c: [c["read"](f, strict=False) and None for f in c["files"]],
        "guard-every-message": lambda c: [[c["guard"].message(m) for m in t.messages] for t in c["traces"]],
        "trace_row": row,
        "row+texts": row_texts,
        "screen": screen,
        "dumps": dumps,
        "export": lambda c: export(c, True),
        "export-no-redact": lambda c: export(c, False),
    }
    return stages[name]


STAGES = ("iter_messages", "read", "guard-every-message", "trace_row", "row+texts", "screen", "dumps", "export", "export-no-redact")


def _count(src: Path, stage: str, run: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
             "--run", str(src), stage, "1" if run else "0"],
            capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        found = re.search(r"Collected : (\d+)", proc.stderr)
        if found is None:
            raise RuntimeError(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
        return int(found.group(1))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--run":
        src, stage, run = Path(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
        ctx = _setup(src, stage)
        if run:
            _stage(stage)(ctx)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("stages", nargs="*", default=list(STAGES))
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, ".."))
    from _harness import machine_line
    from bench_export import make_sessions

    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "traces"
        make_sessions(src, args.sessions)
        for stage in args.stages:
            n = _count(src, stage, True) - _count(src, stage, False)
            print(f"{stage:20s} {n / 1e6:9.1f} M instructions  {n / args.sessions / 1e3:8.1f} k per session", flush=True)


if __name__ == "__main__":
    main()
