"""ststrace.otel.SpanProcessor: conversations over several traces, load, shutdown, the
previous event-based conventions, OpenLLMetry attributes, tool pairing, redaction and caps."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

import ststrace  # noqa: E402
from ststrace.otel import SpanProcessor  # noqa: E402
from ststrace.testing import FakeAPI, ScriptedToolCall  # noqa: E402
from test_decorators_helpers import valid_messages  # noqa: E402
from test_usage import BIG  # noqa: E402

SECRET = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"


def messages_of(path: Path) -> list[dict[str, Any]]:
    # Warnings allowed: a two-line test file may have uniform keys.
    assert [p for p in ststrace.validate(path) if p.severity == "error"] == []
    return [{k: v for k, v in m.items() if k not in ("timestamp", "usage")} for m in ststrace.read(path).messages]


def files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.jsonl"))


def semconv(messages: list[dict[str, Any]]) -> str:
    return orjson.dumps(messages).decode()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def reply(text: str, *calls: tuple[str, str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}]
    parts += [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    return {"role": "assistant", "parts": parts}


def test_pydantic_ai_conversation_over_two_runs_is_one_session(tmp_path: Path, fake_api: FakeAPI) -> None:
    """Two agent runs (two traces) sharing gen_ai.conversation.id: one file, the resent history once."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=fake_api.openai_base_url, api_key="test"))
    settings = InstrumentationSettings(tracer_provider=tp, include_content=True)
    agent = Agent(model, system_prompt="be brief", capabilities=[Instrumentation(settings=settings)])

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return "sunny in " + city

    @agent.tool_plain
    def get_time(tz: str) -> str:
        return "noon in " + tz

    first = agent.run_sync("weather?")
    tp.force_flush()
    (path,) = files(tmp_path)
    assert len(messages_of(path)) == 6  # closed with its trace, complete on disk
    fake_api.tool_calls = (
        ScriptedToolCall("get_weather", {"city": "Lyon"}, "weather03"),
        ScriptedToolCall("get_time", {"tz": "UTC"}, "time04"),
    )
    agent.run_sync("and in Lyon?", message_history=first.all_messages())
    tp.shutdown()
    assert files(tmp_path) == [path]
    got = messages_of(path)
    assert [m["role"] for m in got] == ["system", "user", "assistant", "tool", "tool", "assistant"] * 1 + [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert got[6] == {"role": "user", "content": "and in Lyon?"}
    # The two tools of a turn run in parallel and are recorded as they finish.
    assert {m["toolCallId"] for m in got[3:5]} == {"call_weather01", "call_time02"}
    assert {m["toolCallId"]: m["content"] for m in got[8:10]} == {"call_weather03": "sunny in Lyon", "call_time04": "noon in UTC"}


def _agent_turn(tracer: Any, n: int) -> None:
    with tracer.start_as_current_span(f"agent {n}", attributes={"app.worker": n}):
        history = [user(f"question {n}")]
        with tracer.start_as_current_span(
            "chat m",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.input.messages": semconv(history),
                "gen_ai.output.messages": semconv([reply("", (f"c{n}", "lookup", {"n": n}))]),
                "gen_ai.usage.input_tokens": n,
                "gen_ai.usage.output_tokens": 1,
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool lookup",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.id": f"c{n}",
                "gen_ai.tool.call.arguments": f'{{"n":{n}}}',
                "gen_ai.tool.call.result": f"result {n}",
            },
        ):
            pass
        history += [reply("", (f"c{n}", "lookup", {"n": n}))]
        history += [{"role": "tool", "parts": [{"type": "tool_call_response", "id": f"c{n}", "response": f"result {n}"}]}]
        with tracer.start_as_current_span(
            "chat m",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": semconv(history),
                "gen_ai.output.messages": semconv([reply(f"answer {n}")]),
            },
        ):
            pass


