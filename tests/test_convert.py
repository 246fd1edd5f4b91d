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

SAMPLES = Path(__file__).resolve().parent / "fixtures" / "agent-traces"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "convert"



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
