"""STS -> OTLP: ``ststrace otlp`` and ``ststrace.otel.export`` against a real OTLP/HTTP receiver.

The receiver listens on 127.0.0.1, decodes each request with the official
``opentelemetry-proto`` messages, stores the spans and serves them back as
JSON; the tests read them from it. (arize-phoenix cannot be installed beside
this project's pins: it requires anthropic<2.)

The round trip feeds the received spans, rebuilt as SDK spans in the order they
arrived, to a ``SpanProcessor`` and compares the STS it writes with the source.
"""

from __future__ import annotations

import gzip
import json
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from google.protobuf.json_format import MessageToDict  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.trace import SpanContext, TraceFlags  # noqa: E402

import ststrace  # noqa: E402
from ststrace import Session  # noqa: E402
from ststrace.cli import main  # noqa: E402
from ststrace.otel import SpanProcessor, export  # noqa: E402
from test_usage_cli import _write_trace  # noqa: E402
from test_cli import _two_traces  # noqa: E402


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1 that stores spans and serves them at GET /spans."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.fail_next = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or receiver.fail_next:
                    receiver.fail_next = max(0, receiver.fail_next - 1)
                    self.send_response(400)
                    self.end_headers()
                    return
                receiver.requests.append(ExportTraceServiceRequest.FromString(body))
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:
                spans = [MessageToDict(s) for s in receiver.spans()]
                body = json.dumps(spans).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Any]:
        return [
            span
            for request in self.requests
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]

    def served(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.url + "/spans", timeout=5) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


T0 = 1_767_225_600_000
USAGE = {"input": 12, "output": 30, "cacheRead": 100, "cacheWrite": 4, "totalTokens": 146, "reasoning": 7}


def write_source(path: Path) -> list[dict[str, Any]]:
    """A session shaped like a real agent run; returns its messages as written."""
    records: list[dict[str, Any]] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather and time in Paris?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "reasoningContent": "Two tools are needed.",
            "toolCalls": [
                {"id": "call_1", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
                {"id": "call_2", "function": {"name": "get_time", "arguments": '{"tz":"Europe/Paris"}'}},
            ],
            "model": "gpt-4o",
            "usage": USAGE,
        },
        {"role": "tool", "content": "sunny, 21°C", "toolCallId": "call_1"},
        {"role": "tool", "content": '{"time": "15:00"}', "toolCallId": "call_2"},
        {"role": "assistant", "content": "Sunny, 21°C; it is 15:00.", "model": "gpt-4o-mini"},
        {"role": "user", "content": "Thanks!"},
        {"role": "assistant", "content": "You're welcome."},
        {"role": "user", "content": "Bye"},
    ]
    with Session(path, id="weather-session-1", harness="my-agent", name="Weather in Paris") as s:
        for i, record in enumerate(records):
            s.record({**record, "timestamp": T0 + i * 1000})
    assert ststrace.validate(path) == []
    return [dict(m) for m in ststrace.read(path).messages]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def rebuilt(spans: list[Any]) -> list[ReadableSpan]:
    """The received protobuf spans as SDK spans, as a backend would hand them on."""
    out = []
    for s in spans:
        trace_id = int.from_bytes(s.trace_id, "big")
        context = SpanContext(trace_id, int.from_bytes(s.span_id, "big"), False, TraceFlags(1))
        parent = (
            SpanContext(trace_id, int.from_bytes(s.parent_span_id, "big"), False, TraceFlags(1))
            if s.parent_span_id
            else None
        )
        out.append(
            ReadableSpan(
                name=s.name,
                context=context,
                parent=parent,
                attributes={kv.key: _value(kv.value) for kv in s.attributes},
                start_time=s.start_time_unix_nano,
                end_time=s.end_time_unix_nano,
            )
        )
    return out