async def _async_turn(tracer: Any, n: int) -> None:
    await asyncio.sleep(0)
    _agent_turn(tracer, n)
    await asyncio.sleep(0)


def test_fifty_concurrent_traces_in_threads_and_tasks_and_shutdown_flushes_all(tmp_path: Path) -> None:
    """25 threads and 25 asyncio tasks, each its own trace and file; shutdown alone writes them all."""
    tp = TracerProvider(shutdown_on_exit=False)
    processor = SpanProcessor(tmp_path, flush_interval=60.0)  # nothing flushes by time during the test
    tp.add_span_processor(processor)
    tracer = tp.get_tracer("load")
    barrier = threading.Barrier(26)

    def worker(n: int) -> None:
        barrier.wait()
        _agent_turn(tracer, n)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(25)]
    for t in threads:
        t.start()

    async def tasks() -> None:
        await asyncio.gather(*(_async_turn(tracer, n) for n in range(25, 50)))

    barrier.wait()
    asyncio.run(tasks())
    for t in threads:
        t.join()
    tp.shutdown()
    found = files(tmp_path)
    assert len(found) == 50
    seen = set()
    for path in found:
        got = messages_of(path)
        n = int(got[0]["content"].split()[1])
        seen.add(n)
        assert got == [
            {"role": "user", "content": f"question {n}"},
            {"role": "assistant", "content": "", "toolCalls": [{"id": f"c{n}", "function": {"name": "lookup", "arguments": f'{{"n":{n}}}'}}], "model": "m"},
            {"role": "tool", "content": f"result {n}", "toolCallId": f"c{n}"},
            {"role": "assistant", "content": f"answer {n}"},
        ]
        assert ststrace.read(path).messages[1]["usage"]["input"] == n
    assert seen == set(range(50))
    assert processor.dropped == 0


def _span(tracer: Any, name: str, attributes: dict[str, Any], events: list[tuple[str, dict[str, Any]]] = ()) -> None:  # type: ignore[assignment]
    with tracer.start_as_current_span(name, attributes=attributes) as span:
        for event_name, event_attrs in events:
            span.add_event(event_name, event_attrs)


def test_previous_event_based_convention_span_events(tmp_path: Path) -> None:
    """gen_ai.*.message / gen_ai.choice span events, bodies in gen_ai.event.content JSON or in the attributes."""
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    tracer = tp.get_tracer("old")
    call = {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}
    with tracer.start_as_current_span("agent"):
        _span(
            tracer,
            "chat gpt-4",
            {"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4", "gen_ai.response.model": "gpt-4-0613"},
            [
                ("gen_ai.system.message", {"gen_ai.system": "openai", "gen_ai.event.content": '{"content": "Add."}'}),
                ("gen_ai.user.message", {"gen_ai.system": "openai", "content": "1+2?"}),
                (
                    "gen_ai.choice",
                    {
                        "gen_ai.event.content": orjson.dumps(
                            {"index": 0, "finish_reason": "tool_calls", "message": {"tool_calls": [call]}}
                        ).decode()
                    },
                ),
            ],
        )
        _span(
            tracer,
            "chat gpt-4",
            {"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4"},
            [
                ("gen_ai.system.message", {"content": "Add."}),
                ("gen_ai.user.message", {"content": "1+2?"}),
                ("gen_ai.assistant.message", {"tool_calls": orjson.dumps([call]).decode()}),
                ("gen_ai.tool.message", {"gen_ai.event.content": '{"content": "3", "id": "call_a"}'}),
                ("gen_ai.choice", {"gen_ai.event.content": '{"index": 0, "message": {"content": "It is 3."}}'}),
                ("gen_ai.choice", {"gen_ai.event.content": '{"index": 1, "message": {"content": "Three."}}'}),
            ],
        )
    tp.shutdown()
    (path,) = files(tmp_path)
    assert messages_of(path) == [
        {"role": "system", "content": "Add."},
        {"role": "user", "content": "1+2?"},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": "call_a", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}],
            "model": "gpt-4-0613",
        },
        {"role": "tool", "content": "3", "toolCallId": "call_a"},
        {"role": "assistant", "content": "It is 3.", "model": "gpt-4"},
    ]


