"""ststrace: drop-in tracing for Python agents, written as Hugging Face
Session Trace Simple Format (STS) JSONL files.

Recording (``Session``, ``@tool``, ``@llm``, ``instrument``) is imported with
the package. Reading, validating, converting, exporting and uploading traces are
imported on first use (module ``__getattr__``), as are the command line and
the viewer: ``import ststrace`` stays cheap for the program being traced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._decorators import ThreadPoolExecutor, llm, tool, tool_call_id
from ._errors import InstrumentationError, StstraceError, TraceFormatError, WriteError
from ._instrument import instrument, uninstrument
from ._redact import Redactor
from ._session import Session, current_session

if TYPE_CHECKING:
    from ._convert import ConvertResult, convert, convert_file, detect, write_trace
    from ._export import ExportResult, export
    from ._outcome import outcome
    from ._hub import UploadItem, flush_sync, sync, sync_in_background, upload
    from ._reader import Problem, Trace, iter_messages, read, read_tree, validate

    __version__: str

# Public name -> the private module that defines it, imported on first use.
_LAZY: dict[str, str] = {
    "ConvertResult": "._convert",
    "convert": "._convert",
    "convert_file": "._convert",
    "detect": "._convert",
    "write_trace": "._convert",
    "ExportResult": "._export",
    "export": "._export",
    "outcome": "._outcome",
    "UploadItem": "._hub",
    "flush_sync": "._hub",
    "sync": "._hub",
    "sync_in_background": "._hub",
    "upload": "._hub",
    "Problem": "._reader",
    "Trace": "._reader",
    "iter_messages": "._reader",
    "read": "._reader",
    "read_tree": "._reader",
    "validate": "._reader",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        # importlib.metadata reads the installed distribution: tens of ms.
        from importlib.metadata import PackageNotFoundError, version

        try:
            value: Any = version("ststrace")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            value = "0.0.0"
    elif name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups do not come back here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "ConvertResult",
    "ExportResult",
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
    "export",
    "flush_sync",
    "instrument",
    "iter_messages",
    "llm",
    "outcome",
    "read",
    "read_tree",
    "sync",
    "sync_in_background",
    "tool",
    "tool_call_id",
    "uninstrument",
    "upload",
    "validate",
    "write_trace",
]
