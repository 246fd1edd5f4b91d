"""ststrace against the floor and against other tracing SDKs, each in a fresh process.

Run: ``python benchmarks/compare.py [--n N] [--runs R] [--cases a,b,...]``
(peers need ``pip install -e '.[bench]'``; a peer that is missing or cannot run
offline is reported as skipped, with the reason).

Every case calls the same no-op tool ``def tool(x): return x`` N times:

- ``bare``: no tracing at all.
- ``floor``: the least work any JSONL tracer must do per call: the two STS
  messages built by hand (ids, ms timestamps, ``orjson.dumps`` of the
  arguments and the result), ``orjson.dumps`` of each envelope, appended to a
  buffer that is written to a file every 64 KiB. ``floor-async``: the same
  around ``async def tool(x)``, in an ``async def`` wrapper that awaits it
  (the ratio ``ststrace-async / floor-async`` is printed under the table).
- ``ststrace``: ``@tool`` inside a ``Session`` (default settings, and with
  ``redact=False``); ``async def`` under ``@tool`` awaited in an event loop;
  ``@tool`` with no session.
- peers, each fully offline with a local exporter that writes JSON lines to a
  file: OpenTelemetry SDK (a span per call with the input and output as
  attributes, ``BatchSpanProcessor``), Pydantic Logfire
  (``send_to_logfire=False``, ``@logfire.instrument`` with ``record_return``),
  Langfuse (``@observe``, its ``span_exporter`` set to the local exporter),
  MLflow tracing (``@mlflow.trace``, local file store).

Each case process runs under ststrace's network guard: a connection to any
host but 127.0.0.1 fails, and the attempt is reported.

Columns: wall ns per call (median over R fresh processes, the cases run
round-robin; the calls only)
and its ratio to ``floor``; CPU ns per call (all threads of the process, the
calls plus the final flush: background exporters count) and its ratio; total
ms including the final flush / shutdown; peak RSS growth during the calls;
bytes written per call (a peer whose queue drops spans under load writes
fewer); and the number of calls timed (slow peers are cut to about 4 s).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

CASES = [
    "bare",
    "floor",
    "ststrace",
    "ststrace-redact-off",
    "ststrace-async",
    "floor-async",
    "ststrace-no-session",
    "opentelemetry",
    "logfire",
    "langfuse",
    "mlflow",
]

# A case slower than this per call is cut to fewer calls (ns per call stays
# comparable; the run stays short).
TIME_BUDGET_S = 4.0


def tool(x: Any) -> Any:
    return x


class Skip(Exception):
    """The case cannot run here; the message says why."""


# -- a JSON-lines span exporter for the OpenTelemetry-based peers ------------------------


def jsonl_exporter(path: Path) -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # type: ignore[import-not-found]

    class JsonlSpanExporter(SpanExporter):  # type: ignore[misc]
        def __init__(self) -> None:
            self._file = open(path, "a", encoding="utf-8")
            self.spans = 0

        def export(self, spans: Any) -> Any:
            for span in spans:
                self._file.write(span.to_json(indent=None))
                self._file.write("\n")
                self.spans += 1
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            self._file.close()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            self._file.flush()
            return True

    return JsonlSpanExporter()


# -- cases: each returns (call, finish, out_dir); async cases return an async call ----


def case_bare(out: Path) -> tuple[Callable[[int], Any], Callable[[], None]]:
    return tool, lambda: None


def _floor_lines(out: Path) -> tuple[Callable[[Any], str], Callable[[str, Any], None], Callable[[], None]]:
    """The floor's two halves: the call's line (returns its id) and the result's line."""
    import itertools

    import orjson

    f = open(out / "floor.jsonl", "wb")
    buf = bytearray()
    ids = itertools.count(1)
    prefix = os.urandom(6).hex()
    dumps, now = orjson.dumps, time.time_ns

    def begin(x: Any) -> str:
        nonlocal buf
        call_id = f"call_{prefix}{next(ids):06x}"
        request = {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": call_id, "function": {"name": "tool", "arguments": dumps({"x": x}).decode()}}],
            "timestamp": now() // 1_000_000,
        }
        buf += dumps({"type": "message", "message": request})
        buf += b"\n"
        return call_id

    def end(call_id: str, result: Any) -> None:
        nonlocal buf
        answer = {"role": "tool", "content": dumps(result).decode(), "toolCallId": call_id, "timestamp": now() // 1_000_000}
        buf += dumps({"type": "message", "message": answer})
        buf += b"\n"
        if len(buf) >= 65536:
            f.write(buf)
            buf = bytearray()

    def finish() -> None:
        f.write(buf)
        f.close()

    return begin, end, finish


def case_floor(out: Path) -> tuple[Callable[[int], Any], Callable[[], None]]:
    begin, end, finish = _floor_lines(out)

    def call(x: Any) -> Any:
        call_id = begin(x)
        result = tool(x)
        end(call_id, result)
        return result

    return call, finish


def _ststrace(out: Path, **session_kwargs: Any) -> tuple[Callable[[int], Any], Callable[[], None]]:
    import ststrace

    traced = ststrace.tool(tool)
    session = ststrace.Session(out, **session_kwargs).open()
    return traced, session.close


def case_ststrace(out: Path) -> tuple[Callable[[int], Any], Callable[[], None]]:
    return _ststrace(out)


def case_ststrace_redact_off(out: Path) -> tuple[Callable[[int], Any], Callable[[], None]]:
    return _ststrace(out, redact=False)


def case_ststrace_no_session(out: Path) -> tuple[Callable[[int], Any], Callable[[], None]]:
    import ststrace

    return ststrace.tool(tool), lambda: None


def case_opentelemetry(out: Path) -> tuple[Callable[[int], Any], Callable[[], None]]:
    try:
        import orjson
        from opentelemetry.sdk.trace import TracerProvider  # type: ignore[import-not-found]
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # type: ignore[import-not-found]
    except ImportError as exc:
        raise Skip(f"not installed ({exc.name})") from None
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(jsonl_exporter(out / "otel.jsonl")))
    tracer = provider.get_tracer("bench")

    # The plain OpenTelemetry way to trace a function with its input and output.
    @functools.wraps(tool)
    def traced(x: Any) -> Any:
        with tracer.start_as_current_span("tool") as span:
            span.set_attribute("input", orjson.dumps({"x": x}).decode())
            result = tool(x)
            span.set_attribute("output", orjson.dumps(result).decode())
            return result

    return traced, provider.shutdown


