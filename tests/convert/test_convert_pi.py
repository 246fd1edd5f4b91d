"""``ststrace convert --to pi``: STS -> Pi v3 sessions, and round trips.

Pi -> STS -> Pi must keep every message, tool-call id, argument and result; STS
-> Pi -> STS must give back the same messages.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from ststrace import read, validate
from ststrace._cli.convert import run as run_convert
from ststrace._convert import convert, convert_file, write_trace
from ststrace._convert.to_pi import pi_bytes, pi_lines
from ststrace._reader import Trace
from ststrace.cli import build_parser
from test_convert import CLINE, GEMINI, GEMINI_RECORDINGS, LLAMA, OPENCODE, _CLINE_RESULT, _json_lines, _llama, _source_cline, _source_opencode

HERE = Path(__file__).resolve().parents[1]
SAMPLES = HERE / "fixtures" / "agent-traces"
FIXTURES = HERE / "fixtures" / "convert"
WILD = HERE / "fixtures" / "convert-wild"

PI_SOURCES = [
    SAMPLES / "example_pi_session.jsonl",
    SAMPLES / "example_openclaw_session.jsonl",
    FIXTURES / "pi_v1.jsonl",
    FIXTURES / "pi_v2_branches.jsonl",
]


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _active_messages(path: Path) -> list[dict[str, Any]]:
    """The Pi messages of the active branch (the path from the last entry to the root), read independently."""
    rows = _rows(path)[1:]
    if not all("id" in r for r in rows):  # v1: linear
        return [r["message"] for r in rows if r.get("type") == "message"]
    by_id = {r["id"]: r for r in rows}
    branch = []
    node: dict[str, Any] | None = rows[-1]
    while node is not None:
        branch.append(node)
        node = by_id.get(node.get("parentId") or "")
    return [r["message"] for r in reversed(branch) if r.get("type") == "message"]


def _roles(messages: list[dict[str, Any]]) -> list[str]:
    # A command the user ran with "!" (bashExecution) is a user turn in STS.
    roles = ["user" if m["role"] == "bashExecution" else m["role"] for m in messages]
    return [r for r in roles if r in ("user", "assistant", "toolResult")]


def _calls(messages: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    return [
        (b["id"], b["name"], b["arguments"])
        for m in messages
        if m["role"] == "assistant"
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "toolCall"
    ]


def _results(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for m in messages:
        if m["role"] != "toolResult":
            continue
        text = "\n".join(b["text"] if b["type"] == "text" else "[image]" for b in m["content"])
        out.append((m["toolCallId"], text))
    return out


@pytest.mark.parametrize("src", PI_SOURCES, ids=[p.name for p in PI_SOURCES])
def test_pi_to_sts_to_pi_keeps_messages_calls_and_results(src: Path, tmp_path: Path) -> None:
    """Pi -> STS -> Pi: same user/assistant/result sequence, same call ids, names, arguments, result ids and texts."""
    original = _active_messages(src)
    (sts,) = convert(src, redact=False)
    pi = tmp_path / "pi.jsonl"
    pi.write_bytes(pi_bytes(sts))
    back = [r["message"] for r in _rows(pi) if r.get("type") == "message"]

    assert _roles(back) == _roles(original)
    assert _calls(back) == _calls(original)
    results, back_results = _results(original), _results(back)
    assert [cid for cid, _ in back_results] == [cid for cid, _ in results]
    for (_, text), (_, again), m in zip(results, back_results, [m for m in original if m["role"] == "toolResult"]):
        expected = text if (not m.get("isError") or text.lower().startswith("error")) else f"Error: {text}"
        assert again.replace("[image: image/jpeg]", "[image]").replace("[image: image/png]", "[image]") == expected
    assert [m["isError"] for m in back if m["role"] == "toolResult"] == [
        bool(m.get("isError")) or _results([m])[0][1].lower().startswith("error") for m in original if m["role"] == "toolResult"
    ]

    # And Pi -> STS once more gives the very same STS messages, which validate.
    (again_sts,) = convert_file(pi, "pi", redact=False).traces
    assert again_sts.messages == sts.messages
    assert again_sts.header.get("name") == sts.header.get("name")
    assert again_sts.header.get("cwd") == sts.header.get("cwd")
    out = write_trace(again_sts, tmp_path / "again.jsonl")
    assert [p for p in validate(out) if p.severity == "error"] == []


def test_sts_to_pi_layout() -> None:
    """The Pi file: a v3 header with harness, one linear chain of entries, system as custom_message, model changes."""
    trace = Trace(
        header={"type": "session", "harness": "my-agent", "id": "abc123", "name": "what time is it", "cwd": "/w"},
        messages=[
            {"role": "system", "content": "be terse", "timestamp": 1751382000000},
            {"role": "user", "content": "what time is it?", "timestamp": 1751382000500},
            {"role": "assistant", "content": "", "reasoningContent": "use the tool", "model": "openai/gpt-5",
             "toolCalls": [{"id": "t1", "function": {"name": "get_time", "arguments": "{}"}}], "timestamp": 1751382001000},
            {"role": "tool", "toolCallId": "t1", "content": "2026-07-01T15:00:00Z", "timestamp": 1751382001200},
            {"role": "assistant", "content": "it is 15:00 UTC", "model": "openai/gpt-5", "timestamp": 1751382002000},
        ],
    )
    lines = pi_lines(trace)
    head = lines[0]
    assert head == {
        "type": "session", "version": 3, "id": "abc123", "timestamp": "2025-07-01T15:00:00.000Z",
        "cwd": "/w", "harness": "my-agent", "convertedBy": "ststrace",
    }
    entries = lines[1:]
    assert [e["type"] for e in entries] == [
        "session_info", "custom", "custom_message", "message", "model_change", "message", "message", "message",
    ]
    assert [e["parentId"] for e in entries] == [None] + [e["id"] for e in entries[:-1]]
    assert len({e["id"] for e in entries}) == len(entries)
    assert entries[0]["name"] == "what time is it"
    # teich (the Hub's datasets loader) reads the system prompt from this entry only.
    assert entries[1]["customType"] == "teich-system-prompt" and entries[1]["data"] == {"systemPrompt": "be terse"}
    del entries[1]
    assert entries[1]["customType"] == "system" and entries[1]["content"] == "be terse"
    assert entries[3]["modelId"] == "openai/gpt-5" and entries[3]["provider"] == "openai"
    call = entries[4]["message"]
    assert call["content"] == [
        {"type": "thinking", "thinking": "use the tool"},
        {"type": "toolCall", "id": "t1", "name": "get_time", "arguments": {}},
    ]
    assert call["stopReason"] == "toolUse" and call["model"] == "openai/gpt-5"
    result = entries[5]["message"]
    assert result == {
        "role": "toolResult", "toolCallId": "t1", "toolName": "get_time",
        "content": [{"type": "text", "text": "2026-07-01T15:00:00Z"}], "isError": False, "timestamp": 1751382001200,
    }


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def test_cli_to_pi_from_other_agents_and_from_sts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--to pi takes another agent's session (through STS) or an STS trace; each output reads back as valid STS."""
    sts_dir = tmp_path / "sts"
    assert run_convert(_parse(["convert", str(SAMPLES / "example_codex_session.jsonl"), "-o", str(sts_dir)])) == 0
    (sts_file,) = sts_dir.iterdir()
    out = tmp_path / "pi"
    code = run_convert(_parse(["convert", "--to", "pi", str(SAMPLES / "example_claude_code.jsonl"), str(sts_file), "-o", str(out)]))
    stdout, stderr = capsys.readouterr()
    assert (code, stderr) == (0, "")
    assert "(Pi layout)" in stdout.strip().splitlines()[-1]
    files = sorted(out.iterdir())
    assert len(files) == 2
    harnesses = set()
    for f in files:
        head = _rows(f)[0]
        assert head["type"] == "session" and head["version"] == 3 and head["convertedBy"] == "ststrace"
        harnesses.add(head["harness"])
        (trace,) = convert_file(f, redact=False).traces  # detected as Pi
        again = write_trace(trace, tmp_path / f"back-{f.name}")
        assert [p for p in validate(again) if p.severity == "error"] == []
        assert len(trace.messages) == len(read(sts_file).messages) or head["harness"] == "claude-code"
    assert harnesses == {"claude-code", "codex"}

    # --force replaces its own Pi output, never a Pi session it did not write.
    assert run_convert(_parse(["convert", "--to", "pi", "--force", str(sts_file), "-o", str(out)])) == 0
    real_pi = out / "pi-v1-session.jsonl"
    real_pi.write_bytes((FIXTURES / "pi_v1.jsonl").read_bytes())
    sts_of_pi = tmp_path / "pi-sts"
    assert run_convert(_parse(["convert", str(FIXTURES / "pi_v1.jsonl"), "-o", str(sts_of_pi)])) == 0
    capsys.readouterr()
    assert run_convert(_parse(["convert", "--to", "pi", "--force", str(sts_of_pi / "pi-v1-session.jsonl"), "-o", str(out)])) == 1
    assert "was not written by ststrace" in capsys.readouterr().err
    assert real_pi.read_bytes() == (FIXTURES / "pi_v1.jsonl").read_bytes()


