"""Converters from other agents' session files to STS (ststrace._convert).

The real sample sessions in tests/fixtures/agent-traces (Apache-2.0, TeichAI/teich) are the main
inputs; small fixtures in tests/fixtures/convert cover what they lack (Pi v1 and
v2 trees with branches, OpenAI message files, Claude Code subagents).
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from ststrace import read, validate
from ststrace._convert import ConvertError, convert, convert_file, detect, output_name, write_trace
from ststrace._reader import Trace
import re
import shutil

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "agent-traces"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "convert"



def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") in ("text", "input_text"))


# -- what the sources hold, counted independently of the converters ----------------
# Each returns (tool calls, tool results whose call is in the source, first user prompt).


def _source_claude(path: Path) -> tuple[int, int, str]:
    calls: set[str] = set()
    results = 0
    prompt = None
    for o in _lines(path):
        msg = o.get("message") or {}
        content: Any = msg.get("content")
        if o.get("type") == "assistant":
            calls.update(b["id"] for b in content if b.get("type") == "tool_use")
        elif o.get("type") == "user":
            if isinstance(content, str):
                prompt = prompt if prompt is not None else content
            else:
                results += sum(1 for b in content if b.get("type") == "tool_result" and b["tool_use_id"] in calls)
    assert prompt is not None
    return len(calls), results, prompt


def _source_codex(path: Path) -> tuple[int, int, str]:
    items = _lines(path)
    calls = {o["payload"]["call_id"] for o in items if o["type"] == "response_item" and o["payload"]["type"] in ("function_call", "custom_tool_call")}
    results = sum(
        1
        for o in items
        if o["type"] == "response_item"
        and o["payload"]["type"] in ("function_call_output", "custom_tool_call_output")
        and o["payload"]["call_id"] in calls
    )
    prompt = next(o["payload"]["message"] for o in items if o["type"] == "event_msg" and o["payload"]["type"] == "user_message")
    return len(calls), results, prompt


def _source_pi(path: Path) -> tuple[int, int, str]:
    msgs = [o["message"] for o in _lines(path) if o.get("type") == "message"]
    calls = {b["id"] for m in msgs if m["role"] == "assistant" for b in m["content"] if b.get("type") == "toolCall"}
    results = sum(1 for m in msgs if m["role"] == "toolResult" and m["toolCallId"] in calls)
    prompt = next(_text(m["content"]) for m in msgs if m["role"] == "user")
    return len(calls), results, prompt


def _source_droid(path: Path) -> tuple[int, int, str]:
    msgs = [o["message"] for o in _lines(path) if o.get("type") == "message"]
    calls: set[str] = set()
    results = 0
    for m in msgs:
        for b in m["content"]:
            if b.get("type") == "tool_use":
                calls.add(b["id"])
            elif b.get("type") == "tool_result" and b["tool_use_id"] in calls:
                results += 1
    prompt = next(_text(m["content"]) for m in msgs if m["role"] == "user" and "visibility" not in m and _text(m["content"]))
    return len(calls), results, prompt


def _source_hermes(path: Path) -> tuple[int, int, str]:
    msgs = _lines(path)[0]["messages"]
    calls = {c["id"] for m in msgs for c in (m.get("tool_calls") or [])}
    results = sum(1 for m in msgs if m["role"] == "tool" and m["tool_call_id"] in calls)
    prompt = next(m["content"] for m in msgs if m["role"] == "user")
    return len(calls), results, prompt


def _source_cursor(path: Path) -> tuple[int, int, str]:
    rows = [o for o in _lines(path) if "role" in o]
    calls = {b["id"] for o in rows for b in o["message"]["content"] if b.get("type") == "tool_use"}
    results = sum(1 for o in rows for b in o["message"]["content"] if b.get("type") == "tool_result" and b["tool_use_id"] in calls)
    prompt = next(_text(o["message"]["content"]) for o in rows if o["role"] == "user")
    return len(calls), results, prompt


SAMPLE_CASES: list[tuple[str, str, Callable[[Path], tuple[int, int, str]]]] = [
    ("example_claude_code.jsonl", "claude-code", _source_claude),
    ("example_codex_session.jsonl", "codex", _source_codex),
    ("example_pi_session.jsonl", "pi", _source_pi),
    ("example_openclaw_session.jsonl", "pi", _source_pi),
    ("example_droid_session.jsonl", "droid", _source_droid),
    ("example_hermes_session.jsonl", "hermes", _source_hermes),
    ("example_cursor_session.jsonl", "cursor", _source_cursor),
]


def _written(trace: Trace, tmp_path: Path) -> Path:
    return write_trace(trace, tmp_path / output_name(trace))


def _errors(path: Path) -> list[str]:
    return [str(p) for p in validate(path) if p.severity == "error"]


def _assert_paired(messages: list[dict[str, Any]]) -> None:
    seen_calls: set[str] = set()
    answered: set[str] = set()
    for m in messages:
        for c in m.get("toolCalls", ()):
            assert c["id"] not in seen_calls
            seen_calls.add(c["id"])
            assert isinstance(c["function"]["arguments"], str)
            json.loads(c["function"]["arguments"])
        if m["role"] == "tool":
            assert m["toolCallId"] in seen_calls, "result before (or without) its call"
            assert m["toolCallId"] not in answered
            answered.add(m["toolCallId"])


@pytest.mark.parametrize(("name", "fmt", "source"), SAMPLE_CASES, ids=[c[0] for c in SAMPLE_CASES])
def test_real_sample_converts_faithfully(name: str, fmt: str, source: Callable[[Path], tuple[int, int, str]], tmp_path: Path) -> None:
    """Each real sample: valid output, same tool calls and paired results as the source, same first prompt."""
    path = SAMPLES / name
    assert detect(path) == fmt
    result = convert_file(path)
    assert result.format == fmt
    assert len(result.traces) == 1
    trace = result.traces[0]
    out = _written(trace, tmp_path)
    assert _errors(out) == []

    calls, results, prompt = source(path)
    back = read(out)
    assert sum(len(m.get("toolCalls", ())) for m in back.messages) == calls
    assert sum(1 for m in back.messages if m["role"] == "tool") == results
    _assert_paired(back.messages)
    first_user = next(m for m in back.messages if m["role"] == "user")
    assert first_user["content"] == prompt
    assert back.header["harness"] == fmt
    assert back.header["id"] == trace.header["id"] and back.header["id"]
    # Data Studio only detects a trace whose messages do not all share one key set.
    assert len({frozenset(m) for m in back.messages}) > 1
    if fmt != "cursor":  # the Cursor sample has no times at all
        assert all(isinstance(m.get("timestamp"), int) for m in back.messages)


def test_claude_code_merges_lines_of_one_response() -> None:
    """Assistant lines sharing message.id become one message holding all their blocks."""
    path = SAMPLES / "example_claude_code.jsonl"
    ids = [o["message"]["id"] for o in _lines(path) if o.get("type") == "assistant"]
    trace = convert(path)[0]
    assistants = [m for m in trace.messages if m["role"] == "assistant"]
    assert len(ids) > len(set(ids))  # the sample does split responses
    assert len(assistants) == len(set(ids))
    first = assistants[0]
    assert first["reasoningContent"].startswith("The user wants me to download a random dataset")
    assert first["content"] == "Let me find and download a dataset from Hugging Face."
    assert [c["function"]["name"] for c in first["toolCalls"]] == ["ToolSearch"]
    assert first["model"] == "claude-opus-4-6"
    assert trace.header["cwd"] == "/Users/calebfahlgren/.openclaw/workspace"
    assert trace.header["version"] == "2.1.77"
    assert trace.header["git"] == {"branch": "main"}


def test_claude_code_error_results_are_marked_once() -> None:
    """is_error results start with "Error: "; text already saying so is not prefixed twice."""
    trace = convert(SAMPLES / "example_claude_code.jsonl")[0]
    tools = {m["toolCallId"]: m["content"] for m in trace.messages if m["role"] == "tool"}
    assert tools["toolu_01D1fp5oqW3EsHvqK5CSAhGR"] == "Error: Request failed with status code 400"
    assert tools["toolu_012rn1TdSarXbnz4E4ghnX3Z"].startswith("Error: Exit code 1\n")
    assert tools["toolu_015vZj3DxMP7vaY4WM989tLd"].startswith("<class 'dict'>")  # is_error false: untouched

    droid = convert(SAMPLES / "example_droid_session.jsonl")[0]
    glob = next(m["content"] for m in droid.messages if m.get("toolCallId") == "Glob_7")
    assert glob.startswith("Error: Command failed") and not glob.startswith("Error: Error")


def test_codex_user_prompt_recorded_once_and_context_is_system() -> None:
    """The prompt appears as event_msg and response_item; it is one user message. Injected context is system."""
    trace = convert(SAMPLES / "example_codex_session.jsonl")[0]
    users = [m for m in trace.messages if m["role"] == "user"]
    assert [u["content"] for u in users] == ["make me a dashboard for rss, youtube, and newsletters all in one place"]
    systems = [m["content"] for m in trace.messages if m["role"] == "system"]
    assert systems[0].startswith("You are Codex")  # base instructions
    assert any(s.startswith("<environment_context>") for s in systems)
    assistants = [m for m in trace.messages if m["role"] == "assistant"]
    assert {m["model"] for m in assistants} == {"openai/gpt-5.5"}
    assert any("**Planning app development**" in m.get("reasoningContent", "") for m in assistants)
    patch = next(c for m in assistants for c in m.get("toolCalls", ()) if c["function"]["name"] == "apply_patch")
    assert json.loads(patch["function"]["arguments"])["input"].startswith("*** Begin Patch")
    assert trace.header["version"] == "0.130.0" and trace.header["cwd"] == "/workspace"
    # Codex keeps no title: the first prompt names the session.
    assert trace.header["name"] == "make me a dashboard for rss, youtube, and newsletters all in one place"


def test_codex_event_before_item_and_no_events(tmp_path: Path) -> None:
    """Dedup works whichever copy of the prompt comes first; without events, user items are the prompts."""
    meta = {"timestamp": "2025-09-01T00:00:00.000Z", "type": "session_meta", "payload": {"id": "cx-1", "cwd": "/w", "cli_version": "0.40.0"}}

    def line(kind: str, payload: dict[str, Any], ts: str = "2025-09-01T00:00:01.000Z") -> str:
        return json.dumps({"timestamp": ts, "type": kind, "payload": payload})

    prompt_item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the bug"}]}
    rows = [
        json.dumps(meta),
        line("turn_context", {"model": "gpt-5-codex", "cwd": "/w"}),
        line("event_msg", {"type": "user_message", "message": "fix the bug", "images": []}),
        line("response_item", prompt_item),
        line("response_item", {"type": "function_call", "name": "shell", "arguments": '{"command":["ls"]}', "call_id": "c1"}),
        line("response_item", {"type": "function_call_output", "call_id": "c1", "output": {"content": "denied", "success": False}}),
        line("response_item", {"type": "function_call_output", "call_id": "c-missing", "output": "stray"}),
        line("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}),
    ]
    src = tmp_path / "rollout.jsonl"
    src.write_text("\n".join(rows) + "\n")
    result = convert_file(src)
    assert result.format == "codex"
    trace = result.traces[0]
    assert [m["role"] for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
    assert trace.messages[2]["content"] == "Error: denied"
    assert trace.messages[1]["model"] == "gpt-5-codex"
    assert result.dropped == Counter({"orphan_tool_result": 1})
    assert _errors(_written(trace, tmp_path)) == []

    # An older rollout without user_message events: user items are the prompts.
    src2 = tmp_path / "old.jsonl"
    src2.write_text("\n".join([json.dumps(meta), line("response_item", prompt_item)]) + "\n")
    assert [(m["role"], m["content"]) for m in convert(src2)[0].messages] == [("user", "fix the bug")]
    assert convert(src2)[0].header["name"] == "fix the bug"
    # A long first prompt gives its first line, shortened; no prompt, no name.
    long_prompt = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "\n  " + "word " * 40 + "\nsecond line"}]}
    src2.write_text("\n".join([json.dumps(meta), line("response_item", long_prompt)]) + "\n")
    name = convert(src2)[0].header["name"]
    assert name.startswith("word word") and name.endswith("…") and len(name) == 80
    src2.write_text("\n".join([json.dumps(meta), line("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]})]) + "\n")
    assert "name" not in convert(src2)[0].header


def test_pi_sample_keeps_name_images_and_errors() -> None:
    """Pi: session name from session_info, image in a tool result becomes a counted placeholder."""
    result = convert_file(SAMPLES / "example_pi_session.jsonl")
    trace = result.traces[0]
    assert trace.header["name"].startswith("Issue: Prompts larger than the screen")
    assert trace.header["cwd"] == "/Users/badlogic/workspaces/pi-mono"
    assert result.dropped["image"] == 1
    assert any("[image: image/jpeg]" in m["content"] for m in trace.messages if m["role"] == "tool")
    errors = [m for m in trace.messages if m["role"] == "tool" and m["content"].startswith("Error")]
    assert len(errors) >= 6  # six isError results in the source
    assert all(m.get("model") == "claude-opus-4-5" for m in trace.messages if m["role"] == "assistant")


def test_droid_orphan_result_dropped_and_counted() -> None:
    """A result whose call is not in the file is dropped (STS cannot pair it) and counted."""
    result = convert_file(SAMPLES / "example_droid_session.jsonl")
    assert result.dropped["orphan_tool_result"] == 1
    trace = result.traces[0]
    assert not any(m.get("toolCallId") == "TodoWrite_1" for m in trace.messages)
    assert trace.header["name"] == "Question About Assistant Current Location"
    assert trace.messages[0]["role"] == "system" and trace.messages[0]["content"].startswith("<system-reminder>")


def test_hermes_seconds_become_milliseconds() -> None:
    """Hermes timestamps are epoch seconds; STS wants integer milliseconds."""
    src = _lines(SAMPLES / "example_hermes_session.jsonl")[0]
    trace = convert(SAMPLES / "example_hermes_session.jsonl")[0]
    first_user_src = next(m for m in src["messages"] if m["role"] == "user")
    first_user = next(m for m in trace.messages if m["role"] == "user")
    assert first_user["timestamp"] == round(first_user_src["timestamp"] * 1000)
    assert trace.header["timestamp"] == round(src["started_at"] * 1000)
    assert trace.header["name"] == src["title"]
    assert trace.messages[0] == {"role": "system", "content": src["system_prompt"], "timestamp": trace.header["timestamp"]}
    assert all(m["model"] == "moonshotai/Kimi-K2.6" for m in trace.messages if m["role"] == "assistant")


def test_hermes_many_sessions_inactive_and_repeated_call_ids(tmp_path: Path) -> None:
    """One trace per line; rewound messages skipped; an id reused by a later call gets a unique STS id."""

    def msg(role: str, content: str | None, t: float, **kw: Any) -> dict[str, Any]:
        return {"role": role, "content": content, "timestamp": t, "active": 1, **kw}

    def call() -> list[dict[str, Any]]:
        return [{"id": "functions.read:0", "type": "function", "function": {"name": "read", "arguments": '{"p": 1}'}}]

    s1 = {
        "id": "h1", "model": "m", "started_at": 1700000000.5, "title": "one",
        "messages": [
            msg("user", "go", 1700000001.0),
            msg("assistant", "", 1700000002.0, tool_calls=call()),
            msg("tool", "first", 1700000003.0, tool_call_id="functions.read:0"),
            msg("assistant", "", 1700000004.0, tool_calls=call()),
            msg("tool", "second", 1700000005.0, tool_call_id="functions.read:0"),
            {**msg("user", "rewound", 1700000006.0), "active": 0},
            msg("assistant", "ok", 1700000007.0),
        ],
    }
    s2 = {"id": "h2", "model": "m", "started_at": 1700000100, "messages": [msg("user", "hello", 1700000101)]}
    src = tmp_path / "hermes.jsonl"
    src.write_text(json.dumps(s1) + "\n" + json.dumps(s2) + "\n")
    result = convert_file(src, "hermes")
    assert [t.id for t in result.traces] == ["h1", "h2"]
    t1 = result.traces[0]
    ids = [c["id"] for m in t1.messages for c in m.get("toolCalls", ())]
    assert ids == ["functions.read:0", "functions.read:0#2"]
    assert [(m["toolCallId"], m["content"]) for m in t1.messages if m["role"] == "tool"] == [
        ("functions.read:0", "first"),
        ("functions.read:0#2", "second"),
    ]
    assert "rewound" not in [m["content"] for m in t1.messages]
    assert result.dropped["inactive_message"] == 1
    assert _errors(_written(t1, tmp_path)) == []


def test_pi_v1_linear(tmp_path: Path) -> None:
    """Pi v1 (no ids): the whole file in order; image placeholder; isError marked."""
    result = convert_file(FIXTURES / "pi_v1.jsonl")
    assert result.format == "pi"
    trace = result.traces[0]
    assert [m["role"] for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
    assert trace.messages[0]["content"] == "What is in this screenshot?\n[image: image/png]"
    assert trace.messages[1]["reasoningContent"] == "I should read the notes file first."
    assert trace.messages[1]["toolCalls"][0]["function"] == {"name": "read", "arguments": '{"path":"notes.md"}'}
    assert trace.messages[2]["content"] == "Error: ENOENT: notes.md"
    assert trace.messages[0]["timestamp"] == 1763632801000
    assert trace.header["version"] == 1 and trace.header["cwd"] == "/home/dev/project"
    assert result.dropped == Counter({"image": 1})
    assert _errors(_written(trace, tmp_path)) == []


def test_pi_v2_active_branch_and_all_branches(tmp_path: Path) -> None:
    """The active branch is the path from the last entry to the root; all_branches gives one trace per leaf."""
    path = FIXTURES / "pi_v2_branches.jsonl"
    (active,) = convert(path)
    contents = [m["content"] for m in active.messages]
    assert "Renamed helper to normalize_path (branch B); tests pass." in contents
    assert not any("branch A" in c for c in contents)
    assert active.id == "pi-v2-session"
    assert active.header["name"] == "Rename helper"
    roles = [m["role"] for m in active.messages]
    assert roles == ["user", "system", "system", "assistant", "tool", "user", "assistant"]
    assert active.messages[1]["content"].startswith("[branch summary]")
    assert active.messages[2]["content"] == "Prefer descriptive names."  # v2 hookMessage
    assert active.messages[5]["content"].startswith("Ran `pytest -q`")
    assert active.messages[3]["model"] == "gpt-5"

    branches = convert(path, all_branches=True)
    assert [t.id for t in branches] == ["pi-v2-session", "pi-v2-session-branch-e0000006"]
    assert branches[0].header["branch"] == {"leaf": "e0000012", "active": True}
    other = branches[1]
    assert [m["content"] for m in other.messages][-1] == "Renamed helper to do_thing (branch A)."
    assert other.messages[0]["content"] == "Rename the helper in utils.py"
    for t in branches:
        assert _errors(_written(t, tmp_path)) == []


def test_claude_code_sidechain_gets_its_own_trace(tmp_path: Path) -> None:
    """Subagent lines go to a separate trace; isMeta lines are system; images are counted placeholders."""
    result = convert_file(FIXTURES / "claude_sidechain.jsonl")
    main, side = result.traces
    assert main.id == "cc-side-1" and main.header["name"] == "Find the config loader"
    assert [m["role"] for m in main.messages] == ["user", "assistant", "tool", "system", "assistant"]
    assert main.messages[1]["reasoningContent"] == "Delegate the search."
    assert main.messages[2]["content"] == "It is in app/config.py line 12.\n[image: image/png]"
    assert side.id == "cc-side-1-agent-a1b2"
    assert side.header["parentSessionId"] == "cc-side-1" and side.header["agent_id"] == "a1b2"
    assert "parentToolCallId" not in side.header  # nothing in this file links the agent to its Task call
    assert side.header["name"] == "Find where config is loaded"  # its first prompt
    assert [m["role"] for m in side.messages] == ["user", "assistant", "tool", "assistant"]
    assert side.messages[1]["model"] == "claude-haiku-4-5"
    assert result.dropped == Counter({"image": 1})
    for t in (main, side):
        assert _errors(_written(t, tmp_path)) == []


def test_openai_json_file(tmp_path: Path) -> None:
    """A {"messages": [...]} JSON file: parallel calls paired, stray result dropped, image counted."""
    path = FIXTURES / "openai_messages.json"
    assert detect(path) == "openai"
    result = convert_file(path)
    (trace,) = result.traces
    assert trace.id == "chat-weather-1" and trace.header["name"] == "Weather in Paris"
    assert [m["role"] for m in trace.messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in trace.messages[2]["toolCalls"]] == ["call_paris", "call_lyon"]
    assert trace.messages[2]["content"] == "" and trace.messages[2]["model"] == "gpt-4o-mini"
    assert trace.messages[1]["content"] == "What's the weather in Paris and Lyon?\n[image: image/jpeg]"
    assert trace.messages[5]["reasoningContent"] == "Both calls returned."
    assert result.dropped == Counter({"image": 1, "orphan_tool_result": 1})
    assert _errors(_written(trace, tmp_path)) == []


def test_openai_jsonl_conversations_and_legacy_function_call(tmp_path: Path) -> None:
    """One trace per JSONL line; the legacy function_call / function pair becomes a paired call."""
    path = FIXTURES / "openai_chats.jsonl"
    assert detect(path) == "openai"
    t1, t2 = convert(path)
    assert [t1.id, t2.id] == ["openai_chats-1", "openai_chats-2"]
    assert t1.messages[1] == {"role": "assistant", "content": "Hi!", "model": "gpt-4o"}
    call = t2.messages[1]["toolCalls"][0]
    assert call["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    assert t2.messages[2] == {"role": "tool", "content": "5", "toolCallId": call["id"]}
    for t in (t1, t2):
        assert _errors(_written(t, tmp_path)) == []


def test_openai_one_message_per_line(tmp_path: Path) -> None:
    """A JSONL file of bare messages is one conversation named after the file."""
    src = tmp_path / "chat.jsonl"
    src.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello", "model": "x"}\n')
    assert detect(src) == "openai"
    (t,) = convert(src)
    assert t.id == "chat" and [m["role"] for m in t.messages] == ["user", "assistant"]


def test_detect_refuses_unknown_and_sts(tmp_path: Path) -> None:
    """Unsure detection raises a ValueError naming the file; an STS file is detected as STS."""
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": "world"}\n')
    with pytest.raises(ValueError, match="odd.jsonl"):
        detect(odd)
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("not json at all\n")
    with pytest.raises(ConvertError, match="garbage.txt"):
        convert(garbage)
    sts = tmp_path / "already.jsonl"
    sts.write_text(
        '{"type":"session","harness":"x","id":"a"}\n{"type":"message","message":{"role":"user","content":"hi"}}\n'
    )
    assert detect(sts) == "sts"
    with pytest.raises(ValueError, match="unknown source format"):
        convert(odd, "nope")
    # Naming the format skips detection.
    assert convert(FIXTURES / "pi_v1.jsonl", "openclaw")[0].header["harness"] == "pi"


def test_write_trace_is_exclusive_private_and_readable(tmp_path: Path) -> None:
    """write_trace writes header + envelopes, mode 0600, and never overwrites."""
    trace = Trace(
        header={"type": "session", "harness": "pi", "id": "w1", "name": "n"},
        messages=[{"role": "user", "content": "hi", "timestamp": 1}, {"role": "assistant", "content": "yo", "model": "m"}],
    )
    out = write_trace(trace, tmp_path / "sub" / "w1.jsonl")
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    lines = out.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert json.loads(lines[0]) == trace.header
    assert json.loads(lines[1]) == {"type": "message", "message": trace.messages[0]}
    back = read(out)
    assert back.header == trace.header and back.messages == trace.messages
    before = out.read_bytes()
    with pytest.raises(FileExistsError):
        write_trace(trace, out)
    assert out.read_bytes() == before


def test_output_name_is_safe() -> None:
    """File names come from the session id with unsafe characters replaced."""
    t = Trace(header={"type": "session", "harness": "x", "id": "../a b/c:d"})
    name = output_name(t)
    assert "/" not in name and name.endswith(".jsonl") and ".." not in name


def test_torn_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    """An agent that crashed mid-write leaves a torn line: skipped and counted, the rest converted."""
    src = tmp_path / "torn.jsonl"
    data = (FIXTURES / "pi_v1.jsonl").read_text()
    src.write_text(data + '{"type":"message","message":{"role":"user","con')
    result = convert_file(src)
    assert result.dropped["invalid_line"] == 1
    assert len(result.traces[0].messages) == 4


HERE = Path(__file__).resolve().parents[1]
WILD = HERE / "fixtures" / "convert-wild"


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _error_problems(path: Path) -> list[Any]:
    return [p for p in validate(path) if p.severity == "error"]


# -- Claude Code titles -----------------------------------------------------------

_WRAPPER = re.compile(r"^\s*(<(command-name|command-message|command-args|local-command-stdout)>|Caveat: The messages below)")


def _claude_first_prompt(path: Path) -> tuple[str, int]:
    """The first user turn typed by the user (not a command wrapper, not meta), and how many user lines hold text."""
    first, texts = None, 0
    for o in _json_lines(path):
        if o.get("type") != "user":
            continue
        c = o["message"]["content"]
        text = c if isinstance(c, str) else "\n".join(b["text"] for b in c if b.get("type") == "text")
        if not text:
            continue
        texts += 1
        if first is None and not o.get("isMeta") and not _WRAPPER.match(text):
            first = text
    assert first is not None
    return first, texts


# -- llama.app message trees ---------------------------------------------------------


def _llama(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """(header, active path, every root-to-leaf path), walking ``children`` down
    and ``parent`` up as llama.app does; the ``root`` row is no message."""
    rows = _json_lines(path)
    head, msgs = rows[0], [r["message"] for r in rows[1:]]
    by_id = {m["id"]: m for m in msgs}

    def up(node: dict[str, Any] | None) -> list[dict[str, Any]]:
        out = []
        while node is not None:
            if node["type"] != "root":
                out.append(node)
            node = by_id.get(node["parent"]) if node["parent"] else None
        return out[::-1]

    leaves = [m for m in msgs if not m["children"] and m["type"] != "root"]
    start = by_id.get(head.get("currNode") or "") or max(leaves, key=lambda m: m["timestamp"])
    return head, up(start), [up(leaf) for leaf in leaves]


LLAMA = ["llama_regenerated.jsonl", "llama_tools.jsonl"]


# -- Gemini CLI ------------------------------------------------------------------------

GEMINI = HERE / "fixtures" / "gemini"
GEMINI_RECORDINGS = ["session-2025-12-01T21-45-5b959dae.json", "session-2026-01-16T11-01-file-ops-37b7abef.json"]


def _source_gemini(path: Path) -> tuple[int, int, str]:
    """(calls, results, first prompt) of a chat recording or a checkpoint."""
    doc = json.loads(path.read_text())
    if isinstance(doc, dict):
        msgs = doc["messages"]
        calls = [c for m in msgs if m["type"] == "gemini" for c in m.get("toolCalls", [])]
        return len(calls), sum(1 for c in calls if c.get("result")), next(m["content"] for m in msgs if m["type"] == "user")
    calls = [p for c in doc if c["role"] == "model" for p in c["parts"] if "functionCall" in p]
    results = [p for c in doc if c["role"] == "user" for p in c["parts"] if "functionResponse" in p]
    prompts = [p["text"] for c in doc if c["role"] == "user" for p in c["parts"] if "text" in p]
    return len(calls), len(results), next(t for t in prompts if not t.startswith("This is the Gemini CLI."))


def _gemini_usage(path: Path) -> list[dict[str, int]]:
    out = []
    for m in json.loads(path.read_text())["messages"]:
        t = m.get("tokens")
        if m["type"] == "gemini" and t:
            out.append(
                {
                    "input": t["input"] - t["cached"] + t["tool"],
                    "output": t["output"] + t["thoughts"],
                    "cacheRead": t["cached"],
                    "cacheWrite": 0,
                    "totalTokens": t["total"],
                    "reasoning": t["thoughts"],
                }
            )
    return out


# -- OpenCode ------------------------------------------------------------------------------

OPENCODE = WILD / "opencode_export.json"


def _source_opencode(path: Path) -> tuple[int, int, str]:
    doc = json.loads(path.read_text())
    tools = [p for m in doc["messages"] for p in m["parts"] if p["type"] == "tool"]
    done = [p for p in tools if p["state"]["status"] in ("completed", "error")]
    first = next(p["text"] for m in doc["messages"] if m["info"]["role"] == "user" for p in m["parts"] if p["type"] == "text")
    return len(tools), len(done), first


# -- Cline ---------------------------------------------------------------------------------

CLINE = WILD / "cline" / "1745512345678" / "api_conversation_history.json"
_CLINE_RESULT = re.compile(r"^\[(\w+)(?: for .*)?\] Result:", re.S)


def _source_cline(path: Path) -> tuple[int, int, str]:
    """Calls are ``tool_use`` blocks; results the next user turn's ``[tool ...] Result:`` blocks."""
    doc = json.loads(path.read_text())
    calls = results = 0
    for i, m in enumerate(doc):
        if m["role"] != "assistant":
            continue
        uses = [b for b in m["content"] if b["type"] == "tool_use"]
        calls += len(uses)
        if i + 1 < len(doc):
            heads = [b["text"] for b in doc[i + 1]["content"] if b["type"] == "text" and _CLINE_RESULT.match(b["text"])]
            results += min(len(uses), len(heads))
    task = doc[0]["content"][0]["text"]
    return calls, results, task.split("<task>")[1].split("</task>")[0].strip()


