"""Token usage carried over by the Claude Code, Codex and Droid converters (issue 24 item 6).

The expected counts come from small parsers written here, apart from the
converters: Claude Code's last ``usage`` per API response (``message.id``),
Codex's ``last_token_usage`` of each ``token_count`` event whose running total
changed, Droid's ``tokenUsage`` in the settings file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from hub_loader import hub_detects, offline
from ststrace import validate
from ststrace._convert import convert_file
from ststrace.cli import main

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "agent-traces"
KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _claude_source(path: Path) -> list[dict[str, int]]:
    """Per API response, in order: Anthropic counts (input excludes the cache)."""
    last: dict[str, dict[str, Any]] = {}
    for o in _lines(path):
        if o.get("type") == "assistant" and not o.get("isSidechain"):
            last[o["message"]["id"]] = o["message"]["usage"]
    out = []
    for u in last.values():
        i, w, r, n = u["input_tokens"], u["cache_creation_input_tokens"], u["cache_read_input_tokens"], u["output_tokens"]
        out.append({"input": i, "output": n, "cacheRead": r, "cacheWrite": w, "totalTokens": i + n + r + w})
    return out


def _codex_source(path: Path) -> list[dict[str, int]]:
    """Per model call: ``input_tokens`` there includes the cached ones."""
    out, seen = [], None
    for o in _lines(path):
        p = o.get("payload") or {}
        if o.get("type") != "event_msg" or p.get("type") != "token_count" or not p.get("info"):
            continue
        if p["info"]["total_token_usage"] == seen:
            continue
        seen = p["info"]["total_token_usage"]
        u = p["info"]["last_token_usage"]
        out.append(
            {
                "input": u["input_tokens"] - u["cached_input_tokens"],
                "output": u["output_tokens"],
                "cacheRead": u["cached_input_tokens"],
                "cacheWrite": 0,
                "totalTokens": u["total_tokens"],
                "reasoning": u["reasoning_output_tokens"],
            }
        )
    return out


def _usages(path: Path) -> list[dict[str, Any]]:
    [trace] = convert_file(path).traces
    assert validate(_write(trace, path.parent)) == []
    return [m["usage"] for m in trace.messages if "usage" in m]


def _write(trace: Any, where: Path) -> Path:
    from ststrace import write_trace

    out = where / "out" / "t.jsonl"
    if out.exists():
        out.unlink()
    return write_trace(trace, out)


def test_claude_code_replies_carry_anthropic_usage_with_cache_apart(tmp_path: Path) -> None:
    """One usage per API response (its last line's: the final output count), cache
    reads and writes kept apart from input, and the four adding up to the total."""
    src = shutil.copy(SAMPLES / "example_claude_code.jsonl", tmp_path / "s.jsonl")
    expected = _claude_source(Path(src))
    got = _usages(Path(src))
    assert len(expected) == 12 and got == expected
    assert all(u["totalTokens"] == sum(u[k] for k in KEYS[:4]) for u in got)
    assert got[0] == {"input": 3, "output": 146, "cacheRead": 11350, "cacheWrite": 11273, "totalTokens": 22772}


def test_codex_token_count_events_become_each_replys_usage(tmp_path: Path) -> None:
    """A ``token_count`` repeated with the same running total is not a new call;
    cached input is taken out of ``input``; reasoning stays the part of output it is."""
    src = Path(shutil.copy(SAMPLES / "example_codex_session.jsonl", tmp_path / "s.jsonl"))
    expected = _codex_source(src)
    got = _usages(src)
    assert len(expected) == 14 and got == expected
    assert got[2] == {"input": 767, "output": 254, "cacheRead": 13184, "cacheWrite": 0, "totalTokens": 14205, "reasoning": 51}


def test_codex_counts_go_to_the_reply_before_them(tmp_path: Path) -> None:
    """Each call's counts land on the assistant message its items built, not on a later one."""
    lines = [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "s1", "cwd": "/w"}},
        {"timestamp": "2026-01-01T00:00:01Z", "type": "event_msg", "payload": {"type": "user_message", "message": "hi"}},
        {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}},
        {"timestamp": "2026-01-01T00:00:01Z", "type": "event_msg", "payload": {"type": "token_count", "info": None, "rate_limits": {}}},
        {"timestamp": "2026-01-01T00:00:02Z", "type": "response_item", "payload": {"type": "function_call", "name": "ls", "arguments": "{}", "call_id": "c1"}},
        {"timestamp": "2026-01-01T00:00:02Z", "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 9, "reasoning_output_tokens": 0, "total_tokens": 109},
            "last_token_usage": {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 9, "reasoning_output_tokens": 0, "total_tokens": 109}}}},
        {"timestamp": "2026-01-01T00:00:03Z", "type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "a b"}},
        {"timestamp": "2026-01-01T00:00:03Z", "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 9, "reasoning_output_tokens": 0, "total_tokens": 109},
            "last_token_usage": {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 9, "reasoning_output_tokens": 0, "total_tokens": 109}}}},
        {"timestamp": "2026-01-01T00:00:04Z", "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two files"}]}},
        {"timestamp": "2026-01-01T00:00:04Z", "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": 220, "cached_input_tokens": 140, "output_tokens": 14, "reasoning_output_tokens": 2, "total_tokens": 234},
            "last_token_usage": {"input_tokens": 120, "cached_input_tokens": 100, "output_tokens": 5, "reasoning_output_tokens": 2, "total_tokens": 125}}}},
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    [trace] = convert_file(path).traces
    assert [(m["role"], m.get("usage")) for m in trace.messages] == [
        ("user", None),
        ("assistant", {"input": 60, "output": 9, "cacheRead": 40, "cacheWrite": 0, "totalTokens": 109, "reasoning": 0}),
        ("tool", None),
        ("assistant", {"input": 20, "output": 5, "cacheRead": 100, "cacheWrite": 0, "totalTokens": 125, "reasoning": 2}),
    ]