def test_usage_and_sub_agent_links_survive_sts_to_pi_to_sts(tmp_path: Path) -> None:
    """An STS trace with usage and sub-agent header links -> Pi: each assistant entry carries the
    trace's token counts (not zeros), the header keeps the links, and Pi -> STS gives both back.
    A reply without usage gets Pi's required zeros, and reads back without a usage field."""
    usage = {"input": 10, "output": 5, "cacheRead": 2, "cacheWrite": 0, "totalTokens": 17,
             "cost": {"input": 1e-5, "output": 1e-5, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 2e-5}}
    trace = Trace(
        header={"type": "session", "harness": "ststrace", "id": "child-1", "name": "sub x",
                "parentSessionId": "parent-1", "parentToolCallId": "call_9"},
        messages=[
            {"role": "user", "content": "go", "timestamp": 1751382000000},
            {"role": "assistant", "content": "done", "model": "m2", "usage": usage, "timestamp": 1751382001000},
            {"role": "user", "content": "again", "timestamp": 1751382002000},
            {"role": "assistant", "content": "ok", "model": "m2", "timestamp": 1751382003000},
        ],
    )
    pi = tmp_path / "pi.jsonl"
    pi.write_bytes(pi_bytes(trace))
    rows = _rows(pi)
    assert rows[0]["parentSessionId"] == "parent-1" and rows[0]["parentToolCallId"] == "call_9"
    replies = [r["message"] for r in rows if r.get("type") == "message" and r["message"]["role"] == "assistant"]
    assert replies[0]["usage"] == usage
    assert replies[1]["usage"]["totalTokens"] == 0 and "cost" in replies[1]["usage"]
    (back,) = convert_file(pi, "pi", redact=False).traces
    assert back.header["parentSessionId"] == "parent-1" and back.header["parentToolCallId"] == "call_9"
    assert [m.get("usage") for m in back.messages] == [None, usage, None, None]
    out = write_trace(back, tmp_path / "back.jsonl")
    assert [p for p in validate(out) if p.severity == "error"] == []


