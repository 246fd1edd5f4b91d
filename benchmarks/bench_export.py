"""``ststrace export`` throughput against reading the same files (issue 22).

Run: ``python benchmarks/bench_export.py [--sessions N] [--repeat R]``
or ``python benchmarks/bench_export.py --format dpo --sessions 10000``
or ``python benchmarks/bench_export.py --stages`` (issue 32: where export's time goes)

``--format dpo`` (issue 29): sessions recorded as rollouts (a ``taskId`` per 4
samples, a reward each); ``export(format="dpo")`` runs in a fresh process,
which reports its time and peak memory (RSS), against ``format="sft"`` of the same files. The point: pairing
keeps one small summary per session, so memory does not grow with the files.

Target: ``ststrace.export(dir, out.jsonl)`` (default options: redaction on,
rows written and fsynced) takes at most 2x the time of reading every message
of the same files with ``ststrace.iter_messages``. The sessions are shaped
like recorded ones: a system prompt, tools, user turns, assistant replies with
reasoning, tool calls and usage, tool results of a few hundred characters
(about 12 KB a session). Also shown: export with ``redact=False`` (what
redaction adds) and the Parquet writer. Best of R alternating repeats, wall
and process CPU; MB/s is of input read.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _harness import machine_line, ratio, target  # noqa: E402

import ststrace  # noqa: E402
from ststrace import Session  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool of the benchmark agent, with a description of typical length.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]},
        },
    }
    for name in ("read_file", "list_dir", "grep", "run_tests")
]
RESULT = (
    "def handler(event, context):\n    body = json.loads(event['body'])\n    return {'statusCode': 200, 'body': body}\n" * 4
)


def make_sessions(directory: Path, n: int, rollouts: bool = False) -> int:
    for i in range(n):
        task = {"task_id": f"task-{i // 4:05d}", "sample": i % 4} if rollouts else {}
        with Session(directory, id=f"bench-{i:06d}", harness="bench", flush_interval=60, **task) as s:
            s.tools(TOOLS)
            s.system("You are a coding agent. Use the tools to read and change the repository.")
            for turn in range(4):
                s.user(f"Step {turn}: find where the handler parses the request body and explain it.")
                ids = s.assistant(
                    "Let me look at the code.",
                    reasoning="The handler is probably in src/app.py; reading it first.",
                    tool_calls=[{"name": "read_file", "arguments": {"path": f"src/app{turn}.py", "limit": 200}},
                                {"name": "grep", "arguments": {"path": "src", "limit": 20}}],
                    model="bench-model",
                    usage={"input": 1200 + turn, "output": 80, "cacheRead": 1000},
                )
                for cid in ids:
                    s.tool(cid, RESULT)
            s.assistant(f"The handler parses the body with json.loads and returns it unchanged ({i % 4}).", model="bench-model")
            if rollouts:
                s.outcome((i % 4) / 3, success=i % 4 == 3)
    return sum(f.stat().st_size for f in directory.iterdir())


def read_all(directory: Path) -> None:
    for f in sorted(directory.glob("*.jsonl")):
        for _ in ststrace.iter_messages(f):
            pass


CHILD = """
import resource, sys, time
import ststrace
src, out, fmt = sys.argv[1:4]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
start, cpu = time.perf_counter(), time.process_time()
result = ststrace.export(src, out, format=fmt)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(wall, cpu, peak, rss, result.rows)
"""


def bench_format(src: Path, outs: Path, fmt: str) -> tuple[float, float, int, int, int]:
    import subprocess

    out = outs / f"{fmt}.jsonl"
    done = subprocess.run([sys.executable, "-c", CHILD, str(src), str(out), fmt], check=True, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.path.join(HERE, "..")})
    out.unlink()
    wall, cpu, peak, rss, rows = done.stdout.split()
    return float(wall), float(cpu), int(peak), int(rss), int(rows)


def main_dpo(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "traces"
        size = make_sessions(src, args.sessions, rollouts=True)
        print(f"{args.sessions} sessions ({args.sessions // 4} tasks of 4 samples), {size / 1e6:.1f} MB")
        outs = Path(tmp) / "out"
        outs.mkdir()
        best: dict[str, tuple[float, float, int, int, int]] = {}
        for _ in range(args.repeat):
            for fmt in ("sft", "dpo"):
                got = bench_format(src, outs, fmt)
                if fmt not in best or got[1] < best[fmt][1]:
                    best[fmt] = got
        for fmt, (wall, cpu, peak, rss, rows) in best.items():
            print(f"export format={fmt:4s} {wall:7.2f} s wall {cpu:7.2f} s CPU  {rows:6d} rows  peak RSS {rss / 1e6:6.1f} MB ({peak / 1e6:+.1f} MB over the process before the export)")
        print(f"dpo / sft: {best['dpo'][0] / best['sft'][0]:.2f}x wall, {best['dpo'][1] / best['sft'][1]:.2f}x CPU (dpo reads each paired file twice)")


def main_stages(args: argparse.Namespace) -> None:
    """Each stage of ``export`` alone over the same files, in ms and as a ratio
    to ``iter_messages``: what the export's ratio is made of (issue 32)."""
    from collections import Counter

    from ststrace._convert import input_files
    from ststrace._encode import dumps
    from ststrace._export import _guarded_row, _row, _screen, _Texts
    from ststrace._guard import make_guard
    from ststrace._reader import read

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "traces"
        size = make_sessions(src, args.sessions)
        print(f"{args.sessions} sessions, {size / 1e6:.1f} MB")
        files = sorted(src.glob("*.jsonl"))
        outs = Path(tmp) / "out"
        outs.mkdir()
        counter = iter(range(10**9))
        guard = make_guard(True)
        assert guard is not None
        traces = [read(f, strict=False) for f in files]
        rows = [_row(t, "sft", Counter(), None)[0] for t in traces]
        texts = []
        for t in traces:
            collected = _Texts(guard)
            _row(t, "sft", Counter(), collected)
            texts.append(collected)
        # The stages run over all sessions held in memory, export over one at a
        # time: out of the collector's sight, they do not slow its passes.
        import gc

        gc.freeze()

        def read_each() -> None:
            for f in files:
                read(f, strict=False)

        def write_rows() -> None:
            with open(outs / f"{next(counter)}.jsonl", "wb", buffering=1 << 20) as f:
                for row in rows:
                    f.write(dumps(row) + b"\n")
                f.flush()
                os.fsync(f.fileno())

        cases = {
            "iter_messages (the 1.00x)": lambda: read_all(src),
            "export, whole": lambda: ststrace.export(src, outs / f"{next(counter)}.jsonl"),
            "  list the inputs (input_files)": lambda: input_files([src]),
            "  read and parse (read)": read_each,
            "  row walk alone (redact=False)": lambda: [_row(t, "sft", Counter(), None)[1] for t in traces],
            "  row walk + strings collected": lambda: [_row(t, "sft", Counter(), _Texts(guard))[1] for t in traces],
            "  scan (join + Redactor.find)": lambda: [_screen(guard, t) for t in texts],
            "  walk + scan + guard of flagged": lambda: [_guarded_row(guard, t, "sft", Counter(), True)[1] for t in traces],
            "  encode + write + fsync": write_rows,
        }
        best = {name: (float("inf"), float("inf")) for name in cases}
        for _ in range(args.repeat):
            for name, run in cases.items():
                cpu, start = time.process_time_ns(), time.perf_counter_ns()
                run()
                wall, used = time.perf_counter_ns() - start, time.process_time_ns() - cpu
                best[name] = (min(best[name][0], wall), min(best[name][1], used))
                for f in outs.iterdir():
                    f.unlink()
        base = best["iter_messages (the 1.00x)"]
        for name, (wall, used) in best.items():
            r = ratio((wall, used), base)
            print(f"{name:38s} {wall / 1e6:8.1f} ms wall {used / 1e6:8.1f} ms CPU  {r[0]:.2f}x / {r[1]:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--format", choices=("sft", "dpo"), default="sft", help="dpo: the preference export of rollouts (issue 29)")
    ap.add_argument("--stages", action="store_true", help="time each stage of export alone (issue 32)")
    args = ap.parse_args()
    print(machine_line())
    if args.stages:
        main_stages(args)
        return
    if args.format == "dpo":
        main_dpo(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "traces"
        size = make_sessions(src, args.sessions)
        print(f"{args.sessions} sessions, {size / 1e6:.1f} MB")
        outs = Path(tmp) / "out"
        outs.mkdir()
        counter = iter(range(10**9))

        cases = {
            "iter_messages (read every message)": lambda: read_all(src),
            "export (default: redaction on)": lambda: ststrace.export(src, outs / f"{next(counter)}.jsonl"),
            "export redact=False": lambda: ststrace.export(src, outs / f"{next(counter)}.jsonl", redact=False),
            "export to Parquet": lambda: ststrace.export(src, outs / f"{next(counter)}.parquet"),
        }
        best = {name: (float("inf"), float("inf")) for name in cases}
        for _ in range(args.repeat):
            for name, run in cases.items():
                cpu, start = time.process_time_ns(), time.perf_counter_ns()
                run()
                wall, used = time.perf_counter_ns() - start, time.process_time_ns() - cpu
                best[name] = (min(best[name][0], wall), min(best[name][1], used))
                for f in outs.iterdir():
                    f.unlink()
        base = best["iter_messages (read every message)"]
        for name, (wall, used) in best.items():
            r = ratio((wall, used), base)
            print(f"{name:38s} {wall / 1e9:7.3f} s wall {used / 1e9:7.3f} s CPU  {size / 1e6 / (wall / 1e9):7.1f} MB/s  {r[0]:.2f}x / {r[1]:.2f}x")
        target("export-throughput", "export (default) vs iter_messages over the same files", ratio(best["export (default: redaction on)"], base), 2.0)


if __name__ == "__main__":
    main()
