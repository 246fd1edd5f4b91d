"""Tool schemas: built from ``@tool`` functions, read from the providers' ``tools=``
(real SDKs against the fake server), recorded once per session as the ``tools``
field of a message, and redacted like any other field."""

from __future__ import annotations

import enum
import importlib.util
import json
from pathlib import Path
from typing import Any, Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field

import ststrace
from ststrace import Session, tool
from ststrace._tools import definition, definitions, function_schema, merge
from ststrace.testing import FakeAPI
from test_decorators_helpers import valid_messages
from test_instrument_helpers import (
    ANTHROPIC_TOOLS,
    CHAT_TOOLS,
    MODEL,
    RESPONSES_TOOLS,
    SYSTEM,
    USER,
    chat_messages,
    instrumented,
    new_trace,
)


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Address(BaseModel):
    street: str
    number: int = Field(description="House number")


def forecast(
    city: str,
    days: int = 3,
    unit: Unit = Unit.CELSIUS,
    detail: Literal["short", "long"] = "short",
    hours: Optional[list[int]] = None,
    scale: Union[int, float] = 1,
    address: Address | None = None,
) -> str:
    """Forecast the weather for a city.

    Args:
        city: The city, e.g. Paris.
        days: How many days ahead,
            from 1 to 7.
        unit: The temperature unit.
        detail: How much to say (choices: ["short", "long"])
        hours: Hours of the day to report.
        scale: A factor.
        address: Where exactly.

    Returns:
        The forecast.
    """
    return "sunny"


FORECAST_PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris."},
        "days": {"type": "integer", "description": "How many days ahead, from 1 to 7."},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "The temperature unit."},
        "detail": {"type": "string", "enum": ["short", "long"], "description": "How much to say"},
        "hours": {"type": "array", "items": {"type": "integer"}, "nullable": True, "description": "Hours of the day to report."},
        "scale": {"type": ["integer", "number"], "description": "A factor."},
        "address": {**Address.model_json_schema(), "nullable": True, "description": "Where exactly."},
    },
    "required": ["city"],
}


def test_function_schema_from_signature_hints_and_docstring() -> None:
    """Defaults make a parameter optional; Optional, Enum, Literal, lists,
    unions and pydantic models map as get_json_schema maps them; the docstring
    gives the descriptions and a (choices: ...) list."""
    assert function_schema(forecast) == {
        "type": "function",
        "function": {"name": "forecast", "description": "Forecast the weather for a city.", "parameters": FORECAST_PARAMETERS},
    }