def test_usage_without_cost_gets_no_zero_cost_back(tmp_path: Path) -> None:
    """STS usage without cost -> Pi (zero cost, as Pi requires) -> STS: still no cost."""
    trace = Trace(
        header={"type": "session", "harness": "h", "id": "s1"},
        messages=[
            {"role": "user", "content": "go", "timestamp": 1751382000000},
            {"role": "assistant", "content": "done", "usage": {"input": 3, "output": 4, "cacheRead": 0, "cacheWrite": 0,
                                                              "totalTokens": 7}, "timestamp": 1751382001000},
        ],
    )
    pi = tmp_path / "pi.jsonl"
    pi.write_bytes(pi_bytes(trace))
    (back,) = convert_file(pi, "pi", redact=False).traces
    assert back.messages[1]["usage"] == trace.messages[1]["usage"]



@pytest.mark.parametrize("name", LLAMA)
def test_llama_tree_to_pi_shows_one_answer_and_the_hub_loader_takes_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--to pi`` chains the active path only: a regenerated reply is not followed
    by the old one. The Hub's ``datasets`` loader takes the output for a trace."""
    from hub_loader import hub_detects, offline
    from ststrace.cli import main

    offline(monkeypatch)
    src = WILD / name
    head, active, _ = _llama(src)
    assert main(["convert", "--to", "pi", str(src), "-o", str(tmp_path / "pi")]) == 0
    capsys.readouterr()
    [out] = (tmp_path / "pi").iterdir()
    pi_msgs = [o["message"] for o in _json_lines(out) if o["type"] == "message"]
    replies = [b["text"] for m in pi_msgs if m["role"] == "assistant" for b in m["content"] if b["type"] == "text"]
    assert replies == [m["content"] for m in active if m["role"] == "assistant" and m["content"]]
    first_user = next(m["content"] for m in active if m["role"] == "user")
    assert hub_detects(out, tmp_path / "cache") == (True, head["id"], first_user)


