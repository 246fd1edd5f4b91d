"""Shared pieces of the instrumentation tests (``test_instrument*``,
``test_integration_*``): the conversation, the replies the fake server scripts,
patch snapshots, and the tests that prove the helpers themselves can fail."""

from __future__ import annotations

import importlib
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import ststrace
from ststrace import _instrument
from ststrace._instrument import INTEGRATIONS, _canonical, instrumented as patched_now
from ststrace.testing import FakeAPI
from test_decorators_helpers import assert_paired, valid_messages

MODEL = "gpt-test"
SYSTEM = "You are a concise assistant. Use the tools for facts."
USER = "What's the weather in Paris, and the time there?"
REASONING_TOOLS = "I should call get_weather and get_time."
REASONING_TEXT = "A short greeting is enough here."
REASONING_ANSWER = "The tool results answer the question."
PREAMBLE = "Let me look that up."
TEXT_REPLY = "Hello from the fake API."
WEATHER_RESULT = "Sunny, 21 C"
TIME_RESULT = "15:00"

WEATHER_ARGS = '{"city":"Paris"}'
TIME_ARGS = '{"tz":"Europe/Paris"}'

CHAT_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time in an IANA time zone.",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
        },
    },
]
RESPONSES_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"], "strict": True}
    for t in CHAT_TOOLS
]
ANTHROPIC_TOOLS: list[dict[str, Any]] = [
    {"name": t["function"]["name"], "description": t["function"]["description"], "input_schema": t["function"]["parameters"]}
    for t in CHAT_TOOLS
]


def chat_messages() -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]


def tool_calls(prefix: str) -> list[dict[str, Any]]:
    """The two calls the fake model makes, with the provider's id prefix (``call_`` / ``toolu_``)."""
    return [
        {"id": f"{prefix}weather01", "function": {"name": "get_weather", "arguments": WEATHER_ARGS}},
        {"id": f"{prefix}time02", "function": {"name": "get_time", "arguments": TIME_ARGS}},
    ]


def tool_reply(prefix: str = "call_", model: str = MODEL, reasoning: bool = True) -> dict[str, Any]:
    """The assistant message the fake server's tool-asking reply must record as."""
    msg: dict[str, Any] = {"role": "assistant", "content": PREAMBLE}
    if reasoning:
        msg["reasoningContent"] = REASONING_TOOLS
    msg["toolCalls"] = tool_calls(prefix)
    msg["model"] = model
    return msg


def text_reply(model: str = MODEL, reasoning: bool = True) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": TEXT_REPLY}
    if reasoning:
        msg["reasoningContent"] = REASONING_TEXT
    msg["model"] = model
    return msg


def answer_reply(api: FakeAPI, model: str = MODEL, reasoning: bool = True) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": api.answer_for([WEATHER_RESULT, TIME_RESULT])}
    if reasoning:
        msg["reasoningContent"] = REASONING_ANSWER
    msg["model"] = model
    return msg


INPUTS = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]


def strip(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without their timestamps (which must be present and integers),
    token usage (whose values are checked in tests/core/test_usage.py) and tool
    schemas (checked, with the message that carries them, in tests/core/test_tool_schemas.py)."""
    out = []
    for m in messages:
        m = dict(m)
        m.pop("usage", None)
        m.pop("tools", None)
        ts = m.pop("timestamp", None)
        assert isinstance(ts, int) and ts > 1_600_000_000_000, f"bad timestamp in {m}"
        out.append(m)
    return out


def new_trace(tmp_path: Path) -> Path:
    return tmp_path / f"{uuid.uuid4().hex}.jsonl"


def recorded(path: Path) -> list[dict[str, Any]]:
    """The messages of a finished trace, validated (no errors), pairing checked, timestamps stripped."""
    messages = valid_messages(path)
    assert_paired(messages)
    return strip(messages)


def assistants(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "assistant"]


_FAKE_ID = re.compile(r"(fake|req_fake)\d{4}")


def normalised(value: Any) -> str:
    """JSON text of *value* with the fake server's per-request ids blanked, so two
    runs of the same call compare equal."""

    def default(obj: Any) -> Any:
        dump = getattr(obj, "model_dump", None)
        if callable(dump):
            return dump(mode="json", warnings=False)
        if hasattr(obj, "__dataclass_fields__"):
            return {k: getattr(obj, k) for k in obj.__dataclass_fields__}
        return repr(obj)

    return _FAKE_ID.sub(r"\1NNNN", json.dumps(value, default=default, sort_keys=True))


# --------------------------------------------------------------------------- patches


def targets(name: str) -> dict[str, Any]:
    """``"module:Owner.attr" -> the object there now`` for every method *name* patches."""
    spec = importlib.import_module(INTEGRATIONS[_canonical(name)])
    out: dict[str, Any] = {}
    optional = getattr(spec, "OPTIONAL", frozenset())
    for modules, path, *_ in spec.TARGETS:
        try:
            found = _instrument._resolve(modules, path)
        except ststrace.InstrumentationError:
            assert path in optional, f"{name}: required target {path} is missing"
            continue
        owner, attr = found.owner, found.attr
        module_name = getattr(owner, "__module__", modules)
        # A method the class only inherits is patched on the class and deleted
        # again on undo: "not its own attribute" is the state to restore.
        own = owner.__dict__.get(attr, "<inherited>") if isinstance(owner, type) else getattr(owner, attr)
        out[f"{module_name}:{path}"] = own
    return out


@contextmanager
def instrumented(*names: str) -> Iterator[None]:
    """Instrument *names* for the block; afterwards (everything uninstrumented)
    every original method must be back and no lazy patch left waiting."""
    before = {n: targets(n) for n in names}
    assert not patched_now(), "a previous test left a library instrumented"
    ststrace.instrument(*names)
    try:
        yield
    finally:
        ststrace.uninstrument()
        assert not _instrument._wanted
        after = {n: targets(n) for n in names}
        for n in names:
            for where, original in before[n].items():
                assert after[n][where] is original, f"uninstrument did not restore {where}"


@pytest.fixture
def patched() -> Iterator[None]:
    """openai, anthropic and huggingface_hub instrumented for one test."""
    with instrumented("openai", "anthropic", "huggingface_hub"):
        yield


# --------------------------------------------------------------------------- the helpers can fail


def test_strip_rejects_a_missing_timestamp() -> None:
    """``strip`` fails on a message without a timestamp."""
    with pytest.raises(AssertionError):
        strip([{"role": "user", "content": "x"}])


def test_normalised_tells_different_replies_apart() -> None:
    """Only the per-request fake ids are blanked; other differences remain."""
    assert normalised({"id": "chatcmpl-fake0001"}) == normalised({"id": "chatcmpl-fake0002"})
    assert normalised({"id": "chatcmpl-fake0001", "x": 1}) != normalised({"id": "chatcmpl-fake0001", "x": 2})


def test_instrumented_detects_a_patch_left_behind() -> None:
    """The context manager fails if a method is not restored on exit."""
    import openai.resources.chat.completions.completions as mod

    original = mod.Completions.__dict__["create"]
    with pytest.raises(AssertionError, match="did not restore"):
        with instrumented("openai"):
            ststrace.uninstrument("openai")
            mod.Completions.create = lambda *a, **k: None  # type: ignore[method-assign]
    mod.Completions.create = original  # type: ignore[method-assign]
    assert targets("openai")["openai.resources.chat.completions.completions:Completions.create"] is original
