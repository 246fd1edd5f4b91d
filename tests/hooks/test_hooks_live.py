"""The hook worker keeps a Claude Code session's STS files up to date reading only what the transcript gained.

Every step is compared with what ``convert`` makes of the transcript as it
stands then: the incremental path must never write anything else.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from ststrace._convert import convert_file, input_files, output_name, sts_bytes
from ststrace._hooks import hook, live, worker

HERE = Path(__file__).resolve().parents[1]  # tests/
WILD = HERE / "fixtures" / "convert-wild"
TRACES = HERE / "fixtures" / "agent-traces"


def _expected(transcript: Path) -> dict[str, bytes]:
    """What ``ststrace convert`` writes for the transcript and its subagent files, by file name."""
    out: dict[str, bytes] = {}
    for src in input_files([transcript])[0]:
        try:
            traces = convert_file(src, "claude-code").traces
        except ValueError:
            continue  # no message yet: convert writes nothing
        out.update({output_name(t): sts_bytes(t) for t in traces})
    return out


def _written(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))}


class _Session:
    """A hooked session run in this process: an event is ``hook.note`` then the worker."""

    def __init__(self, tmp_path: Path, transcript: Path) -> None:
        self.transcript = transcript
        self.out = tmp_path / "out"
        self.opts = hook.Options("claude-code", str(self.out), None, "sts")

    def event(self, name: str = "PostToolUse") -> None:
        payload = {"session_id": "s", "transcript_path": str(self.transcript), "cwd": "/w", "hook_event_name": name}
        key = hook.note(self.opts, hook._event("claude-code", payload, []))[0]
        worker.process(self.opts, key)
        done = hook.read_json(str(self.out / hook.STATE_DIR / f"{key}.done"))
        assert done is not None and "error" not in done, done


@pytest.fixture
def fulls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The whole-transcript conversions the worker did (the fallback), in order."""
    calls: list[Path] = []
    real = live._full

    def counting(transcript: Path, *args: Any) -> Any:
        calls.append(transcript)
        return real(transcript, *args)

    monkeypatch.setattr(live, "_full", counting)
    return calls


def _uid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def _synthetic() -> list[dict[str, Any]]:
    """A session with what makes incremental conversion hard, in the order Claude Code writes it.

    Replies split over several lines under one ``message.id`` with growing
    usage (one of them continued after its tool result, as streamed tool
    execution does), an in-file subagent (older versions) started by a Task
    call, a late ``custom-title`` and ``summary`` (the header changes), a
    line for an earlier reply after a later one (convert merges it there),
    a secret to redact, bookkeeping lines and a blank line.
    """
    s = "sess-synth"
    base = {"sessionId": s, "cwd": "/home/dev/shop", "version": "2.1.0", "gitBranch": "main"}
    n = 0
    lines: list[dict[str, Any]] = [{"type": "queue-operation", "operation": "enqueue", "sessionId": s}]

    def line(kind: str, message: dict[str, Any], **extra: Any) -> None:
        nonlocal n
        n += 1
        lines.append({**base, "type": kind, "uuid": _uid(n), "timestamp": f"2026-07-01T10:{n // 60:02d}:{n % 60:02d}.000Z", "message": message, **extra})

    def reply(mid: str, blocks: list[dict[str, Any]], out_tokens: int, **extra: Any) -> None:
        for i, block in enumerate(blocks):
            usage = {"input_tokens": 10, "output_tokens": out_tokens if i == len(blocks) - 1 else 1, "cache_read_input_tokens": 5}
            line("assistant", {"id": mid, "role": "assistant", "model": "claude-x", "content": [block], "usage": usage}, **extra)

    def result(call: str, text: str, **extra: Any) -> None:
        line("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": text}]}, **extra)

    line("user", {"role": "user", "content": "<command-name>/clear</command-name>"})
    line("user", {"role": "user", "content": "Fix the failing test in shop/cart.py, key AKIAIOSFODNN7EXAMPLE"})
    reply("msg_1", [{"type": "thinking", "thinking": "look first"}, {"type": "text", "text": "Reading."}, {"type": "tool_use", "id": "tu_1", "name": "Read", "input": {"path": "cart.py"}}], 40)
    result("tu_1", "def total(): return 1")
    reply("msg_2", [{"type": "tool_use", "id": "tu_2", "name": "Task", "input": {"prompt": "run the tests"}}], 12)
    side = {"isSidechain": True, "agentId": "ag1"}
    line("user", {"role": "user", "content": "run the tests"}, **side)
    lines.append({"type": "progress", "sessionId": s, "parentToolUseID": "tu_2", "data": {"type": "agent_progress", "agentId": "ag1"}})
    reply("msg_s1", [{"type": "tool_use", "id": "tu_s1", "name": "Bash", "input": {"command": "pytest"}}], 9, **side)
    result("tu_s1", "1 failed", **side)
    reply("msg_s2", [{"type": "text", "text": "One test fails."}], 7, **side)
    result("tu_2", "One test fails.", toolUseResult={"agentId": "ag1", "status": "completed"})
    reply("msg_3", [{"type": "text", "text": "Editing."}, {"type": "tool_use", "id": "tu_3", "name": "Edit", "input": {"path": "cart.py"}}], 30)
    result("tu_3", "edited")
    # Streamed tool execution: the reply goes on after its first result.
    reply("msg_3", [{"type": "tool_use", "id": "tu_4", "name": "Bash", "input": {"command": "pytest -q"}}], 55)
    result("tu_4", "all passed")
    lines.append({"type": "custom-title", "customTitle": "Cart fix", "sessionId": s})
    reply("msg_4", [{"type": "text", "text": "Done: the test passes."}], 20)
    # A late line of msg_3, after msg_4: convert merges it into msg_3.
    reply("msg_3", [{"type": "text", "text": "(and a note)"}], 60)
    lines.append({"type": "file-history-snapshot", "messageId": "x", "snapshot": {}})
    line("user", {"role": "user", "content": "thanks"})
    reply("msg_5", [{"type": "text", "text": "You're welcome."}], 5)
    lines.append({"type": "summary", "summary": "Fixing cart totals", "leafUuid": _uid(3)})
    line("user", {"role": "user", "content": "one more: sk-ant-api03-" + "A" * 93 + "AA"})
    reply("msg_6", [{"type": "thinking", "thinking": "sure"}, {"type": "text", "text": "On it."}], 9)
    return lines


