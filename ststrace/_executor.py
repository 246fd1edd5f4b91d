"""An executor whose workers record into the submitter's session."""

from __future__ import annotations

import concurrent.futures
import contextvars
from typing import Any, Callable

class ThreadPoolExecutor(concurrent.futures.ThreadPoolExecutor):
    """A ThreadPoolExecutor whose workers see the submitter's current session.

    A plain ``threading.Thread`` starts with an empty context and so records
    nothing; submit work through this executor (or ``asyncio.to_thread``).
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        ctx = contextvars.copy_context()
        return super().submit(ctx.run, fn, *args, **kwargs)
