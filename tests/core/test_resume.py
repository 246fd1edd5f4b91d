"""Resuming a session that other processes append to: the cut of a torn last
line never takes their whole lines (issue 31, item 11).

The resumer holds ``fcntl.flock(LOCK_EX)`` across its read and its cut; every
writer holds ``LOCK_SH`` while it appends. The stress test runs real
processes; its outcome does not depend on timing once the lock is there (every
record must be in the file, whatever the interleaving)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from ststrace import Session
from ststrace._reader import read

fcntl = pytest.importorskip("fcntl")

APPEND = """
    import sys
    from ststrace import Session
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Session(path, id="resumed", resume=True) as s:
        for i in range(n):
            s.user(f"{tag}-{i}")
            s.flush()
    """

RESUME = """
    import sys
    from ststrace import Session
    path, n = sys.argv[1], int(sys.argv[2])
    for _ in range(n):
        with Session(path, id="resumed", resume=True):
            pass
    """


def _start(code: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stderr=subprocess.PIPE)


def test_resumers_never_cut_the_lines_of_appending_processes(tmp_path: Path) -> None:
    path = tmp_path / "resumed.jsonl"
    with Session(path, id="resumed") as s:
        s.user("start")
    n = 1500
    procs = [_start(APPEND, str(path), tag, str(n)) for tag in ("a", "b")]
    procs += [_start(RESUME, str(path), "200") for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()
    lines = path.read_bytes().splitlines()
    contents = [orjson.loads(line)["message"]["content"] for line in lines[1:]]
    missing = {f"{t}-{i}" for t in ("a", "b") for i in range(n)} - set(contents)
    assert sorted(missing) == [], f"{len(missing)} records cut"
    assert len(contents) == 2 * n + 1
    read(path)  # every line whole


def test_the_read_and_the_cut_hold_an_exclusive_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a resume reads, another descriptor can take no lock of any kind
    (a writer's LOCK_SH waits), and the torn line it cuts is still cut."""
    path = tmp_path / "t.jsonl"
    with Session(path, id="t") as s:
        s.user("one")
        s.user("two")
    with open(path, "ab") as f:
        f.write(b'{"type": "message", "mess')
    seen: list[bool] = []
    from ststrace import _resume

    real = _resume._replay

    def probe(self: Session, line: bytes) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            seen.append(True)
        else:
            seen.append(False)
        finally:
            os.close(fd)
        real(self, line)

    monkeypatch.setattr(_resume, "_replay", probe)
    with Session(path, id="t", resume=True) as s:
        s.user("three")
    assert seen == [True, True]
    assert [m["content"] for m in read(path).messages] == ["one", "two", "three"]


def test_a_writer_appends_under_a_shared_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flusher's writes happen between LOCK_SH and LOCK_UN on its descriptor,
    so a resumer's exclusive lock waits for them and they for it."""
    from ststrace import _fds

    events: list[tuple[str, int]] = []
    real_flock = fcntl.flock
    names = {fcntl.LOCK_SH: "sh", fcntl.LOCK_UN: "un", fcntl.LOCK_EX: "ex"}

    def flock(fd: int, op: int) -> None:
        events.append((names.get(op, str(op)), os.fstat(fd).st_size))
        real_flock(fd, op)

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        monkeypatch.setattr(_fds.fcntl, "flock", flock)
        size = path.stat().st_size
        s.user("hello")
        s.flush()
        monkeypatch.undo()
    # Taken before the line was written, released after.
    assert events[:2] == [("sh", size), ("un", path.stat().st_size)]
