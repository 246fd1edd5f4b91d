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
import json
from test_convert import HERE, WILD, _error_problems, _json_lines
import os
from typing import Any
from test_redact import POSITIVES
from ststrace._convert import ConvertError, convert, convert_file, detect, write_trace
from ststrace._reader import Trace
from test_convert import CC_AGENT, CC_MAIN

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "agent-traces"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "convert"


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



# -- STS to STS ----------------------------------------------------------------------


def test_convert_on_an_sts_file_normalises_it_and_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An STS file converts (exit 0): secrets redacted, a result before its call and a
    second answer dropped and counted, a reused call id made unique; the output validates."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    src = tmp_path / "in" / "run.jsonl"
    src.parent.mkdir()
    rows = [
        {"type": "session", "harness": "my-agent", "id": "run-1", "name": "deploy", "team": "infra"},
        {"role": "user", "content": f"deploy with {token}"},
        {"role": "tool", "toolCallId": "c1", "content": "too early"},
        {"role": "assistant", "content": "", "model": "m", "toolCalls": [{"id": "c1", "function": {"name": "sh", "arguments": "{\"cmd\": \"ls\"}"}}]},
        {"role": "tool", "toolCallId": "c1", "content": "a b"},
        {"role": "tool", "toolCallId": "c1", "content": "again"},
        {"role": "assistant", "content": "", "toolCalls": [{"id": "c1", "function": {"name": "sh", "arguments": "{}"}}]},
        {"role": "assistant", "content": "done", "model": "m", "usage": {"input": 5, "output": 2}},
    ]
    src.write_text("".join(json.dumps(r if r.get("type") else {"type": "message", "message": r}) + "\n" for r in rows))
    assert [p.code for p in validate(src) if p.severity == "error"] == [
        "orphan-tool-result", "duplicate-tool-result", "duplicate-tool-call-id",
    ]
    from ststrace.cli import main

    assert main(["convert", str(src), "-o", str(tmp_path / "out")]) == 0
    summary = capsys.readouterr().out
    assert "converted 1 of 1 file" in summary and "1 duplicate_tool_result, 1 orphan_tool_result" in summary
    assert "redacted: 1 github_token" in summary
    out = tmp_path / "out" / "run-1.jsonl"
    assert _error_problems(out) == []
    lines = _json_lines(out)
    assert lines[0] == {"type": "session", "harness": "my-agent", "id": "run-1", "name": "deploy", "team": "infra"}
    msgs = [x["message"] for x in lines[1:]]
    assert token not in out.read_text()
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant", "assistant"]
    assert [tc["id"] for m in msgs for tc in m.get("toolCalls", [])] == ["c1", "c1#2"]
    assert msgs[-1]["usage"] == {"input": 5, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 7}


def test_cline_tasks_folder_converts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``convert <globalStorage>/tasks`` finds each task's ``api_conversation_history.json``."""
    from ststrace.cli import main

    assert main(["convert", str(WILD / "cline"), "-o", str(tmp_path / "out")]) == 0
    assert "converted 1 of 1 file" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["1745512345678.jsonl"]


GITHUB = next(s for k, s, _ in POSITIVES if k == "github_token" and s.startswith("ghp_"))
OPENAI = next(s for k, s, _ in POSITIVES if k == "openai_key")


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = run_convert(_parse(["convert", *argv]))
    out, err = capsys.readouterr()
    return code, out.strip().splitlines()[-1] if out.strip() else "", err


# -- redaction -------------------------------------------------------------


def _secret_chat(tmp_path: Path) -> Path:
    rows = [
        {"role": "user", "content": f"deploy with token {GITHUB}"},
        {"role": "assistant", "content": "", "model": "m", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": json.dumps({"cmd": f"export OPENAI_API_KEY={OPENAI}"})}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": f"OPENAI_API_KEY={OPENAI}\nHOME=/home/dev"},
        {"role": "assistant", "content": "done", "model": "m"},
    ]
    src = tmp_path / "secret-chat.json"
    src.write_text(json.dumps({"id": "secret-chat", "title": f"token {GITHUB}", "messages": rows}))
    return src


def test_cli_converts_the_subagents_folder_beside_a_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Given <id>.jsonl, the files in <id>/subagents/ are converted too, and the summary says how many were found."""
    out = tmp_path / "out"
    code, summary, err = _cli([str(CC_MAIN), "-o", str(out)], capsys)
    assert (code, err) == (0, "")
    assert sorted(p.name for p in out.iterdir()) == ["cc-main-1-agent-a7f3c2d.jsonl", "cc-main-1.jsonl"]
    assert summary.startswith(f"converted 2 of 2 files into 2 traces in {out}")
    assert "1 subagent file found" in summary
    assert "dropped: 2 agent_progress, 1 invalid_line, 1 orphan_tool_result, 1 progress" in summary
    for p in out.iterdir():
        assert [x for x in validate(p) if x.severity == "error"] == []


# -- a wrong --from ----------------------------------------------------------------------


@pytest.mark.parametrize("wrong", ["codex", "hermes", "droid", "cursor"])
def test_wrong_from_is_a_failure(wrong: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--from of another agent on a Claude Code file: exit 1, "no messages found ... detected: claude-code"."""
    out = tmp_path / "out"
    code, summary, err = _cli(["--from", wrong, str(CC_AGENT), "-o", str(out)], capsys)
    assert code == 1
    assert err.strip() == f"ststrace convert: no messages found in {CC_AGENT} as {wrong}; detected: claude-code"
    assert summary.startswith("converted 0 of 1 file into 0 traces") and summary.endswith("; 1 failed")
    assert "from_" not in (err + summary).replace(str(tmp_path), "")
    with pytest.raises(ConvertError, match="no messages found"):
        convert_file(CC_AGENT, wrong)