def test_operation_details_event_and_system_instructions(tmp_path: Path) -> None:
    """The gen_ai.client.inference.operation.details event carries the messages when the span does not."""
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    tracer = tp.get_tracer("new")
    _span(
        tracer,
        "chat",
        {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "x"},
        [
            (
                "gen_ai.client.inference.operation.details",
                {
                    "gen_ai.system_instructions": '[{"type": "text", "content": "Be kind."}]',
                    "gen_ai.input.messages": semconv(
                        [{"role": "user", "parts": [{"type": "text", "content": "Look"}, {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "iVBORw0KGgo="}]}]
                    ),
                    "gen_ai.output.messages": semconv(
                        [{"role": "assistant", "parts": [{"type": "reasoning", "content": "A cat."}, {"type": "text", "content": "A cat."}]}]
                    ),
                    "gen_ai.response.model": "vision-1",
                },
            )
        ],
    )
    tp.shutdown()
    (path,) = files(tmp_path)
    assert messages_of(path) == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Look\n[image]"},
        {"role": "assistant", "content": "A cat.", "reasoningContent": "A cat.", "model": "vision-1"},
    ]


def test_openllmetry_indexed_attributes(tmp_path: Path) -> None:
    """gen_ai.prompt.N.* / gen_ai.completion.N.* as OpenLLMetry writes them."""
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    _span(
        tp.get_tracer("ollm"),
        "openai.chat",
        {
            "gen_ai.system": "openai",
            "llm.request.type": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "Paris weather?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "",
            "gen_ai.completion.0.tool_calls.0.id": "call_w",
            "gen_ai.completion.0.tool_calls.0.name": "weather",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
            "gen_ai.usage.prompt_tokens": 9,
            "gen_ai.usage.completion_tokens": 3,
            "gen_ai.usage.cache_read_input_tokens": 5,
        },
    )
    tp.shutdown()
    (path,) = files(tmp_path)
    trace = ststrace.read(path)
    assert messages_of(path) == [
        {"role": "user", "content": "Paris weather?"},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": "call_w", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}],
            "model": "gpt-4o",
        },
    ]
    # Anthropic-style cache reads are counted beside the prompt tokens, not inside.
    assert trace.messages[1]["usage"] == {"input": 9, "output": 3, "cacheRead": 5, "cacheWrite": 0, "totalTokens": 17}


def test_tool_span_without_call_id_answers_the_pending_call_once(tmp_path: Path) -> None:
    """A tool span with no id claims the model's pending call by name and arguments; the next
    request's copy of the result is not recorded again; a tool nobody asked for gets its own call."""
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    tracer = tp.get_tracer("t")
    asked = [reply("", ("id_1", "search", '{"q":"a"}'), ("id_2", "search", '{"q":"b"}'))]
    with tracer.start_as_current_span("agent"):
        _span(tracer, "llm", {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user",
                              "llm.input_messages.0.message.content": "find a and b",
                              "llm.output_messages.0.message.role": "assistant",
                              "llm.output_messages.0.message.tool_calls.0.tool_call.id": "id_1",
                              "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
                              "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"q":"a"}',
                              "llm.output_messages.0.message.tool_calls.1.tool_call.id": "id_2",
                              "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "search",
                              "llm.output_messages.0.message.tool_calls.1.tool_call.function.arguments": '{"q":"b"}'})
        _span(tracer, "search", {"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": '{"q":"b"}', "output.value": "B!"})
        _span(tracer, "search", {"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": '{"q":"a"}', "output.value": "A!"})
        _span(tracer, "clock", {"openinference.span.kind": "TOOL", "tool.name": "clock", "input.value": "UTC", "output.value": "noon"})
        history = [user("find a and b"), *asked]
        history += [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "id_1", "response": "A!"}]}]
        history += [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "id_2", "response": "B!"}]}]
        _span(tracer, "chat", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": semconv(history),
                               "gen_ai.output.messages": semconv([reply("a is A!, b is B!")])})
    tp.shutdown()
    (path,) = files(tmp_path)
    got = messages_of(path)
    assert [(m["role"], m.get("toolCallId"), m["content"]) for m in got if m["role"] == "tool"][:2] == [
        ("tool", "id_2", "B!"),
        ("tool", "id_1", "A!"),
    ]
    clock = got[4]
    assert clock["toolCalls"][0]["function"] == {"name": "clock", "arguments": '"UTC"'}
    assert got[5] == {"role": "tool", "content": "noon", "toolCallId": clock["toolCalls"][0]["id"]}
    assert got[6] == {"role": "assistant", "content": "a is A!, b is B!"}
    assert len(got) == 7