def test_function_schema_without_hints_or_docstring_accepts_anything() -> None:
    def legacy(self: Any, a, b=2, *rest, **extra):  # type: ignore[no-untyped-def]
        return a

    assert function_schema(legacy, "legacy_tool") == {
        "type": "function",
        "function": {"name": "legacy_tool", "parameters": {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"]}},
    }


def test_rest_style_docstring() -> None:
    def f(x: str) -> str:
        """Echo.

        :param x: The text.
        :returns: The same.
        """
        return x

    fn = function_schema(f)["function"]
    assert fn["description"] == "Echo."
    assert fn["parameters"]["properties"] == {"x": {"type": "string", "description": "The text."}}


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed")
def test_same_schema_as_transformers_get_json_schema() -> None:
    from transformers.utils import get_json_schema

    def simple(city: str, days: int = 3, unit: Optional[Literal["c", "f"]] = None, hours: list[int] | None = None) -> str:
        """Forecast.

        Args:
            city: The city.
            days: Days ahead.
            unit: The unit.
            hours: Hours.
        """
        return ""

    theirs = get_json_schema(simple)
    theirs["function"].pop("return", None)
    assert function_schema(simple) == theirs


def test_tool_decorator_builds_the_schema_once_and_takes_an_override() -> None:
    decorated = tool(forecast)
    assert decorated._self_ststrace_schema == function_schema(forecast)  # type: ignore[attr-defined]
    whole = {"name": "fc", "description": "Given.", "parameters": {"type": "object", "properties": {}}}
    assert tool(schema=whole)(forecast)._self_ststrace_schema == {"type": "function", "function": whole}  # type: ignore[attr-defined]
    params = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert tool(name="search", schema=params)(forecast)._self_ststrace_schema == {  # type: ignore[attr-defined]
        "type": "function",
        "function": {"name": "search", "parameters": params},
    }
    with pytest.raises(ValueError, match="@tool\\(schema=...\\) for 'forecast'"):
        tool(schema=[1, 2])(forecast)  # type: ignore[arg-type]


def test_provider_shapes_normalise_to_one() -> None:
    """OpenAI Chat, Responses, Anthropic, Gemini and Bedrock tool lists give the
    same definitions; built-in tools without a schema are left out."""
    want = [{**t, "function": {**t["function"]}} for t in CHAT_TOOLS]
    assert definitions(CHAT_TOOLS) == want
    assert definitions(ANTHROPIC_TOOLS) == want
    no_description = [{"type": "function", "function": {"name": t["function"]["name"], "parameters": t["function"]["parameters"], "strict": True}} for t in CHAT_TOOLS]
    assert definitions(RESPONSES_TOOLS + [{"type": "web_search"}]) == no_description
    gemini = [{"function_declarations": [{"name": t["function"]["name"], "description": t["function"]["description"],
               "parameters": {"type": "OBJECT", "properties": {k: {"type": "STRING"} for k in t["function"]["parameters"]["properties"]},
                              "required": t["function"]["parameters"]["required"]}} for t in CHAT_TOOLS]}]
    assert definitions(gemini) == want
    bedrock = {"tools": [{"toolSpec": {"name": t["function"]["name"], "description": t["function"]["description"],
                                       "inputSchema": {"json": t["function"]["parameters"]}}} for t in CHAT_TOOLS]}
    assert definitions(bedrock) == want
    assert definition({"type": "bash_20250124", "name": "bash"}) is None
    assert definitions("not a list") == []


def test_merge_keeps_the_first_definition_of_a_name() -> None:
    a = {"type": "function", "function": {"name": "a", "description": "first"}}
    a2 = {"type": "function", "function": {"name": "a", "description": "second"}}
    b = {"type": "function", "function": {"name": "b"}}
    assert merge([[a], [a2, b], None]) == [a, b]


# -- recording -----------------------------------------------------------------------


def _lines(path: Path) -> list[dict[str, Any]]:
    return valid_messages(path)


def test_tool_schema_recorded_on_first_call_in_each_session(tmp_path: Path) -> None:
    """The first call of a @tool in a session writes its schema on the call's
    message; later calls and other tools' calls write only what is new."""
    get = tool(forecast)

    @tool
    def other(x: int) -> int:
        """Other."""
        return x

    for name in ("a", "b"):
        path = tmp_path / f"{name}.jsonl"
        with Session(path):
            get("Paris")
            get("Rome")
            other(1)
        msgs = _lines(path)
        carriers = [(i, m["role"], m.get("tools")) for i, m in enumerate(msgs) if "tools" in m]
        assert carriers == [
            (0, "assistant", [function_schema(forecast)]),
            (4, "assistant", [function_schema(other, "other")]),
        ]


def test_s_tools_by_hand_once_per_distinct_set(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.tools(ANTHROPIC_TOOLS)
        s.user("one")
        s.tools(list(reversed(CHAT_TOOLS)))  # the same set: nothing new
        s.user("two")
        s.tools([forecast])
        s.user("three")
        s.tools(ANTHROPIC_TOOLS)  # seen before in this session
        s.user("four")
    msgs = _lines(path)
    assert [m.get("tools") for m in msgs] == [CHAT_TOOLS, None, [function_schema(forecast)], None]
    assert s.stats()["lost"] == 0


def test_s_tools_refuses_what_is_not_a_tool(tmp_path: Path) -> None:
    with Session(tmp_path / "t.jsonl") as s:
        with pytest.raises(ValueError, match=r"tools\[1\]: not a tool definition"):
            s.tools([CHAT_TOOLS[0], {"description": "no name"}])
        with pytest.raises(ValueError, match="tools must be a list"):
            s.tools({"name": "x"})  # type: ignore[arg-type]
        s.user("hi")
    assert "tools" not in _lines(tmp_path / "t.jsonl")[0]


def test_tool_schemas_are_redacted(tmp_path: Path) -> None:
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.tools([{"name": "deploy", "description": f"Deploys with key {secret}", "parameters": {"type": "object", "properties": {}}}])
        s.user("go")
    text = path.read_text()
    assert secret not in text
    (msg,) = _lines(path)
    assert msg["tools"][0]["function"]["name"] == "deploy"
    assert "[REDACTED" in msg["tools"][0]["function"]["description"]
    assert s.stats()["redactions"]


def test_tools_offered_to_a_call_that_recorded_nothing_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.user("hi")
        s.tools(CHAT_TOOLS)
    assert s.stats()["lost"] == 1
    assert "tools" not in _lines(path)[0]


def test_disabled_session_records_no_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STSTRACE_DISABLED", "1")
    with Session() as s:
        s.tools(CHAT_TOOLS)
        tool(forecast)("Paris")
    assert s.path is None


# -- from the providers' tools= (real SDKs, fake server) -------------------------------


def _reply_tools(path: Path) -> list[tuple[str, Any]]:
    # Read, not validated: the fake server gives each reply the same call ids.
    return [(m["role"], m.get("tools")) for m in ststrace.read(path).messages if m["role"] == "assistant" or "tools" in m]


def test_openai_chat_tools_recorded_on_the_first_reply_only(openai_sync: Any, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    with instrumented("openai"), Session(path):
        for _ in range(2):
            openai_sync.chat.completions.create(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS)
        openai_sync.chat.completions.create(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS[:1])
    assert _reply_tools(path) == [("assistant", CHAT_TOOLS), ("assistant", None), ("assistant", CHAT_TOOLS[:1])]


def test_openai_responses_tools(openai_sync: Any, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    with instrumented("openai"), Session(path):
        openai_sync.responses.create(model=MODEL, instructions=SYSTEM, input=USER, tools=RESPONSES_TOOLS)
    assert _reply_tools(path) == [("assistant", definitions(RESPONSES_TOOLS))]


def test_anthropic_tools(anthropic_sync: Any, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    with instrumented("anthropic"), Session(path):
        anthropic_sync.messages.create(model=MODEL, max_tokens=100, system=SYSTEM, messages=[{"role": "user", "content": USER}], tools=ANTHROPIC_TOOLS)
    assert _reply_tools(path) == [("assistant", CHAT_TOOLS)]


def test_huggingface_hub_tools(hf_sync: Any, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    with instrumented("huggingface_hub"), Session(path):
        hf_sync.chat_completion(messages=chat_messages(), tools=CHAT_TOOLS, model="fake-model")
    assert _reply_tools(path) == [("assistant", CHAT_TOOLS)]


@pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")
def test_litellm_tools(fake_api: FakeAPI, tmp_path: Path) -> None:
    litellm = pytest.importorskip("litellm")
    path = new_trace(tmp_path)
    with instrumented("litellm", "openai"), Session(path):
        litellm.completion(
            model=f"openai/{MODEL}", messages=chat_messages(), tools=CHAT_TOOLS,
            api_base=fake_api.openai_base_url, api_key="test", timeout=5, max_retries=0,
        )
    assert _reply_tools(path) == [("assistant", CHAT_TOOLS)]


def test_failed_call_tools_ride_on_the_retry(openai_sync: Any, fake_api: FakeAPI, tmp_path: Path) -> None:
    import openai

    path = new_trace(tmp_path)
    with instrumented("openai"), Session(path) as s:
        fake_api.fail_next(500)
        with pytest.raises(openai.APIStatusError):
            openai_sync.with_options(max_retries=0).chat.completions.create(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS)
        openai_sync.chat.completions.create(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS)
    tools_on = [(m["role"], m.get("tools")) for m in ststrace.read(path).messages if "tools" in m]
    assert len(tools_on) == 1 and tools_on[0][1] == CHAT_TOOLS
    assert s.stats()["lost"] == 0


def test_schema_lookup_is_the_only_per_call_cost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first call, a @tool call does not build or offer its schema again."""
    calls: list[Any] = []
    original = Session._offer_tools

    def spy(self: Session, defs: Any, key: Any = None) -> None:
        calls.append(key)
        original(self, defs, key)

    monkeypatch.setattr(Session, "_offer_tools", spy)
    get = tool(forecast)
    with Session(tmp_path / "t.jsonl"):
        for _ in range(5):
            get("Paris")
    assert len(calls) == 1


def test_hub_detection_still_sees_the_trace(tmp_path: Path) -> None:
    """A trace with tools is valid STS with no warning ststrace validate gives."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.tools(CHAT_TOOLS)
        s.user("hi")
        s.assistant("hello", model="m")
    assert [p for p in ststrace.validate(path) if p.severity == "error"] == []
    assert json.loads(path.read_text().splitlines()[1])["message"]["tools"] == CHAT_TOOLS


def test_validate_checks_the_tools_field(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"type":"session","harness":"h","id":"t"}\n'
        '{"type":"message","message":{"role":"user","content":"a","tools":[{"name":"no function key"}]}}\n'
        '{"type":"message","message":{"role":"assistant","content":"b","model":"m"}}\n'
    )
    assert [(p.line, p.code) for p in ststrace.validate(path) if p.severity == "error"] == [(2, "field-type")]


def test_llm_reads_the_tools_of_every_provider_shape(tmp_path: Path) -> None:
    """@llm (and so every integration built on it) takes tools= , Bedrock's
    toolConfig= and google-genai's config=...(tools=)."""
    from ststrace import llm

    @llm
    def call(**kwargs: Any) -> str:
        return "ok"

    bedrock = {"tools": [{"toolSpec": {"name": t["function"]["name"], "description": t["function"]["description"],
                                       "inputSchema": {"json": t["function"]["parameters"]}}} for t in CHAT_TOOLS]}
    gemini = {"tools": [{"function_declarations": [{**t["function"]} for t in CHAT_TOOLS[:1]]}]}
    for name, kwargs, want in [
        ("chat", {"tools": CHAT_TOOLS}, CHAT_TOOLS),
        ("bedrock", {"toolConfig": bedrock}, CHAT_TOOLS),
        ("gemini", {"config": gemini}, CHAT_TOOLS[:1]),
        ("none", {"config": {"temperature": 0}}, None),
    ]:
        path = tmp_path / f"{name}.jsonl"
        with Session(path):
            call(**kwargs)
        (reply,) = _lines(path)
        assert reply.get("tools") == want, name


def test_the_same_tools_list_mutated_in_place_is_recorded_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent passes one tools= list on every call: converted once, and again
    when it changed in place (the cache keeps a copy, not just the object)."""
    import copy

    from ststrace import _tools, llm

    converted: list[int] = []
    real = _tools.definitions
    monkeypatch.setattr(_tools, "definitions", lambda value: converted.append(1) or real(value))

    @llm
    def call(**kwargs: Any) -> str:
        return "ok"

    offered = copy.deepcopy(CHAT_TOOLS[:1])
    path = tmp_path / "t.jsonl"
    with Session(path):
        for _ in range(3):
            call(tools=offered)
        offered[0]["function"]["description"] = "Changed in place."
        call(tools=offered)
        offered.append(copy.deepcopy(CHAT_TOOLS[1]))
        call(tools=offered)
        call(tools=offered)
    assert len(converted) == 3
    sets = [m["tools"] for m in _lines(path) if "tools" in m]
    assert [[t["function"].get("description") for t in s] for s in sets] == [
        [CHAT_TOOLS[0]["function"].get("description")],
        ["Changed in place."],
        ["Changed in place.", CHAT_TOOLS[1]["function"].get("description")],
    ]
