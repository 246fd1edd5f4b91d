"""``convert`` of Gemini CLI 0.61's JSON Lines chat recording (``session-*.jsonl``),
read back the way Gemini CLI reads it: later states of a message replace it in
place, ``$set`` updates the metadata (its ``messages`` replace them all),
``$rewindTo`` drops a message and all after it. The real CLI writes one in
tests/hooks/test_hooks_gemini.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import ststrace
from ststrace._convert import detect, gemini

HEAD = {"sessionId": "g1", "projectHash": "abc", "startTime": "2026-01-05T10:00:00.000Z", "lastUpdated": "2026-01-05T10:00:00.000Z", "kind": "main"}


def _write(path: Path, records: list[Any], tail: bytes = b"") -> Path:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + tail)
    return path


def _user(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "timestamp": "2026-01-05T10:00:01.000Z", "type": "user", "content": [{"text": text}]}


def _gemini(mid: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"id": mid, "timestamp": "2026-01-05T10:00:02.000Z", "type": "gemini", "content": text, "model": "gemini-2.5-flash", **extra}


def test_records_are_replayed_as_gemini_cli_reads_them(tmp_path: Path) -> None:
    call = {
        "id": "c1", "name": "run_shell_command", "args": {"command": "echo hi"}, "status": "success",
        "result": [{"functionResponse": {"id": "c1", "name": "run_shell_command", "response": {"output": "hi"}}}],
        "timestamp": "2026-01-05T10:00:03.000Z",
    }
    path = _write(
        tmp_path / "session-2026-01-05T10-00-g1.jsonl",
        [
            HEAD,
            {"$set": {"messages": [_user("ctx", "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n</session_context>")]}},
            _user("u1", "Run echo hi"),
            _gemini("m1", "Let me"),
            {"$set": {"lastUpdated": "2026-01-05T10:00:02.500Z"}},
            _gemini("m1", "Let me run it.", toolCalls=[call]),  # the same reply, later: replaces it in place
            {"id": "r1", "timestamp": "2026-01-05T10:00:03.000Z", "type": "user", "content": call["result"]},
            _gemini("m2", "It printed hi."),
            _user("u2", "A question I took back"),
            _gemini("m3", "An answer to it"),
            {"$rewindTo": "u2"},
        ],
        tail=b'{"id": "m4", "type": "gem',  # the line being written
    )
    assert detect(path) == "gemini"
    (trace,) = ststrace.convert(path)
    assert trace.header["harness"] == "gemini-cli" and trace.id == "g1" and trace.header["name"] == "Run echo hi"
    # The context turn is the CLI's, not a prompt; the results it repeats as a
    # user turn are the call's, recorded once; the rewound turns are gone.
    assert [m["role"] for m in trace.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert trace.messages[0]["content"].startswith("<session_context>")
    assert [trace.messages[i]["content"] for i in (1, 2, 4)] == ["Run echo hi", "Let me run it.", "It printed hi."]
    assert trace.messages[2]["toolCalls"][0]["id"] == "c1" and trace.messages[3]["toolCallId"] == "c1"
    assert "hi" in trace.messages[3]["content"]
    result = ststrace.convert_file(path)
    assert result.dropped == {"torn last line": 1}


def test_a_jsonl_file_that_is_not_a_recording_is_not_taken_for_one(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.jsonl", [{"sessionId": "s", "type": "user"}])
    assert gemini.jsonl_recording(path.read_bytes(), Counter()) is None
