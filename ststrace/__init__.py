"""ststrace: drop-in tracing for Python agents, written as Hugging Face
Session Trace Simple Format (STS) JSONL files."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from ._context import current_session
from ._decorators import ThreadPoolExecutor, llm, tool, tool_call_id
from ._instrument import instrument, uninstrument
from ._errors import InstrumentationError, StstraceError, TraceFormatError, WriteError
from ._reader import Problem, Trace, iter_messages, read, validate
from ._session import Session

try:
    __version__ = version("ststrace")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "InstrumentationError",
    "Problem",
    "Session",
    "StstraceError",
    "ThreadPoolExecutor",
    "Trace",
    "TraceFormatError",
    "WriteError",
    "__version__",
    "current_session",
    "instrument",
    "iter_messages",
    "llm",
    "read",
    "tool",
    "tool_call_id",
    "uninstrument",
    "validate",
]