@pytest.mark.parametrize("name", ["cc_clear.jsonl", "cc_init.jsonl"])
def test_claude_code_title_is_the_first_real_prompt_not_the_slash_command(name: str, tmp_path: Path) -> None:
    """``/clear`` and ``/init`` sessions are named by the prompt that follows the
    command; the wrapper turns stay in the trace, word for word."""
    src = WILD / name
    prompt, texts = _claude_first_prompt(src)
    [trace] = convert_file(src).traces
    title = trace.header["name"]
    assert title == " ".join(prompt.splitlines()[0].split())[:79].rstrip() + ("…" if len(prompt.splitlines()[0]) > 80 else "")
    assert not title.startswith("<") and "Caveat" not in title
    contents = [m["content"] for m in trace.messages if m["role"] in ("user", "system")]
    assert len(contents) == texts
    assert any(c.lstrip().startswith(("<command-name>", "<command-message>")) for c in contents)
    caveats = [m for m in trace.messages if m["content"].startswith("Caveat:")]
    assert all(m["role"] == "system" for m in caveats)
    assert _error_problems(write_trace(trace, tmp_path / "t.jsonl")) == []


@pytest.mark.parametrize("name", LLAMA)
def test_llama_tree_reads_as_its_active_path(name: str) -> None:
    """``read`` / ``iter_messages`` give the path root -> currNode: no placeholder,
    one reply where a regeneration left two; no final newline, ``harness`` first: fine."""
    from ststrace import iter_messages, read

    src = WILD / name
    assert not src.read_bytes().endswith(b"\n")
    head, active, _ = _llama(src)
    trace = read(src)
    assert [m["id"] for m in trace.messages] == [m["id"] for m in active]
    assert [m["id"] for m in iter_messages(src)] == [m["id"] for m in active]
    assert not any(m.get("type") == "root" for m in trace.messages)
    assert trace.messages[-1]["id"] == head["currNode"]
    assert _error_problems(src) == []
    from ststrace import read_tree

    assert [m["id"] for m in read_tree(src).messages] == [x["message"]["id"] for x in _json_lines(src)[1:]]


