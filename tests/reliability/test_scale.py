"""Many sessions at once: threads, asyncio tasks, and 5,000 open sessions under
``ulimit -n 1024``; and one long session of 1,000,000 messages with bounded memory."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from ststrace import Session, current_session, read, validate


def check_episode(path: Path, i: int, turns: int) -> None:
    trace = read(path)
    assert trace.header["id"] == f"ep{i}"
    roles = [m["role"] for m in trace.messages]
    assert roles == ["user", "assistant", "tool", "assistant"] * turns
    assert [m["content"] for m in trace.messages[::4]] == [f"{i}:{t}" for t in range(turns)]
    assert validate(path) == []


def record_episode(s: Session, i: int, turn: int) -> None:
    s.user(f"{i}:{turn}")
    (cid,) = s.assistant("", tool_calls=[{"name": "lookup", "arguments": {"i": i, "turn": turn}}], model="m")
    s.tool(cid, {"ok": True})
    s.assistant(f"done {i}:{turn}", model="m")


def test_50_sessions_in_50_threads(tmp_path: Path) -> None:
    barrier = threading.Barrier(50)
    failures: list[BaseException] = []

    def episode(i: int) -> None:
        try:
            barrier.wait()
            with Session(tmp_path, id=f"ep{i}", flush_interval=0.01, buffer_size=512) as s:
                for turn in range(100):
                    assert current_session() is s
                    record_episode(s, i, turn)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    for i in range(50):
        check_episode(tmp_path / f"ep{i}.jsonl", i, 100)


async def test_500_sessions_in_asyncio_tasks(tmp_path: Path) -> None:
    async def episode(i: int) -> None:
        async with Session(tmp_path, id=f"ep{i}", flush_interval=0.01) as s:
            for turn in range(5):
                record_episode(s, i, turn)
                await asyncio.sleep(0)
                assert current_session() is s

    await asyncio.gather(*(episode(i) for i in range(500)))
    for i in range(500):
        check_episode(tmp_path / f"ep{i}.jsonl", i, 5)


FIVE_THOUSAND = """
import os, resource, sys
from ststrace import Session, read, validate

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
d = sys.argv[1]
sessions = [Session(d, id=f"s{i}", flush_interval=0.05).open() for i in range(5000)]
peak = len(os.listdir("/proc/self/fd"))
for turn in range(3):
    for i, s in enumerate(sessions):
        s.user(f"{i}:{turn}")
        if (i + turn) % 97 == 0:
            s.flush()
    peak = max(peak, len(os.listdir("/proc/self/fd")))
for s in sessions:
    s.close()
    assert s.stats()["lost"] == 0 and s.stats()["write_errors"] == 0
print("peak_fds", peak)
"""


def test_5000_open_sessions_under_ulimit_1024(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Idle sessions must not pin descriptors (RL and eval harnesses run thousands)."""
    out = scripts.run(FIVE_THOUSAND, str(tmp_path), timeout=120)
    assert out.returncode == 0, out.stderr
    peak = int(out.stdout.split()[1])
    assert peak < 200
    files = sorted(tmp_path.glob("s*.jsonl"))
    assert len(files) == 5000
    for i in range(0, 5000, 7):
        msgs = read(tmp_path / f"s{i}.jsonl").messages
        assert [m["content"] for m in msgs] == [f"{i}:{t}" for t in range(3)]


LONG_RUN = """
import sys
from ststrace import Session

def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

total = int(sys.argv[2])
checkpoint = total // 5
last = ""
with Session(sys.argv[1], id="long", flush_interval=0.5) as s:
    for i in range(total):
        k = i % 4
        if k == 0:
            s.user(f"u{i}")
        elif k == 1:
            (last,) = s.assistant("", tool_calls=[{"name": "t", "arguments": {"i": i}}], model="m")
        elif k == 2 and i % 8 == 2:
            # Every other call is never answered: the pending table must stay bounded.
            s.tool(last, "r")
        else:
            s.assistant(f"a{i}", model="m")
        if i == checkpoint:
            rss_early = rss_kib()
    rss_late = rss_kib()
    st = s.stats()
print(rss_early, rss_late, st["messages"], st["pending_tool_calls"], st["lost"])
"""


def run_long(scripts, tmp_path: Path, total: int) -> None:  # type: ignore[no-untyped-def]
    out = scripts.run(LONG_RUN, str(tmp_path), str(total), timeout=900)
    assert out.returncode == 0, out.stderr
    early, late, messages, pending, lost = map(int, out.stdout.split())
    assert messages == total and lost == 0
    assert pending <= 10_000
    # Flat, not growing with the message count (allow allocator noise).
    assert late - early < 24 * 1024, (early, late)
    path = tmp_path / "long.jsonl"
    n = 0
    with path.open("rb") as f:
        for n, _ in enumerate(f):
            pass
    assert n == total  # header + total lines, counted from 0


def test_one_million_messages_with_bounded_memory(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_long(scripts, tmp_path, 1_000_000)


@pytest.mark.slow
def test_ten_million_messages_with_bounded_memory(scripts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_long(scripts, tmp_path, 10_000_000)
