"""What ``export`` reads and the file it writes: a torn last line keeps its
session, the temporary file never follows a planted link, and the output is
private (issue 31, items 3-5)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import ststrace
from ststrace import Session
from ststrace._export import export


def _session(directory: Path, sid: str = "s-1") -> Path:
    with Session(directory, id=sid, harness="my-agent") as s:
        s.user("Weather in Paris?")
        s.assistant("Sunny.", model="m-1")
    assert s.path is not None
    return s.path


def test_a_torn_last_line_keeps_the_session(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A session killed mid-write is exported without its torn line, as convert reads it."""
    src = tmp_path / "in"
    path = _session(src)
    with open(path, "ab") as f:
        f.write(b'{"type": "message", "message": {"role": "assistant", "cont')
    result = export(src, tmp_path / "out.jsonl")
    assert result.failed == []
    assert result.rows == 1
    rows = (tmp_path / "out.jsonl").read_text().splitlines()
    assert len(rows) == 1 and "Sunny." in rows[0]
    assert "torn last line" in caplog.text


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_link_planted_at_the_temporary_name_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """Links at the old predictable name and at the exact name: the victim is untouched."""
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    src = tmp_path / "in"
    _session(src)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / f"out{suffix}"
    # The name an attacker could predict before the fix.
    os.symlink(victim, tmp_path / f".{out.name}.{os.getpid()}.tmp")
    export(src, out)
    assert victim.read_text() == "precious"
    assert not out.is_symlink() and out.stat().st_size > 0
    out.unlink()
    # Even a link at the very name chosen is refused, not written through.
    monkeypatch.setattr("ststrace._export.secrets.token_hex", lambda n: "cafe")
    planted = tmp_path / f".{out.name}.{os.getpid()}.cafe.tmp"
    os.symlink(victim, planted)
    with pytest.raises(FileExistsError):
        export(src, out)
    assert victim.read_text() == "precious"
    assert planted.is_symlink() and not out.exists()


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
@pytest.mark.parametrize("redact", [True, False])
def test_the_output_is_private(tmp_path: Path, suffix: str, redact: bool) -> None:
    """0600 like traces and convert output, whatever the umask: with redact=False
    it holds raw secrets."""
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    src = tmp_path / "in"
    _session(src)
    old = os.umask(0o022)
    try:
        out = tmp_path / f"out{suffix}"
        ststrace.export(src, out, redact=redact)
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        ststrace.export(src, out, redact=redact, force=True)
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_a_directory_lists_the_files_rglob_finds(tmp_path: Path) -> None:
    """The one-walk listing of a directory's inputs (issue 32) gives what a
    ``rglob`` per pattern gave: any depth, hidden names, links to files but not
    through links to directories, no directory named like a trace, no dangling link."""
    from ststrace._convert import _TRACE_GLOBS, _parts, _trace_files

    d = tmp_path
    (d / "a" / "b").mkdir(parents=True)
    (d / ".hidden").mkdir()
    (d / "x.jsonl").mkdir()
    (d / "a-b").mkdir()
    (d / "a b").mkdir()
    names = ["1.jsonl", "a/2.jsonl", "a/b/3.jsonl", ".hidden/4.jsonl", ".5.jsonl", "a/session-1.json",
             "a/b/checkpoint-2.json", "api_conversation_history.json", "a/other.json", "readme.md",
             "x.jsonl/inner.jsonl", "session-.json", "a/notes.jsonl.bak", "a-b/5.jsonl", "a b/6.jsonl"]
    for name in names:
        (d / name).write_text("{}")
    os.symlink(d / "a", d / "linkdir")
    os.symlink(d / "1.jsonl", d / "link.jsonl")
    os.symlink(d / "missing", d / "dangling.jsonl")
    expected = sorted(f for g in _TRACE_GLOBS for f in d.rglob(g) if f.is_file())
    assert sorted(_trace_files(d)) == expected
    assert sorted(_trace_files(d), key=_parts) == expected  # Path order ("a/..." before "a-b/...")
    assert len(expected) == 13