def _jsonl(objs: list[dict[str, Any]]) -> bytes:
    out = []
    for i, obj in enumerate(objs):
        out.append(json.dumps(obj).encode() + b"\n")
        if i == 5:
            out.append(b"\n")  # blank lines are skipped
    return b"".join(out)


def _grow(session: _Session, data: bytes, cuts: list[int], check: Callable[[int], None] | None = None) -> None:
    """Write *data* in pieces ending at *cuts*; after each, an event, then the files must be ``convert``'s."""
    written = 0
    for step, cut in enumerate([*cuts, len(data)]):
        with open(session.transcript, "ab") as f:
            f.write(data[written:cut])
        written = cut
        session.event()
        want = _expected(session.transcript)
        if want:
            assert _written(session.out) == want, f"step {step}, byte {cut} of {len(data)}"
        if check is not None:
            check(step)


def test_line_by_line_the_files_equal_convert_at_every_event(tmp_path: Path, fulls: list[Path]) -> None:
    data = _jsonl(_synthetic())
    transcript = tmp_path / "sess-synth.jsonl"
    session = _Session(tmp_path, transcript)
    ends = [i + 1 for i, c in enumerate(data) if c == ord("\n")]
    _grow(session, data, ends[:-1])
    files = _written(session.out)
    assert set(files) == {"sess-synth.jsonl", "sess-synth-agent-ag1.jsonl"}
    header = json.loads(files["sess-synth.jsonl"].splitlines()[0])
    assert header["name"] == "Cart fix" and "AKIA" not in files["sess-synth.jsonl"].decode()
    # One whole conversion to start, one for the late msg_3 line; every other event read only what was added.
    assert len(fulls) == 2, fulls


def test_pieces_cut_anywhere_in_a_line_equal_convert(tmp_path: Path, fulls: list[Path]) -> None:
    """Events that find a torn last line (the agent still writing it)."""
    data = _jsonl(_synthetic())
    session = _Session(tmp_path, tmp_path / "sess-synth.jsonl")
    _grow(session, data, list(range(97, len(data), 211)))
    assert len(fulls) < len(data) // 211 // 2


@pytest.mark.parametrize("name", ["example_claude_code.jsonl", "cc-main-1.jsonl", "cc_clear.jsonl", "cc_init.jsonl"])
def test_real_transcripts_fed_in_small_appends_equal_convert(tmp_path: Path, name: str, fulls: list[Path]) -> None:
    src = (TRACES if (TRACES / name).exists() else WILD) / name
    transcript = tmp_path / name
    if (src.with_suffix("")).is_dir():
        shutil.copytree(src.with_suffix(""), transcript.with_suffix(""))  # its subagents/ files
    data = src.read_bytes()
    ends = [i + 1 for i, c in enumerate(data) if c == ord("\n")]
    _grow(_Session(tmp_path, transcript), data, ends[:-1:2])
    assert len(fulls) <= 2