def test_otlp_command_sends_genai_spans_the_receiver_serves_back(receiver: Receiver, tmp_path: Path) -> None:
    """One trace per session: an invoke_agent root, a chat span per reply, an execute_tool span per answered call."""
    source = tmp_path / "weather.jsonl"
    write_source(source)
    code = main(["otlp", str(source), "--endpoint", receiver.url, "--header", "authorization=Bearer t0ken"])
    assert code == 0
    assert receiver.headers[0]["authorization"] == "Bearer t0ken"
    spans = receiver.served()
    by_name = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    assert sorted(by_name) == [
        "chat",
        "chat gpt-4o",
        "chat gpt-4o-mini",
        "execute_tool get_time",
        "execute_tool get_weather",
        "invoke_agent Weather in Paris",
    ]
    (root,) = by_name["invoke_agent Weather in Paris"]
    assert "parentSpanId" not in root
    assert {s["traceId"] for s in spans} == {root["traceId"]}
    assert all(s["parentSpanId"] == root["spanId"] for s in spans if s is not root)
    attrs = {a["key"]: a["value"] for a in by_name["chat gpt-4o"][0]["attributes"]}
    assert attrs["gen_ai.conversation.id"] == {"stringValue": "weather-session-1"}
    assert attrs["gen_ai.usage.input_tokens"] == {"intValue": "116"}  # cached tokens counted in, as the conventions say
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == {"intValue": "100"}
    output = json.loads(attrs["gen_ai.output.messages"]["stringValue"])
    assert output[0]["parts"][0] == {"type": "reasoning", "content": "Two tools are needed."}
    tool = {a["key"]: a["value"] for a in by_name["execute_tool get_time"][0]["attributes"]}
    assert tool["gen_ai.tool.call.id"] == {"stringValue": "call_2"}
    assert tool["gen_ai.tool.call.result"] == {"stringValue": '{"time": "15:00"}'}
    assert int(root["startTimeUnixNano"]) == T0 * 1_000_000
    assert int(root["endTimeUnixNano"]) == (T0 + 8000) * 1_000_000


def test_round_trip_sts_to_otlp_to_processor_gives_back_the_same_messages(receiver: Receiver, tmp_path: Path) -> None:
    """STS -> OTLP -> SpanProcessor -> STS: roles, contents, reasoning, tool calls and ids, results, models, usage."""
    source = tmp_path / "weather.jsonl"
    original = write_source(source)
    result = export([source], endpoint=receiver.url)
    assert (result.sessions, result.spans) == (1, 6)  # root, 3 chat, 2 execute_tool
    processor = SpanProcessor(tmp_path / "back")
    for span in rebuilt(receiver.spans()):
        processor.on_end(span)
    processor.shutdown()
    back = tmp_path / "back" / "weather-session-1.jsonl"
    assert ststrace.validate(back) == []
    trace = ststrace.read(back)
    assert trace.header["harness"] == "my-agent" and trace.header["name"] == "Weather in Paris"
    strip = lambda ms: [{k: v for k, v in m.items() if k != "timestamp"} for m in ms]  # noqa: E731
    assert strip(trace.messages) == strip(original)
    # Replies keep their own time; the rest are dated by the request that carried them.
    assert [m["timestamp"] for m in trace.messages if m["role"] == "assistant"] == [T0 + 2000, T0 + 5000, T0 + 7000]


def test_export_sends_the_same_trace_id_for_the_same_session_twice(receiver: Receiver, tmp_path: Path) -> None:
    """The trace id is derived from the session id, so a re-send does not duplicate the trace."""
    source = tmp_path / "weather.jsonl"
    write_source(source)
    export(source, endpoint=receiver.url + "/v1/traces")
    export(source, endpoint=receiver.url)
    ids = {s.trace_id for s in receiver.spans()}
    assert len(ids) == 1 and len(receiver.requests) == 2


