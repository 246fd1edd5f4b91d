"""OpenTelemetry both ways (``ststrace.otel``): GenAI spans in, OTLP out."""
