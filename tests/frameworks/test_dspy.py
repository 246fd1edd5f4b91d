"""DSPy under ``ststrace.instrument()`` alone, the real ``dspy`` against the fake
OpenAI-compatible server: ``dspy.ReAct`` (``forward`` and ``aforward``, DSPy's
native engine and ``engine="litellm"``), ``dspy.Predict`` with a ``dspy.ToolCalls``
output (native function calling and the text protocol) and ``ToolCall.execute()``,
and ``ChainOfThought``.

ReAct speaks a text protocol, so the fake server is scripted with the replies
a model would write in DSPy's ``[[ ## field ## ]]`` format."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

# DSPy's disk cache lives under the home directory unless told otherwise; its
# model metadata is refreshed from the internet unless LiteLLM's local copy is
# asked for (tests/frameworks/conftest.py sets that too).
os.environ.setdefault("DSPY_CACHEDIR", tempfile.mkdtemp(prefix="ststrace-dspy-cache-"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
dspy = pytest.importorskip("dspy", reason="dspy is not installed (pip install 'ststrace[test]')")
litellm = pytest.importorskip("litellm")

import ststrace  # noqa: E402
from ststrace import Session  # noqa: E402
from ststrace._instrument import instrumented as patched_now  # noqa: E402
from ststrace.testing import FakeAPI, ScriptedReply  # noqa: E402
from test_decorators_helpers import assert_paired, valid_messages  # noqa: E402
from test_instrument_helpers import instrumented  # noqa: E402

# litellm's own pydantic models warn about ReadOnly TypedDict items on first use.
pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")

QUESTION = "What's the weather in Paris?"
WEATHER_RESULT = "Sunny, 21 C"
ANSWER = "It is sunny in Paris, 21 C."


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return WEATHER_RESULT if city == "Paris" else "unknown"


def get_time(tz: str) -> str:
    """Local time in an IANA time zone."""
    return "15:00" if tz == "Europe/Paris" else "unknown"


def fields(**values: str) -> str:
    """A reply in DSPy's ChatAdapter format."""
    body = "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in values.items())
    return body + "[[ ## completed ## ]]"


STEP_1 = fields(next_thought="I should look up the weather.", next_tool_name="get_weather", next_tool_args='{"city": "Paris"}')
STEP_2 = fields(next_thought="I know enough now.", next_tool_name="finish", next_tool_args="{}")
EXTRACT = fields(reasoning="The tool said it is sunny.", answer=ANSWER)


def tokens(text: str) -> int:
    # The fake server's count: about four characters per token.
    return max(1, (len(text) + 3) // 4)


def usage_for(request: Any, reply_text: str) -> dict[str, int]:
    """The usage the fake server reported for *request* answered with *reply_text*."""
    prompt = tokens(json.dumps(request.body["messages"], separators=(",", ":"), ensure_ascii=False))
    output = tokens(reply_text)
    return {"input": prompt, "output": output, "cacheRead": 0, "cacheWrite": 0, "totalTokens": prompt + output, "reasoning": 0}


def lm(api: FakeAPI, **kwargs: Any) -> Any:
    return dspy.LM("openai/gpt-4o-mini", api_base=api.openai_base_url, api_key="test", cache=False, **kwargs)


@pytest.fixture
def traced() -> Iterator[None]:
    """``instrument()`` with no names, as a user writes it: dspy, litellm, openai ... patched."""
    with instrumented():
        yield


@pytest.fixture(autouse=True)
def dspy_settings() -> Iterator[None]:
    with dspy.context(adapter=dspy.ChatAdapter()):
        yield


def react_trace(react: Any, api: FakeAPI) -> list[dict[str, Any]]:
    """The exact trace of the scripted two-step ReAct run (ids taken from the trace)."""
    requests = api.requests_to("chat")
    assert len(requests) == 3
    return [
        {"role": "system", "content": react.react.signature.instructions},
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": "",
            "reasoningContent": "I should look up the weather.",
            "toolCalls": [{"id": "<1>", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}],
            "model": "gpt-4o-mini",
            "usage": usage_for(requests[0], STEP_1),
        },
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "<1>"},
        {
            "role": "assistant",
            "content": "",
            "reasoningContent": "I know enough now.",
            "toolCalls": [{"id": "<2>", "function": {"name": "finish", "arguments": "{}"}}],
            "model": "gpt-4o-mini",
            "usage": usage_for(requests[1], STEP_2),
        },
        {"role": "tool", "content": "Completed.", "toolCallId": "<2>"},
        {
            "role": "assistant",
            "content": ANSWER,
            "reasoningContent": "The tool said it is sunny.",
            "model": "gpt-4o-mini",
            "usage": usage_for(requests[2], EXTRACT),
        },
    ]


