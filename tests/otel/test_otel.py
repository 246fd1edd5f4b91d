"""ststrace.otel.SpanProcessor with real instrumentations against the local fake server.

Each emitter runs its real client or framework against ststrace.testing.FakeAPI on
127.0.0.1; the spans go through an SDK TracerProvider into the processor, and the
STS file must hold the exact conversation (ids included) and pass validate.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import ststrace  # noqa: E402
from ststrace.otel import SpanProcessor  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}},
    },
]
ANSWER = "Here is what I found: result of get_weather; result of get_time"


def read_lines(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return lines[0], [line["message"] for line in lines[1:]]


def only_file(directory: Path) -> Path:
    files = sorted(directory.glob("*.jsonl"))
    assert len(files) == 1, files
    assert ststrace.validate(files[0]) == []
    return files[0]


def without(messages: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k not in keys} for m in messages]


def tools_sorted(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """*messages* with each run of tool results sorted by call id: tools run in parallel
    (PydanticAI) finish, and so are recorded, in either order."""
    out: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for m in [*messages, {"role": "end"}]:
        if m["role"] == "tool":
            run.append(m)
            continue
        out += sorted(run, key=lambda r: r["toolCallId"])
        run = []
        out.append(m)
    return out[:-1]


def tool_loop(client: Any, model: str = "gpt-4o") -> None:
    """A minimal agent loop: ask, run the two tools the model asks for, ask again."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
    ]
    reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
    message = reply.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "result of " + call.function.name})
    client.chat.completions.create(model=model, messages=messages, tools=TOOLS)


def expected_tool_loop(arguments: tuple[str, str] = ('{"city":"Paris"}', '{"tz":"Europe/Paris"}')) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "Let me look that up.",
            "toolCalls": [
                {"id": "call_weather01", "function": {"name": "get_weather", "arguments": arguments[0]}},
                {"id": "call_time02", "function": {"name": "get_time", "arguments": arguments[1]}},
            ],
            "model": "gpt-4o",
        },
        {"role": "tool", "content": "result of get_weather", "toolCallId": "call_weather01"},
        {"role": "tool", "content": "result of get_time", "toolCallId": "call_time02"},
        {"role": "assistant", "content": ANSWER, "model": "gpt-4o"},
    ]


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A TracerProvider with the ststrace processor beside an in-memory exporter."""
    tp = TracerProvider(shutdown_on_exit=False)
    memory = InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(memory))
    tp.add_span_processor(SpanProcessor(tmp_path / "traces"))
    yield tp, memory
    tp.shutdown()


def test_openai_v2_instrumentation_with_content_capture(
    provider: tuple[TracerProvider, InMemorySpanExporter], fake_api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """opentelemetry-instrumentation-openai-v2 (gen_ai.input/output.messages) gives the exact conversation."""
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    from fakeapi_fixtures import openai_client

    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    tp, memory = provider
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    try:
        client = openai_client(fake_api)
        with tp.get_tracer("app").start_as_current_span("my agent") as root:
            tool_loop(client)
        trace_id = root.get_span_context().trace_id
    finally:
        instrumentor.uninstrument()
    tp.force_flush()
    chat_spans = [s for s in memory.get_finished_spans() if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]
    assert len(chat_spans) == 2 and "gen_ai.input.messages" in (chat_spans[0].attributes or {})
    path = only_file(tmp_path / "traces")
    header, messages = read_lines(path)
    assert header["id"] == f"{trace_id:032x}" and header["otel"] == {"traceId": f"{trace_id:032x}"}
    assert without(messages, "timestamp", "usage") == expected_tool_loop()
    assert messages[2]["usage"] == {"input": 20, "output": 25, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 45}
    assert messages[5]["usage"]["input"] == 151


def test_openinference_openai_instrumentor(
    provider: tuple[TracerProvider, InMemorySpanExporter], fake_api: FakeAPI, tmp_path: Path
) -> None:
    """OpenInference's llm.input_messages / llm.output_messages and token counts."""
    from openinference.instrumentation.openai import OpenAIInstrumentor

    from fakeapi_fixtures import openai_client

    tp, _ = provider
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    try:
        with tp.get_tracer("app").start_as_current_span("my agent"):
            tool_loop(openai_client(fake_api))
    finally:
        instrumentor.uninstrument()
    tp.force_flush()
    _, messages = read_lines(only_file(tmp_path / "traces"))
    assert without(messages, "timestamp", "usage") == expected_tool_loop()
    assert messages[2]["usage"] == {
        "input": 20,
        "output": 25,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 45,
        "reasoning": 10,
    }


