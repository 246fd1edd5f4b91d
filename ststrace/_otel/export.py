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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace import SpanProcessor as _SdkSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from .._encode import dumps
from .._limits import token_count
from .._reader import Trace, iter_messages, read

__all__ = ["ExportResult", "export", "trace_spans"]

#: Spans per OTLP request, and about how many bytes of attributes.
BATCH = 512
MAX_REQUEST_BYTES = 3 << 20
#: Characters of JSON history a chat span carries (its most recent messages); see trace_spans.
MAX_HISTORY_CHARS = 64 << 10
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


class _Sender(_SdkSpanProcessor):
    """Sends spans as they end, at most :data:`BATCH` spans and about
    :data:`MAX_REQUEST_BYTES` per request: memory holds one batch, not the
    session's spans (each chat span carries the history before it, so all of
    them together grow with the square of the session's length).

    A refused batch is kept in :attr:`error` (raising inside ``span.end()``
    would reach the SDK); the spans ended after it are dropped, not sent."""

    def __init__(self, exporter: Any, url: str, success: Any) -> None:
        self._exporter = exporter
        self._url = url
        self._success = success
        self._batch: list[ReadableSpan] = []
        self._size = 0
        self.sent = 0
        self.error: ConnectionError | None = None

    def on_end(self, span: ReadableSpan) -> None:
        if self.error is not None:
            return
        n = _size(span)
        if self._batch and (len(self._batch) >= BATCH or self._size + n > MAX_REQUEST_BYTES):
            self.flush()
        self._batch.append(span)
        self._size += n

    def flush(self) -> None:
        """Send what is batched; raises the refusal, if any."""
        batch, self._batch, self._size = self._batch, [], 0
        if batch and self.error is None:
            if self._exporter.export(batch) is self._success:
                self.sent += len(batch)
            else:
                self.error = ConnectionError(_refused(self._url))
        if self.error is not None:
            raise self.error


def _not_listening(url: str) -> str | None:
    """Why nothing can reach *url*'s host and port, or ``None`` when a connection
    opens (or goes through a proxy, which this cannot check). Asked before the
    first request, so a collector that is not running is one clear line, not
    the exporter's retries for the whole timeout."""
    import socket
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None  # a bad port: the exporter says so
    if parts.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
        return None
    try:
        socket.create_connection((host, port), timeout=2).close()
    except ConnectionRefusedError:
        return f"{url}: nothing is listening at {host}:{port} (connection refused); is the collector running?"
    except OSError as exc:
        return f"{url}: cannot connect to {host}:{port}: {exc.strerror or exc}"
    return None


def _refused(url: str) -> str:
    return _not_listening(url) or f"{url}: the OTLP receiver did not accept the spans (see the log for its answer)"


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
    for call_id, name, arguments in _calls(msg):
        # Arguments stay JSON text, so they come back byte for byte.
        parts.append({"type": "tool_call", "id": call_id, "name": name, "arguments": arguments})
    return {"role": role, "parts": parts}


def _calls(msg: Mapping[str, Any]) -> list[tuple[Any, Any, Any]]:
    """(id, name, arguments) of each tool call that has the STS shape; a
    malformed ``toolCalls`` (the reader only checks role and content) gives none."""
    calls = msg.get("toolCalls")
    out: list[tuple[Any, Any, Any]] = []
    if isinstance(calls, list):
        for call in calls:
            if isinstance(call, dict):
                fn = call.get("function")
                fn = fn if isinstance(fn, dict) else {}
                out.append((call.get("id"), fn.get("name"), fn.get("arguments")))
    return out


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
        # A count validate refuses (2**64 cannot even be an OTel int attribute) counts as 0.
        value = usage.get(key)
        return value if isinstance(value, int) and token_count(value) is not None else 0

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


