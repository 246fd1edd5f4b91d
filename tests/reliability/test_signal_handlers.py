"""Recording and flushing from a signal handler (issue 13 #12).

Python runs a handler on the main thread between two bytecodes of whatever it
was doing: possibly ststrace code holding one of its locks. The handler's
recording, flush() and close() must then neither hang nor raise.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ststrace import read, validate

INTERRUPTED_INSIDE_STSTRACE = """
import os, signal, sys, threading
import faulthandler
from ststrace import Session, _registry, _writer

faulthandler.register(signal.SIGUSR2)
d = sys.argv[1]
TOKEN = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
s = Session(d + "/main.jsonl", flush_interval=3600).open()
s.user("before")
w = s._writer
done = []

def handler(signum, frame):
    cid = f"h{len(done)}"
    s.assistant("", tool_calls=[{"name": "f", "arguments": {"q": 1}, "id": cid}])
    s.tool(cid, "handled " + TOKEN)
    s.flush()
    with Session(d + f"/from-handler-{len(done)}.jsonl", flush_interval=3600) as h:
        h.user("opened and closed in a handler")
    done.append(signum)

signal.signal(signal.SIGUSR1, handler)
signal.alarm(20)  # a hang dies of SIGALRM
# The main thread is interrupted while it holds each lock in turn, as if the
# signal had arrived in the middle of ststrace's own code.
held = {
    "tool calls": s._state_lock,
    "redaction counts": s._guard._lock,
    "buffer": w._lock,
    "flusher": _writer._flusher._lock,
    "fd pool": _writer._fd_pool._lock,
    "open sessions": _registry._lock,
}
for name, lock in held.items():
    with lock:
        os.kill(os.getpid(), signal.SIGUSR1)
        for _ in range(1000):  # the handler runs between these bytecodes
            pass
        assert len(done) == list(held).index(name) + 1, name
    print("ok", name, flush=True)
s.close()
print("closed", s.stats()["lost"])
"""


def test_a_handler_records_flushes_and_opens_while_the_main_thread_holds_each_lock(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """No hang, no exception; everything the handlers recorded is on disk, paired."""
    out = scripts.run(INTERRUPTED_INSIDE_STSTRACE, str(tmp_path), timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.split("\n")[-2] == "closed 0", out.stdout + out.stderr
    msgs = read(tmp_path / "main.jsonl").messages
    assert msgs[0]["content"] == "before"
    assert [m["role"] for m in msgs[1:]] == ["assistant", "tool"] * 6
    assert all(m["content"] == "handled [REDACTED:github_token]" for m in msgs[2::2])
    assert [p for p in validate(tmp_path / "main.jsonl") if p.severity == "error"] == []
    for k in range(6):
        assert [m["content"] for m in read(tmp_path / f"from-handler-{k}.jsonl").messages] == ["opened and closed in a handler"]


FAST_TIMER = """
import signal, sys, time
from ststrace import Session, tool

d, seconds, interval = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
s = Session(d + "/timer.jsonl", flush_interval=0.01).open()
ticks = 0

def handler(signum, frame):
    global ticks
    ticks += 1
    n = ticks  # a nested handler may change ticks from here on
    s.assistant("", tool_calls=[{"name": "tick", "arguments": {"n": n}, "id": f"t{n}"}])
    s.tool(f"t{n}", "tock")
    s.flush()

@tool
def work(i):
    return i

signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, interval, interval)
end = time.monotonic() + seconds
i = 0
while time.monotonic() < end:
    ids = s.assistant("", tool_calls=[{"name": "work", "arguments": {"i": i}}])
    work(i)
    s.flush() if i % 50 == 0 else None
    i += 1
signal.setitimer(signal.ITIMER_REAL, 0, 0)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
s.close()
print("done", i, ticks, s.stats()["lost"], flush=True)
"""


@pytest.mark.parametrize(
    "seconds", [pytest.param(2.0, id="2s"), pytest.param(30.0, id="30s", marks=pytest.mark.slow)]
)
def test_record_and_flush_from_a_fast_timer(scripts, tmp_path: Path, seconds: float) -> None:  # type: ignore[no-untyped-def]
    """A 0.2 ms interval timer whose handler records a call, its result and
    flushes, while the main thread records and calls a @tool: it ends, nothing
    is lost, every call has its result."""
    out = scripts.run(FAST_TIMER, str(tmp_path), str(seconds), "0.0002", timeout=60 + 4 * seconds)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    _, loops, ticks, lost = out.stdout.split()
    assert int(ticks) > 0 and int(lost) == 0
    msgs = read(tmp_path / "timer.jsonl").messages
    roles = Counter(m["role"] for m in msgs)
    assert roles["assistant"] == roles["tool"] == int(loops) + int(ticks)
    assert [p for p in validate(tmp_path / "timer.jsonl") if p.severity == "error"] == []