def case_logfire(out: Path) -> tuple[Callable[[int], Any], Callable[[], None]]:
    try:
        import logfire  # type: ignore[import-not-found]
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # type: ignore[import-not-found]
    except ImportError as exc:
        raise Skip(f"not installed ({exc.name})") from None
    logfire.configure(
        send_to_logfire=False,
        console=False,
        metrics=False,
        inspect_arguments=False,
        data_dir=out / ".logfire",
        additional_span_processors=[BatchSpanProcessor(jsonl_exporter(out / "logfire.jsonl"))],
    )
    traced = logfire.instrument("tool", record_return=True)(tool)
    return traced, logfire.shutdown


def case_langfuse(out: Path) -> tuple[Callable[[int], Any], Callable[[], None]]:
    try:
        from langfuse import Langfuse, observe  # type: ignore[import-not-found]
    except ImportError as exc:
        raise Skip(f"not installed ({exc.name})") from None
    client = Langfuse(
        public_key="pk-lf-offline",
        secret_key="sk-lf-offline",
        base_url="http://127.0.0.1:9",
        span_exporter=jsonl_exporter(out / "langfuse.jsonl"),
    )
    traced = observe(name="tool", as_type="tool")(tool)
    return traced, client.shutdown


def case_mlflow(out: Path) -> tuple[Callable[[int], Any], Callable[[], None]]:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    # MLflow 3 keeps the local file store only behind this opt-in.
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    try:
        import mlflow  # type: ignore[import-not-found]
    except ImportError as exc:
        raise Skip(f"not installed ({exc.name})") from None
    mlflow.set_tracking_uri((out / "mlruns").as_uri())
    mlflow.set_experiment("bench")
    traced = mlflow.trace(name="tool", span_type="TOOL")(tool)

    def finish() -> None:
        flush = getattr(mlflow, "flush_trace_async_logging", None)
        if callable(flush):
            flush()

    return traced, finish


