"""What a new user hits in the first ten minutes: clear answers, said once."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

import ststrace
from ststrace import Session
from ststrace.cli import main

FAKE_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"  # shaped like a Hugging Face token, made up


def _trace(path: Path, messages: list[dict[str, object]]) -> Path:
    lines = [{"type": "session", "harness": "t", "id": path.stem}]
    lines += [{"type": "message", "message": m} for m in messages]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_validate_a_file_that_is_not_a_trace_says_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`ststrace validate README.md`: one line naming the file and line 1, exit 1."""
    readme = tmp_path / "README.md"
    readme.write_text("# A project\n\nSome prose.\n\n" + "more prose\n" * 300)
    assert main(["validate", str(readme)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1, out
    assert out[0].startswith(f"{readme}: not an STS trace (line 1: ")


@pytest.mark.parametrize("first", ['[1, 2, 3]', '{"hello": "world"}', '"text"'])
def test_validate_json_that_is_not_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str], first: str) -> None:
    """JSON lines that are not a session header are 'not an STS trace' too, once."""
    f = tmp_path / "data.jsonl"
    f.write_text(first + "\n" + first + "\n")
    assert main(["validate", str(f)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and "not an STS trace (line 1:" in out[0], out


def test_validate_many_problems_prints_the_first_20_and_a_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace with 30 problems: 20 lines, then how many more; --all shows all."""
    f = _trace(tmp_path / "bad.jsonl", [{"role": "bogus", "content": "x"}] * 30)
    assert main(["validate", "--json", str(f)]) == 1
    total = len(json.loads(capsys.readouterr().out)["files"][0]["problems"])
    assert total >= 30
    assert main(["validate", str(f)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 21
    assert out[-1] == f"{f}: ... and {total - 20} more problems (--all or --json lists every one)"
    assert main(["validate", "--all", str(f)]) == 1
    assert len(capsys.readouterr().out.splitlines()) == total


def test_a_header_without_messages_still_validates_when_it_is_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace whose first line is a message (header missing) is still checked line by line."""
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps({"type": "message", "message": {"role": "user", "content": "hi"}}) + "\n")
    assert main(["validate", str(f)]) == 1
    out = capsys.readouterr().out
    assert "header-missing" in out and "not an STS trace" not in out


def test_upload_dry_run_prints_each_refusal_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A refused file is reported once on stderr (not as a log line and again as 'refused')."""
    pytest.importorskip("huggingface_hub")
    f = _trace(tmp_path / "leaky.jsonl", [{"role": "user", "content": f"token {FAKE_TOKEN}", "model": "m"}])
    assert main(["upload", str(f), "--repo", "alice/traces", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert err.count(FAKE_TOKEN[:6]) <= 1  # the secret itself is never echoed whole
    finding_lines = [ln for ln in err.splitlines() if str(f) in ln]
    assert len(finding_lines) == 1, err
    assert "refused" in finding_lines[0]


@pytest.mark.parametrize("name", ["mytrace.json", "run.txt", "out/trace.JSON"])
def test_session_refuses_a_file_path_that_is_not_jsonl(tmp_path: Path, name: str) -> None:
    """Session("mytrace.json") used to create a directory of that name."""
    with pytest.raises(ValueError, match=r"directory .* or a file ending in \.jsonl"):
        Session(tmp_path / name)
    assert not (tmp_path / name).exists()


def test_session_accepts_an_existing_directory_with_a_dot(tmp_path: Path) -> None:
    """A directory that exists is a directory, whatever its name looks like."""
    d = tmp_path / "runs.v2"
    d.mkdir()
    with Session(d) as s:
        s.user("hi")
    assert s.path is not None and s.path.parent == d and s.path.exists()


def test_disabled_session_has_no_path_says_so_once_and_keeps_stats_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """STSTRACE_DISABLED=1: path is None, one INFO line, the same stats keys as enabled."""
    from ststrace import _session_checks

    with Session(tmp_path) as enabled:
        enabled.user("x")
    keys = set(enabled.stats())
    monkeypatch.setenv("STSTRACE_DISABLED", "1")
    monkeypatch.setattr(_session_checks, "_disabled_noted", False)
    caplog.set_level(logging.INFO, logger="ststrace")
    for _ in range(3):
        with Session(tmp_path / "off") as s:
            s.user("not recorded")
        assert s.path is None
        assert set(s.stats()) == keys
    notes = [r for r in caplog.records if "STSTRACE_DISABLED" in r.getMessage()]
    assert len(notes) == 1 and notes[0].levelno == logging.INFO
    assert not (tmp_path / "off").exists()


def test_sync_to_without_huggingface_hub_fails_at_construction(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The hint to install the extra comes when the session is made, not as a traceback at close."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install 'ststrace\[hub\]'"):
        Session(tmp_path, sync_to="hf://datasets/alice/traces")


def test_sync_to_with_a_bad_target_fails_at_construction(tmp_path: Path) -> None:
    pytest.importorskip("huggingface_hub")
    with pytest.raises(ValueError, match="hf://"):
        Session(tmp_path, sync_to="s3://bucket/x")


def test_import_ststrace_has_no_import_cycles_between_session_and_lower_modules() -> None:
    """The arrows run one way: lower modules never import _session at run time."""
    root = Path(ststrace.__file__).parent
    for name in ("_registry.py", "_signals.py", "_hub.py", "_writer.py", "_guard.py", "_redact.py", "_records.py"):
        text = (root / name).read_text()
        assert "from ._session import" not in text and "import _session" not in text, name