def test_otlp_command_reports_bad_input_and_refusals_in_one_line(
    receiver: Receiver, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Missing file, a bad endpoint and a receiver that answers 400 each give exit 1 and a clear line."""
    source = tmp_path / "weather.jsonl"
    write_source(source)
    assert main(["otlp", str(tmp_path / "nope.jsonl"), "--endpoint", receiver.url]) == 1
    assert "nope.jsonl: no such file" in capsys.readouterr().err
    assert main(["otlp", str(source), "--endpoint", "localhost:4318"]) == 1
    assert "endpoint must be an http:// or https:// URL" in capsys.readouterr().err
    assert main(["otlp", str(source), "--endpoint", receiver.url, "--header", "novalue"]) == 2
    capsys.readouterr()
    receiver.fail_next = 1
    assert main(["otlp", str(source), "--endpoint", receiver.url]) == 1
    assert "did not accept the spans" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "message"}\n')
    assert main(["otlp", str(source), str(bad), "--endpoint", receiver.url]) == 1
    assert "bad.jsonl" in capsys.readouterr().err
    assert len(receiver.requests) == 0  # nothing sent when any file is unreadable


def test_export_writes_nothing_into_the_global_provider(receiver: Receiver, tmp_path: Path) -> None:
    """export() uses a private provider: the application's global tracer provider is left alone."""
    from opentelemetry import trace

    before = trace.get_tracer_provider()
    source = tmp_path / "weather.jsonl"
    write_source(source)
    export(source, endpoint=receiver.url)
    assert trace.get_tracer_provider() is before
    assert orjson.loads(source.read_bytes().splitlines()[0])["id"] == "weather-session-1"


def test_import_ststrace_does_not_load_opentelemetry() -> None:
    """`import ststrace` and `ststrace --help` stay free of OpenTelemetry; `import ststrace.otel` loads it."""
    import subprocess
    import sys

    code = (
        "import sys, ststrace, ststrace.cli, contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out: ststrace.cli.main(['--help'])\n"
        "assert 'otlp' in out.getvalue(), out.getvalue()\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'loaded'\n"
        "import ststrace.otel\n"
        "assert 'opentelemetry.sdk.trace' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_long_session_is_sent_in_requests_of_bounded_size(
    receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chat span carries the history before it: requests are split by size, and no span is lost."""
    from ststrace._otel import export as export_module

    monkeypatch.setattr(export_module, "MAX_REQUEST_BYTES", 20_000)
    path = tmp_path / "long.jsonl"
    with Session(path, id="long-1") as s:
        for i in range(30):
            s.user(f"question {i} " + "x" * 200)
            s.assistant(f"answer {i}", model="m")
    result = export(path, endpoint=receiver.url)
    assert result.spans == 31 and len(receiver.spans()) == 31
    assert len(receiver.requests) > 3
    sizes = [r.ByteSize() for r in receiver.requests]
    assert max(sizes) < 60_000, sizes  # the root span (whole conversation) alone is ~20 KB


def test_several_files_become_several_traces_and_round_trip_each(receiver: Receiver, tmp_path: Path) -> None:
    """Two sessions in one command: two traces, each read back by the processor into its own file."""
    first = tmp_path / "a.jsonl"
    write_source(first)
    second = tmp_path / "b.jsonl"
    with Session(second, id="other-session", harness="h2") as s:
        s.user("ping")
        s.assistant("pong", model="m2")
    assert main(["otlp", str(first), str(second), "--endpoint", receiver.url]) == 0
    spans = receiver.spans()
    assert len({s.trace_id for s in spans}) == 2
    processor = SpanProcessor(tmp_path / "back")
    for span in rebuilt(spans):
        processor.on_end(span)
    processor.shutdown()
    back = sorted(p.name for p in (tmp_path / "back").glob("*.jsonl"))
    assert back == ["other-session.jsonl", "weather-session-1.jsonl"]
    other = ststrace.read(tmp_path / "back" / "other-session.jsonl")
    assert other.header["harness"] == "h2"
    assert [(m["role"], m["content"], m.get("model")) for m in other.messages] == [("user", "ping", None), ("assistant", "pong", "m2")]


def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(
    receiver: Receiver, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--timeout 0`` / ``-1`` / ``nan`` / ``inf``: exit 2 with argparse's line (it was exit 1,
    "the OTLP receiver did not accept the spans", with nothing wrong at the receiver); and
    ``export(timeout=0)`` is a ValueError. Nothing is sent."""
    source = tmp_path / "weather.jsonl"
    write_source(source)
    for bad in ("0", "-1", "nan", "inf"):
        assert main(["otlp", str(source), "--endpoint", receiver.url, f"--timeout={bad}"]) == 2
        err = capsys.readouterr().err
        assert "--timeout" in err and "did not accept" not in err
    for bad_value in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            export([source], endpoint=receiver.url, timeout=bad_value)
    assert len(receiver.requests) == 0


def test_a_sub_agent_session_keeps_its_parent_links_through_otlp_and_back(receiver: Receiver, tmp_path: Path) -> None:
    """A child session (parentSessionId / parentToolCallId in its header, usage on its reply):
    the spans carry the links, and read back by SpanProcessor the header has them again."""
    child = tmp_path / "child.jsonl"
    with Session(child, id="child-1", harness="my-agent", name="research",
                 metadata={"parentSessionId": "parent-1", "parentToolCallId": "call_7"}) as s:
        s.record({"role": "user", "content": "look it up", "timestamp": T0})
        s.record({"role": "assistant", "content": "found it", "model": "gpt-4o", "usage": USAGE, "timestamp": T0 + 1000})
    export([child], endpoint=receiver.url)
    spans = receiver.spans()
    root = next(s for s in spans if s.name.startswith("invoke_agent"))
    attrs = {a.key: _value(a.value) for a in root.attributes}
    assert attrs["ststrace.session.parent_session_id"] == "parent-1"
    assert attrs["ststrace.session.parent_tool_call_id"] == "call_7"
    processor = SpanProcessor(tmp_path / "back")
    for span in rebuilt(spans):
        processor.on_end(span)
    processor.shutdown()
    trace = ststrace.read(tmp_path / "back" / "child-1.jsonl")
    assert trace.header["parentSessionId"] == "parent-1" and trace.header["parentToolCallId"] == "call_7"
    assert [m.get("usage") for m in trace.messages] == [m.get("usage") for m in ststrace.read(child).messages]



# -- ststrace otlp sends as it builds; memory bounded by the largest span -----------


def _long_session(path: Path, turns: int) -> Path:
    with Session(path, id="long-1", redact=False) as s:
        for i in range(turns):
            s.user(f"question {i}: how is item {i} doing in the queue today?")
            if i % 3 == 2:
                (cid,) = s.assistant("", model="m", tool_calls=[{"name": "lookup", "arguments": {"item": i}}])
                s.tool(cid, f"item {i} is waiting")
            s.assistant(f"answer {i}: item {i} is fine.", model="m")
    return path


class _Discard:
    """An OTLP/HTTP receiver on 127.0.0.1 that counts and drops each request."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.sizes: list[int] = []
        sizes = self.sizes

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(n)
                sizes.append(n)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_otlp_takes_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from ststrace.cli import main
    from test_otel_export import Receiver  # the local OTLP receiver the export tests use

    _two_traces(tmp_path / "traces")
    receiver = Receiver()
    try:
        assert main(["otlp", str(tmp_path / "traces"), "--endpoint", receiver.url]) == 0
    finally:
        receiver.close()
    assert len(receiver.spans()) == 4  # a root and a chat span per session
    assert capsys.readouterr().out.startswith("sent 2 sessions (")


def test_otlp_export_memory_does_not_grow_with_the_square_of_the_session(tmp_path: Path) -> None:
    """1,600 messages with the whole history on every chat span (about 30 MB of spans): the
    Python memory export() allocates at its peak stays near one request (3 MiB), not all spans."""
    import tracemalloc

    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from ststrace.otel import export

    path = _long_session(tmp_path / "long.jsonl", 600)
    receiver = _Discard()
    try:
        export(path, endpoint=receiver.url)  # warm-up: imports and first-use caches are not the export's
        receiver.sizes.clear()
        tracemalloc.start()
        try:
            result = export(path, endpoint=receiver.url, max_history_chars=None)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        receiver.close()
    sent = sum(receiver.sizes)
    assert result.spans == 1 + 800 + 200 and sent > 25_000_000, (result, sent)
    assert peak < 14_000_000, f"peak {peak / 1e6:.1f} MB of Python memory for {sent / 1e6:.0f} MB sent"


def test_chat_spans_carry_the_recent_history_and_round_trip(tmp_path: Path) -> None:
    """With a small budget each chat span holds the most recent messages that fit (and counts the
    rest in ststrace.input.messages_omitted); read back by SpanProcessor, the session is whole."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    import ststrace
    from ststrace._otel import export as export_module
    from ststrace.otel import SpanProcessor
    from test_otel_export import Receiver, rebuilt

    path = _long_session(tmp_path / "long.jsonl", 40)
    receiver = Receiver()
    try:
        ststrace.otel.export(path, endpoint=receiver.url, max_history_chars=2_000)
    finally:
        receiver.close()
    chats = [s for s in receiver.spans() if s.name.startswith("chat")]
    omitted = [next((a.value.int_value for a in s.attributes if a.key == "ststrace.input.messages_omitted"), 0) for s in chats]
    sizes = [len(next(a.value.string_value for a in s.attributes if a.key == "gen_ai.input.messages")) for s in chats]
    assert omitted[:3] == [0, 0, 0] and omitted[-1] > 50, omitted
    assert max(sizes) <= 2_000, sizes
    assert export_module.MAX_HISTORY_CHARS == 65_536  # the CLI's default says the same
    from ststrace._cli.otlp import MAX_HISTORY_CHARS

    assert MAX_HISTORY_CHARS == export_module.MAX_HISTORY_CHARS
    out = tmp_path / "back"
    processor = SpanProcessor(out)
    for span in rebuilt(receiver.spans()):
        processor.on_end(span)
    processor.shutdown()
    (back,) = out.glob("*.jsonl")
    keep = ("role", "content", "toolCalls", "toolCallId", "model")
    assert [{k: m[k] for k in keep if k in m} for m in ststrace.read(back).messages] == [
        {k: m[k] for k in keep if k in m} for m in ststrace.read(path).messages
    ]


# -- a refused connection says nothing is listening ----------------


def test_otlp_to_a_closed_port_says_nothing_is_listening(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket
    import time

    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from ststrace.cli import main

    with socket.socket() as probe:  # a port that was free a moment ago, with nothing bound to it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (path,) = _two_traces(tmp_path)[:1]
    start = time.monotonic()
    assert main(["otlp", str(path), "--endpoint", f"http://127.0.0.1:{port}"]) == 1
    assert time.monotonic() - start < 5  # no exporter retries for the whole timeout
    assert capsys.readouterr().err == (
        f"ststrace otlp: http://127.0.0.1:{port}/v1/traces: nothing is listening at 127.0.0.1:{port} "
        "(connection refused); is the collector running?\n"
    )


def test_otlp_sends_a_file_whose_usage_count_is_past_64_bit_signed(tmp_path: Path) -> None:
    """A file written elsewhere with a count of 2**63 + 5 (an int to JSON readers, too big for an
    OTel int attribute): the other counts are sent, the batch is not lost."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from ststrace.otel import export
    from test_otel_export import Receiver

    path = _write_trace(
        tmp_path / "t.jsonl",
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "model": "m", "usage": {"input": 5, "output": 2**63 + 5}},
    )
    receiver = Receiver()
    try:
        assert export(path, endpoint=receiver.url).spans == 2
        (chat,) = [s for s in receiver.spans() if s.name.startswith("chat")]
    finally:
        receiver.close()
    attrs = {a.key: a.value.int_value for a in chat.attributes if a.key.startswith("gen_ai.usage.")}
    assert attrs == {"gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 0}
