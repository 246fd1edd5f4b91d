"""Memory and bytes of ``ststrace.otel.export`` (``ststrace otlp``) for one long session.

Run: ``python benchmarks/bench_otlp_memory.py [--messages N] [--max-history-chars B]``

Workload: one STS session of N messages (default 20,000): user turns and
assistant replies, every fourth reply a tool call answered by a tool result,
about 60 characters of text each. It is exported to a receiver on 127.0.0.1
that reads and discards each OTLP/HTTP request, counting its bytes. The export
runs in a fresh child process; its peak RSS (``ru_maxrss``) is reported beside
that of a child that only imports ``ststrace.otel`` and the OTLP exporter and reads the session
(the floor: what holding the session itself costs).

Each chat span carries the conversation before it (GenAI conventions), so
without a bound the bytes sent grow with the square of the session's length;
``--max-history-chars 0`` means unbounded (only sensible for small N).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _harness import machine_line  # noqa: E402

from ststrace import Session  # noqa: E402


TARGET_MIB = 64


class Counts:
    requests = 0
    bytes = 0
    largest = 0


def _receiver(counts: Counts) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length", "0"))
            left = n
            while left:
                left -= len(self.rfile.read(min(left, 1 << 20)))
            counts.requests += 1
            counts.bytes += n
            counts.largest = max(counts.largest, n)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def write_session(path: Path, messages: int) -> None:
    with Session(path, id="long-session", redact=False, buffer_size=1 << 20) as s:
        n = 0
        turn = 0
        while n < messages:
            s.user(f"question {turn}: what is the state of item {turn} in the queue today?")
            n += 1
            if n >= messages:
                break
            if turn % 4 == 3 and n + 2 < messages:
                (cid,) = s.assistant("", model="m", tool_calls=[{"name": "lookup", "arguments": {"item": turn}}])
                s.tool(cid, f"item {turn} is waiting behind {turn % 7} others in the queue")
                n += 2
            s.assistant(f"answer {turn}: item {turn} is fine and will be processed shortly.", model="m")
            n += 1
            turn += 1


def _child(code: str) -> tuple[float, int]:
    """(seconds, peak RSS in KiB) of a fresh interpreter running *code*."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code])
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode})")
    return time.perf_counter() - start, usage.ru_maxrss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--max-history-chars", type=int, default=None, help="default: export's own (65,536); 0: unbounded")
    args = ap.parse_args()
    root = os.environ.get('BENCH_ROOT') or str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.jsonl"
        write_session(path, args.messages)
        counts = Counts()
        server = _receiver(counts)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        history = "" if args.max_history_chars is None else (
            f", max_history_chars={args.max_history_chars or None!r}"
        )
        prefix = f"import sys; sys.path.insert(0, {root!r}); import ststrace.otel, ststrace; "
        _, floor_kib = _child(
            prefix + "import opentelemetry.exporter.otlp.proto.http.trace_exporter; " + f"t = ststrace.read({str(path)!r})"
        )
        seconds, peak_kib = _child(prefix + f"ststrace.otel.export({str(path)!r}, endpoint={url!r}{history})")
        server.shutdown()
        size = path.stat().st_size
    print(machine_line())
    print(f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}")
    print(f"session: {args.messages:,} messages, {size / 1e6:.1f} MB on disk")
    print(f"sent: {counts.bytes / 1e6:.1f} MB in {counts.requests} requests (largest {counts.largest / 1e6:.2f} MB), {seconds:.1f} s")
    added = (peak_kib - floor_kib) / 1024
    print(f"peak RSS: export {peak_kib / 1024:.0f} MiB; reading the session alone {floor_kib / 1024:.0f} MiB "
          f"(export adds {added:.0f} MiB)")
    # Bounded by one request (3 MB) and the spans being built, whatever the length.
    verdict = "MET" if added <= TARGET_MIB else "MISSED"
    print(f"TARGET otlp-memory | RSS export adds to reading the session, {args.messages:,} messages | "
          f"{added:.0f} MiB | <= {TARGET_MIB} MiB | {verdict}")


if __name__ == "__main__":
    main()
