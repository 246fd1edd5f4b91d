"""SIGTERM and interpreter exit with sessions still open: what was recorded is on disk."""

from __future__ import annotations

import random
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

from ststrace import read, validate


def contents(path: Path) -> list[str]:
    return [m["content"] for m in read(path).messages]


def assert_clean(path: Path) -> None:
    assert [p for p in validate(path) if p.severity == "error"] == []


IDLE_OPEN_SESSIONS = """
import sys, time
from ststrace import Session
d = sys.argv[1]
a = Session(d, id="with-block", flush_interval=3600)
b = Session(d, id="opened", flush_interval=3600).open()
with a:
    for i in range(1000):
        a.user(f"a{i}")
        b.user(f"b{i}")
    print("ready", flush=True)
    time.sleep(60)
"""


def test_sigterm_with_open_sessions_writes_everything(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Nothing was flushed yet (flush_interval=3600); SIGTERM closes both sessions
    and the process still dies of SIGTERM."""
    child = scripts.start(IDLE_OPEN_SESSIONS, str(tmp_path))
    child.wait_for("ready")
    child.proc.send_signal(signal.SIGTERM)
    assert child.wait(30) == -signal.SIGTERM
    assert contents(tmp_path / "with-block.jsonl") == [f"a{i}" for i in range(1000)]
    assert contents(tmp_path / "opened.jsonl") == [f"b{i}" for i in range(1000)]
    assert_clean(tmp_path / "with-block.jsonl")
    assert_clean(tmp_path / "opened.jsonl")


BUSY = """
import faulthandler, signal, sys, threading, time
from ststrace import Session

faulthandler.register(signal.SIGUSR1)
s = Session(sys.argv[1], id="busy", flush_interval=3600, buffer_size=1 << 22).open()

def work(t):
    i = 0
    while True:
        s.user(f"{t}:{i}")
        i += 1
        if i % 50 == 0:
            time.sleep(0.001)

for t in (1, 2):
    threading.Thread(target=work, args=(t,), daemon=True).start()
i = 0
while True:
    # The main thread records in a tight loop: SIGTERM lands inside ststrace's
    # own code (holding its locks) much of the time.
    s.user(f"0:{i}")
    i += 1
    if i == 2000:
        print("go", flush=True)
"""


def test_sigterm_while_the_main_thread_records(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """No deadlock, exit status unchanged, and the file is whole: no torn line,
    each thread's records a gap-free prefix."""
    rnd = random.Random()
    for attempt in range(3):
        d = tmp_path / f"run{attempt}"
        d.mkdir()
        child = scripts.start(BUSY, str(d))
        child.wait_for("go")
        time.sleep(rnd.uniform(0.0, 0.15))
        child.proc.send_signal(signal.SIGTERM)
        assert child.wait(30) == -signal.SIGTERM
        path = d / "busy.jsonl"
        assert path.read_bytes().endswith(b"\n")
        assert_clean(path)
        per_thread: dict[str, list[int]] = defaultdict(list)
        for c in contents(path):
            t, i = c.split(":")
            per_thread[t].append(int(i))
        assert len(per_thread["0"]) >= 2000
        for seq in per_thread.values():
            assert seq == list(range(len(seq)))


ASYNC_SESSION = """
import asyncio, sys
from ststrace import Session

async def main():
    async with Session(sys.argv[1], id="async", flush_interval=3600) as s:
        for i in range(500):
            s.user(f"m{i}")
        print("ready", flush=True)
        await asyncio.sleep(60)

asyncio.run(main())
"""


def test_sigterm_in_an_asyncio_program(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`async with` opens the file off the main thread; the handler is installed anyway."""
    child = scripts.start(ASYNC_SESSION, str(tmp_path))
    child.wait_for("ready")
    child.proc.send_signal(signal.SIGTERM)
    assert child.wait(30) == -signal.SIGTERM
    assert contents(tmp_path / "async.jsonl") == [f"m{i}" for i in range(500)]


USER_HANDLER = """
import signal, sys, time
from ststrace import Session

def handler(signum, frame):
    print("user handler", flush=True)
    sys.exit(3)

signal.signal(signal.SIGTERM, handler)
s = Session(sys.argv[1], id="own", flush_interval=3600).open()
s.user("x")
assert signal.getsignal(signal.SIGTERM) is handler
print("ready", flush=True)
time.sleep(60)
"""


def test_a_programs_own_sigterm_handler_is_kept(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """ststrace only installs its handler over SIG_DFL; the user's one runs, and
    the normal exit that follows still closes the session (atexit)."""
    child = scripts.start(USER_HANDLER, str(tmp_path))
    child.wait_for("ready")
    child.proc.send_signal(signal.SIGTERM)
    assert child.wait(30) == 3
    assert "user handler" in child.lines
    assert contents(tmp_path / "own.jsonl") == ["x"]


NOT_MAIN_THREAD = """
import signal, sys, threading
from ststrace import Session

def opener():
    Session(sys.argv[1], flush_interval=3600).open().user("t")

t = threading.Thread(target=opener)
t.start(); t.join()
assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "installed off the main thread"
Session(sys.argv[1], flush_interval=3600).open()
assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, "not installed on the main thread"
print("ok")
"""


def test_handler_is_installed_from_the_main_thread_only(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = scripts.run(NOT_MAIN_THREAD, str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


NORMAL_EXIT = """
import sys, threading
from ststrace import Session
d = sys.argv[1]
s = Session(d, id="never-closed", flush_interval=3600).open()
for i in range(3000):
    s.user(f"n{i}")

def in_thread():
    t = Session(d, id="thread-opened", flush_interval=3600).open()
    t.user("from a thread")

th = threading.Thread(target=in_thread)
th.start(); th.join()
"""


def test_normal_exit_with_open_sessions_writes_everything(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = scripts.run(NORMAL_EXIT, str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert contents(tmp_path / "never-closed.jsonl") == [f"n{i}" for i in range(3000)]
    assert contents(tmp_path / "thread-opened.jsonl") == ["from a thread"]
    assert_clean(tmp_path / "never-closed.jsonl")


CRASHED_WITH = """
import sys
from ststrace import Session
d = sys.argv[1]
outer = Session(d, id="outer", flush_interval=3600).open()
outer.user("outer before")
with Session(d, id="inner", flush_interval=3600) as s:
    for i in range(100):
        s.user(f"i{i}")
    raise RuntimeError("agent crashed")
"""


def test_uncaught_exception_in_a_with_block(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The crash still closes the block's session, and atexit the other one."""
    out = scripts.run(CRASHED_WITH, str(tmp_path))
    assert out.returncode == 1
    assert "RuntimeError: agent crashed" in out.stderr
    assert contents(tmp_path / "inner.jsonl") == [f"i{i}" for i in range(100)]
    assert contents(tmp_path / "outer.jsonl") == ["outer before"]
    assert_clean(tmp_path / "inner.jsonl")


SYS_EXIT_FROM_THREAD_POOL = """
import sys
from concurrent.futures import ThreadPoolExecutor
from ststrace import Session
d = sys.argv[1]

def episode(i):
    s = Session(d, id=f"ep{i}", flush_interval=3600).open()
    for j in range(50):
        s.user(f"{i}:{j}")

with ThreadPoolExecutor(8) as pool:
    list(pool.map(episode, range(40)))
sys.exit(0)
"""


def test_exit_after_worker_threads_left_sessions_open(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = scripts.run(SYS_EXIT_FROM_THREAD_POOL, str(tmp_path))
    assert out.returncode == 0, out.stderr
    for i in range(40):
        assert contents(tmp_path / f"ep{i}.jsonl") == [f"{i}:{j}" for j in range(50)]


CTRL_C_DURING_CLOSE = """
import os, signal, sys, threading
from ststrace import Session

d, n, caught, op = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "caught", sys.argv[4]
s = Session(d + "/big.jsonl", flush_interval=3600, buffer_size=1 << 30, max_buffer=1 << 30).open()
for i in range(n):
    s.user(f"{i}:" + "r" * 80)
stats = s.stats()
assert stats["bytes"] < 1000, stats  # all of it still buffered: close() writes it

# The Ctrl-C must land while close() (flush()) is writing, at any load: the
# flusher's first write of that job sends it, and writes on only once the
# main thread's handler has run. A signal that arrives just before the main
# thread blocks in its wait is only seen when the wait ends (CPython checks
# for signals before it blocks, not after): so it is sent again until handled,
# and the handler raises once.
handled = threading.Event()
armed = False

def on_sigint(signum, frame):
    if not handled.is_set():
        handled.set()
        signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt

signal.signal(signal.SIGINT, on_sigint)
real_write = os.write

def write(fd, data):
    global armed
    if armed and threading.current_thread().name == "ststrace-flusher":
        armed = False
        os.kill(os.getpid(), signal.SIGINT)
        while not handled.wait(0.05):
            os.kill(os.getpid(), signal.SIGINT)
    return real_write(fd, data)

os.write = write
try:
    armed = True
    s.close() if op == "close" else s.flush()
    print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    if not caught:
        raise
os.write = real_write
# Whatever close() had not done, close_all (atexit) finishes.
print("lost", s.stats()["lost"], flush=True)
if op == "flush":
    s.user(f"{n}:after")
    s.close()
"""


@pytest.mark.parametrize("op", ["close", "flush"])
@pytest.mark.parametrize("caught", ["caught", "uncaught"])
def test_ctrl_c_during_close_loses_nothing(scripts, tmp_path: Path, caught: str, op: str) -> None:  # type: ignore[no-untyped-def]
    """Issue 13 #13: Ctrl-C while close() (or flush()) writes 400,000 buffered
    records: every record is on disk or counted lost (here: none lost), in
    order, and the file ends in whole lines, whether the program catches the
    KeyboardInterrupt or dies of it."""
    n = 400_000
    out = scripts.run(CTRL_C_DURING_CLOSE, str(tmp_path), str(n), caught, op, timeout=120)
    assert out.stdout.startswith("interrupted"), out.stdout + out.stderr[-2000:]
    if caught == "caught":
        assert out.returncode == 0, out.stderr[-2000:]
    else:
        assert "KeyboardInterrupt" in out.stderr and out.returncode != 0
    path = tmp_path / "big.jsonl"
    assert path.read_bytes().endswith(b"\n")
    got = [int(c.split(":")[0]) for c in contents(path)]
    assert got == list(range(n + (op == "flush" and caught == "caught")))
    assert_clean(path)