def messages_of(path: Path) -> list[dict[str, Any]]:
    """The trace's messages, usage kept, timestamps checked and dropped, every
    result after its call."""
    out = valid_messages(path)
    assert_paired(out)
    for m in out:
        assert isinstance(m.pop("timestamp"), int)
    return out


def with_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """*messages* with generated call ids replaced by ``<n>`` in order of appearance,
    after checking each is used by exactly one call and its result."""
    names: dict[str, str] = {}
    out = json.loads(json.dumps(messages))
    for m in out:
        for call in m.get("toolCalls", ()):
            assert call["id"] not in names, "a call id used twice"
            names[call["id"]] = f"<{len(names) + 1}>"
            call["id"] = names[call["id"]]
        if m["role"] == "tool":
            m["toolCallId"] = names[m["toolCallId"]]
    return out


# --------------------------------------------------------------------------- ReAct


def test_react_records_each_step_its_observation_and_the_answer(
    traced: None, fake_api: FakeAPI, trace: Path
) -> None:
    """The agent's instructions and question once; each step's thought as
    reasoning and its tool call (a generated id), the observation answering it,
    ``finish`` and its ``"Completed."``, then the extracted answer; the
    text-protocol prompts themselves are not recorded."""
    fake_api.script(ScriptedReply(text=STEP_1), ScriptedReply(text=STEP_2), ScriptedReply(text=EXTRACT))
    react = dspy.ReAct("question -> answer", tools=[get_weather])
    with dspy.context(lm=lm(fake_api)):
        with Session(trace):
            pred = react(question=QUESTION)
    assert pred.answer == ANSWER
    assert with_ids(messages_of(trace)) == react_trace(react, fake_api)


async def test_react_aforward_through_litellm_is_recorded_once(
    traced: None, fake_api: FakeAPI, trace: Path
) -> None:
    """``engine="litellm"``: litellm is instrumented too, yet its text-protocol
    calls are not recorded a second time; ``acall`` records like ``forward``."""
    assert {"dspy", "litellm", "openai"} <= set(patched_now())
    fake_api.script(ScriptedReply(text=STEP_1), ScriptedReply(text=STEP_2), ScriptedReply(text=EXTRACT))
    react = dspy.ReAct("question -> answer", tools=[get_weather])
    with dspy.context(lm=lm(fake_api, engine="litellm")):
        async with Session(trace):
            pred = await react.acall(question=QUESTION)
    assert pred.answer == ANSWER
    assert with_ids(messages_of(trace)) == react_trace(react, fake_api)


def test_react_tool_error_and_a_decorated_tool(traced: None, fake_api: FakeAPI, trace: Path) -> None:
    """A failing tool's error is its observation; an ``@ststrace.tool`` tool
    answers its own call (one call, one result, no made-up second call)."""

    @ststrace.tool
    def get_time(tz: str) -> str:
        """Local time in an IANA time zone."""
        return "15:00"

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        raise RuntimeError("weather service down")

    fake_api.script(
        ScriptedReply(text=STEP_1),
        ScriptedReply(text=fields(next_thought="Try the time.", next_tool_name="get_time", next_tool_args='{"tz": "Europe/Paris"}')),
        ScriptedReply(text=STEP_2),
        ScriptedReply(text=EXTRACT),
    )
    react = dspy.ReAct("question -> answer", tools=[get_weather, get_time])
    with dspy.context(lm=lm(fake_api)):
        with Session(trace):
            react(question=QUESTION)
    got = with_ids(messages_of(trace))
    assert [m["role"] for m in got] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"]
    assert got[3]["toolCallId"] == "<1>"
    assert got[3]["content"].startswith("Execution error in get_weather:") and "weather service down" in got[3]["content"]
    assert got[4]["toolCalls"][0]["function"] == {"name": "get_time", "arguments": '{"tz":"Europe/Paris"}'}
    # get_time is an @ststrace.tool: its schema enters the session with its first result.
    assert [t["function"]["name"] for t in got[5].pop("tools")] == ["get_time"]
    assert got[5] == {"role": "tool", "content": "15:00", "toolCallId": "<2>"}
    assert got[8]["content"] == ANSWER


