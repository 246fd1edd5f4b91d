"""Close open sessions on SIGTERM, then die of SIGTERM as if we were not there.

A process killed by the default SIGTERM action runs no ``atexit`` handlers, so
whatever was still buffered would be lost. We install a handler only where it
cannot change the program's behaviour: the handler is still ``SIG_DFL`` (the
user has not chosen one) and we are on the main thread (``signal.signal``
requires it). After closing the sessions the handler restores ``SIG_DFL`` and
re-sends the signal, so the exit status stays "killed by SIGTERM".
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from types import FrameType

from ._errors import internal_error
from ._registry import close_all

_installed = False

# Python runs signal handlers on the main thread between bytecodes. If that
# thread was interrupted inside ststrace's writer (holding a non-reentrant
# lock), closing from the handler would deadlock, so the close is retried a
# moment later instead; after this many retries it runs in a helper thread
# that the handler waits for with a timeout.
_MAX_DEFERRALS = 200
_RETRY_DELAY = 0.005
_LAST_RESORT_TIMEOUT = 5.0

_deferrals = 0
_PACKAGE_DIR = str(Path(__file__).resolve().parent)
# Where os.py lives is the standard library (sysconfig would say the same,
# at the cost of milliseconds on import).
_STDLIB_DIR = str(Path(os.__file__).resolve().parent)


def install() -> None:
    """Install the SIGTERM handler once, if nobody else handles SIGTERM."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            _installed = True  # the program handles SIGTERM itself; leave it alone
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
        _installed = True
    except (ValueError, OSError, AttributeError) as exc:  # pragma: no cover - exotic platforms
        internal_error(exc, "installing the SIGTERM handler")


def _inside_ststrace(frame: FrameType | None) -> bool:
    """True if the interrupted code is ststrace's own (possibly via the stdlib)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_PACKAGE_DIR):
            return True
        if not filename.startswith(_STDLIB_DIR):
            return False  # user code: it holds none of our locks
        frame = frame.f_back
    return False


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global _deferrals
    if _inside_ststrace(frame) and _deferrals < _MAX_DEFERRALS:
        _deferrals += 1
        try:
            timer = threading.Timer(_RETRY_DELAY, os.kill, (os.getpid(), signal.SIGTERM))
            timer.daemon = True
            timer.start()
            return
        except RuntimeError:
            # No new threads at interpreter shutdown: atexit is closing the
            # sessions already; closing here could deadlock. Just die.
            _die()
            return
    try:
        if _deferrals >= _MAX_DEFERRALS:
            helper = threading.Thread(target=close_all, name="ststrace-sigterm", daemon=True)
            helper.start()
            helper.join(_LAST_RESORT_TIMEOUT)
        else:
            close_all()
    except Exception as exc:
        internal_error(exc, "SIGTERM handler")
    finally:
        _die()


def _die() -> None:
    """Terminate by SIGTERM's default action, so the exit status is what it would have been."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
