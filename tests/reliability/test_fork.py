"""os.fork() while records are buffered and while the flusher is writing."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from ststrace import read, validate

FORK_STORM = """
import os, random, sys, threading, time
from ststrace import Session

d, durable = sys.argv[1], sys.argv[2] == "1"
s = Session(d + "/parent.jsonl", flush_interval=0.001, buffer_size=512, durable=durable).open()
stop = threading.Event()

def work(t):
    i = 0
    while not stop.is_set():
        s.user(f"{t}:{i}:" + "p" * (i % 300))
        i += 1
        if i % 200 == 0:
            time.sleep(0.0005)

threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
for th in threads:
    th.start()
children = []
rnd = random.Random()
for k in range(30):
    time.sleep(rnd.uniform(0.0, 0.01))
    pid = os.fork()
    if pid == 0:
        # In the child: nothing of the parent's buffer may be written from here.
        assert s.stats()["buffered_bytes"] == 0
        with Session(d + f"/child{k}.jsonl", flush_interval=0.001) as c:
            for j in range(50):
                c.user(f"c:{j}")
        if k % 2:
            os._exit(0)
        sys.exit(0)  # atexit runs in the child and closes the inherited session
    children.append(pid)
for pid in children:
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
stop.set()
for th in threads:
    th.join()
s.close()
print("ok", s.stats()["messages"])
"""


@pytest.mark.parametrize("durable", [False, True], ids=["buffered", "durable"])
def test_forks_while_the_flusher_writes(scripts, tmp_path: Path, durable: bool) -> None:  # type: ignore[no-untyped-def]
    """30 forks at random moments: the parent's file has every record exactly once,
    in order per thread; every child wrote its own complete file."""
    out = scripts.run(FORK_STORM, str(tmp_path), "1" if durable else "0", timeout=120)
    assert out.returncode == 0, out.stderr
    recorded = int(out.stdout.split()[1])
    parent = tmp_path / "parent.jsonl"
    assert [p for p in validate(parent) if p.severity == "error"] == []
    msgs = read(parent).messages
    assert len(msgs) == recorded
    per_thread: dict[str, list[int]] = defaultdict(list)
    for m in msgs:
        t, i, _ = m["content"].split(":", 2)
        per_thread[t].append(int(i))
    assert set(per_thread) == {"0", "1", "2"}
    for seq in per_thread.values():
        assert seq == list(range(len(seq)))
    for k in range(30):
        child = read(tmp_path / f"child{k}.jsonl")
        assert [m["content"] for m in child.messages] == [f"c:{j}" for j in range(50)]


FORK_THEN_EXEC_CHILD_SESSION_IDS = """
import os, sys
from ststrace import Session
d = sys.argv[1]
ids = []
r, w = os.pipe()
for k in range(20):
    pid = os.fork()
    if pid == 0:
        s = Session(d).open()
        s.user("x")
        s.close()
        os.write(w, (s.id + "\\n").encode())
        os._exit(0)
    os.waitpid(pid, 0)
os.close(w)
data = b""
while chunk := os.read(r, 4096):
    data += chunk
ids = data.decode().split()
assert len(ids) == len(set(ids)) == 20, ids
print("ok")
"""


def test_forked_children_make_distinct_session_ids(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = scripts.run(FORK_THEN_EXEC_CHILD_SESSION_IDS, str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert len(list(tmp_path.glob("*.jsonl"))) == 20


LOCKS_HELD_AT_FORK = """
import os, sys, threading
from ststrace import Session, _ids, _registry, _writer

d = sys.argv[1]
s = Session(d + "/parent.jsonl", flush_interval=3600).open()
s.user("p")
w = s._writer
# Another thread is inside ststrace at the moment of fork: it holds these locks,
# and in the child that thread no longer exists to release them.
locks = {
    "session id": _ids._uuid7_lock,
    "open sessions": _registry._lock,
    "fd pool": _writer._fd_pool._lock,
    "flusher": _writer._flusher._lock,
    "buffer": w._lock,
    "io": w._io_lock,
    "tool calls": s._state_lock,
}
held = threading.Event()
release = threading.Event()

def holder():
    for lock in locks.values():
        lock.acquire()
    held.set()
    release.wait()
    for lock in locks.values():
        lock.release()

threading.Thread(target=holder).start()
held.wait()
pid = os.fork()
if pid == 0:
    # Would hang on any lock the fork copied in its held state.
    signal_alarm = __import__("signal")
    signal_alarm.alarm(10)
    s.user("child into inherited session")
    s.assistant("", tool_calls=[{"name": "f", "arguments": {}}])
    with Session(d + "/child.jsonl", flush_interval=3600) as c:
        c.user("child")
    s.close()
    os._exit(0)
release.set()
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
s.close()
"""


def test_fork_while_another_thread_holds_ststrace_locks(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The child gets fresh locks: it can record, open its own session and close."""
    out = scripts.run(LOCKS_HELD_AT_FORK, str(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "child 0", out.stdout + out.stderr
    assert [m["content"] for m in read(tmp_path / "child.jsonl").messages] == ["child"]
    # The parent's buffered "p" is written once, by the parent (the child's own
    # records into the inherited session are its own to write).
    parent = [m["content"] for m in read(tmp_path / "parent.jsonl").messages]
    assert parent.count("p") == 1
    assert [p for p in validate(tmp_path / "parent.jsonl") if p.severity == "error"] == []
