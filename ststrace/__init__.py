"""ststrace: drop-in tracing for Python agents, written as Hugging Face
Session Trace Simple Format (STS) JSONL files."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from ._context import current_session
from ._convert import ConvertResult, convert, convert_file, detect, write_trace
from ._decorators import ThreadPoolExecutor, llm, tool, tool_call_id
from ._errors import InstrumentationError, StstraceError, TraceFormatError, WriteError
from ._hub import UploadItem, flush_sync, sync, sync_in_background, upload
from ._instrument import instrument, uninstrument
from ._redact import Redactor
from ._reader import Problem, Trace, iter_messages, read, validate
from ._session import Session

try:
    __version__ = version("ststrace")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "ConvertResult",
    "InstrumentationError",
    "Problem",
    "Redactor",
    "Session",
    "StstraceError",
    "ThreadPoolExecutor",
    "Trace",
    "TraceFormatError",
    "UploadItem",
    "WriteError",
    "__version__",
    "convert",
    "convert_file",
    "current_session",
    "detect",
    "flush_sync",
    "instrument",
    "iter_messages",
    "llm",
    "read",
    "sync",
    "sync_in_background",
    "tool",
    "tool_call_id",
    "uninstrument",
    "upload",
    "validate",
    "write_trace",
]
