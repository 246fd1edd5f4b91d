"""Cost of ``ststrace.otel.SpanProcessor`` per GenAI span, against the SDK's own
``BatchSpanProcessor`` with a no-op exporter, in one process.

Run: ``python benchmarks/bench_otel.py [--traces T] [--turns N] [--repeats R]``

Workload: T traces, each an agent loop of N turns; every turn is a ``chat`` span
carrying the GenAI conventions' ``gen_ai.input.messages`` (the whole history so
far, resent as agent loops do) and ``gen_ai.output.messages`` (a reply with a tool
call), usage counts, then an ``execute_tool`` span with its result. The same
spans go through three TracerProviders, built alike:

- ``none``: no span processor (the SDK's own cost of making the spans);
- ``batch``: ``BatchSpanProcessor`` with an exporter that drops everything;
- ``ststrace``: ``ststrace.otel.SpanProcessor`` writing one STS file per trace.

Per variant it reports, per GenAI span: the CPU time of the application thread
(creating and ending the spans: what the application itself spends; thread CPU
time, because wall time on a shared 2-core machine mostly measures the
neighbours), and
the process CPU time until ``force_flush()`` returned (which adds the
background work: batching and the no-op export, or mapping and writing STS).
The added cost of a processor is its figure minus ``none``; the ratio
ststrace/batch of the added costs is what is compared. Variants are run in
rotating order, R times, medians reported. Plain (non-GenAI) spans are measured
the same way.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import orjson  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402

from ststrace.otel import SpanProcessor  # noqa: E402


class NoopExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except Exception:
        pass
    return platform.processor() or "unknown"


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text}


def workload(turns: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(chat span attributes, tool span attributes) per turn of one agent loop."""
    history: list[dict[str, Any]] = [
        {"role": "system", "parts": [text_part("You are a concise assistant. Use the tools for facts.")]},
        {"role": "user", "parts": [text_part("What's the weather in Paris, and the time there?")]},
    ]
    out = []
    for turn in range(turns):
        call_id = f"call_{turn:04d}"
        reply = {
            "role": "assistant",
            "parts": [
                text_part(f"Checking step {turn}."),
                {"type": "tool_call", "id": call_id, "name": "get_weather", "arguments": '{"city": "Paris"}'},
            ],
            "finish_reason": "tool_calls",
        }
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.input.messages": orjson.dumps(history).decode(),
            "gen_ai.output.messages": orjson.dumps([reply]).decode(),
            "gen_ai.usage.input_tokens": 120 + 40 * turn,
            "gen_ai.usage.output_tokens": 25,
        }
        result = f"Sunny, 21°C at step {turn}."
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            "gen_ai.tool.call.result": result,
        }
        out.append((chat, tool))
        history.append(reply)
        history.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": result}]})
    return out


def provider_for(variant: str, directory: str) -> TracerProvider:
    tp = TracerProvider(shutdown_on_exit=False)
    if variant == "batch":
        tp.add_span_processor(BatchSpanProcessor(NoopExporter(), max_queue_size=1 << 20))
    elif variant == "ststrace":
        tp.add_span_processor(SpanProcessor(directory, max_queue=1 << 20))
    return tp


def run_genai(variant: str, traces: int, spans: list[tuple[dict[str, Any], dict[str, Any]]]) -> tuple[float, float]:
    """(application thread's CPU seconds, process CPU seconds until flushed)."""
    with tempfile.TemporaryDirectory() as directory:
        tp = provider_for(variant, directory)
        tracer = tp.get_tracer("bench")
        cpu0 = time.process_time()
        thread0 = time.thread_time()
        for _ in range(traces):
            with tracer.start_as_current_span("agent run"):
                for chat, tool in spans:
                    with tracer.start_as_current_span("chat gpt-4o", attributes=chat):
                        pass
                    with tracer.start_as_current_span("execute_tool get_weather", attributes=tool):
                        pass
        app = time.thread_time() - thread0
        tp.force_flush(timeout_millis=600_000)
        cpu = time.process_time() - cpu0
        tp.shutdown()
    return app, cpu


def run_plain(variant: str, n: int) -> float:
    with tempfile.TemporaryDirectory() as directory:
        tp = provider_for(variant, directory)
        tracer = tp.get_tracer("bench")
        attrs = {"http.method": "GET", "http.route": "/items/{id}", "http.status_code": 200}
        t0 = time.thread_time()
        for _ in range(n // 10):
            with tracer.start_as_current_span("GET /items", attributes=attrs):
                for _ in range(9):
                    with tracer.start_as_current_span("SELECT", attributes={"db.system": "postgresql"}):
                        pass
        elapsed = time.thread_time() - t0
        tp.force_flush(timeout_millis=600_000)
        tp.shutdown()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=20)
    parser.add_argument("--turns", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plain", type=int, default=20_000, help="plain spans per run")
    args = parser.parse_args()
    spans = workload(args.turns)
    n_spans = args.traces * args.turns * 2
    variants = ["none", "batch", "ststrace"]
    app: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    plain: dict[str, list[float]] = {v: [] for v in variants}
    run_genai("ststrace", 2, spans)  # warm-up: imports, first file
    for r in range(args.repeats):
        order = variants[r % 3 :] + variants[: r % 3]
        for v in order:
            a, c = run_genai(v, args.traces, spans)
            app[v].append(a)
            cpu[v].append(c)
            plain[v].append(run_plain(v, args.plain))

    def per_span(values: list[float], n: int) -> float:
        return statistics.median(values) / n * 1e6

    print(f"CPU: {cpu_model()}; Python {platform.python_version()}; {os.cpu_count()} cores")
    print(
        f"GenAI spans: {args.traces} traces x {args.turns} turns x (chat + execute_tool) = {n_spans} spans, "
        f"{args.repeats} repeats, medians, microseconds per span"
    )
    print(f"{'variant':<10} {'app thread':>12} {'CPU to flush':>14} {'plain span':>12}  (CPU time)")
    for v in variants:
        print(
            f"{v:<10} {per_span(app[v], n_spans):>12.1f} {per_span(cpu[v], n_spans):>14.1f} "
            f"{per_span(plain[v], args.plain):>12.2f}"
        )
    added = {
        v: (
            per_span(app[v], n_spans) - per_span(app["none"], n_spans),
            per_span(cpu[v], n_spans) - per_span(cpu["none"], n_spans),
            per_span(plain[v], args.plain) - per_span(plain["none"], args.plain),
        )
        for v in ("batch", "ststrace")
    }
    print("added over 'none' (us per span): app thread / CPU to flush / plain span")
    for v, (a, c, p) in added.items():
        print(f"  {v:<9} {a:8.2f} / {c:8.2f} / {p:6.2f}")
    b, s = added["batch"], added["ststrace"]

    def ratio(x: float, y: float) -> str:
        return f"{x / y:.2f}x" if y > 0 else "n/a"

    print(
        f"ratio ststrace/batch of the added cost: app thread {ratio(s[0], b[0])}, "
        f"CPU to flush {ratio(s[1], b[1])}, plain spans {ratio(s[2], b[2])}"
    )


if __name__ == "__main__":
    main()
