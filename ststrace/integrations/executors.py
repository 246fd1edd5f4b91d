"""Executor threads: work a framework hands to ``concurrent.futures``'
``ThreadPoolExecutor`` (``loop.run_in_executor`` with the default executor or
any other, ``executor.submit``, ``executor.map``) while a session is open runs
in that session. Installed by every ``instrument()`` call, removed by
``uninstrument()`` with no names.

A worker thread does not inherit the submitter's context, so without this a
client called there (LlamaIndex's BedrockConverse streams boto3 through
``run_in_executor``) records nothing, and the user cannot change the
framework's code. Only ststrace's own context variables travel with the work,
never the rest of the submitter's context: the user's context variables behave
as they always did. With no session current, ``submit`` is called straight
through (one context-variable read).
"""

from __future__ import annotations

import concurrent.futures.thread
import threading
from typing import Any, Callable

import wrapt

from .._context import current, current_tool_call, in_llm_call

_OWNER: Any = concurrent.futures.thread.ThreadPoolExecutor
_lock = threading.Lock()
#: The wrapper in place (``None`` when not installed) and whether it records.
_wrapper: Any = None
_original: Any = None
_active = False


def _carry(fn: Callable[..., Any], session: Any, llm_call: bool, tool_call: Any) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        # Set in the worker's own context for this work item only, then put
        # back, so the next item the worker runs starts as it would have.
        tokens = (current.set(session), in_llm_call.set(llm_call), current_tool_call.set(tool_call))
        try:
            return fn(*args, **kwargs)
        finally:
            current_tool_call.reset(tokens[2])
            in_llm_call.reset(tokens[1])
            current.reset(tokens[0])

    return run


def _submit(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    session = current.get()
    if session is None or not _active or not args:
        return wrapped(*args, **kwargs)
    # in_llm_call travels too: a client called on the worker by an @llm
    # function (or a recording integration) must not record the call again.
    fn = _carry(args[0], session, in_llm_call.get(), current_tool_call.get())
    return wrapped(fn, *args[1:], **kwargs)


def install() -> None:
    """Patch ``ThreadPoolExecutor.submit`` (idempotent)."""
    global _wrapper, _original, _active
    with _lock:
        if _wrapper is None:
            _original = _OWNER.__dict__["submit"]
            _wrapper = wrapt.FunctionWrapper(_original, _submit)
            _OWNER.submit = _wrapper
        _active = True


def uninstall() -> None:
    """Put ``submit`` back; if something wrapped it on top of ours since, leave
    that in place and only stop carrying sessions."""
    global _wrapper, _active
    with _lock:
        _active = False
        if _wrapper is not None and _OWNER.__dict__.get("submit") is _wrapper:
            _OWNER.submit = _original
            _wrapper = None
