"""The buffered writer: whole lines, backpressure, failing disks, the fd pool, fork.

Failing writes use real devices: ``/dev/full`` answers every write with ENOSPC.
The full-filesystem case with recovery lives in ``reliability/test_disk_full.py``.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import orjson
import pytest

from ststrace import Session, WriteError, read, validate
from ststrace import _writer
from ststrace._writer import Writer, _fd_pool, _flusher

DEV_FULL = Path("/dev/full")
needs_dev_full = pytest.mark.skipif(not DEV_FULL.exists(), reason="no /dev/full on this system")


def line(i: int, pad: int = 0) -> bytes:
    return orjson.dumps({"type": "message", "message": {"role": "user", "content": f"{i}" + "x" * pad}}) + b"\n"


def open_fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def full_writer(**kwargs: int | float) -> Writer:
    fd = os.open(DEV_FULL, os.O_WRONLY | os.O_APPEND)
    return Writer(DEV_FULL, fd, **kwargs)  # type: ignore[arg-type]


# -- whole lines, ordering, flush/close ---------------------------------------------


def test_writer_writes_whole_lines_in_order(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    w = Writer(path, fd, buffer_size=100, flush_interval=0.01)
    for i in range(5000):
        assert w.append(line(i, i % 300))
    assert w.close() is None
    got = path.read_bytes().splitlines()
    assert got == [line(i, i % 300)[:-1] for i in range(5000)]
    assert w.stats()["bytes"] == path.stat().st_size
    assert w.stats()["messages"] == 5000
    assert w.closed


def test_close_while_other_threads_record_loses_nothing_silently(tmp_path: Path) -> None:
    """Every record counted in stats()['messages'] is in the file; later ones are counted lost."""
    with_big_buffer = Session(tmp_path, flush_interval=60, buffer_size=1 << 26).open()
    stop = threading.Event()
    pad = "p" * 200

    # Events, not sleeps, so that it holds at any load: close() starts once a
    # thread has recorded 1,001 messages; recording stops once a record was
    # begun after close() returned.
    warm, closed, after = threading.Event(), threading.Event(), threading.Event()

    def record() -> None:
        i = 0
        while not stop.is_set():
            was_closed = closed.is_set()
            with_big_buffer.user(f"{i}{pad}")
            i += 1
            if i > 1000:
                warm.set()
            if was_closed:
                after.set()

    threads = [threading.Thread(target=record) for _ in range(3)]
    for t in threads:
        t.start()
    assert warm.wait(120), "the recording threads never got going"
    try:
        with_big_buffer.close()
    except WriteError:
        pass  # records that arrive after close are reported as lost
    closed.set()
    assert after.wait(120), "no record was made after close()"
    stop.set()
    for t in threads:
        t.join()
    st = with_big_buffer.stats()
    on_disk = len(read(with_big_buffer.path).messages)
    assert st["messages"] > 1000
    assert on_disk == st["messages"]
    assert st["lost"] > 0  # the recording went on after close


def _land_as_a_racing_append(w: Writer, line: bytes) -> None:
    """What append()'s fast path does once its unlocked size check has passed:
    a thread preempted between the check and these two statements lands its
    line whenever it runs again, here at the moment the test chooses."""
    w._chunks.append(line)
    w._size += len(line)


@pytest.mark.parametrize("when", ["during the last write", "after close returned"])
def test_a_record_landing_as_close_runs_is_counted_lost_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, when: str
) -> None:
    """It used to be counted both as recorded and as lost (stats()['messages']
    one more than the file's lines), made close() raise WriteError on a healthy
    disk, or, after close() had finished, stayed in the buffer uncounted."""
    caplog.set_level(logging.WARNING, logger="ststrace")
    s = Session(tmp_path, flush_interval=60).open()
    s.user("before")
    w = s._writer
    assert w is not None
    late = orjson.dumps({"role": "user", "content": "late"}) + b"\n"
    if when == "during the last write":
        real = Writer._write_locked

        def last_write(self: Writer, fsync: bool, deadline: float | None = None) -> BaseException | None:
            out = real(self, fsync, deadline)
            if self is w and w.closed:
                _land_as_a_racing_append(w, late)
            return out

        monkeypatch.setattr(Writer, "_write_locked", last_write)  # Writer has __slots__
        s.close()  # must not raise: the disk is fine
    else:
        s.close()
        _land_as_a_racing_append(w, late)
    st = s.stats()
    assert len(read(s.path).messages) == st["messages"] == 1
    assert st["lost"] == 1 and st["write_errors"] == 0
    assert not w._chunks
    assert any("is closed; a record made after close()" in r.getMessage() for r in caplog.records)


def test_flush_from_many_threads_at_once(tmp_path: Path) -> None:
    """Concurrent flush() calls from several threads never duplicate or split lines."""
    with Session(tmp_path, flush_interval=0.005, buffer_size=64) as s:

        def work(t: int) -> None:
            for i in range(500):
                s.user(f"{t}:{i}")
                if i % 7 == 0:
                    s.flush()

        threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    contents = [m["content"] for m in read(s.path).messages]
    assert len(contents) == len(set(contents)) == 3000
    for t in range(6):
        assert [c for c in contents if c.startswith(f"{t}:")] == [f"{t}:{i}" for i in range(500)]


# -- backpressure and drops ------------------------------------------------------


def test_backpressure_blocks_instead_of_dropping(tmp_path: Path) -> None:
    """A full buffer on a working disk makes recording wait for the writer; nothing is dropped."""
    with Session(tmp_path, flush_interval=60, buffer_size=256, max_buffer=4096) as s:
        writer = s._writer
        assert writer is not None
        done = threading.Event()
        sizes: list[int] = []

        def record() -> None:
            for i in range(2000):
                s.user(f"{i:05d}" + "b" * 50)
                sizes.append(writer.stats()["buffered_bytes"])
            done.set()

        # Holding the writer's I/O lock stands in for a slow disk: the flusher
        # cannot drain, so the recording thread must block, not drop or grow.
        writer._io_lock.acquire()
        t = threading.Thread(target=record)
        t.start()
        try:
            assert not done.wait(0.5), "recording did not block on a full buffer"
            assert writer.stats()["lost"] == 0
            assert writer.stats()["buffered_bytes"] < 4096 + 200
            assert t.is_alive()
        finally:
            writer._io_lock.release()
        t.join(30)
        assert done.is_set()
    assert max(sizes) < 4096 + 200
    assert s.stats()["lost"] == 0
    contents = [m["content"][:5] for m in read(s.path).messages]
    assert contents == [f"{i:05d}" for i in range(2000)]


@needs_dev_full
@pytest.mark.allow_internal_errors
def test_failing_writes_keep_records_then_drop_with_count(caplog: pytest.LogCaptureFixture) -> None:
    """ENOSPC: appends never raise or block; past max_buffer they are dropped and counted."""
    with caplog.at_level(logging.ERROR, logger="ststrace"):
        w = full_writer(buffer_size=100, max_buffer=1000, flush_interval=0.01)
        with pytest.raises(WriteError) as first:
            w.append(line(0))
            w.flush()
        assert "/dev/full" in str(first.value)
        assert w.stats()["write_errors"] >= 1
        start = time.monotonic()
        accepted = sum(w.append(line(i, 20)) for i in range(1, 501))
        assert time.monotonic() - start < 5
        st = w.stats()
        assert accepted < 500
        assert st["lost"] == 500 - accepted
        assert st["messages"] == 1 + accepted
        assert st["buffered_bytes"] <= 1000 + len(line(500, 20))
        err = w.close()
    assert isinstance(err, WriteError)
    assert err.path == DEV_FULL
    # Everything not written is lost once the writer closes: dropped + still buffered.
    assert err.lost == w.stats()["lost"] == 501
    assert "501 record(s) lost" in str(err)
    logged = [r for r in caplog.records if r.levelno == logging.ERROR and "cannot write" in r.getMessage()]
    assert len(logged) == 1  # the disk error is logged once, not per retry
    assert w.append(line(1)) is False  # closed


@needs_dev_full
def test_drops_happen_only_while_writes_fail(tmp_path: Path) -> None:
    """The same tiny buffer on a healthy disk drops nothing."""
    path = tmp_path / "ok.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    w = Writer(path, fd, buffer_size=100, max_buffer=1000, flush_interval=0.01)
    assert all(w.append(line(i, 20)) for i in range(3000))
    assert w.close() is None
    assert w.stats()["lost"] == 0
    assert path.read_bytes().count(b"\n") == 3000


@needs_dev_full
@pytest.mark.allow_internal_errors
def test_session_exit_with_failing_disk_raises_write_error(tmp_path: Path) -> None:
    """close() raises WriteError naming the file; inside a failing block it is only logged."""
    s = Session(tmp_path / "s.jsonl", flush_interval=60).open()
    assert s._writer is not None
    # Point the session's writer at a failing device: a real ENOSPC on every write.
    s._writer._close_fd()
    s._writer.path = DEV_FULL
    s.user("never written")
    with pytest.raises(WriteError, match="/dev/full.*1 record"):
        s.close()
    assert s.stats()["lost"] == 1


# -- fd pool -------------------------------------------------------------------------


def test_idle_sessions_do_not_pin_descriptors(tmp_path: Path) -> None:
    """Hundreds of open sessions hold at most the pool's limit of descriptors."""
    base = open_fd_count()
    sessions = [Session(tmp_path, id=f"s{i}", flush_interval=60).open() for i in range(300)]
    try:
        assert open_fd_count() - base <= _fd_pool.limit + 2
        for round_ in range(3):
            for i, s in enumerate(sessions):
                s.user(f"{i}-{round_}")
                if i % 3 == 0:
                    s.flush()
            assert open_fd_count() - base <= _fd_pool.limit + 2
    finally:
        for s in reversed(sessions):
            s.close()
    assert open_fd_count() <= base + 1
    for i, s in enumerate(sessions):
        assert [m["content"] for m in read(s.path).messages] == [f"{i}-{r}" for r in range(3)]


def test_file_replaced_under_an_idle_session_is_recreated_not_followed(tmp_path: Path) -> None:
    """A reopened descriptor never follows a symlink planted at the path."""
    sessions = [Session(tmp_path, id=f"p{i}", flush_interval=60).open() for i in range(_fd_pool.limit + 5)]
    first = sessions[0]
    assert first._writer is not None and first._writer._fd is None  # evicted from the pool
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    first.path.rename(tmp_path / "moved.jsonl")
    first.path.symlink_to(victim)
    first.user("x")
    with pytest.raises(WriteError):
        first.flush()
    assert victim.read_bytes() == b"keep"
    for s in sessions[1:]:
        s.close()
    first.path.unlink()
    with pytest.raises(WriteError):
        first.close()


# -- flusher -------------------------------------------------------------------------


def test_one_flusher_thread_for_all_sessions(tmp_path: Path) -> None:
    sessions = [Session(tmp_path, flush_interval=0.01).open() for _ in range(20)]
    for s in sessions:
        s.user("x")
    names = [t.name for t in threading.enumerate() if t.name == "ststrace-flusher"]
    assert names == ["ststrace-flusher"]
    assert _flusher.thread is not None and _flusher.thread.daemon
    for s in reversed(sessions):
        s.close()


# -- fork ------------------------------------------------------------------------------


FORK_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    import ststrace
    d = Path(sys.argv[1])
    s = ststrace.Session(d / "parent.jsonl", flush_interval=60).open()
    for i in range(1000):
        s.user(f"before-{i}")
    pid = os.fork()
    if pid == 0:
        # Child: the parent's buffer is gone, and the child can trace on its own.
        assert s.stats()["buffered_bytes"] == 0, s.stats()
        with ststrace.Session(d / "child.jsonl", flush_interval=60) as c:
            for i in range(100):
                c.user(f"child-{i}")
        sys.exit(0)  # normal exit: atexit runs and closes the inherited session too
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    for i in range(1000):
        s.user(f"after-{i}")
    s.close()
    print("ok")
    """
)


def test_fork_child_discards_parent_buffer(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    parent = [m["content"] for m in read(tmp_path / "parent.jsonl").messages]
    assert parent == [f"before-{i}" for i in range(1000)] + [f"after-{i}" for i in range(1000)]
    child = [m["content"] for m in read(tmp_path / "child.jsonl").messages]
    assert child == [f"child-{i}" for i in range(100)]
    assert [p for p in validate(tmp_path / "parent.jsonl") if p.severity == "error"] == []


LOOP_DOES_NO_FILE_IO = """
import asyncio, sys, threading
from ststrace import Session

opened_by = []
sys.addaudithook(lambda event, args: event == "open" and opened_by.append(threading.get_ident()))

async def main(d):
    sessions = [Session(d, id=f"s{i}", buffer_size=256, flush_interval=0.001, durable=i % 2 == 0) for i in range(100)]
    for s in sessions:
        await s.__aenter__()  # the file is created on a worker thread
    loop_thread = threading.get_ident()
    del opened_by[:]
    for turn in range(50):
        for i, s in enumerate(sessions):
            s.user(f"{i}:{turn}" + "z" * 100)
        await asyncio.sleep(0.002)
    # Until the flusher has reopened a pooled descriptor (at any load).
    deadline = asyncio.get_running_loop().time() + 120
    while not opened_by and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert loop_thread not in opened_by, "the event loop thread opened a file"
    assert opened_by, "the flusher never reopened a pooled descriptor"
    for s in sessions:
        await s.__aexit__(None, None, None)
    print("ok")

asyncio.run(main(sys.argv[1]))
"""


def test_recording_on_an_event_loop_does_no_file_io(tmp_path: Path) -> None:
    """Writes, fsyncs and descriptor reopens (100 sessions > the pool) happen on the
    flusher thread; the loop thread only appends to a buffer (audit hook on open)."""
    out = subprocess.run(
        [sys.executable, "-c", LOOP_DOES_NO_FILE_IO, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    for i in (0, 1, 57, 99):
        assert len(read(tmp_path / f"s{i}.jsonl").messages) == 50


# -- slices, loans: a writer that shares the GIL ----------------------------------


def _recording_writes(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[int]:
    """Sizes of the os.write calls made to *path* (the real call still runs)."""
    sizes: list[int] = []
    real_write = os.write
    target = os.stat(path).st_ino

    def write(fd: int, data: bytes | memoryview) -> int:
        if os.fstat(fd).st_ino == target:
            sizes.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    return sizes


def test_a_large_buffer_is_written_in_bounded_slices_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 12 MB buffer goes out in slices of about _SLICE_BYTES (each taken with
    the GIL held for a bounded time), every line once and in order."""
    path = tmp_path / "big.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    w = Writer(path, fd, flush_interval=60, buffer_size=1 << 30, max_buffer=1 << 30)
    lines = [line(i, i % 200) for i in range(100_000)]
    for ln in lines:
        w.append(ln)
    sizes = _recording_writes(monkeypatch, path)
    w.flush()
    assert path.read_bytes() == b"".join(lines)
    assert len(sizes) > 10
    assert max(sizes) <= 2 * _writer._SLICE_BYTES
    assert w.stats()["messages"] == 100_000
    assert w.stats()["buffered_bytes"] == 0
    assert w.close() is None


@pytest.mark.allow_internal_errors
def test_a_failure_between_slices_keeps_exactly_the_unwritten_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A short write, then ENOSPC, in the middle of a sliced write: the written
    part is not repeated, the rest (the cut line included) follows on retry."""
    path = tmp_path / "cut.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    w = Writer(path, fd, flush_interval=60, buffer_size=1 << 30, max_buffer=1 << 30)
    lines = [line(i, 150) for i in range(40_000)]
    for ln in lines:
        w.append(ln)
    real_write = os.write
    target = os.stat(path).st_ino
    calls = 0

    def failing(fd: int, data: bytes | memoryview) -> int:
        nonlocal calls
        if os.fstat(fd).st_ino != target:
            return real_write(fd, data)
        calls += 1
        if calls == 3:
            return real_write(fd, bytes(data)[: len(data) // 2 + 7])  # short: cuts a line
        if calls == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", failing)
    with pytest.raises(WriteError):
        w.flush()
    on_disk = path.read_bytes()
    assert 0 < len(on_disk) < sum(map(len, lines))
    assert not on_disk.endswith(b"\n")  # the short write stopped inside a line
    monkeypatch.setattr(os, "write", real_write)
    w.flush()
    assert path.read_bytes() == b"".join(lines)
    assert w.stats()["bytes"] == path.stat().st_size
    assert w.close() is None


def test_a_cut_pass_leaves_the_rest_due_and_in_order(tmp_path: Path) -> None:
    """While recording threads lend the GIL, a flusher pass stops at its
    deadline; what it did not take stays buffered, due, and in order."""
    path = tmp_path / "cut-pass.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    w = Writer(path, fd, flush_interval=60, buffer_size=1 << 30, max_buffer=1 << 30)
    lines = [line(i, 50) for i in range(20_000)]
    for ln in lines:
        w.append(ln)
    saved = _flusher._lent_at
    try:
        _flusher._lent_at = time.monotonic()  # as if a loop had just lent the GIL
        assert w.write_out(deadline=time.monotonic() - 1) is None
        assert path.read_bytes() == b""
        assert w.due(time.monotonic())
    finally:
        _flusher._lent_at = saved
    w.flush()
    assert path.read_bytes() == b"".join(lines)
    assert w.close() is None


BUSY_LOOP_LENDS_THE_GIL = r"""
import asyncio, sys, time
from pathlib import Path
from ststrace import Session
from ststrace._writer import _flusher

async def main(d):
    sessions = [Session(Path(d) / f"s{i}.jsonl", flush_interval=0.05) for i in range(20)]
    for s in sessions:
        await s.__aenter__()
    text = "tool output: 42 rows, the first is {'id': 1, 'name': 'Ada'} " * 3
    # 1.5 s of the loop thread's CPU time, not of the clock: on a loaded
    # machine the process gets a fraction of the wall time, and the flusher a
    # fraction of that.
    end = time.thread_time() + 1.5
    async def task(s):
        while time.thread_time() < end:
            s.user(text)
            sum(range(400))  # the agent's own work between records
            await asyncio.sleep(0)  # never idle: the loop holds the GIL
    await asyncio.gather(*(task(s) for s in sessions))
    written = sum(s.stats()["bytes"] for s in sessions)
    buffered = sum(s.stats()["buffered_bytes"] for s in sessions)
    flushes = sum(s.stats()["flushes"] for s in sessions)
    for s in sessions:
        await s.__aexit__(None, None, None)
    print(f"{written / (written + buffered):.3f} {flushes} {_flusher.loans}")

asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.serial  # counts writes per CPU second: not beside another busy worker
def test_a_busy_event_loop_lends_the_flusher_the_gil(tmp_path: Path) -> None:
    """Tasks that never let the loop idle keep the GIL from the flusher thread
    (CPython's switch interval restarts at every loop iteration): without the
    loans it managed a handful of writes in the 1.5 s of recording (1 to 7
    measured), leaving the files nearly empty until close. With them it
    writes about every 4 ms (about 165 writes measured)."""
    out = subprocess.run(
        [sys.executable, "-c", BUSY_LOOP_LENDS_THE_GIL, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    share, flushes, loans = out.stdout.split()
    # (How many loans it took varies: when the OS happens to preempt the loop
    # thread, the flusher gets the GIL without one.)
    assert int(flushes) >= 40, f"{flushes} writes while recording ({float(share):.0%} of the bytes, {loans} loans)"
    for i in (0, 19):
        assert [p for p in validate(tmp_path / f"s{i}.jsonl") if p.severity == "error"] == []


BUSY_LOOP_BACKPRESSURE = r"""
import asyncio, sys, time
from pathlib import Path
from ststrace import Session, read

async def main(d):
    sessions = [Session(Path(d) / f"s{i}.jsonl", durable=True, max_buffer=256 * 1024) for i in range(10)]
    for s in sessions:
        await s.__aenter__()
    text = "x" * 500
    async def task(s):
        for _ in range(10_000):
            s.user(text)
            await asyncio.sleep(0)
    start = time.monotonic()
    await asyncio.gather(*(task(s) for s in sessions))
    took = time.monotonic() - start
    lost = sum(s.stats()["lost"] for s in sessions)
    for s in sessions:
        await s.__aexit__(None, None, None)
    counts = {len(read(Path(d) / f"s{i}.jsonl").messages) for i in range(10)}
    print(f"{took:.2f} {lost} {sorted(counts)}")

asyncio.run(main(sys.argv[1]))
"""


def test_backpressure_in_a_busy_event_loop_keeps_everything(tmp_path: Path) -> None:
    """50 MB through 256 KiB buffers from a loop that never idles (so the
    flusher is in its polite, loan-driven mode): recording waits for the writer
    instead of dropping, every record arrives, and the waits do not pile up."""
    out = subprocess.run(
        [sys.executable, "-c", BUSY_LOOP_BACKPRESSURE, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    took, lost, counts = out.stdout.split(maxsplit=2)
    assert int(lost) == 0
    assert counts.strip() == "[10000]"
    assert float(took) < 30


# -- the process-wide buffer ------------------------------------------------------


@needs_dev_full
@pytest.mark.allow_internal_errors
def test_a_failing_disk_drops_past_the_session_share_of_the_process_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """With many sessions open, each may buffer only its share of the process-wide
    total before records are dropped (counted), not its whole max_buffer: a
    thousand sessions on a failing disk must not each fill 64 MiB first."""
    w = full_writer(flush_interval=0.01)
    monkeypatch.setattr(_flusher, "share", 256 * 1024)  # as with 4,096 sessions and 1 GiB
    assert w.max_buffer == 64 * 1024 * 1024
    accepted = sum(w.append(line(i, 500)) for i in range(5_000))  # ~2.6 MB offered
    st = w.stats()
    assert st["lost"] == 5_000 - accepted > 0
    assert st["buffered_bytes"] < 256 * 1024 + 64 * 1024
    err = w.close()
    assert isinstance(err, WriteError)
    assert err.lost == 5_000


def test_a_healthy_disk_waits_at_the_share_and_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At its share a session on a working disk waits for the writer, as it
    would at max_buffer: the buffer stays near the share, nothing is lost."""
    path = tmp_path / "share.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    w = Writer(path, fd, flush_interval=60)
    monkeypatch.setattr(_flusher, "share", 128 * 1024)
    peak = 0
    for i in range(20_000):
        assert w.append(line(i, 100))
        peak = max(peak, w.stats()["buffered_bytes"])
    assert peak < 128 * 1024 + 64 * 1024
    assert w.close() is None
    assert w.stats()["lost"] == 0
    assert path.read_bytes().count(b"\n") == 20_000


def test_the_share_follows_the_number_of_open_sessions(tmp_path: Path) -> None:
    before = len(_flusher.writers())
    sessions = [Session(tmp_path / f"s{i}.jsonl").open() for i in range(3)]
    n = len(_flusher.writers())
    assert n == before + 3
    assert _flusher.share == max(_writer._MIN_SHARE, _writer._TOTAL_BUFFER // n)
    for s in sessions:
        s.close()
    assert _flusher.share == max(_writer._MIN_SHARE, _writer._TOTAL_BUFFER // max(1, before))


def test_records_racing_close_on_a_healthy_disk_do_not_make_close_raise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A framework's background task still recording while the session closes
    (an Agents SDK streamed run cancelled just before the ``with`` block ends)
    loses those records, counted and logged once; but the disk is fine, so
    close() must not raise ``WriteError`` ("could not write") into the user's
    code. It used to, whenever a record landed while close() ran."""
    caplog.set_level(logging.WARNING, logger="ststrace")
    for _ in range(5):
        s = Session(tmp_path, flush_interval=60).open()
        stop, warm, closed, after = threading.Event(), threading.Event(), threading.Event(), threading.Event()

        def record() -> None:
            i = 0
            while not stop.is_set():
                was_closed = closed.is_set()
                s.user("x" * 200)
                i += 1
                if i > 100:
                    warm.set()
                if was_closed:
                    after.set()

        threads = [threading.Thread(target=record) for _ in range(3)]
        for t in threads:
            t.start()
        assert warm.wait(120)  # records are landing: close() races them
        try:
            s.close()  # must not raise
        finally:
            closed.set()
            after.wait(120)  # a record begun after close() returned: lost
            stop.set()
            for t in threads:
                t.join()
        st = s.stats()
        assert st["lost"] > 0 and st["write_errors"] == 0
        assert len(read(s.path).messages) == st["messages"]
    assert any("is closed; a record made after close()" in r.getMessage() for r in caplog.records)


# -- an evicted descriptor is reopened only if the file is still the same ----------


def test_evicted_descriptor_is_not_reopened_on_a_replaced_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More sessions than pooled descriptors: the first session's descriptor is
    closed. Its file is then replaced; later records must not reach the
    replacement. They are counted lost, and the error names the file."""
    monkeypatch.setattr(_writer._fd_pool, "limit", 4)
    first = Session(tmp_path / "first.jsonl", flush_interval=3600).open()
    first.user("before")
    first.flush()
    others = [Session(tmp_path / f"other{i}.jsonl", flush_interval=3600).open() for i in range(6)]
    try:
        assert first._writer is not None and first._writer._fd is None, "the first descriptor was not evicted"
        foreign = tmp_path / "foreign.jsonl"
        foreign.write_bytes(b"somebody else's file\n")
        os.replace(foreign, first.path)
        caplog.set_level(logging.WARNING, logger="ststrace")
        first.user("after 1")
        first.user("after 2")
        err = None
        try:
            first.close()
        except OSError as exc:
            err = exc
    finally:
        for s in others:
            s.close()
    assert first.path.read_bytes() == b"somebody else's file\n"
    assert first.stats()["lost"] == 2
    assert err is not None and str(first.path) in str(err)
    assert any("replaced" in r.getMessage() and str(first.path) in r.getMessage() for r in caplog.records)


def test_evicted_descriptor_reopens_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: the file left alone is reopened and gets every record."""
    monkeypatch.setattr(_writer._fd_pool, "limit", 4)
    first = Session(tmp_path / "first.jsonl", flush_interval=3600).open()
    others = [Session(tmp_path / f"other{i}.jsonl", flush_interval=3600).open() for i in range(6)]
    assert first._writer is not None and first._writer._fd is None
    first.user("after")
    first.close()
    for s in others:
        s.close()
    assert [m["content"] for m in read(first.path).messages] == ["after"]
    assert first.stats()["lost"] == 0
