"""Exceptions ststrace raises on purpose, and the policy for its own failures.

ststrace's own failures must never reach the user's code: they are logged on the
``ststrace`` logger and the program carries on. Our test suite installs a hook
(:data:`internal_error_hook`) that turns them into test failures, so a swallowed
bug still fails loudly where it can be fixed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

logger = logging.getLogger("ststrace")

#: Called with every internal exception after it is logged (tests set it).
internal_error_hook: Callable[[BaseException], None] | None = None


class StstraceError(Exception):
    """Base class of the exceptions ststrace raises at the user's request."""


class WriteError(StstraceError, OSError):
    """The trace file could not be written (disk full, I/O error, ...)."""

    def __init__(self, path: Path | str, cause: BaseException | None, lost: int = 0) -> None:
        self.path = Path(path)
        self.lost = lost
        detail = f": {cause}" if cause is not None else ""
        lost_text = f"; {lost} record(s) lost" if lost else ""
        super().__init__(f"ststrace could not write {self.path}{detail}{lost_text}")


class TraceFormatError(StstraceError, ValueError):
    """A file given to the reader is not a well-formed STS trace."""

    def __init__(self, path: Path | str, line: int, message: str) -> None:
        self.path = Path(path)
        self.line = line
        self.reason = message
        super().__init__(f"{self.path}:{line}: {message}")


class BadArgument(ValueError):
    """A recording call's argument that ststrace's own checks refuse (a plain
    ``ValueError`` to the caller). Recording methods let these through and
    swallow every other failure of building a record."""


class InstrumentationError(StstraceError):
    """A client library asked for by name cannot be instrumented."""


def internal_error(exc: BaseException, where: str = "") -> None:
    """Log an exception raised by ststrace's own work; never raises."""
    try:
        logger.error("ststrace internal error%s", f" in {where}" if where else "", exc_info=exc)
        hook = internal_error_hook
        if hook is not None:
            hook(exc)
    except Exception:  # pragma: no cover - logging itself failed
        pass
