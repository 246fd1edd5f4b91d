"""``ststrace otlp``: send traces to an OpenTelemetry collector or backend over OTLP/HTTP."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from ._common import CliError, non_negative_int, positive_float, trace_files

#: export()'s default, repeated: --help must not import OpenTelemetry.
MAX_HISTORY_CHARS = 65_536


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
    p.add_argument(
        "--max-history-chars",
        type=non_negative_int,
        default=MAX_HISTORY_CHARS,
        metavar="N",
        help=f"history a chat span carries: its most recent messages, up to N characters of JSON "
        f"(default {MAX_HISTORY_CHARS:,}; 0: all of it, which grows with the square of the session)",
    )
    p.add_argument("--timeout", type=positive_float, default=10.0, metavar="SECONDS", help="per request (default 10)")


def _has_exporter() -> bool:
    # find_spec of a dotted name imports its parents: with ``opentelemetry``
    # installed (many libraries bring it) but not ``opentelemetry.exporter``,
    # it raises ModuleNotFoundError instead of returning None.
    try:
        return importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is not None
    except (ImportError, ValueError):
        return False


def run(args: argparse.Namespace) -> int:
    files = trace_files(args.files)
    if not _has_exporter():
        raise CliError('needs the OpenTelemetry OTLP exporter: pip install "ststrace[otel]"')
    from ..otel import export

    try:
        result = export(
            files,
            endpoint=args.endpoint,
            headers=dict(args.header),
            timeout=args.timeout,
            max_history_chars=args.max_history_chars or None,
        )
    except (ValueError, ConnectionError) as exc:
        raise CliError(str(exc)) from None
    sessions = "session" if result.sessions == 1 else "sessions"
    print(f"sent {result.sessions} {sessions} ({result.spans} spans) to {args.endpoint}")
    return 0