def test_a_react_run_inside_a_tool_is_a_linked_child_session(
    traced: None, fake_api: FakeAPI, trace: Path
) -> None:
    """A tool that runs a ReAct agent of its own: that run records into a child
    session named after the tool and linked to the outer call; the outer trace
    keeps the call and the inner answer as its observation."""
    inner = dspy.ReAct("question -> answer", tools=[get_weather])

    def research(topic: str) -> str:
        """Research a topic with a helper agent."""
        return str(inner(question=topic).answer)

    fake_api.script(
        ScriptedReply(text=fields(next_thought="Ask the helper.", next_tool_name="research", next_tool_args='{"topic": "%s"}' % QUESTION)),
        ScriptedReply(text=STEP_1),
        ScriptedReply(text=STEP_2),
        ScriptedReply(text=EXTRACT),
        ScriptedReply(text=STEP_2),
        ScriptedReply(text=EXTRACT),
    )
    outer = dspy.ReAct("question -> answer", tools=[research])
    with dspy.context(lm=lm(fake_api)):
        with Session(trace) as s:
            assert outer(question=QUESTION).answer == ANSWER
    got = with_ids(messages_of(trace))
    assert [m["role"] for m in got] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert got[2]["toolCalls"][0]["function"] == {"name": "research", "arguments": json.dumps({"topic": QUESTION}, separators=(",", ":"))}
    assert got[3] == {"role": "tool", "content": ANSWER, "toolCallId": "<1>"}
    (child,) = trace.parent.glob("trace.*.jsonl")
    header = json.loads(child.read_text().splitlines()[0])
    outer_call = messages_of(trace)[2]["toolCalls"][0]["id"]
    assert (header["name"], header["parentSessionId"], header["parentToolCallId"]) == ("research", s.id, outer_call)
    inner_messages = with_ids(messages_of(child))
    assert [m["role"] for m in inner_messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert inner_messages[1] == {"role": "user", "content": QUESTION}
    assert inner_messages[3] == {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "<1>"}
    assert inner_messages[6]["content"] == ANSWER


def test_a_reply_dspy_cannot_parse_is_recorded_as_written(
    traced: None, fake_api: FakeAPI, trace: Path
) -> None:
    """A step reply outside DSPy's format: DSPy asks again with its JSON
    adapter, fails again, and the run ends with DSPy's exception; both replies
    are in the trace as the model wrote them, each with a note, then the
    failure. The exception reaches the caller unchanged."""
    fake_api.script(ScriptedReply(text="I am not sure what to do."), ScriptedReply(text="Still not sure."))
    react = dspy.ReAct("question -> answer", tools=[get_weather])
    with dspy.context(lm=lm(fake_api)):
        with Session(trace):
            with pytest.raises(dspy.utils.exceptions.AdapterParseError):
                react(question=QUESTION)
    requests = fake_api.requests_to("chat")
    assert len(requests) == 2
    note = {"role": "system", "content": "DSPy could not parse this reply into the signature's fields"}
    assert messages_of(trace) == [
        {"role": "system", "content": react.react.signature.instructions},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "I am not sure what to do.", "model": "gpt-4o-mini", "usage": usage_for(requests[0], "I am not sure what to do.")},
        note,
        {"role": "assistant", "content": "Still not sure.", "model": "gpt-4o-mini", "usage": usage_for(requests[1], "Still not sure.")},
        note,
        {"role": "system", "content": "The agent run failed: AdapterParseError: LM response cannot be serialized to a JSON object."},
    ]