def test_gemini_to_pi_and_the_hub_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder of Gemini CLI sessions converts (``session-*.json`` are picked up);
    ``--to pi`` output is taken for a trace by the Hub's ``datasets`` loader."""
    import shutil

    from hub_loader import hub_detects, offline
    from ststrace.cli import main

    offline(monkeypatch)
    chats = tmp_path / "tmp" / "abc123" / "chats"
    chats.mkdir(parents=True)
    for name in GEMINI_RECORDINGS:
        shutil.copy(GEMINI / name, chats / name)
    assert main(["convert", "--to", "pi", str(tmp_path / "tmp"), "-o", str(tmp_path / "pi")]) == 0
    summary = capsys.readouterr().out
    assert "converted 2 of 2 files" in summary and "token usage kept: 20 replies" in summary
    for name in GEMINI_RECORDINGS:
        doc = json.loads((GEMINI / name).read_text())
        out = tmp_path / "pi" / f"{doc['sessionId']}.jsonl"
        first = next(m["content"] for m in doc["messages"] if m["type"] == "user")
        assert hub_detects(out, tmp_path / "cache" / name) == (True, doc["sessionId"], first)


def test_opencode_to_pi_and_the_hub_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from hub_loader import hub_detects, offline
    from ststrace.cli import main

    offline(monkeypatch)
    assert main(["convert", "--to", "pi", str(OPENCODE), "-o", str(tmp_path / "pi")]) == 0
    assert "token usage kept: 2 replies, 16,297 tokens" in capsys.readouterr().out
    [out] = (tmp_path / "pi").iterdir()
    doc = json.loads(OPENCODE.read_text())
    assert hub_detects(out, tmp_path / "cache") == (True, doc["info"]["id"], _source_opencode(OPENCODE)[2])


def test_cline_to_pi_and_the_hub_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from hub_loader import hub_detects, offline
    from ststrace.cli import main

    offline(monkeypatch)
    assert main(["convert", "--to", "pi", str(CLINE), "-o", str(tmp_path / "pi")]) == 0
    capsys.readouterr()
    [out] = (tmp_path / "pi").iterdir()
    assert hub_detects(out, tmp_path / "cache") == (True, "1745512345678", _source_cline(CLINE)[2])