def test_openinference_langchain_with_tool_spans(
    provider: tuple[TracerProvider, InMemorySpanExporter], fake_api: FakeAPI, tmp_path: Path
) -> None:
    """LangChain under OpenInference: results come from TOOL spans, once, with the model's call ids."""
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from openinference.instrumentation.langchain import LangChainInstrumentor

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny in " + city

    @tool
    def get_time(tz: str) -> str:
        """The time in a zone."""
        return "noon in " + tz

    tp, _ = provider
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    try:
        llm = ChatOpenAI(
            model="gpt-4o", base_url=fake_api.openai_base_url, api_key="test", max_retries=0, timeout=5
        ).bind_tools([get_weather, get_time])
        with tp.get_tracer("app").start_as_current_span("my agent"):
            history: list[Any] = [SystemMessage("be brief"), HumanMessage("weather?")]
            ai = llm.invoke(history)
            history.append(ai)
            tools = {"get_weather": get_weather, "get_time": get_time}
            for call in ai.tool_calls:
                history.append(tools[call["name"]].invoke(call))
            llm.invoke(history)
    finally:
        instrumentor.uninstrument()
    tp.force_flush()
    _, messages = read_lines(only_file(tmp_path / "traces"))
    expected = expected_tool_loop(('{"city": "Paris"}', '{"tz": "Europe/Paris"}'))
    expected[3]["content"] = "sunny in Paris"
    expected[4]["content"] = "noon in Europe/Paris"
    expected[5]["content"] = "Here is what I found: sunny in Paris; noon in Europe/Paris"
    assert without(messages, "timestamp", "usage") == expected
    assert [m["role"] for m in messages].count("tool") == 2  # from the tool spans, not again from the input


