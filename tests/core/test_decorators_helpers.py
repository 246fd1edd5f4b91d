"""Helpers shared by the decorator tests (``test_tool*``, ``test_llm*``,
``test_context*``), plus the tests that prove the helpers themselves can fail."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import ststrace


def valid_messages(path: Path) -> list[dict[str, Any]]:
    """The messages of the trace at *path*, after asserting it validates with no errors."""
    errors = [p for p in ststrace.validate(path) if p.severity == "error"]
    assert not errors, "trace does not validate:\n" + "\n".join(map(str, errors))
    return ststrace.read(path).messages


def tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "tool"]


def calls_by_id(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every tool call in the trace, by id: ``{"name", "arguments", "index"}``."""
    out: dict[str, dict[str, Any]] = {}
    for i, m in enumerate(messages):
        for c in m.get("toolCalls", ()):
            out[c["id"]] = {"name": c["function"]["name"], "arguments": c["function"]["arguments"], "index": i}
    return out


def assert_paired(messages: list[dict[str, Any]]) -> None:
    """Every tool result follows the call it answers; no id answered twice."""
    calls = calls_by_id(messages)
    seen: set[str] = set()
    for i, m in enumerate(messages):
        if m["role"] != "tool":
            continue
        cid = m["toolCallId"]
        assert cid in calls and calls[cid]["index"] < i, f"result {i} answers no earlier call: {m}"
        assert cid not in seen, f"{cid} answered twice"
        seen.add(cid)


def trace_dir_files() -> list[str]:
    """Files under the default trace directory the test fixture isolates."""
    root = os.environ["STSTRACE_DIR"]
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]


def test_valid_messages_rejects_an_orphan_result(tmp_path: Path) -> None:
    """The helper fails on a trace whose tool result answers no call."""
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"type":"session","harness":"h","id":"x"}\n'
        '{"type":"message","message":{"role":"tool","toolCallId":"nope","content":"r"}}\n'
    )
    with pytest.raises(AssertionError, match="orphan-tool-result"):
        valid_messages(path)


def test_assert_paired_rejects_a_result_before_its_call() -> None:
    """The pairing check fails when a result precedes its call."""
    msgs: list[dict[str, Any]] = [
        {"role": "tool", "toolCallId": "a", "content": ""},
        {"role": "assistant", "content": "", "toolCalls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]},
    ]
    with pytest.raises(AssertionError):
        assert_paired(msgs)