def test_droid_session_totals_from_the_settings_file(tmp_path: Path) -> None:
    """Droid keeps totals per session (``tokenUsage`` in ``<id>.settings.json``): the header's ``usage``."""
    src = Path(shutil.copy(SAMPLES / "example_droid_session.jsonl", tmp_path / "s.jsonl"))
    sid = _lines(src)[0]["id"]
    settings = {
        "model": "claude-opus-4-5-20251101",
        "tokenUsage": {"inputTokens": 1200, "outputTokens": 340, "cacheCreationTokens": 5000, "cacheReadTokens": 90000, "thinkingTokens": 45},
    }
    (tmp_path / f"{sid}.settings.json").write_text(json.dumps(settings))
    [trace] = convert_file(src).traces
    assert trace.header["usage"] == {
        "input": 1200, "output": 340, "cacheRead": 90000, "cacheWrite": 5000, "totalTokens": 96540, "reasoning": 45,
    }
    assert not any("usage" in m for m in trace.messages)
    assert [p for p in validate(_write(trace, tmp_path)) if p.severity == "error"] == []


def test_summary_says_what_usage_was_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The summary line names the replies whose usage was kept and their tokens
    (it said "dropped: nothing" while dropping it); ``stats`` totals them."""
    src = tmp_path / "in"
    src.mkdir()
    for name in ("example_claude_code.jsonl", "example_codex_session.jsonl"):
        shutil.copy(SAMPLES / name, src / name)
    expected = _claude_source(src / "example_claude_code.jsonl") + _codex_source(src / "example_codex_session.jsonl")
    tokens = sum(u["totalTokens"] for u in expected)
    assert main(["convert", str(src), "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert f"token usage kept: {len(expected)} replies, {tokens:,} tokens" in out
    assert main(["stats", "--json", str(tmp_path / "out")]) == 0
    total = json.loads(capsys.readouterr().out)["total"]["usage"]
    assert total["totalTokens"] == tokens
    assert total["cacheRead"] == sum(u["cacheRead"] for u in expected)


def test_usage_survives_to_pi_and_the_hub_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--to pi`` writes each reply's usage in Pi's own shape, and the Hub's loader still takes the file for a trace."""
    offline(monkeypatch)
    src = Path(shutil.copy(SAMPLES / "example_claude_code.jsonl", tmp_path / "s.jsonl"))
    assert main(["convert", "--to", "pi", str(src), "-o", str(tmp_path / "pi")]) == 0
    capsys.readouterr()
    [out] = (tmp_path / "pi").iterdir()
    pi_usage = [o["message"]["usage"] for o in _lines(out) if o.get("type") == "message" and o["message"]["role"] == "assistant"]
    assert [{k: u[k] for k in KEYS} for u in pi_usage] == _claude_source(src)
    sid = next(o["sessionId"] for o in _lines(src) if "sessionId" in o)
    detected, session_id, prompt = hub_detects(out, tmp_path / "cache")
    assert (detected, session_id) == (True, sid)
    assert isinstance(prompt, str) and prompt


def test_hermes_session_totals_in_the_header_and_in_stats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Hermes counts per session (``input_tokens`` apart from the cache): the header's
    ``usage``; ``stats`` counts a header total when no reply carries usage."""
    src = Path(shutil.copy(SAMPLES / "example_hermes_session.jsonl", tmp_path / "h.jsonl"))
    row = json.loads(src.read_text().splitlines()[0])
    expected = {
        "input": row["input_tokens"],
        "output": row["output_tokens"],
        "cacheRead": row["cache_read_tokens"],
        "cacheWrite": row["cache_write_tokens"],
        "totalTokens": row["input_tokens"] + row["output_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"],
    }
    [trace] = convert_file(src).traces
    assert trace.header["usage"] == expected
    assert main(["convert", str(src), "-o", str(tmp_path / "out")]) == 0
    assert f"token usage kept: 1 session total, {expected['totalTokens']:,} tokens" in capsys.readouterr().out
    assert main(["stats", "--json", str(tmp_path / "out")]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["usage"] == expected