def test_one_call_seen_by_two_instrumentations_is_recorded_once(tmp_path: Path) -> None:
    """A framework's LLM span around the client library's span with the same reply: one assistant message."""
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    tracer = tp.get_tracer("t")
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": semconv([user("hi")]),
        "gen_ai.output.messages": semconv([reply("hello")]),
    }
    with tracer.start_as_current_span("framework llm", attributes=attrs):
        _span(tracer, "client chat", attrs)
    _span(tracer, "second trace, same words", attrs)
    tp.shutdown()
    contents = sorted(tuple(m["content"] for m in messages_of(p)) for p in files(tmp_path))
    assert contents == [("hi", "hello"), ("hi", "hello")]  # once per trace, not twice in the first


def test_redaction_and_caps_apply_to_span_content(tmp_path: Path) -> None:
    """A secret in a prompt is redacted and an oversized reply capped, as for every record."""
    tp = TracerProvider(shutdown_on_exit=False)
    processor = SpanProcessor(tmp_path, max_field_chars=1000, harness="otel-app", metadata={"team": "x"})
    tp.add_span_processor(processor)
    _span(
        tp.get_tracer("t"),
        "chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": semconv([user(f"my token is {SECRET}")]),
            "gen_ai.output.messages": semconv([reply("x" * 5000)]),
        },
    )
    tp.shutdown()
    (path,) = files(tmp_path)
    text = path.read_text()
    assert SECRET not in text and "[REDACTED:" in text
    got = ststrace.read(path)
    assert len(got.messages[1]["content"]) < 1200
    assert got.header["harness"] == "otel-app" and got.header["team"] == "x"


def test_non_genai_spans_are_ignored_without_starting_the_worker(tmp_path: Path) -> None:
    """Plain spans (even roots) never reach the worker: no thread, no queue item, no file."""
    tp = TracerProvider(shutdown_on_exit=False)
    processor = SpanProcessor(tmp_path)
    tp.add_span_processor(processor)
    tracer = tp.get_tracer("t")
    for _ in range(100):
        with tracer.start_as_current_span("GET /", attributes={"http.method": "GET"}):
            with tracer.start_as_current_span("SELECT"):
                pass
    assert processor._worker is None and processor._queue.qsize() == 0
    tp.shutdown()
    assert files(tmp_path) == []


def test_constructor_rejects_per_trace_options_and_bad_session_options(tmp_path: Path) -> None:
    """path/id/resume are the processor's to choose; a Session option error surfaces at construction."""
    with pytest.raises(TypeError, match="does not take id"):
        SpanProcessor(tmp_path, id="x")
    with pytest.raises(ValueError, match="flush_interval"):
        SpanProcessor(tmp_path, flush_interval=0)
    with pytest.raises(TypeError):
        SpanProcessor(tmp_path, no_such_option=1)


