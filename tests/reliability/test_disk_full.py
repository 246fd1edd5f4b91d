"""A real full disk: a 256 KiB tmpfs mounted by the test (root only).

The user's code keeps running, the loss is counted, flush()/close() raise
WriteError naming the file, and once space returns flush() writes the rest.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from ststrace import Session, WriteError, read, validate

pytestmark = pytest.mark.root


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(directory: Path) -> Path:
    """Write a filler file until the filesystem refuses (ENOSPC)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    block = b"\0" * 4096
    try:
        while True:
            try:
                if os.write(fd, block) == 0:
                    break
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
    finally:
        os.close(fd)
    return filler


def indices(path: Path) -> list[int]:
    return [int(m["content"].split(":")[0]) for m in read(path).messages]


@pytest.mark.allow_internal_errors
def test_full_disk_counts_loss_and_recovers(tiny_fs: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = Session(tiny_fs, id="full", flush_interval=0.01, buffer_size=1024, max_buffer=16384).open()
    filler = fill(tiny_fs)
    pad = "d" * 100
    with caplog.at_level(logging.ERROR, logger="ststrace"):
        start = time.monotonic()
        for i in range(3000):
            s.user(f"{i}:{pad}")  # never raises, never blocks for long
        elapsed = time.monotonic() - start
    assert elapsed < 10
    st = s.stats()
    assert st["write_errors"] >= 1
    assert st["lost"] > 0
    assert st["messages"] + st["lost"] == 3000
    assert "cannot write" in caplog.text and str(s.path) in caplog.text

    with pytest.raises(WriteError) as info:
        s.flush()
    assert info.value.path == s.path and str(s.path) in str(info.value)

    # Space returns: flush() writes everything still buffered, in whole lines.
    filler.unlink()
    s.flush()
    kept = indices(s.path)
    assert len(kept) == st["messages"]
    assert kept == sorted(set(kept))  # in order, nothing written twice
    assert kept[0] == 0  # the oldest records were kept, the newest dropped
    assert [p for p in validate(s.path) if p.severity == "error"] == []

    s.user(f"3000:{pad}")
    with pytest.raises(WriteError, match=rf"{s.path}.*{st['lost']} record\(s\) lost"):
        s.close()
    assert indices(s.path)[-1] == 3000
    assert s.stats()["lost"] == st["lost"]


@pytest.mark.allow_internal_errors
def test_close_on_a_still_full_disk_then_resume(tiny_fs: Path) -> None:
    """close() reports what it could not write; the file stays a valid prefix that
    resume=True can continue once there is space again."""
    s = Session(tiny_fs, id="stuck", flush_interval=3600).open()
    filler = fill(tiny_fs)
    for i in range(500):
        s.user(f"{i}:" + "e" * 100)
    with pytest.raises(WriteError) as info:
        s.close()
    lost = info.value.lost
    assert lost > 0 and str(s.path) in str(info.value)
    assert s.stats()["lost"] == lost
    problems = [p for p in validate(s.path) if p.severity == "error"]
    assert {p.code for p in problems} <= {"torn-line"}
    written = read(s.path, strict=False).messages
    assert len(written) + lost == 500  # a torn last line counts as lost

    filler.unlink()
    with Session(s.path, resume=True) as again:
        again.user("500:resumed")
    assert [p for p in validate(s.path) if p.severity == "error"] == []
    assert indices(s.path) == list(range(len(written))) + [500]


@pytest.mark.allow_internal_errors
def test_user_exception_wins_over_write_error(tiny_fs: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A block that raises on a full disk: the user's exception propagates, ours is logged."""
    boom = ValueError("agent failed")
    with caplog.at_level(logging.ERROR, logger="ststrace"):
        with pytest.raises(ValueError) as info:
            with Session(tiny_fs, id="both", flush_interval=3600) as s:
                fill(tiny_fs)
                s.user("x" * 5000)
                raise boom
    assert info.value is boom
    assert any(str(s.path) in r.getMessage() and "lost" in r.getMessage() for r in caplog.records)


def test_opening_on_a_full_disk_raises_and_leaves_no_file(tiny_fs: Path) -> None:
    fill(tiny_fs)
    with pytest.raises(WriteError) as info:
        Session(tiny_fs, id="nohead").open()
    assert "nohead.jsonl" in str(info.value)
    assert not (tiny_fs / "nohead.jsonl").exists()  # no empty file blocks the id
    (tiny_fs / "filler").unlink()
    with Session(tiny_fs, id="nohead") as s:
        s.user("now it works")
    assert read(s.path).messages[0]["content"] == "now it works"


@pytest.mark.allow_internal_errors
@pytest.mark.parametrize("pad", [100, 3000], ids=["short-lines", "long-lines"])
def test_close_on_a_full_disk_leaves_whole_lines(tiny_fs: Path, pad: int) -> None:
    """Issue 13 #15: the last write on a full disk is usually short, cutting a line.
    close() cuts that line back off: the file validates, reads strictly, and is
    no longer taken for a file still being written (upload and sync skip those)."""
    from ststrace._hub import is_open

    s = Session(tiny_fs, id="torn", flush_interval=3600).open()
    fill(tiny_fs)
    for i in range(400):
        s.user(f"{i}:" + "t" * pad)
    with pytest.raises(WriteError) as info:
        s.close()
    lost = info.value.lost
    assert lost > 0
    assert s.path.read_bytes().endswith(b"\n")
    assert [p for p in validate(s.path) if p.severity == "error"] == []
    assert not is_open(s.path)
    written = read(s.path).messages  # strict: no torn line
    assert len(written) + lost == 400
    assert indices(s.path) == list(range(len(written)))
    assert s.stats()["bytes"] == s.path.stat().st_size