def test_pydantic_ai_agent_with_instrumentation(
    provider: tuple[TracerProvider, InMemorySpanExporter], fake_api: FakeAPI, tmp_path: Path
) -> None:
    """A PydanticAI agent run: chat and execute_tool spans, conversation id as the session id,
    reasoning ("thinking" parts), agent name in the header."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    tp, memory = provider
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=fake_api.openai_base_url, api_key="test"))
    settings = InstrumentationSettings(tracer_provider=tp, include_content=True)
    agent = Agent(model, system_prompt="be brief", name="weather_agent", capabilities=[Instrumentation(settings=settings)])

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return "sunny in " + city

    @agent.tool_plain
    def get_time(tz: str) -> str:
        return "noon in " + tz

    result = agent.run_sync("weather?")
    tp.force_flush()
    root = [s for s in memory.get_finished_spans() if s.parent is None]
    assert len(root) == 1
    conversation = (root[0].attributes or {})["gen_ai.conversation.id"]
    path = only_file(tmp_path / "traces")
    header, messages = read_lines(path)
    assert header["id"] == conversation and header["agent"] == "weather_agent"
    assert result.output == "Here is what I found: sunny in Paris; noon in Europe/Paris"
    assert tools_sorted(without(messages, "timestamp", "usage")) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "Let me look that up.",
            "reasoningContent": "I should call get_weather and get_time.",
            "toolCalls": [
                {"id": "call_weather01", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
                {"id": "call_time02", "function": {"name": "get_time", "arguments": '{"tz":"Europe/Paris"}'}},
            ],
            "model": "gpt-4o",
        },
        {"role": "tool", "content": "noon in Europe/Paris", "toolCallId": "call_time02"},
        {"role": "tool", "content": "sunny in Paris", "toolCallId": "call_weather01"},
        {
            "role": "assistant",
            "content": result.output,
            "reasoningContent": "The tool results answer the question.",
            "model": "gpt-4o",
        },
    ]
    assert messages[2]["usage"]["reasoning"] == 10


def test_processor_beside_other_processors_changes_nothing_they_receive(
    provider: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    """Non-GenAI spans are ignored (no file); the other processor still gets every span unchanged."""
    tp, memory = provider
    tracer = tp.get_tracer("app")
    with tracer.start_as_current_span("http request", attributes={"http.method": "GET"}):
        with tracer.start_as_current_span("db query"):
            pass
    tp.force_flush()
    spans = memory.get_finished_spans()
    assert [s.name for s in spans] == ["db query", "http request"]
    assert dict(spans[1].attributes or {}) == {"http.method": "GET"}
    assert not (tmp_path / "traces").exists() or not list((tmp_path / "traces").glob("*.jsonl"))


def test_fifty_concurrent_instrumented_agents_in_threads_and_tasks(
    fake_api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """openai-v2 under load: 25 threads (sync client) and 25 asyncio tasks (async client), one
    trace and one file each; provider shutdown alone flushes all, nothing lost or mixed up."""
    import asyncio
    import threading

    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    from fakeapi_fixtures import async_openai_client, openai_client

    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    tp = TracerProvider(shutdown_on_exit=False)
    processor = SpanProcessor(tmp_path / "traces", flush_interval=60.0)
    tp.add_span_processor(processor)
    tracer = tp.get_tracer("app")
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tp)

    def ask(n: int) -> list[dict[str, Any]]:
        return [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"weather {n}?"}]

    def sync_agent(n: int, client: Any) -> None:
        with tracer.start_as_current_span(f"agent {n}"):
            messages = ask(n)
            message = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS).choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": f"{call.function.name} {n}"})
            client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)

    async def async_agent(n: int, client: Any) -> None:
        with tracer.start_as_current_span(f"agent {n}"):
            messages = ask(n)
            reply = await client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": f"{call.function.name} {n}"})
            await client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)

    async def tasks() -> None:
        # Retries: 50 simultaneous connections can overflow the fake server's listen backlog.
        client = async_openai_client(fake_api, max_retries=3)
        await asyncio.gather(*(async_agent(n, client) for n in range(25, 50)))
        await client.close()

    try:
        client = openai_client(fake_api, max_retries=3)
        threads = [threading.Thread(target=sync_agent, args=(n, client)) for n in range(25)]
        for t in threads:
            t.start()
        asyncio.run(tasks())
        for t in threads:
            t.join()
    finally:
        instrumentor.uninstrument()
    tp.shutdown()
    paths = sorted((tmp_path / "traces").glob("*.jsonl"))
    assert len(paths) == 50 and processor.dropped == 0
    seen = set()
    for path in paths:
        assert ststrace.validate(path) == []
        _, messages = read_lines(path)
        n = int(messages[1]["content"].split()[1].rstrip("?"))
        seen.add(n)
        expected = expected_tool_loop()
        expected[1]["content"] = f"weather {n}?"
        expected[3]["content"] = f"get_weather {n}"
        expected[4]["content"] = f"get_time {n}"
        expected[5]["content"] = f"Here is what I found: get_weather {n}; get_time {n}"
        assert without(messages, "timestamp", "usage") == expected
    assert seen == set(range(50))


def test_openinference_smolagents_tool_calling_agent(tmp_path: Path) -> None:
    """smolagents under OpenInference: its textual tool-call/observation turns are not recorded as
    messages; calls come from the LLM spans and results from the TOOL spans (final_answer too)."""
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    from ststrace.testing import ScriptedToolCall

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city
        """
        return "sunny in " + city

    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path / "traces"))
    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    weather = ScriptedToolCall("get_weather", {"city": "Paris"}, "weather01")
    final = ScriptedToolCall("final_answer", {"answer": "It is sunny."}, "final02")
    try:
        with FakeAPI(tool_calls=[weather], reasoning=False) as api:

            def after_step(step: Any, agent: Any = None) -> None:
                api.tool_calls = (final,)  # the fake model answers through smolagents' final_answer tool

            model = OpenAIServerModel("gpt-4o", api_base=api.openai_base_url, api_key="test", client_kwargs={"max_retries": 0})
            agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=3, step_callbacks=[after_step], verbosity_level=0)
            assert agent.run("weather?") == "It is sunny."
            system_prompt = api.requests[0].body["messages"][0]["content"][0]["text"]
    finally:
        instrumentor.uninstrument()
    tp.shutdown()
    _, messages = read_lines(only_file(tmp_path / "traces"))
    assert without(messages, "timestamp", "usage") == [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": "New task:\nweather?"},
        {
            "role": "assistant",
            "content": "Let me look that up.",
            "toolCalls": [{"id": weather.call_id, "function": {"name": "get_weather", "arguments": weather.arguments_json}}],
            "model": "gpt-4o",
        },
        {"role": "tool", "content": "sunny in Paris", "toolCallId": weather.call_id},
        {
            "role": "assistant",
            "content": "Let me look that up.",
            "toolCalls": [{"id": final.call_id, "function": {"name": "final_answer", "arguments": final.arguments_json}}],
            "model": "gpt-4o",
        },
        {"role": "tool", "content": "It is sunny.", "toolCallId": final.call_id},
    ]


@pytest.mark.parametrize("mode", ["EVENT_ONLY", "SPAN_AND_EVENT"])
def test_openai_v2_events_as_log_records(
    mode: str, fake_api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """openai-v2 sending the operation.details event to the logs pipeline: with processor.logs()
    on the LoggerProvider the conversation is recorded from the event (EVENT_ONLY), and once
    when both the span and the event carry it (SPAN_AND_EVENT)."""
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider

    from fakeapi_fixtures import openai_client

    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    tp = TracerProvider(shutdown_on_exit=False)
    processor = SpanProcessor(tmp_path / "traces")
    tp.add_span_processor(processor)
    lp = LoggerProvider(shutdown_on_exit=False)
    lp.add_log_record_processor(processor.logs())
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tp, logger_provider=lp)
    try:
        with tp.get_tracer("app").start_as_current_span("my agent"):
            tool_loop(openai_client(fake_api))
    finally:
        instrumentor.uninstrument()
    tp.shutdown()
    lp.shutdown()
    _, messages = read_lines(only_file(tmp_path / "traces"))
    assert without(messages, "timestamp", "usage") == expected_tool_loop()