def test_force_flush_blocks_until_the_open_session_is_on_disk(tmp_path: Path) -> None:
    """force_flush() writes and closes a trace still in progress (its root has not ended); the
    trace's later spans append to the same file without writing the history again."""
    tp = TracerProvider(shutdown_on_exit=False)
    processor = SpanProcessor(tmp_path, flush_interval=60.0)
    tp.add_span_processor(processor)
    tracer = tp.get_tracer("t")
    with tracer.start_as_current_span("agent"):
        _span(tracer, "chat", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": semconv([user("q")]),
                               "gen_ai.output.messages": semconv([reply("a")])})
        assert tp.force_flush() is True
        (path,) = files(tmp_path)
        assert [m["content"] for m in messages_of(path)] == ["q", "a"]
        assert processor._open == {}  # closed: whole on disk even if the process is frozen now
        history = [user("q"), reply("a"), user("q2")]
        _span(tracer, "chat", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": semconv(history),
                               "gen_ai.output.messages": semconv([reply("a2")])})
    tp.shutdown()
    assert files(tmp_path) == [path]
    assert [m["content"] for m in messages_of(path)] == ["q", "a", "q2", "a2"]


def test_conversation_resumed_by_a_new_processor_records_only_what_is_new(tmp_path: Path) -> None:
    """A conversation continued in a later run (a new processor, same directory): the file is
    appended to and the history already in it is not written again; a span that ends after its
    trace's root goes into the same file."""

    def run(history: list[dict[str, Any]], answer: str, late: bool = False) -> None:
        tp = TracerProvider(shutdown_on_exit=False)
        tp.add_span_processor(SpanProcessor(tmp_path))
        tracer = tp.get_tracer("t")
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": "conv-42",
            "gen_ai.input.messages": semconv(history),
            "gen_ai.output.messages": semconv([reply(answer)]),
        }
        with tracer.start_as_current_span("turn"):
            child = tracer.start_span("late chat", attributes=attrs) if late else None
            if not late:
                _span(tracer, "chat", attrs)
        if child is not None:
            child.end()  # after the root: the trace's file was closed already
        tp.shutdown()

    run([user("hi")], "hello")
    run([user("hi"), reply("hello"), user("how are you?")], "fine", late=True)
    assert files(tmp_path) == [tmp_path / "conv-42.jsonl"]
    assert [m["content"] for m in messages_of(tmp_path / "conv-42.jsonl")] == ["hi", "hello", "how are you?", "fine"]


def test_a_root_whose_parent_is_in_another_service_closes_the_session(tmp_path: Path) -> None:
    """A request that continues a trace from upstream (remote parent): its local root closes the file."""
    from opentelemetry import trace as trace_api
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path, flush_interval=60.0))
    tracer = tp.get_tracer("t")
    upstream = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    with tracer.start_as_current_span("POST /chat", context=trace_api.set_span_in_context(NonRecordingSpan(upstream))):
        _span(tracer, "chat", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": semconv([user("q")]),
                               "gen_ai.output.messages": semconv([reply("a")])})
    tp.force_flush()
    (path,) = files(tmp_path)
    assert path.name == f"{0x1234:032x}.jsonl"
    # Closed (not merely flushed): the file ends with its last record and no session is open.
    processor = tp._active_span_processor._span_processors[0]
    assert processor._open == {} and [m["content"] for m in messages_of(path)] == ["q", "a"]
    tp.shutdown()