async def atool(x: Any) -> Any:
    return x


class _Finishing:
    """``async with`` that calls *finish* at the end (the floor's final write)."""

    def __init__(self, finish: Callable[[], None]) -> None:
        self.finish = finish

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: Any) -> None:
        self.finish()


def case_ststrace_async(out: Path) -> Any:
    import ststrace

    return ststrace.tool(atool), ststrace.Session(out)


def case_floor_async(out: Path) -> Any:
    """The floor around an ``async def``: the same two lines by hand, in an
    ``async def`` wrapper that awaits the tool (what recording an awaited
    result needs at least: a second coroutine)."""
    begin, end, finish = _floor_lines(out)

    async def call(x: Any) -> Any:
        call_id = begin(x)
        result = await atool(x)
        end(call_id, result)
        return result

    return call, _Finishing(finish)


ASYNC_SETUP: dict[str, Callable[[Path], Any]] = {
    "ststrace-async": case_ststrace_async,
    "floor-async": case_floor_async,
}


SETUP: dict[str, Callable[[Path], Any]] = {
    "bare": case_bare,
    "floor": case_floor,
    "ststrace": case_ststrace,
    "ststrace-redact-off": case_ststrace_redact_off,
    "ststrace-no-session": case_ststrace_no_session,
    "opentelemetry": case_opentelemetry,
    "logfire": case_logfire,
    "langfuse": case_langfuse,
    "mlflow": case_mlflow,
}


# -- one case, in this (fresh) process ------------------------------------------------------


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_case(name: str, n: int, out: Path) -> dict[str, Any]:
    from ststrace.testing.netguard import localhost_only

    with localhost_only() as refused:
        try:
            result = _run_case(name, n, out)
        except Skip as exc:
            result = {"skipped": str(exc)}
        except Exception as exc:
            result = {"skipped": f"failed offline: {type(exc).__name__}: {exc}"[:300]}
        if refused:
            result["refused_network"] = sorted(set(refused))[:5]
    return result


def _run_case(name: str, n: int, out: Path) -> dict[str, Any]:
    if name in ASYNC_SETUP:
        return asyncio.run(_run_async(ASYNC_SETUP[name], n, out))
    call, finish = SETUP[name](out)
    # Warm up (imports, caches, lazily built wrappers), then size the run.
    start = time.perf_counter()
    for i in range(200):
        call(i)
    per_call = (time.perf_counter() - start) / 200
    n = max(200, min(n, int(TIME_BUDGET_S / max(per_call, 1e-9))))
    gc.collect()
    before_bytes = dir_bytes(out)
    rss0 = rss_kib()
    cpu0 = time.process_time_ns()
    start = time.perf_counter_ns()
    for i in range(n):
        call(i)
    calls_ns = time.perf_counter_ns() - start
    finish()
    total_ns = time.perf_counter_ns() - start
    cpu_ns = time.process_time_ns() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "n": n,
        "ns_per_call": calls_ns / n,
        "cpu_ns_per_call": cpu_ns / n,
        "total_ms": total_ns / 1e6,
        "rss_growth_kib": max(0, peak - rss0),
        "bytes_per_call": (dir_bytes(out) - before_bytes) / n,
    }


