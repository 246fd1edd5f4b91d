"""GenAI events sent as OpenTelemetry log records, handed to the span processor.

The SDK's logs API lives in ``opentelemetry.sdk._logs`` (not yet stable), so it
is imported only when :meth:`SpanProcessor.logs` is called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.sdk._logs import LogRecordProcessor

from .._errors import internal_error

__all__ = ["GENAI_EVENTS", "GenAILogProcessor"]

GENAI_EVENTS = frozenset(
    {
        "gen_ai.client.inference.operation.details",
        "gen_ai.system.message",
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.tool.message",
        "gen_ai.choice",
    }
)

Sink = Callable[[int, int, str, Mapping[str, Any]], None]


class GenAILogProcessor(LogRecordProcessor):
    """Pass GenAI event log records (with the span they belong to) to *sink*."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    def on_emit(self, log_record: Any) -> None:
        try:
            record = getattr(log_record, "log_record", log_record)
            name = getattr(record, "event_name", None)
            if name not in GENAI_EVENTS:
                return
            span_id = getattr(record, "span_id", 0) or 0
            trace_id = getattr(record, "trace_id", 0) or 0
            if not span_id:
                return  # not emitted inside a span: nothing to attach it to
            attributes: dict[str, Any] = dict(record.attributes or {})
            body = record.body
            if isinstance(body, Mapping):
                # The earlier conventions put the message in the body.
                attributes.update(body)
            self._sink(trace_id, span_id, name, attributes)
        except Exception as exc:
            internal_error(exc, "ststrace.otel log processor")

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