def test_malformed_genai_attributes_record_what_is_readable_and_never_fail(tmp_path: Path) -> None:
    """Broken JSON, wrong types and odd indexes: no internal error (the suite turns those into
    failures), no exception into the application, and the readable parts are still recorded."""
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    tracer = tp.get_tracer("t")
    odd: list[dict[str, Any]] = [
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "not json", "gen_ai.output.messages": '{"a": 1}'},
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[1, null, \"x\", {\"role\": 5}]"},
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": '[{"role": "user", "parts": "text"}]'},
        {"gen_ai.operation.name": "chat", "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "tool_call", "id": 123, "name": null, "arguments": [1]}]}]'},
        {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": 7, "llm.input_messages.x.message.content": "?",
         "llm.output_messages.0.message.tool_calls.0.tool_call": "flat", "llm.token_count.prompt": "12"},
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.result": 3.5},
        {"openinference.span.kind": "TOOL", "input.value": "{broken", "output.value": '{"type": "tool", "data": 5}'},
        {"gen_ai.operation.name": "chat", "gen_ai.system_instructions": "plain words, not JSON",
         "gen_ai.input.messages": semconv([user("still fine")]), "gen_ai.output.messages": semconv([reply("ok")])},
    ]
    with tracer.start_as_current_span("agent"):
        for attrs in odd:
            _span(tracer, "odd", attrs, [("gen_ai.choice", {"gen_ai.event.content": "{not json"})])
    tp.shutdown()
    (path,) = files(tmp_path)
    got = messages_of(path)
    assert {"role": "system", "content": "plain words, not JSON"} in got
    assert got[-2:] == [{"role": "user", "content": "still fine"}, {"role": "assistant", "content": "ok"}]


def test_interpreter_exit_without_shutdown_writes_every_queued_span(tmp_path: Path) -> None:
    """A program that never shuts its provider down: at exit the queued spans are written and the
    files closed whole, even though ststrace's own exit hook closes open sessions first."""
    import subprocess
    import sys

    script = f"""
import orjson
from opentelemetry.sdk.trace import TracerProvider
from ststrace.otel import SpanProcessor
tp = TracerProvider(shutdown_on_exit=False)
tp.add_span_processor(SpanProcessor({str(tmp_path)!r}, flush_interval=60.0))
tracer = tp.get_tracer("t")
for n in range(20):
    with tracer.start_as_current_span("agent"):
        history = []
        for turn in range(10):
            history.append({{"role": "user", "parts": [{{"type": "text", "content": f"q{{n}}.{{turn}}"}}]}})
            attrs = {{"gen_ai.operation.name": "chat", "gen_ai.input.messages": orjson.dumps(history).decode(),
                      "gen_ai.output.messages": orjson.dumps([{{"role": "assistant", "parts": [{{"type": "text", "content": f"a{{n}}.{{turn}}"}}]}}]).decode()}}
            with tracer.start_as_current_span("chat", attributes=attrs):
                pass
            history.append({{"role": "assistant", "parts": [{{"type": "text", "content": f"a{{n}}.{{turn}}"}}]}})
    # Leave the last trace open: its root never ends.
tracer.start_span("never ends")
with tracer.start_as_current_span("open agent"):
    pass
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr, done.stderr
    found = files(tmp_path)
    assert len(found) == 20
    for path in found:
        got = messages_of(path)
        n = got[0]["content"][1:].split(".")[0]
        assert [m["content"] for m in got] == [f"{p}{n}.{t}" for t in range(10) for p in ("q", "a")]


def test_conversation_ids_that_are_not_file_names_stay_apart(tmp_path: Path) -> None:
    """Conversation ids that only differ where a file name cannot hold them ("user/1", "user?1"),
    or past 128 characters, are distinct conversations: distinct files, each with its own
    otel.conversationId; and "." names one file, the same for each of its traces."""
    tp = TracerProvider(shutdown_on_exit=False)
    processor = SpanProcessor(tmp_path)
    tp.add_span_processor(processor)
    tracer = tp.get_tracer("t")
    long = "x" * 200
    convs = ["user/1", "user?1", long + "A", long + "B", ".", "."]
    for n, conv in enumerate(convs):
        with tracer.start_as_current_span("turn"):
            _span(tracer, "chat", {
                "gen_ai.operation.name": "chat",
                "gen_ai.conversation.id": conv,
                "gen_ai.input.messages": semconv([user(f"q{n}")]),
                "gen_ai.output.messages": semconv([reply(f"a{n}")]),
            })
    tp.shutdown()
    processor.shutdown()  # a second shutdown is harmless
    by_conv = {}
    for path in files(tmp_path):
        trace = ststrace.read(path)
        by_conv[trace.header["otel"]["conversationId"]] = [m["content"] for m in messages_of(path)]
        assert len(path.name) <= 140
    assert by_conv == {
        "user/1": ["q0", "a0"],
        "user?1": ["q1", "a1"],
        long + "A": ["q2", "a2"],
        long + "B": ["q3", "a3"],
        ".": ["q4", "a4", "q5", "a5"],
    }


def test_a_secret_in_a_conversation_id_stays_out_of_the_file_name(tmp_path: Path) -> None:
    """A token used as (part of) gen_ai.conversation.id: the header is redacted, and so is the
    file name; the file's name and header id agree, and its turns stay in one file."""
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    tracer = tp.get_tracer("t")
    for n in range(2):
        with tracer.start_as_current_span("turn"):
            _span(tracer, "chat", {
                "gen_ai.operation.name": "chat",
                "gen_ai.conversation.id": "chat-" + SECRET,
                "gen_ai.input.messages": semconv([user(f"q{n}")]),
                "gen_ai.output.messages": semconv([reply(f"a{n}")]),
            })
    tp.shutdown()
    (path,) = files(tmp_path)
    assert SECRET not in path.name and SECRET not in path.read_text()
    header = ststrace.read(path).header
    assert path.name == header["id"] + ".jsonl"
    assert header["otel"]["conversationId"] == "chat-[REDACTED:github_token]"
    assert [m["content"] for m in messages_of(path)] == ["q0", "a0", "q1", "a1"]