@pytest.mark.parametrize("name", LLAMA)
def test_llama_tree_converts_to_its_active_path_or_one_file_per_leaf(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ststrace.cli import main

    src = WILD / name
    head, active, every = _llama(src)
    [trace] = convert_file(src).traces
    assert [(m["role"], m["content"]) for m in trace.messages] == [(m["role"], m["content"]) for m in active]
    assert trace.header["harness"] == "llama.app" and trace.header["id"] == head["id"] and "currNode" not in trace.header
    calls = [tc["id"] for m in active for tc in m.get("toolCalls", [])]
    assert [tc["id"] for m in trace.messages for tc in m.get("toolCalls", [])] == calls
    assert [m["toolCallId"] for m in trace.messages if m["role"] == "tool"] == [m["toolCallId"] for m in active if m["role"] == "tool"]
    timed = [m for m in active if "timings" in m]
    assert [m["usage"]["output"] for m in trace.messages if "usage" in m] == [m["timings"]["predicted_n"] for m in timed]
    assert [m["usage"]["cacheRead"] for m in trace.messages if "usage" in m] == [m["timings"]["cache_n"] for m in timed]

    assert main(["convert", "--all-branches", str(src), "-o", str(tmp_path / "all")]) == 0
    capsys.readouterr()
    outs = sorted((tmp_path / "all").iterdir())
    assert len(outs) == len(every)
    got = sorted([m["message"]["content"] for m in _json_lines(o)[1:]] for o in outs)
    assert got == sorted([m["content"] for m in path] for path in every)
    assert all(_error_problems(o) == [] for o in outs)


@pytest.mark.parametrize("name", [*GEMINI_RECORDINGS, "checkpoint-auth-fix.json"])
def test_gemini_cli_sessions_convert_with_calls_results_and_usage(name: str, tmp_path: Path) -> None:
    """Real Gemini CLI chat recordings (and a checkpoint): every call and its result,
    paired; thoughts as reasoning; Gemini's token counts in the Pi shape (cached
    tokens out of input, thoughts in output) adding up to Gemini's own total."""
    src = GEMINI / name
    calls, results, prompt = _source_gemini(src)
    r = convert_file(src)
    assert r.format == "gemini"
    [trace] = r.traces
    assert trace.header["harness"] == "gemini-cli"
    msgs = trace.messages
    assert sum(len(m.get("toolCalls", [])) for m in msgs) == calls
    assert sum(1 for m in msgs if m["role"] == "tool") == results
    assert next(m["content"] for m in msgs if m["role"] == "user") == prompt
    assert trace.header["name"] == " ".join(prompt.splitlines()[0].split())[:80]
    if name.startswith("session-"):
        doc = json.loads(src.read_text())
        assert trace.id == doc["sessionId"]
        assert [m["usage"] for m in msgs if "usage" in m] == _gemini_usage(src)
        assert all(u["totalTokens"] == u["input"] + u["output"] + u["cacheRead"] for u in _gemini_usage(src))
        thoughts = sum(1 for m in doc["messages"] if m.get("thoughts"))
        assert sum(1 for m in msgs if "reasoningContent" in m) == thoughts
    else:
        assert [m["content"] for m in msgs if m["role"] == "tool"][-1] == "Error: Tool execution denied by user."
        assert msgs[0]["role"] == "system"  # the context turn the CLI sends first
    assert r.dropped == {}
    assert _error_problems(write_trace(trace, tmp_path / "t.jsonl")) == []


def test_opencode_export_one_message_per_step_with_its_tokens(tmp_path: Path) -> None:
    """Each model call (step-start .. step-finish) is one assistant message carrying that
    step's tokens and cost; tool parts give the call and, after it, the result (errors
    marked); a synthetic text part is a system message; an aborted reply says so."""
    calls, results, prompt = _source_opencode(OPENCODE)
    r = convert_file(OPENCODE)
    assert r.format == "opencode"
    [trace] = r.traces
    doc = json.loads(OPENCODE.read_text())
    assert (trace.id, trace.header["name"]) == (doc["info"]["id"], doc["info"]["title"])
    msgs = trace.messages
    assert sum(len(m.get("toolCalls", [])) for m in msgs) == calls
    assert sum(1 for m in msgs if m["role"] == "tool") == results
    assert next(m["content"] for m in msgs if m["role"] == "user") == prompt
    finishes = [p for m in doc["messages"] for p in m["parts"] if p["type"] == "step-finish"]
    usages = [m["usage"] for m in msgs if "usage" in m]
    assert len(usages) == len(finishes)
    for u, f in zip(usages, finishes):
        t = f["tokens"]
        assert u["totalTokens"] == t["input"] + t["output"] + t["reasoning"] + t["cache"]["read"] + t["cache"]["write"]
        assert (u["input"], u["cacheRead"], u["reasoning"]) == (t["input"], t["cache"]["read"], t["reasoning"])
        assert u["cost"]["total"] == pytest.approx(f["cost"])
    assert usages[0]["totalTokens"] == 8006  # the step's own total in the real log this shape comes from
    tool_texts = [m["content"] for m in msgs if m["role"] == "tool"]
    assert tool_texts[-1] == "Error: File is outside the allowed directories"
    assert [m["role"] for m in msgs][-3:] == ["system", "user", "assistant"]
    assert msgs[-1]["content"] == "Error: The operation was aborted."
    assert r.dropped == {"image": 1}
    assert _error_problems(write_trace(trace, tmp_path / "t.jsonl")) == []


def test_cline_task_pairs_results_by_order_and_keeps_clines_notes_apart(tmp_path: Path) -> None:
    calls, results, prompt = _source_cline(CLINE)
    r = convert_file(CLINE)
    assert r.format == "cline"
    [trace] = r.traces
    assert (trace.id, trace.header["name"]) == ("1745512345678", prompt)
    msgs = trace.messages
    ids = [c["id"] for m in msgs for c in m.get("toolCalls", [])]
    assert len(ids) == calls and [m["toolCallId"] for m in msgs if m["role"] == "tool"] == ids[:results]
    assert [m["content"] for m in msgs if m["role"] == "user"] == [prompt, "Use Math.round on cents."]
    assert all(not m["content"].startswith("<environment_details>") for m in msgs if m["role"] == "user")
    errors = [m for m in msgs if m["role"] == "tool" and m["content"].startswith("Error:")]
    assert len(errors) == 1 and "exit code 1" in errors[0]["content"]
    doc = json.loads(CLINE.read_text())
    tokens = [m["metrics"]["tokens"] for m in doc if m["role"] == "assistant"]
    assert [m["usage"] for m in msgs if "usage" in m] == [
        {"input": t["prompt"] - t["cached"], "output": t["completion"], "cacheRead": t["cached"], "cacheWrite": 0,
         "totalTokens": t["prompt"] + t["completion"]}
        for t in tokens
    ]
    assert _error_problems(write_trace(trace, tmp_path / "t.jsonl")) == []


def test_a_flat_sts_file_with_a_stray_curr_node_stays_flat() -> None:
    """Only messages linked by ``id`` / ``parent`` make a tree: a flat file whose
    header happens to carry ``currNode`` keeps every message."""
    import tempfile

    from ststrace import iter_messages, read

    rows = [
        {"type": "session", "harness": "x", "id": "s", "currNode": "nope"},
        {"type": "message", "message": {"role": "user", "content": "a"}},
        {"type": "message", "message": {"role": "assistant", "content": "b", "model": "m"}},
    ]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert [m["content"] for m in read(p).messages] == ["a", "b"]
        assert [m["content"] for m in iter_messages(p)] == ["a", "b"]


CC_MAIN = WILD / "cc-main-1.jsonl"
CC_AGENT = WILD / "cc-main-1" / "subagents" / "agent-a7f3c2d.jsonl"
HERMES_GATEWAY = WILD / "20260418_192600_a1b2c3d4.jsonl"


def _rows(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def _valid(trace: Trace, tmp_path: Path) -> Path:
    out = write_trace(trace, tmp_path / f"{len(list(tmp_path.iterdir()))}-{output_name(trace)}")
    assert [str(p) for p in validate(out) if p.severity == "error"] == []
    return out


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


# -- Codex: a prompt with images ------------------------------------------------


def test_codex_image_prompt_is_one_user_message(tmp_path: Path) -> None:
    """The <image>-wrapped prompt is one user message with one placeholder per image, counted once."""
    src = WILD / "codex_image_prompt.jsonl"
    images = sum(
        1
        for o in _rows(src)
        if o["type"] == "response_item" and o["payload"].get("role") == "user"
        for b in o["payload"]["content"]
        if b["type"] == "input_image"
    )
    prompts = [o["payload"]["message"] for o in _rows(src) if o["type"] == "event_msg" and o["payload"]["type"] == "user_message"]
    result = convert_file(src)
    (trace,) = result.traces
    users = [m["content"] for m in trace.messages if m["role"] == "user"]
    assert users == [
        f"{prompts[0]}\n[image: image/png]\n[image: image/jpeg]",
        prompts[1],
    ]
    systems = [m["content"] for m in trace.messages if m["role"] == "system"]
    assert not any(prompts[0] in s for s in systems)  # no system copy of the prompt
    assert not any("<image" in m["content"] for m in trace.messages)
    assert result.dropped == Counter({"image": images}) and images == 2
    _valid(trace, tmp_path)

    # The event first, then the item: the same single message and count.
    lines = src.read_text().splitlines()
    item = next(i for i, ln in enumerate(lines) if "input_image" in ln)
    lines[item], lines[item + 1] = lines[item + 1], lines[item]
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_text("\n".join(lines) + "\n")
    again = convert_file(swapped)
    assert again.traces[0].messages == trace.messages
    assert again.dropped == Counter({"image": 2})


# -- Claude Code -------------------------------------------------------------


def test_claude_title_from_own_summary_only(tmp_path: Path) -> None:
    """The title is a summary whose leafUuid is in the file, not the last summary (another session's)."""
    rows = _rows(CC_MAIN)
    uuids = {o.get("uuid") for o in rows}
    own = [o["summary"] for o in rows if o.get("type") == "summary" and o["leafUuid"] in uuids]
    assert rows[-1]["type"] == "summary" and rows[-1]["leafUuid"] not in uuids  # the trap
    main = convert_file(CC_MAIN).traces[0]
    assert main.header["name"] == own[-1] == "Checkout test currency mismatch"

    # With no summary of its own, the first prompt (first line, shortened) names it.
    no_own = tmp_path / "cc-main-1.jsonl"
    no_own.write_text("".join(json.dumps(o) + "\n" for o in rows if not (o.get("type") == "summary" and o["leafUuid"] in uuids)))
    trace = convert(no_own)[0]
    first_line = rows[2]["message"]["content"].splitlines()[0]
    assert len(first_line) > 80
    assert trace.header["name"] == first_line[:79].rstrip() + "…"


def test_claude_progress_blank_blocks_and_orphans_counted(tmp_path: Path) -> None:
    """progress / agent_progress lines are counted; blank text blocks vanish; an orphan in an empty subagent group is counted."""
    rows = _rows(CC_MAIN)
    progress = Counter("agent_progress" if o["data"]["type"] == "agent_progress" else "progress" for o in rows if o.get("type") == "progress")
    result = convert_file(CC_MAIN)
    assert result.dropped == Counter({**progress, "orphan_tool_result": 1})
    assert progress == Counter({"agent_progress": 2, "progress": 1})
    (main,) = result.traces  # the orphan-only subagent group yields no trace
    first = next(m for m in main.messages if m["role"] == "assistant")
    assert first["content"] == "Let me have a subagent search the test setup."
    assert [c["id"] for c in first["toolCalls"]] == ["toolu_task_1"]
    _valid(main, tmp_path)

    # The OpenClaw sample starts a reply with a "\n\n" text block.
    claw = convert(SAMPLES / "example_openclaw_session.jsonl")[0]
    assert next(m for m in claw.messages if m["role"] == "assistant")["content"].startswith("Hey! I just came online")


def test_claude_subagent_file_links_parent_and_counts_torn_line(tmp_path: Path) -> None:
    """A subagents/agent-*.jsonl file: its torn line is counted; the header names the parent session and Task call."""
    torn = sum(1 for line in CC_AGENT.read_text().splitlines() if line.strip() and not _parses(line))
    result = convert_file(CC_AGENT)
    assert torn == 1 and result.dropped == Counter({"invalid_line": 1})
    (trace,) = result.traces
    assert trace.id == "cc-main-1-agent-a7f3c2d"
    assert trace.header["parentSessionId"] == "cc-main-1"
    assert trace.header["parentToolCallId"] == "toolu_task_1"
    assert trace.header["name"] == "Find where the test currency is configured"
    assert [m["role"] for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
    _valid(trace, tmp_path)

    # Lines that do not say isSidechain / agentId: the subagents/agent-<id>.jsonl path does.
    bare = tmp_path / "cc-main-1" / "subagents" / CC_AGENT.name
    bare.parent.mkdir(parents=True)
    rows = [{k: v for k, v in o.items() if k not in ("isSidechain", "agentId")} for o in _rows(CC_AGENT)]
    bare.write_text("".join(json.dumps(o) + "\n" for o in rows))
    shutil.copy(CC_MAIN, tmp_path / CC_MAIN.name)
    (plain,) = convert(bare)
    assert plain.id == trace.id and plain.header["parentToolCallId"] == "toolu_task_1"
    assert plain.messages == trace.messages

    # Without the main file beside it, the call cannot be known; the session still can.
    alone = tmp_path / "x" / "subagents" / CC_AGENT.name
    alone.parent.mkdir(parents=True)
    shutil.copy(CC_AGENT, alone)
    header = convert(alone)[0].header
    assert header["parentSessionId"] == "cc-main-1" and "parentToolCallId" not in header


# -- Hermes ------------------------------------------------------------------------------


def test_hermes_gateway_transcript(tmp_path: Path) -> None:
    """A session_meta line then chat lines: harness hermes, id from the file name, models per meta line."""
    rows = _rows(HERMES_GATEWAY)
    assert detect(HERMES_GATEWAY) == "hermes"
    result = convert_file(HERMES_GATEWAY)
    (trace,) = result.traces
    assert trace.header["harness"] == "hermes" and trace.id == HERMES_GATEWAY.stem
    assert trace.header["model"] == rows[0]["model"] and trace.header["source"] == "telegram"
    assert trace.header["tools"] == ["terminal", "web_search"]
    chat = [o for o in rows if o["role"] != "session_meta"]
    assert [m["role"] for m in trace.messages] == [o["role"] for o in chat]
    assert [m.get("model") for m in trace.messages if m["role"] == "assistant"] == [
        "anthropic/claude-sonnet-4",
        "anthropic/claude-sonnet-4",
        "openai/gpt-5-mini",
    ]
    call = trace.messages[1]
    assert call["reasoningContent"] == "Check with df." and call["toolCalls"][0]["id"] == "call_df"
    assert trace.messages[2]["toolCallId"] == "call_df"
    assert trace.messages[0]["timestamp"] == 1776540365000  # naive ISO read as UTC
    assert result.dropped == Counter()
    assert convert_file(HERMES_GATEWAY, "hermes").traces[0].messages == trace.messages
    _valid(trace, tmp_path)


def test_hermes_pretty_printed_export(tmp_path: Path) -> None:
    """An indented JSON export (one session, or a list of them) is read whole, not line by line."""
    src = WILD / "hermes_export.json"
    session = json.loads(src.read_text())
    assert detect(src) == "hermes"
    (trace,) = convert(src)
    assert trace.id == session["id"] and trace.header["name"] == session["title"]
    assert [m["role"] for m in trace.messages] == ["system"] + [m["role"] for m in session["messages"]]
    listed = tmp_path / "two.json"
    listed.write_text(json.dumps([session, {**session, "id": "second"}], indent=2))
    assert [t.id for t in convert(listed, "hermes")] == [session["id"], "second"]
    _valid(trace, tmp_path)


# -- Droid ---------------------------------------------------------------------------------


def test_droid_message_model_and_compaction(tmp_path: Path) -> None:
    """Each assistant message keeps its own modelId (no sidecar needed); the compaction summary is a system message."""
    src = WILD / "droid_models.jsonl"
    rows = _rows(src)
    models = [o["message"]["modelId"] for o in rows if o.get("type") == "message" and o["message"]["role"] == "assistant"]
    summary = next(o["summaryText"] for o in rows if o.get("type") == "compaction_state")
    (trace,) = convert(src)
    assert [m["model"] for m in trace.messages if m["role"] == "assistant"] == models
    assert {"role": "system", "content": f"[compaction summary]\n{summary}", "timestamp": 1764684300000} in trace.messages
    # With a settings.json sidecar, the message's own model still wins.
    copy = tmp_path / "7d1e5c3b-2a4f-4b6d-8e9f-0a1b2c3d4e5f.jsonl"
    shutil.copy(src, copy)
    copy.with_suffix(".settings.json").write_text('{"model": "sidecar-model"}')
    (again,) = convert(copy)
    assert [m["model"] for m in again.messages if m["role"] == "assistant"] == models
    assert again.header["model"] == "sidecar-model"
    _valid(trace, tmp_path)


# -- Codex early rollouts -----------------------------------------------------------------


def test_codex_early_rollout(tmp_path: Path) -> None:
    """A first line without instructions is still a Codex meta line: detected, id and cwd kept, also with --from."""
    src = WILD / "codex_early.jsonl"
    meta = _rows(src)[0]
    assert "instructions" not in meta
    assert detect(src) == "codex"
    for from_ in (None, "codex"):
        (trace,) = convert(src, from_)
        assert trace.id == meta["id"] and trace.header["cwd"] == meta["cwd"]
        assert [m["role"] for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
        assert trace.messages[1]["reasoningContent"] == "Use ls."
    _valid(trace, tmp_path)


# -- bad input ----------------------------------------------------------


def test_json_dump_array_of_messages_is_openai(tmp_path: Path) -> None:
    """A one-line JSON array of messages (json.dump's output) is detected and converted as OpenAI messages."""
    rows = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a1", "type": "function", "function": {"name": "add", "arguments": '{"a":2,"b":3}'}}]},
        {"role": "tool", "tool_call_id": "a1", "content": "5"},
        {"role": "assistant", "content": "5"},
    ]
    src = tmp_path / "chat.jsonl"
    with open(src, "w") as f:
        json.dump(rows, f)
    assert "\n" not in src.read_text()
    assert detect(src) == "openai"
    (trace,) = convert(src)
    assert [m["role"] for m in trace.messages] == [r["role"] for r in rows]
    assert trace.messages[3]["toolCallId"] == "a1"
    _valid(trace, tmp_path)


def test_type_confused_input_is_counted_not_fatal(tmp_path: Path) -> None:
    """A block type that is a list, "tool_calls": 5, a list role: converted, the odd parts counted."""
    rows = [
        {"role": "user", "content": [{"type": ["text"], "text": "hello"}, {"type": 7, "image_url": "x"}]},
        {"role": "assistant", "content": "hi", "tool_calls": 5},
        {"role": ["assistant"], "content": "?"},
        {"role": "assistant", "content": "ok", "tool_calls": [5, {"id": [], "function": {"name": {}, "arguments": 3}}]},
    ]
    src = tmp_path / "confused.json"
    src.write_text(json.dumps(rows))
    result = convert_file(src)
    (trace,) = result.traces
    assert trace.messages[0]["content"].startswith("hello\n")
    assert result.dropped["invalid_tool_calls"] == 1 and result.dropped["invalid_tool_call"] == 1
    assert result.dropped["block:untyped"] == 1 and result.dropped["message:['assistant']"] == 1
    assert trace.messages[2]["toolCalls"][0]["function"] == {"name": "unknown", "arguments": "3"}
    _valid(trace, tmp_path)
