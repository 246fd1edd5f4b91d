"""File safety, verified as part of "safe to share": private permissions, no
clobbering, no escaping the trace directory, no following a planted symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ststrace import Session


def _record(path: Path) -> None:
    old = os.umask(0o022)
    try:
        with Session(path) as s:
            s.user("hi")
    finally:
        os.umask(old)


def test_trace_file_is_0600_in_a_0700_directory(tmp_path: Path) -> None:
    """The file is 0600 and the directory ststrace creates for it is 0700, despite umask 022."""
    path = tmp_path / "a" / "t.jsonl"
    _record(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_every_directory_created_is_0700(tmp_path: Path) -> None:
    """Missing intermediate directories are private too, not only the last one."""
    path = tmp_path / "a" / "b" / "t.jsonl"
    _record(path)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700


def test_existing_trace_is_never_clobbered(tmp_path: Path) -> None:
    """A second session on the same path refuses, and the first file is unchanged."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.user("first")
    before = path.read_bytes()
    with pytest.raises(FileExistsError):
        with Session(path) as s:
            s.user("second")
    assert path.read_bytes() == before


@pytest.mark.parametrize("bad_id", ["../x", "../../etc/passwd", "/abs/path", "a/b", "a\\b", "a\x00b", "..", ".", "", "x" * 129])
def test_ids_that_could_escape_the_directory_are_rejected(tmp_path: Path, bad_id: str) -> None:
    """Session ids become file names: separators, '..', NUL and absolute paths are refused."""
    with pytest.raises(ValueError):
        Session(tmp_path, id=bad_id)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dangling", [False, True])
def test_planted_symlink_is_not_followed(tmp_path: Path, dangling: bool) -> None:
    """A symlink at the trace path (to a file or to nowhere) is refused, its target untouched."""
    target = tmp_path / "victim.txt"
    if not dangling:
        target.write_text("precious")
    link = tmp_path / "t.jsonl"
    link.symlink_to(target)
    with pytest.raises(FileExistsError):
        with Session(link) as s:
            s.user("payload")
    if dangling:
        assert not target.exists()
    else:
        assert target.read_text() == "precious"



# -- odd paths -----------------------------------------------------------------------


def test_dangling_symlink_as_the_trace_directory_says_so(tmp_path: Path) -> None:
    link = tmp_path / "traces"
    link.symlink_to(tmp_path / "gone")
    for kwargs in ({}, {"resume": True, "id": "x"}):
        with pytest.raises(FileNotFoundError, match=r"traces is a symbolic link to '.*gone', which does not exist"):
            Session(link, **kwargs).open()
    assert not (tmp_path / "gone").exists()
