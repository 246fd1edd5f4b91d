"""Shared set-up for the agent-framework tests (each runs the real framework
against the local fake server on 127.0.0.1).

Set before any framework is imported: none of them may send telemetry or
fetch anything from the internet (the network guard in ``tests/conftest.py``
fails the test if one tries).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

# CrewAI's telemetry and tracing; LiteLLM's price list; huggingface_hub's
# telemetry. Only flags that switch telemetry off: OTEL_SDK_DISABLED would also
# switch off the OpenTelemetry tests elsewhere in the suite, so test_crewai sets
# it per test.
for _name, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}.items():
    os.environ.setdefault(_name, _value)

import pytest  # noqa: E402

from test_decorators_helpers import assert_paired, calls_by_id, valid_messages  # noqa: E402
from test_instrument_helpers import instrumented  # noqa: E402


def _messages_of(path: Path) -> list[dict[str, Any]]:
    """The trace's messages without timestamps and usage, after checking that it validates,
    that every result follows its call, that every call is answered exactly
    once and that every message carries an integer timestamp."""
    messages = valid_messages(path)
    assert_paired(messages)
    answered = {m["toolCallId"] for m in messages if m["role"] == "tool"}
    unanswered = set(calls_by_id(messages)) - answered
    assert not unanswered, f"tool calls without a result: {sorted(unanswered)}"
    out = []
    for m in messages:
        m = dict(m)
        ts = m.pop("timestamp", None)
        assert isinstance(ts, int) and ts > 1_600_000_000_000, f"bad timestamp in {m}"
        # Token usage is the provider's count (checked in tests/core/test_usage.py);
        # here it must only be well formed where present.
        usage = m.pop("usage", None)
        assert usage is None or (m["role"] == "assistant" and isinstance(usage.get("totalTokens"), int)), m
        # Tool schemas are checked in tests/frameworks/test_framework_tool_schemas.py;
        # here they must only be well formed where present.
        tools = m.pop("tools", None)
        assert tools is None or all(t["type"] == "function" and t["function"]["name"] for t in tools), m
        out.append(m)
    return out


@pytest.fixture
def messages_of() -> Callable[[Path], list[dict[str, Any]]]:
    """``messages_of(path)``: the checked messages of a finished trace, timestamps stripped."""
    return _messages_of


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """Where the test's session writes."""
    return tmp_path / "trace.jsonl"


@pytest.fixture
def instrumented_all() -> Iterator[None]:
    """``ststrace.instrument()`` with no names, as a user writes it; afterwards
    every original method must be back (a test file may narrow this fixture)."""
    with instrumented():
        yield