def test_a_jsonl_file_as_the_directory_is_refused_at_construction(tmp_path: Path) -> None:
    """``SpanProcessor("traces/all.jsonl")`` was accepted: the first trace went into that file and
    every later trace was lost (logged: "cannot resume"). Each trace needs its own file: refused
    up front; a directory whose name ends in .jsonl is still a directory."""
    with pytest.raises(ValueError, match="directory"):
        SpanProcessor(tmp_path / "all.jsonl")
    assert not (tmp_path / "all.jsonl").exists()
    odd = tmp_path / "odd.jsonl"
    odd.mkdir()
    SpanProcessor(odd).shutdown()



def test_otel_negative_token_count_drops_the_count_and_keeps_the_reply(tmp_path: Path) -> None:
    """A span reporting output_tokens=-5 (and cache reads >= 2**64): the reply is recorded,
    the bad counts are left out, and no internal error is logged (the conftest would fail the test)."""
    import orjson

    pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace import TracerProvider

    from ststrace.otel import SpanProcessor

    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    with tp.get_tracer("t").start_as_current_span("chat m", attributes={
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": orjson.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]).decode(),
        "gen_ai.output.messages": orjson.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "yo"}]}]).decode(),
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": -5,
        "gen_ai.usage.cache_read.input_tokens": float(BIG),
    }):
        pass
    tp.shutdown()
    (path,) = tmp_path.glob("*.jsonl")
    user, reply = valid_messages(path)
    assert (user["content"], reply["content"]) == ("hi", "yo")
    assert reply["usage"] == {"input": 10, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 10}


def test_otel_conversation_id_of_dots_gives_a_visible_file(tmp_path: Path) -> None:
    import orjson

    pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace import TracerProvider

    from ststrace.otel import SpanProcessor

    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    for conv in ("...", ".hidden"):
        with tp.get_tracer("t").start_as_current_span("chat", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": conv,
            "gen_ai.input.messages": orjson.dumps([{"role": "user", "parts": [{"type": "text", "content": conv}]}]).decode(),
        }):
            pass
    tp.shutdown()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and not any(n.startswith(".") for n in names), names
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == names
