"""``ststrace otlp``: send traces to an OpenTelemetry collector or backend over OTLP/HTTP."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from ._common import CliError, positive_float, trace_files


def _header(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"a header is KEY=VALUE, not {text!r}")
    return key.strip(), value


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=Path, metavar="TRACE.jsonl", help="trace files (.jsonl), or directories of them")
    p.add_argument(
        "--endpoint",
        required=True,
        metavar="URL",
        help="the receiver's OTLP/HTTP base URL, e.g. http://localhost:4318 (/v1/traces is added)",
    )
    p.add_argument(
        "--header",
        action="append",
        type=_header,
        default=[],
        metavar="KEY=VALUE",
        help="an HTTP header to send (repeatable), e.g. authorization=Bearer\\ TOKEN",
    )
    # positive_float: 0, negative, nan or inf would only surface as a refused batch.
    p.add_argument("--timeout", type=positive_float, default=10.0, metavar="SECONDS", help="per request (default 10)")


def run(args: argparse.Namespace) -> int:
    files = trace_files(args.files)
    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        raise CliError("needs the OpenTelemetry OTLP exporter: pip install 'ststrace[otel]'")
    from ..otel import export

    try:
        result = export(files, endpoint=args.endpoint, headers=dict(args.header), timeout=args.timeout)
    except (ValueError, ConnectionError) as exc:
        raise CliError(str(exc)) from None
    sessions = "session" if result.sessions == 1 else "sessions"
    print(f"sent {result.sessions} {sessions} ({result.spans} spans) to {args.endpoint}")
    return 0
