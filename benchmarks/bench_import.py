"""What ``import ststrace`` costs on top of its dependencies (issue 16, target 4).

Run: ``python benchmarks/bench_import.py [--runs N] [--wrapt-dir DIR ...]``

Fresh processes, timed by ``python -X importtime`` (cumulative microseconds
of a top-level import):

- in one process, ``import wrapt, orjson`` then ``import ststrace``: the
  second line is exactly what ststrace adds (its own modules and the
  standard-library modules wrapt does not load already). The CPU time of each
  step (``time.process_time``) is printed beside: on a shared machine the
  importtime wall clock also counts the time the process waited for a CPU.
- ``import ststrace`` and ``import wrapt, orjson``, each in its own process,
  alternating: the difference of their medians (noisier, the same quantity).

Target: the median of what ststrace adds is at most 15 ms. Byte-code caching
is on, as in an installed package: the children run without
``PYTHONDONTWRITEBYTECODE`` and with ``PYTHONPYCACHEPREFIX`` set to a temporary
directory (so the source tree stays clean), after one warm-up import that
fills it. Also printed: which ststrace modules the import loads (the
converters, hub, reader, viewer, adapters and command line must not be among
them), and its heaviest pieces.

``--wrapt-dir DIR`` (repeatable) also times ``import wrapt`` from another
install of wrapt (``pip install --target DIR wrapt==X``), to compare versions.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import machine_line, target_line  # noqa: E402

_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)")
LAZY = ("ststrace._convert", "ststrace._hub", "ststrace._reader", "ststrace._view", "ststrace._cli", "ststrace.cli", "ststrace._adapters")


def _env(cache: str, extra_path: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache
    src = str(HERE.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, src, env.get("PYTHONPATH")) if p)
    return env


def importtime(code: str, env: dict[str, str]) -> list[tuple[int, int, int, str]]:
    """(self us, cumulative us, depth, module) for every import *code* makes."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True, check=True)
    out = []
    for line in proc.stderr.splitlines():
        m = _LINE.match(line)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    return out


def importtime_cpu(env: dict[str, str]) -> tuple[list[tuple[int, int, int, str]], int]:
    """importtime rows of ``import wrapt, orjson; import ststrace``, and the CPU us of the second step."""
    code = (
        "import time; import wrapt, orjson; t = time.process_time_ns(); import ststrace; "
        "print((time.process_time_ns() - t) // 1000)"
    )
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True, check=True)
    rows = []
    for line in proc.stderr.splitlines():
        m = _LINE.match(line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    return rows, int(proc.stdout.split()[-1])


def top(rows: list[tuple[int, int, int, str]], *names: str) -> int:
    return sum(cum for _, cum, depth, name in rows if depth == 0 and name in names)


def _wrapt_version(env: dict[str, str]) -> str:
    code = "import wrapt; print(wrapt.__version__)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per side; the median is kept")
    parser.add_argument("--wrapt-dir", action="append", default=[], help="another wrapt install to time (repeatable)")
    args = parser.parse_args(argv)
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="ststrace-pyc-") as cache:
        env = _env(cache)
        loaded = subprocess.run(
            [sys.executable, "-c", "import sys, ststrace; print(' '.join(sorted(m for m in sys.modules if m.startswith('ststrace'))))"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        ours: list[int] = []
        deps: list[int] = []
        wrapt_alone: list[int] = []
        added: list[int] = []
        added_cpu: list[int] = []
        detail: list[tuple[int, int, int, str]] = []
        for _ in range(args.runs):
            ours.append(top(importtime("import ststrace", env), "ststrace"))
            rows = importtime("import wrapt, orjson", env)
            deps.append(top(rows, "wrapt", "orjson"))
            wrapt_alone.append(top(rows, "wrapt"))
            rows, cpu = importtime_cpu(env)
            added.append(top(rows, "ststrace"))
            added_cpu.append(cpu)
            if not detail or added[-1] < min(added[:-1]):
                detail = rows
        others = {}
        for d in args.wrapt_dir:
            other_env = _env(cache, d)
            version = _wrapt_version(other_env)
            others[f"wrapt {version} ({d})"] = statistics.median(top(importtime("import wrapt", other_env), "wrapt") for _ in range(args.runs))

    m_ours, m_deps = statistics.median(ours), statistics.median(deps)
    m_added = statistics.median(added)
    ms = lambda xs: ", ".join(f"{x / 1000:.1f}" for x in xs)  # noqa: E731
    print(f"{args.runs} fresh processes each; cumulative import time, ms:")
    print(f"  after wrapt and orjson, import ststrace adds  median {m_added / 1000:5.1f} ms  (runs: {ms(added)})")
    print(f"    the same step in process CPU time            median {statistics.median(added_cpu) / 1000:5.1f} ms  (runs: {ms(added_cpu)})")
    print(f"  import ststrace alone                         median {m_ours / 1000:5.1f} ms  (runs: {ms(ours)})")
    print(f"  import wrapt, orjson alone                    median {m_deps / 1000:5.1f} ms  (runs: {ms(deps)})")
    print(f"    difference of the medians                          {(m_ours - m_deps) / 1000:+5.1f} ms")
    print(f"  of which wrapt ({_wrapt_version(env)})                   median {statistics.median(wrapt_alone) / 1000:5.1f} ms")
    for label, value in others.items():
        print(f"  import {label}: median {value / 1000:.1f} ms")
    print("heaviest pieces of what ststrace adds (self time, quickest run):")
    start = next((i for i, r in enumerate(detail) if r[3] == "orjson" and r[2] == 0), 0)
    for self_us, cum, depth, name in sorted(detail[start + 1 :], reverse=True)[:8]:
        print(f"    {name:40s} {self_us / 1000:5.1f} ms self, {cum / 1000:5.1f} ms cumulative")
    eager = [m for m in loaded if m.startswith(LAZY)]
    print(f"ststrace modules loaded by the import: {' '.join(loaded)}")
    print(f"of those, ones that should be lazy: {' '.join(eager) or 'none'}")
    extra = m_added / 1000
    target_line(
        "4", "import ststrace on top of import wrapt, orjson (median, -X importtime)", f"+{extra:.1f} ms", "<= 15 ms", extra <= 15 and not eager
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