async def _run_async(setup: Callable[[Path], Any], n: int, out: Path) -> dict[str, Any]:
    traced, session = setup(out)
    async with session:
        for i in range(200):
            await traced(i)
        gc.collect()
        before_bytes = dir_bytes(out)
        rss0 = rss_kib()
        cpu0 = time.process_time_ns()
        start = time.perf_counter_ns()
        for i in range(n):
            await traced(i)
        calls_ns = time.perf_counter_ns() - start
    total_ns = time.perf_counter_ns() - start
    cpu_ns = time.process_time_ns() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "n": n,
        "ns_per_call": calls_ns / n,
        "cpu_ns_per_call": cpu_ns / n,
        "total_ms": total_ns / 1e6,
        "rss_growth_kib": max(0, peak - rss0),
        "bytes_per_call": (dir_bytes(out) - before_bytes) / n,
    }


# -- the orchestrator ------------------------------------------------------------------------


def spawn(name: str, n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as d:
        proc = subprocess.run(
            [sys.executable, __file__, "--case", name, "--n", str(n), "--out", d],
            capture_output=True,
            text=True,
            timeout=600,
        )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"skipped": f"crashed: {tail}"[:300]}
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("ststrace", "orjson", "wrapt", "opentelemetry-sdk", "logfire", "langfuse", "mlflow-skinny", "mlflow"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs, {model or platform.processor()}, Python {platform.python_version()}, {platform.system()} {platform.release()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="calls per run (slow peers are cut to ~4 s)")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per case; the median is shown")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of: " + ", ".join(CASES))
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.case:  # a child process: run one case, print one JSON line
        print(json.dumps(run_case(args.case, args.n, Path(args.out))))
        return 0

    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    results: dict[str, dict[str, Any]] = {}
    # Round-robin: each round runs every case once, so a slow spell of a shared
    # machine (which moves a whole process by 30% or more) falls on all cases
    # alike instead of on the one whose runs it happens to cover.
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for k in range(args.runs):
        for name in names:
            if name in results:
                continue  # skipped
            r = spawn(name, args.n)
            if "skipped" in r:
                results[name] = r
                continue
            runs[name].append(r)
        print(f"  round {k + 1} of {args.runs}: done", file=sys.stderr)
    for name in names:
        if name in results:
            continue
        done = runs[name]
        results[name] = {key: statistics.median(r[key] for r in done) for key in done[0] if key != "refused_network"}
        refused = sorted({x for r in done for x in r.get("refused_network", [])})
        if refused:
            results[name]["refused_network"] = refused

    floor = results.get("floor", {}).get("ns_per_call")
    floor_cpu = results.get("floor", {}).get("cpu_ns_per_call")
    print(f"{time.strftime('%Y-%m-%d')} | {machine()}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()))
    print(f"median of {args.runs} fresh processes, up to {args.n} calls each")
    print()
    header = (
        f"| {'case':22} | {'ns/call':>9} | {'x floor':>7} | {'CPU ns/call':>11} | {'x floor':>7} | "
        f"{'total ms':>9} | {'peak RSS +KiB':>13} | {'bytes/call':>10} | {'calls':>7} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for name in names:
        r = results[name]
        if "skipped" in r:
            print(f"| {name:22} | skipped: {r['skipped']}")
            continue
        ratio = f"{r['ns_per_call'] / floor:7.2f}" if floor else "      -"
        cpu_ratio = f"{r['cpu_ns_per_call'] / floor_cpu:7.2f}" if floor_cpu else "      -"
        print(
            f"| {name:22} | {r['ns_per_call']:9.0f} | {ratio} | {r['cpu_ns_per_call']:11.0f} | {cpu_ratio} | "
            f"{r['total_ms']:9.1f} | {r['rss_growth_kib']:13.0f} | {r['bytes_per_call']:10.1f} | {r['n']:7.0f} |"
        )
        if r.get("refused_network"):
            print(f"|   (tried to reach: {', '.join(r['refused_network'])})")
    a, fa = results.get("ststrace-async", {}), results.get("floor-async", {})
    if "ns_per_call" in a and "ns_per_call" in fa:
        print()
        print(
            f"ststrace-async / floor-async: {a['ns_per_call'] / fa['ns_per_call']:.2f}x wall, "
            f"{a['cpu_ns_per_call'] / fa['cpu_ns_per_call']:.2f}x CPU"
        )
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