def trace_spans(trace: Trace, tracer: trace_api.Tracer, max_history_chars: int | None = MAX_HISTORY_CHARS) -> int:
    """Emit the spans of one session through *tracer*; returns how many.

    Spans end in conversation order (each ``chat`` span at its reply, each
    ``execute_tool`` span at its result, the root last), so a span processor
    sees them as the conversation happened. A chat span's
    ``gen_ai.input.messages`` holds the conversation before it, its most
    recent messages up to *max_history_chars* characters of JSON (``None``: all of it);
    ``ststrace.input.messages_omitted`` counts the older ones left out (the
    root span holds them all). Unbounded, a long session would send bytes
    growing with the square of its length.
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
    # Each message before this point, as JSON text: str, not orjson's bytes,
    # which keep a 4 KiB buffer each however short the message.
    history: list[str] = []
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
                "gen_ai.input.messages": "",
                "gen_ai.output.messages": _json([_parts(msg)]),
            }
            attrs["gen_ai.input.messages"], omitted = _recent(history, max_history_chars)
            if omitted:
                attrs["ststrace.input.messages_omitted"] = omitted
            if isinstance(model, str) and model:
                attrs["gen_ai.request.model"] = model
                attrs["gen_ai.response.model"] = model
            attrs.update(_usage_attributes(msg.get("usage")))
            span = tracer.start_span(f"chat {model or ''}".strip(), context=context, attributes=attrs, start_time=previous)
            span.end(end_time=max(at, previous))
            count += 1
            for raw_id, raw_name, arguments in _calls(msg):
                name = raw_name if isinstance(raw_name, str) else ""
                call_id = raw_id if isinstance(raw_id, str) else ""
                tool_span = tracer.start_span(
                    f"execute_tool {name}",
                    context=context,
                    kind=trace_api.SpanKind.INTERNAL,
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        **session_attrs,
                        "gen_ai.tool.name": name,
                        "gen_ai.tool.call.id": call_id,
                        "gen_ai.tool.call.arguments": arguments if isinstance(arguments, str) else "{}",
                    },
                    start_time=max(at, previous),
                )
                open_tools[call_id] = (tool_span, name)
        elif role == "tool":
            answered = msg.get("toolCallId")
            pending = open_tools.pop(answered, None) if isinstance(answered, str) else None
            if pending is not None:
                tool_span = pending[0]
                content = msg.get("content")
                tool_span.set_attribute("gen_ai.tool.call.result", content if isinstance(content, str) else "")
                tool_span.end(end_time=max(at, tool_span.start_time or 0))
                count += 1
        history.append(_json(_parts(msg)))
        previous = max(at, previous)
    # Calls never answered get no span: an execute_tool span stands for a tool that ran.
    root.end(end_time=max(last, previous))
    return count


def _recent(history: list[str], budget: int | None) -> tuple[str, int]:
    """The JSON array of the last messages of *history* that fit in *budget* characters
    (at least the last one), and how many earlier ones were left out."""
    start, size = len(history), 2
    while start > 0 and (budget is None or start == len(history) or size + len(history[start - 1]) + 1 <= budget):
        start -= 1
        size += len(history[start]) + 1
    return "[" + ",".join(history[start:]) + "]", start


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
    max_history_chars: int | None = MAX_HISTORY_CHARS,
) -> ExportResult:
    """Send each STS session in *paths* as one OpenTelemetry trace to an OTLP/HTTP *endpoint*.

    *endpoint* is the collector's base URL (``http://localhost:4318``; ``/v1/traces``
    is added) or the full traces URL. Raises ``ValueError`` for a bad endpoint,
    ``TraceFormatError`` / ``OSError`` for a file that cannot be read (before
    anything is sent), and ``ConnectionError`` when nothing listens at the
    endpoint or the receiver refuses a batch. Spans are sent in batches as they
    are built, so memory holds one session and one batch.
    *max_history_chars*: see :func:`trace_spans`.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    url = _endpoint(endpoint)
    # Checked here: the exporter only logs a bad timeout and reports a refused batch.
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if max_history_chars is not None and (
        isinstance(max_history_chars, bool) or not isinstance(max_history_chars, int) or max_history_chars < 0
    ):
        raise ValueError(f"max_history_chars must be a non-negative integer or None, not {max_history_chars!r}")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = [Path(p) for p in paths]
    for path in files:
        # Every file checked before anything is sent, one message at a time.
        for _ in iter_messages(path):
            pass
    unreachable = _not_listening(url)
    if unreachable is not None:
        raise ConnectionError(unreachable)
    ids = _SessionIds()
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}), id_generator=ids, shutdown_on_exit=False)
    exporter = OTLPSpanExporter(endpoint=url, headers=dict(headers or {}), timeout=timeout)
    sender = _Sender(exporter, url, SpanExportResult.SUCCESS)
    provider.add_span_processor(sender)
    tracer = provider.get_tracer(_SCOPE)
    try:
        for path in files:
            trace = read(path)
            ids.trace_id = _trace_id(trace.id)
            trace_spans(trace, tracer, max_history_chars)
            del trace
            if sender.error is not None:
                raise sender.error
        sender.flush()
        return ExportResult(sessions=len(files), spans=sender.sent)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
        provider.shutdown()


def _size(span: ReadableSpan) -> int:
    return sum(len(v) for v in (span.attributes or {}).values() if isinstance(v, str)) + 200