def test_a_rewritten_or_shrunk_transcript_is_converted_again(tmp_path: Path, fulls: list[Path]) -> None:
    objs = _synthetic()
    transcript = tmp_path / "sess-synth.jsonl"
    session = _Session(tmp_path, transcript)
    transcript.write_bytes(_jsonl(objs))
    session.event()
    # Rewritten in place, the same length: only the bytes before the offset tell.
    data = bytearray(transcript.read_bytes())
    at = data.index(b"Reading.")
    data[at : at + 8] = b"Writing."
    transcript.write_bytes(bytes(data))
    session.event()
    assert _written(session.out) == _expected(transcript) and b"Writing." in _written(session.out)["sess-synth.jsonl"]
    transcript.write_bytes(_jsonl(objs[:12]))  # shrank
    session.event()
    assert _written(session.out)["sess-synth.jsonl"] == _expected(transcript)["sess-synth.jsonl"]
    (session.out / hook.STATE_DIR / "claude-code-s.conv").write_bytes(b"{not json")  # a damaged state
    with open(transcript, "ab") as f:
        f.write(_jsonl(objs[12:14]))
    session.event()
    assert _written(session.out)["sess-synth.jsonl"] == _expected(transcript)["sess-synth.jsonl"]
    assert len(fulls) == 4


def test_a_torn_line_left_in_the_file_by_a_killed_worker_is_repaired(tmp_path: Path, fulls: list[Path]) -> None:
    objs = _synthetic()
    transcript = tmp_path / "sess-synth.jsonl"
    session = _Session(tmp_path, transcript)
    transcript.write_bytes(_jsonl(objs[:20]))
    session.event()
    with open(session.out / "sess-synth.jsonl", "ab") as f:
        f.write(b'{"type":"message","mess')
    with open(transcript, "ab") as f:
        f.write(_jsonl(objs[20:]))
    session.event()
    assert _written(session.out) == _expected(transcript) and len(fulls) == 1


def _read_bytes() -> int:
    """Bytes this process has read through read(2) and the like so far (Linux)."""
    with open("/proc/self/io", "rb") as f:
        fields = dict(line.split(b": ") for line in f.read().splitlines())
    return int(fields[b"rchar"])


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="counts reads through /proc/self/io (Linux)")
def test_an_event_reads_what_the_transcript_gained_not_the_whole_of_it(tmp_path: Path, fulls: list[Path]) -> None:
    objs = _synthetic()
    head, tail = objs[:-6], objs[-6:]
    pad = "x" * 4000
    transcript = tmp_path / "sess-synth.jsonl"
    with open(transcript, "wb") as f:
        f.write(_jsonl(head))
        for i in range(2000):  # ~8 MB of tool results to an earlier call
            f.write(json.dumps({"type": "user", "sessionId": "sess-synth", "uuid": f"pad-{i}", "message": {"role": "user", "content": f"{i} {pad}"}}).encode() + b"\n")
    size = transcript.stat().st_size
    session = _Session(tmp_path, transcript)
    before = _read_bytes()
    session.event()
    first = _read_bytes() - before
    assert first >= size  # the meter sees a whole conversion
    per_event = []
    for obj in tail:
        added = _jsonl([obj])
        with open(transcript, "ab") as f:
            f.write(added)
        before = _read_bytes()
        session.event()
        per_event.append(_read_bytes() - before)
    assert _written(session.out) == _expected(transcript) and len(fulls) == 1
    # The lines added, the state kept (a few hundred KB here), the tail of the STS file: not the transcript.
    assert max(per_event) < size // 10, (per_event, size)


def test_an_ended_session_drops_its_state_and_a_resumed_one_is_still_convert(tmp_path: Path, fulls: list[Path]) -> None:
    objs = _synthetic()
    transcript = tmp_path / "sess-synth.jsonl"
    session = _Session(tmp_path, transcript)
    memo = session.out / hook.STATE_DIR / "claude-code-s.conv"
    transcript.write_bytes(_jsonl(objs[:15]))
    session.event()
    assert memo.is_file()
    session.event("SessionEnd")
    assert not memo.exists() and _written(session.out) == _expected(transcript)
    with open(transcript, "ab") as f:  # claude --resume: the same file goes on
        f.write(_jsonl(objs[15:]))
    session.event("UserPromptSubmit")
    assert memo.is_file() and _written(session.out) == _expected(transcript)
    assert len(fulls) == 2