def test_cli_never_says_from_underscore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every CLI message names the option --from, never the Python parameter from_."""
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": "world"}\n')
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    code, _, err = _cli([str(odd), str(garbage), "-o", str(tmp_path / "o")], capsys)
    assert code == 1 and err.count("\n") == 2
    assert "--from" in err and "from_" not in err.replace(str(tmp_path), "")
    with pytest.raises(ConvertError, match="from_="):  # the Python API says it the Python way
        detect(odd)


# -- re-running into the same folder ------------------------------------------------------


def test_rerun_skip_existing_and_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plain re-run fails; --skip-existing leaves outputs alone; --force replaces only ststrace-written files."""
    out = tmp_path / "out"
    src = WILD / "droid_models.jsonl"
    assert _cli([str(src), "-o", str(out)], capsys)[0] == 0
    target = out / "7d1e5c3b-2a4f-4b6d-8e9f-0a1b2c3d4e5f.jsonl"
    first = target.read_bytes()
    os.utime(target, (1, 1))

    code, summary, err = _cli([str(src), "-o", str(out)], capsys)
    assert code == 1 and "already exists; not overwritten (--skip-existing keeps it, --force replaces it)" in err

    code, summary, err = _cli(["--skip-existing", str(src), "-o", str(out)], capsys)
    assert (code, err) == (0, "")
    assert summary.startswith("converted 1 of 1 file into 0 traces") and "; 1 skipped (already converted)" in summary
    assert target.stat().st_mtime == 1

    code, summary, err = _cli(["--force", str(src), "-o", str(out)], capsys)
    assert (code, err) == (0, "") and "; 1 replaced" in summary
    assert target.read_bytes() == first and target.stat().st_mtime != 1
    assert sorted(p.name for p in out.iterdir()) == [target.name]  # no temp file left behind

    # A file ststrace did not write is never replaced, and never taken for "already converted".
    target.write_text("my notes\n")
    for flag in ("--force", "--skip-existing"):
        code, summary, err = _cli([flag, str(src), "-o", str(out)], capsys)
        assert code == 1 and "not overwritten" in err, flag
        assert target.read_text() == "my notes\n"


def test_skip_existing_refuses_another_session_with_the_same_file_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--skip-existing skips only an output holding the same session id."""
    out = tmp_path / "out"
    out.mkdir()
    other = Trace(header={"type": "session", "harness": "x", "id": "7d1e5c3b/2a4f-4b6d-8e9f-0a1b2c3d4e5f"}, messages=[{"role": "user", "content": "hi"}])
    write_trace(other, out / "7d1e5c3b_2a4f-4b6d-8e9f-0a1b2c3d4e5f.jsonl")
    src = tmp_path / "7d1e5c3b_2a4f-4b6d-8e9f-0a1b2c3d4e5f.jsonl"
    src.write_text((WILD / "droid_models.jsonl").read_text().replace("7d1e5c3b-2a4f", "7d1e5c3b_2a4f"))
    code, _, err = _cli(["--skip-existing", str(src), "-o", str(out)], capsys)
    assert code == 1 and "holds another session" in err


def test_convert_redacts_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Secrets in content, tool arguments, tool output and the title are redacted and counted; --no-redact keeps them."""
    src = _secret_chat(tmp_path)
    result = convert_file(src)
    text = json.dumps([result.traces[0].header, result.traces[0].messages])
    assert GITHUB not in text and OPENAI not in text
    assert "[REDACTED:github_token]" in text and "[REDACTED:openai_key]" in text
    assert result.redactions == {"github_token": 2, "openai_key": 2}
    json.loads(result.traces[0].messages[1]["toolCalls"][0]["function"]["arguments"])  # still JSON

    out = tmp_path / "out"
    code, summary, _ = _cli([str(src), "-o", str(out)], capsys)
    assert code == 0 and "; redacted: 2 github_token, 2 openai_key" in summary
    written = (out / "secret-chat.jsonl").read_text()
    assert GITHUB not in written and OPENAI not in written
    _ = [x for x in validate(out / "secret-chat.jsonl") if x.severity == "error"] == []

    kept = tmp_path / "kept"
    code, summary, _ = _cli(["--no-redact", str(src), "-o", str(kept)], capsys)
    assert code == 0 and summary.endswith("; redaction off")
    assert GITHUB in (kept / "secret-chat.jsonl").read_text()
    assert convert_file(src, redact=False).redactions == {}


def test_convert_honours_stsstrace_redact_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """STSTRACE_REDACT=0 turns the default redaction off, as for Session."""
    monkeypatch.setenv("STSTRACE_REDACT", "0")
    src = _secret_chat(tmp_path)
    assert GITHUB in json.dumps(convert(src)[0].messages)


@pytest.mark.allow_internal_errors
def test_cli_reports_an_unforeseen_error_with_the_file_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A converter bug (here: a TypeError planted in the Droid converter) is one line naming the file; the batch continues."""
    from ststrace import _convert

    def broken(path: Path, **kwargs: Any) -> Any:
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setitem(_convert.FORMATS, "droid", broken)
    out = tmp_path / "out"
    src = WILD / "droid_models.jsonl"
    code, summary, err = _cli([str(src), str(WILD / "codex_early.jsonl"), "-o", str(out)], capsys)
    assert code == 1
    assert err.strip() == f"ststrace convert: {src}: internal error: TypeError: unhashable type: 'list' (STSTRACE_DEBUG=1 shows the traceback)"
    assert summary.startswith("converted 1 of 2 files into 1 trace") and summary.endswith("; 1 failed")
    assert [p.name for p in out.iterdir()] == ["4f6e2b1a-0c9d-4e8f-a7b6-5c4d3e2f1a0b.jsonl"]
