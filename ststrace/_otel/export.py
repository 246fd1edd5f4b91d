"""STS sessions -> OpenTelemetry traces in the GenAI conventions, sent over OTLP/HTTP.

One session becomes one trace: an ``invoke_agent`` root span (the session id as
``gen_ai.conversation.id``, harness and name as attributes, the whole
conversation as ``gen_ai.input.messages``), one ``chat`` span per assistant
message (the conversation before it as ``gen_ai.input.messages``, the reply as
``gen_ai.output.messages``, model and usage), and one ``execute_tool`` span per
tool call answered by a result. Times come from the messages' timestamps. The
trace id is derived from the session id, so sending a file twice gives the
same trace.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace import SpanProcessor as _SdkSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from .._encode import dumps
from .._reader import Trace, read

__all__ = ["ExportResult", "export", "trace_spans"]

#: Spans per OTLP request, and about how many bytes of attributes.
BATCH = 512
MAX_REQUEST_BYTES = 3 << 20
_SCOPE = "ststrace.otel"


@dataclass
class ExportResult:
    """What :func:`export` sent."""

    sessions: int
    spans: int


class _SessionIds(IdGenerator):
    """Trace ids derived from the session id; span ids random."""

    def __init__(self) -> None:
        self.trace_id = 0
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        return self.trace_id or self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        return self._random.generate_span_id()


class _Collect(_SdkSpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _trace_id(session_id: str) -> int:
    value = int.from_bytes(hashlib.sha256(session_id.encode()).digest()[:16], "big")
    return value or 1


def _ns(ms: Any, fallback: int) -> int:
    if isinstance(ms, int) and not isinstance(ms, bool) and ms > 0:
        return ms * 1_000_000
    return fallback


def _parts(msg: Mapping[str, Any]) -> dict[str, Any]:
    """One STS message in the conventions' parts shape."""
    role = msg.get("role")
    content = msg.get("content")
    text = content if isinstance(content, str) else ""
    if role == "tool":
        return {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": msg.get("toolCallId", ""), "response": text}],
        }
    parts: list[dict[str, Any]] = []
    reasoning = msg.get("reasoningContent")
    if isinstance(reasoning, str) and reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    if text or role != "assistant":
        parts.append({"type": "text", "content": text})
    for call in msg.get("toolCalls") or ():
        fn = call.get("function") or {}
        # Arguments stay JSON text, so they come back byte for byte.
        parts.append({"type": "tool_call", "id": call.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments")})
    return {"role": role, "parts": parts}


#: Sub-agent header fields and the span attributes that carry them.
LINK_ATTRIBUTES = {
    "parentSessionId": "ststrace.session.parent_session_id",
    "parentToolCallId": "ststrace.session.parent_tool_call_id",
}


def _json(value: Any) -> str:
    return dumps(value).decode()


def _usage_attributes(usage: Any) -> dict[str, int]:
    if not isinstance(usage, Mapping):
        return {}

    def num(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    # The conventions count cached tokens inside the input tokens.
    out = {
        "gen_ai.usage.input_tokens": num("input") + num("cacheRead") + num("cacheWrite"),
        "gen_ai.usage.output_tokens": num("output"),
    }
    if num("cacheRead"):
        out["gen_ai.usage.cache_read.input_tokens"] = num("cacheRead")
    if num("cacheWrite"):
        out["gen_ai.usage.cache_creation.input_tokens"] = num("cacheWrite")
    if "reasoning" in usage:
        out["gen_ai.usage.reasoning.output_tokens"] = num("reasoning")
    return out


def trace_spans(trace: Trace, tracer: trace_api.Tracer) -> int:
    """Emit the spans of one session through *tracer*; returns how many.

    Spans end in conversation order (each ``chat`` span at its reply, each
    ``execute_tool`` span at its result, the root last), so a span processor
    sees them as the conversation happened.
    """
    header = trace.header
    messages = [m for m in trace.messages if isinstance(m, Mapping)]
    session_id = str(header.get("id", ""))
    harness = str(header.get("harness", ""))
    stamps = [m["timestamp"] for m in messages if isinstance(m.get("timestamp"), int) and m["timestamp"] > 0]
    now = time.time_ns()
    first = stamps[0] * 1_000_000 if stamps else now
    last = max(stamps) * 1_000_000 if stamps else now
    # On every span: a backend hands spans on without on_start, root last.
    session_attrs = {"gen_ai.conversation.id": session_id, "ststrace.session.harness": harness}
    if isinstance(header.get("name"), str):
        session_attrs["ststrace.session.name"] = header["name"]
    # A sub-agent's links to its parent, so a backend (and SpanProcessor) can join them.
    for key, attr in LINK_ATTRIBUTES.items():
        if isinstance(header.get(key), str):
            session_attrs[attr] = header[key]
    root_attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        **session_attrs,
        "gen_ai.agent.name": str(header.get("name") or harness),
        "gen_ai.input.messages": _json([_parts(m) for m in messages]),
    }
    root = tracer.start_span(
        f"invoke_agent {header.get('name') or harness}", attributes=root_attrs, start_time=first
    )
    context = trace_api.set_span_in_context(root)
    count = 1
    history: list[dict[str, Any]] = []
    open_tools: dict[str, tuple[Any, str]] = {}  # call id -> (span, name)
    previous = first
    for msg in messages:
        at = _ns(msg.get("timestamp"), previous)
        role = msg.get("role")
        if role == "assistant":
            model = msg.get("model")
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                **session_attrs,
                "gen_ai.input.messages": _json(history),
                "gen_ai.output.messages": _json([_parts(msg)]),
            }
            if isinstance(model, str) and model:
                attrs["gen_ai.request.model"] = model
                attrs["gen_ai.response.model"] = model
            attrs.update(_usage_attributes(msg.get("usage")))
            span = tracer.start_span(f"chat {model or ''}".strip(), context=context, attributes=attrs, start_time=previous)
            span.end(end_time=max(at, previous))
            count += 1
            for call in msg.get("toolCalls") or ():
                fn = call.get("function") or {}
                name = str(fn.get("name", ""))
                call_id = str(call.get("id", ""))
                tool_span = tracer.start_span(
                    f"execute_tool {name}",
                    context=context,
                    kind=trace_api.SpanKind.INTERNAL,
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        **session_attrs,
                        "gen_ai.tool.name": name,
                        "gen_ai.tool.call.id": call_id,
                        "gen_ai.tool.call.arguments": str(fn.get("arguments", "{}")),
                    },
                    start_time=max(at, previous),
                )
                open_tools[call_id] = (tool_span, name)
        elif role == "tool":
            pending = open_tools.pop(str(msg.get("toolCallId", "")), None)
            if pending is not None:
                tool_span = pending[0]
                content = msg.get("content")
                tool_span.set_attribute("gen_ai.tool.call.result", content if isinstance(content, str) else "")
                tool_span.end(end_time=max(at, tool_span.start_time or 0))
                count += 1
        history.append(_parts(msg))
        previous = max(at, previous)
    # Calls never answered get no span: an execute_tool span stands for a tool that ran.
    root.end(end_time=max(last, previous))
    return count


