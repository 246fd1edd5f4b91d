"""``ststrace validate``: check trace files against STS-Format."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import CliError, describe, dump_json, one_line, trace_file, warn

HELP = "check trace files against STS-Format"


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="trace files (.jsonl)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of lines")


def run(args: argparse.Namespace) -> int:
    from .._reader import validate

    failed = False
    report: list[dict[str, Any]] = []
    for path in args.files:
        try:
            problems = validate(trace_file(path))
        except (CliError, OSError) as exc:
            msg = str(exc) if isinstance(exc, CliError) else describe(exc)
            warn("ststrace validate", msg)
            failed = True
            report.append(
                {
                    "path": str(path),
                    "ok": False,
                    "errors": 1,
                    "warnings": 0,
                    "problems": [{"line": 0, "code": "unreadable", "severity": "error", "message": msg}],
                }
            )
            continue
        n_err = sum(1 for pr in problems if pr.severity == "error")
        failed = failed or n_err > 0
        report.append(
            {
                "path": str(path),
                "ok": n_err == 0,
                "errors": n_err,
                "warnings": len(problems) - n_err,
                "problems": [pr._asdict() for pr in problems],
            }
        )
        if not args.json:
            for pr in problems:
                where = f"{path}:{pr.line}" if pr.line > 0 else str(path)
                print(f"{where}: {pr.severity}: {pr.code}: {one_line(pr.message)}")
            if not problems:
                print(f"{path}: ok")
    if args.json:
        dump_json({"ok": not failed, "files": report})
    return 1 if failed else 0
