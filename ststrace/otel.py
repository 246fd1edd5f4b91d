"""OpenTelemetry both ways. Import it explicitly: ``import ststrace.otel``
(``pip install 'ststrace[otel]'``); ``import ststrace`` does not load OpenTelemetry.

In: :class:`SpanProcessor` turns the GenAI spans of any instrumentation
(OpenTelemetry GenAI conventions, OpenInference, OpenLLMetry) into one STS
session file per trace; ``processor.logs()`` adds GenAI events that an
instrumentation sends as log records.

Out: :func:`export` sends STS sessions to any OTLP/HTTP receiver as traces in the
GenAI conventions (also ``ststrace otlp FILE... --endpoint URL``).
"""

from __future__ import annotations

try:
    import opentelemetry.sdk.trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "ststrace.otel needs the OpenTelemetry SDK: pip install 'ststrace[otel]'"
    ) from exc

from ._otel.export import ExportResult, export, trace_spans
from ._otel.processor import SpanProcessor

__all__ = ["ExportResult", "SpanProcessor", "export", "trace_spans"]