def _endpoint(endpoint: str) -> str:
    if not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://")):
        raise ValueError(f"endpoint must be an http:// or https:// URL such as http://localhost:4318, not {endpoint!r}")
    base = endpoint.rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


def export(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    endpoint: str,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    service_name: str = "ststrace",
) -> ExportResult:
    """Send each STS session in *paths* as one OpenTelemetry trace to an OTLP/HTTP *endpoint*.

    *endpoint* is the collector's base URL (``http://localhost:4318``; ``/v1/traces``
    is added) or the full traces URL. Raises ``ValueError`` for a bad endpoint,
    ``TraceFormatError`` / ``OSError`` for a file that cannot be read (before
    anything is sent), and ``ConnectionError`` when the receiver refuses a batch.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    url = _endpoint(endpoint)
    # Checked here: the exporter only logs a bad timeout and reports a refused batch.
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    traces = [read(Path(p)) for p in paths]  # every file checked before anything is sent
    ids = _SessionIds()
    collect = _Collect()
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}), id_generator=ids, shutdown_on_exit=False)
    provider.add_span_processor(collect)
    tracer = provider.get_tracer(_SCOPE)
    exporter = OTLPSpanExporter(endpoint=url, headers=dict(headers or {}), timeout=timeout)
    sent = 0
    try:
        for trace in traces:
            ids.trace_id = _trace_id(trace.id)
            trace_spans(trace, tracer)
            sent += _send(exporter, collect, url, SpanExportResult.SUCCESS)
        return ExportResult(sessions=len(traces), spans=sent)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
        provider.shutdown()


def _size(span: ReadableSpan) -> int:
    return sum(len(v) for v in (span.attributes or {}).values() if isinstance(v, str)) + 200


def _send(exporter: Any, collect: _Collect, url: str, success: Any) -> int:
    """Send the collected spans, at most :data:`BATCH` spans and about
    :data:`MAX_REQUEST_BYTES` per request (every chat span carries the history
    before it, so a long session is large)."""
    spans: Sequence[ReadableSpan] = collect.spans
    collect.spans = []
    batch: list[ReadableSpan] = []
    size = 0
    for span in spans:
        n = _size(span)
        if batch and (len(batch) >= BATCH or size + n > MAX_REQUEST_BYTES):
            _export(exporter, batch, url, success)
            batch, size = [], 0
        batch.append(span)
        size += n
    if batch:
        _export(exporter, batch, url, success)
    return len(spans)


def _export(exporter: Any, batch: Sequence[ReadableSpan], url: str, success: Any) -> None:
    if exporter.export(batch) is not success:
        raise ConnectionError(f"{url}: the OTLP receiver did not accept the spans (see the log for its answer)")