def test_outside_a_session_nothing_is_recorded(fake_api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STSTRACE_DIR", str(tmp_path))
    fake_api.script(ScriptedReply(text=STEP_1), ScriptedReply(text=STEP_2), ScriptedReply(text=EXTRACT))
    with instrumented("dspy"):
        with dspy.context(lm=lm(fake_api)):
            pred = dspy.ReAct("question -> answer", tools=[get_weather])(question=QUESTION)
    assert pred.answer == ANSWER
    assert not list(tmp_path.glob("*.jsonl"))


# --------------------------------------------------------------------------- Predict with tools


class ToolSignature(dspy.Signature):
    """Answer the question with the tools."""

    question: str = dspy.InputField()
    tools: list[dspy.Tool] = dspy.InputField()
    outputs: dspy.ToolCalls = dspy.OutputField()


def test_predict_with_native_tool_calls_and_execute(
    traced: None, fake_api: FakeAPI, trace: Path
) -> None:
    """Native function calling: the provider's call ids; ``execute()`` records
    each result answering its call; the tools are not part of the prompt text."""
    tools = [dspy.Tool(get_weather), dspy.Tool(get_time)]
    with dspy.context(lm=lm(fake_api), adapter=dspy.ChatAdapter(use_native_function_calling=True)):
        with Session(trace):
            pred = dspy.Predict(ToolSignature)(question=QUESTION, tools=tools)
            results = [call.execute(functions=tools) for call in pred.outputs.tool_calls]
    assert results == [WEATHER_RESULT, "15:00"]
    request = fake_api.requests_to("chat")[0]
    assert [t["function"]["name"] for t in request.body["tools"]] == ["get_weather", "get_time"]
    got = messages_of(trace)
    assert got[:2] == [
        {"role": "system", "content": ToolSignature.instructions},
        {"role": "user", "content": QUESTION},
    ]
    assert got[2]["toolCalls"] == [
        {"id": "call_weather01", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
        {"id": "call_time02", "function": {"name": "get_time", "arguments": '{"tz":"Europe/Paris"}'}},
    ]
    assert got[3:] == [
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "call_weather01"},
        {"role": "tool", "content": "15:00", "toolCallId": "call_time02"},
    ]


def test_predict_with_text_tool_calls_and_a_failing_execute(
    traced: None, fake_api: FakeAPI, trace: Path
) -> None:
    """The text protocol has no ids: a generated one, kept by ``execute()``; a
    tool that raises is answered with the error, which reaches the caller."""

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        raise ValueError("no such city")

    reply = fields(outputs='{"tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]}')
    fake_api.script(ScriptedReply(text=reply))
    tools = [dspy.Tool(get_weather)]
    with dspy.context(lm=lm(fake_api, engine="litellm")):
        with Session(trace):
            pred = dspy.Predict(ToolSignature)(question=QUESTION, tools=tools)
            with pytest.raises(RuntimeError, match="no such city"):
                pred.outputs.tool_calls[0].execute(functions=tools)
    got = with_ids(messages_of(trace))
    assert got[2] == {
        "role": "assistant",
        "content": "",
        "toolCalls": [{"id": "<1>", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}],
        "model": "gpt-4o-mini",
        "usage": usage_for(fake_api.requests_to("chat")[0], reply),
    }
    assert got[3] == {
        "role": "tool",
        "content": "Error: RuntimeError: Error executing tool 'get_weather': no such city",
        "toolCallId": "<1>",
    }
    assert len(got) == 4


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_chain_of_thought_records_reasoning_and_outputs(
    traced: None, fake_api: FakeAPI, trace: Path, mode: str
) -> None:
    """``ChainOfThought`` (a ``Predict``), called and ``acall``-ed: instructions,
    input, and the output with the ``reasoning`` field as reasoning."""
    reply = fields(reasoning="Paris is in France.", answer="France")
    fake_api.script(ScriptedReply(text=reply))
    cot = dspy.ChainOfThought("question -> answer")
    with dspy.context(lm=lm(fake_api)):
        with Session(trace):
            if mode == "sync":
                pred = cot(question="Which country is Paris in?")
            else:
                pred = await cot.acall(question="Which country is Paris in?")
    assert pred.answer == "France"
    assert messages_of(trace) == [
        {"role": "system", "content": cot.predict.signature.instructions},
        {"role": "user", "content": "Which country is Paris in?"},
        {
            "role": "assistant",
            "content": "France",
            "reasoningContent": "Paris is in France.",
            "model": "gpt-4o-mini",
            "usage": usage_for(fake_api.requests_to("chat")[0], reply),
        },
    ]
