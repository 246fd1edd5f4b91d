"""Run the benchmarks one after another and summarise their targets (``make bench``).

Run: ``python benchmarks/run_all.py [--full] [--only a,b]``

By default every benchmark runs in a quick configuration (a few minutes in
all on a 2-core machine); ``--full`` uses the sizes the README's results were
measured with. Each one runs in its own process and prints its own figures;
every line a script prints as ``TARGET <id> | <what> | <figure> | <target> |
MET`` (or ``MISSED``, see ``_harness.py``) is collected into the summary
printed at the end, with the date, the CPU model, the load average and the
versions. Peers in ``compare.py`` are skipped (with the reason) unless
``pip install -e '.[bench]'`` installed them. Exits non-zero if a benchmark
script fails to run; missed targets are reported in the summary, not as
failures (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import cpu_model  # noqa: E402

QUICK: list[tuple[str, list[str]]] = [
    ("bench_decorators.py", ["--number", "2000", "--repeat", "20"]),
    ("bench_core.py", ["--number", "2000", "--repeat", "40", "--mb", "32", "--tp-repeat", "2"]),
    ("bench_redact.py", ["--number", "5000", "--repeat", "5"]),
    ("bench_import.py", ["--runs", "5"]),
    ("bench_open.py", ["--sessions", "5000", "--runs", "2"]),
    ("bench_loop_lag.py", ["--tasks", "200", "--messages", "1000", "--runs", "2"]),
    ("bench_memory.py", ["--messages", "200000"]),
    ("bench_export.py", ["--sessions", "300", "--repeat", "3"]),
    ("compare.py", ["--n", "20000", "--runs", "3"]),
    ("bench_otlp_memory.py", ["--messages", "5000"]),
]

FULL: list[tuple[str, list[str]]] = [
    ("bench_decorators.py", ["--repeat", "60"]),
    ("bench_core.py", []),
    ("bench_redact.py", []),
    ("bench_import.py", ["--runs", "9"]),
    ("bench_open.py", ["--sessions", "5000", "--runs", "3"]),
    ("bench_loop_lag.py", []),
    ("bench_memory.py", []),
    ("bench_export.py", []),
    ("compare.py", []),
    ("bench_otlp_memory.py", []),
]


def versions() -> str:
    out = [f"Python {platform.python_version()}"]
    for dist in ("ststrace", "wrapt", "orjson"):
        try:
            out.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            out.append(f"{dist} (not installed)")
    return ", ".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full sizes (tens of minutes)")
    parser.add_argument("--only", help="comma-separated script names (e.g. bench_open.py,bench_core.py)")
    args = parser.parse_args(argv)
    plan = FULL if args.full else QUICK
    if args.only:
        wanted = {name.strip() for name in args.only.split(",")}
        plan = [(s, a) for s, a in plan if s in wanted or s.removesuffix(".py") in wanted]
    failed: list[str] = []
    targets: list[tuple[str, list[str]]] = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for script, script_args in plan:
        path = HERE / script
        if not path.exists():
            print(f"== {script}: not present, skipped\n", flush=True)
            continue
        print(f"== {script} {' '.join(script_args)}".rstrip(), flush=True)
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, str(path), *script_args], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            if line.startswith("TARGET "):
                targets.append((script, [part.strip() for part in line[len("TARGET ") :].split("|")]))
        code = proc.wait()
        print(f"-- {script}: {time.perf_counter() - start:.0f} s{'' if code == 0 else f', exit status {code}'}\n", flush=True)
        if code != 0:
            failed.append(script)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print("=" * 100)
    print(f"Summary, {started}: CPU {cpu_model()} ({os.cpu_count()} CPUs), load average now {load:.1f}; {versions()}")
    print(f"{'target':6} {'result':7} {'figure':34} {'limit':18} what")
    for script, parts in targets:
        tid, what, figure, limit, verdict = (parts + [""] * 5)[:5]
        print(f"{tid:6} {verdict:7} {figure:34} {limit:18} {what} ({script})")
    missed = sum(1 for _, parts in targets if parts[-1] != "MET")
    print(f"{len(targets) - missed} of {len(targets)} target lines met.")
    if failed:
        print(f"failed to run: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
