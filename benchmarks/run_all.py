"""Run the benchmarks one after another (``make bench``).

Run: ``python benchmarks/run_all.py [--full]``

By default every benchmark runs in a quick configuration (about two minutes
in all on a 2-core machine); ``--full`` uses the sizes the README's results
table was measured with. Each one runs in its own process. Peers in
``compare.py`` are skipped (with the reason) unless ``pip install -e '.[bench]'``
installed them. Exits non-zero if a benchmark script fails to run; missed
targets are reported in the output, not as failures (timings on a shared
machine are noisy).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

QUICK: list[tuple[str, list[str]]] = [
    ("bench_core.py", ["--number", "2000", "--repeat", "50", "--mb", "32"]),
    ("bench_decorators.py", ["--number", "500", "--repeat", "100"]),
    ("bench_redact.py", []),
    ("bench_loop_lag.py", ["--tasks", "200", "--messages", "1000"]),
    ("bench_memory.py", ["--messages", "200000"]),
    ("compare.py", ["--n", "20000", "--runs", "3"]),
]

FULL: list[tuple[str, list[str]]] = [
    ("bench_core.py", []),
    ("bench_decorators.py", []),
    ("bench_redact.py", []),
    ("bench_loop_lag.py", []),
    ("bench_memory.py", []),
    ("compare.py", []),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full sizes (several minutes)")
    args = parser.parse_args(argv)
    failed = []
    for script, script_args in FULL if args.full else QUICK:
        path = HERE / script
        if not path.exists():
            print(f"== {script}: not present, skipped\n", flush=True)
            continue
        print(f"== {script} {' '.join(script_args)}".rstrip(), flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(path), *script_args])
        print(f"-- {script}: {time.perf_counter() - start:.0f} s{'' if code == 0 else f', exit status {code}'}\n", flush=True)
        if code != 0:
            failed.append(script)
    if failed:
        print(f"failed to run: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
