"""``ststrace validate``: check trace files against STS-Format."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import CliError, describe, dump_json, one_line, source_format, trace_files, warn

#: Problems printed per file; a broken file's first lines say what is wrong.
MAX_SHOWN = 20


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files", nargs="+", type=Path, metavar="PATH", help="trace files (.jsonl), or directories of them (searched recursively)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document instead of lines")
    p.add_argument("--all", action="store_true", help=f"print every problem, not just the first {MAX_SHOWN} per file")


def _not_sts(path: Path) -> list[Any]:
    """One ``not-sts`` problem for another agent's session file (instead of a list of STS errors)."""
    from .._convert import FORMAT_LABELS
    from .._reader import Problem

    fmt = source_format(path)
    if fmt == "sts" or (fmt == "pi" and _sts_without_harness(path)):
        # The reader then names what is wrong: a header without `harness`.
        return []
    what = FORMAT_LABELS.get(fmt, fmt)
    return [Problem(1, "not-sts", f"this is {what}, not STS; `ststrace convert` turns it into STS", "error")]


def _sts_without_harness(path: Path) -> bool:
    """An STS file whose header lacks ``harness``: detection calls it Pi (Pi's header has
    none), but its lines are STS's (no Pi ``version``; messages without Pi's ``id`` /
    ``parentId``, in STS roles: ``tool`` with ``toolCallId``, not Pi's ``toolResult``)."""
    import orjson

    try:
        with open(path, "rb") as f:
            lines = [orjson.loads(raw) for raw, _ in zip(f, range(50)) if raw.strip()]
    except (OSError, ValueError):
        return False
    if not lines or not all(isinstance(o, dict) for o in lines):
        return False
    header, rest = lines[0], lines[1:]
    if "harness" in header or "version" in header or header.get("type") != "session":
        return False
    return all(
        o.get("type") == "message"
        and not ({"id", "parentId"} & o.keys())
        and isinstance(m := o.get("message"), dict)
        and m.get("role") in ("user", "assistant", "system", "tool")
        for o in rest
    )


def run(args: argparse.Namespace) -> int:
    failed = False
    report: list[dict[str, Any]] = []
    for given in args.files:
        # Each argument on its own: a missing one is reported, the others still checked.
        try:
            paths = trace_files([given])
        except CliError as exc:
            failed = True
            _unreadable(given, str(exc), report)
            continue
        for path in paths:
            failed = _check(path, args, report) or failed
    if args.json:
        dump_json({"ok": not failed, "files": report})
    return 1 if failed else 0


def _unreadable(path: Path, msg: str, report: list[dict[str, Any]]) -> None:
    warn("ststrace validate", msg)
    report.append(
        {
            "path": str(path),
            "ok": False,
            "errors": 1,
            "warnings": 0,
            "problems": [{"line": 0, "code": "unreadable", "severity": "error", "message": msg}],
        }
    )


def _check(path: Path, args: argparse.Namespace, report: list[dict[str, Any]]) -> bool:
    """Validate one file, print and report its problems; True if it has errors."""
    from .._reader import validate

    try:
        problems = _not_sts(path) or validate(path)
    except (CliError, OSError) as exc:
        _unreadable(path, str(exc) if isinstance(exc, CliError) else describe(exc), report)
        return True
    n_err = sum(1 for pr in problems if pr.severity == "error")
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
        if len(problems) == 1 and problems[0].code == "not-sts":
            print(f"{path}: {one_line(problems[0].message)}")
            return True
        shown = problems if args.all else problems[:MAX_SHOWN]
        for pr in shown:
            where = f"{path}:{pr.line}" if pr.line > 0 else str(path)
            print(f"{where}: {pr.severity}: {pr.code}: {one_line(pr.message)}")
        if len(shown) < len(problems):
            print(f"{path}: ... and {len(problems) - len(shown)} more problems (--all or --json lists every one)")
        if not problems:
            print(f"{path}: ok")
    return n_err > 0
