"""``ststrace convert``: many files, a progress bar on a TTY, a summary, bad inputs skipped."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import pytest

from ststrace import read, validate
from ststrace._cli.convert import _Progress
from ststrace._convert import FORMATS
from ststrace._cli.convert import run as run_convert
from ststrace.cli import build_parser

SAMPLES = Path(__file__).resolve().parent / "fixtures" / "agent-traces"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "convert"


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def test_convert_many_with_one_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad file is one line on stderr and skipped; the rest are written; exit 1; a summary with drops."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"what": "is this"}\n')
    out = tmp_path / "out"
    args = _parse(["convert", str(FIXTURES / "pi_v1.jsonl"), str(bad), str(FIXTURES / "claude_sidechain.jsonl"), "-o", str(out)])
    assert args.command == "convert"
    assert run_convert(args) == 1
    stdout, stderr = capsys.readouterr()
    assert stderr.strip().splitlines() == [f"ststrace convert: {bad}: cannot tell which agent wrote this file; pass --from with one of: {', '.join(FORMATS)}"]
    names = sorted(p.name for p in out.iterdir())
    assert names == ["cc-side-1-agent-a1b2.jsonl", "cc-side-1.jsonl", "pi-v1-session.jsonl"]
    for p in out.iterdir():
        assert [pr for pr in validate(p) if pr.severity == "error"] == []
    summary = stdout.strip().splitlines()[-1]
    assert summary.startswith(f"converted 2 of 3 files into 3 traces in {out}")
    assert "dropped: 2 image" in summary and summary.endswith("; 1 failed")


def test_convert_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A second run into the same directory refuses to overwrite and leaves the first output intact."""
    out = tmp_path / "out"
    assert run_convert(_parse(["convert", str(FIXTURES / "pi_v1.jsonl"), "-o", str(out)])) == 0
    first = (out / "pi-v1-session.jsonl").read_bytes()
    capsys.readouterr()
    assert run_convert(_parse(["convert", str(FIXTURES / "pi_v1.jsonl"), "-o", str(out)])) == 1
    _, err = capsys.readouterr()
    assert "already exists; not overwritten" in err
    assert (out / "pi-v1-session.jsonl").read_bytes() == first


def test_convert_from_and_all_branches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--from skips detection; --all-branches writes one file per Pi leaf; an unknown --from is refused."""
    out = tmp_path / "out"
    assert run_convert(_parse(["convert", "--from", "pi", "--all-branches", str(FIXTURES / "pi_v2_branches.jsonl"), "-o", str(out)])) == 0
    assert sorted(p.name for p in out.iterdir()) == ["pi-v2-session-branch-e0000006.jsonl", "pi-v2-session.jsonl"]
    assert read(out / "pi-v2-session.jsonl").header["branch"]["active"] is True
    capsys.readouterr()
    assert run_convert(_parse(["convert", "--from", "nope", str(FIXTURES / "pi_v1.jsonl"), "-o", str(tmp_path / "x")])) == 1
    err = capsys.readouterr().err
    assert "unknown --from format 'nope'" in err and "from_" not in err


def test_convert_directory_of_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory input converts every *.jsonl under it."""
    out = tmp_path / "out"
    assert run_convert(_parse(["convert", str(SAMPLES), "-o", str(out)])) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("converted 7 of 7 files into 7 traces")
    assert "1 orphan_tool_result" in summary
    assert len(list(out.iterdir())) == 7


def test_progress_bar_only_on_a_tty() -> None:
    """The bar draws on a TTY stream and stays silent on a pipe."""

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    bar = _Progress(4, tty)
    bar.update(2, "some/file.jsonl")
    bar.clear()
    assert "2/4 some/file.jsonl" in tty.getvalue() and "[############............]" in tty.getvalue()
    pipe = io.StringIO()
    bar = _Progress(4, pipe)
    bar.update(2, "x")
    bar.clear()
    assert pipe.getvalue() == ""


def test_standalone_entry_point(tmp_path: Path) -> None:
    """python -m ststrace convert ... works as a real process (stderr is not a TTY: no bar)."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "ststrace", "convert", str(FIXTURES / "openai_chats.jsonl"), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith("converted 1 of 1 file into 2 traces")
    assert sorted(p.name for p in out.iterdir()) == ["openai_chats-1.jsonl", "openai_chats-2.jsonl"]


def test_rerun_into_an_output_directory_inside_the_input_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``convert sessions/ -o sessions/sts`` twice: the second run does not take the first run's
    outputs for inputs (which failed every one of them, exit 1); --skip-existing skips them all."""
    src = tmp_path / "sessions"
    src.mkdir()
    for name in ("pi_v1.jsonl", "claude_sidechain.jsonl"):
        (src / name).write_bytes((FIXTURES / name).read_bytes())
    out = src / "sts"
    assert run_convert(_parse(["convert", str(src), "-o", str(out)])) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert run_convert(_parse(["convert", str(src), "-o", str(out), "--skip-existing"])) == 0
    stdout, stderr = capsys.readouterr()
    assert stderr == ""
    assert stdout.strip().startswith("converted 2 of 2 files into 0 traces")
    assert "3 skipped" in stdout
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
