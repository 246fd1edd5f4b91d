"""``@llm``: the model call's reply recorded, and the input messages the
session has not recorded yet. Also the entry point of the instrumented
clients (``_begin_llm``)."""

from __future__ import annotations

import copy
import functools
import inspect
from typing import Any, Callable, Mapping, overload

from . import _records, _tools
from ._context import current, in_llm_call
from ._errors import internal_error, logger
from ._generators import _Observer, _trace_agen, _trace_gen
from ._session import Session
from ._text import json_text
from ._wrapping import _ASYNC, _GEN, _SYNC, F, _kind, _Wrapper

class _LlmCall:
    """Records one model reply into the session it started in."""

    __slots__ = ("session", "model")

    def __init__(self, session: Session, model: str | None) -> None:
        self.session = session
        self.model = model

    def record(self, msg: dict[str, Any] | None) -> None:
        try:
            if msg is None:
                return
            msg = dict(msg)
            msg.setdefault("role", "assistant")
            if "content" not in msg or msg["content"] is None:
                msg["content"] = ""
            if self.model and not msg.get("model"):
                msg["model"] = self.model
            if "timestamp" not in msg:
                msg["timestamp"] = _records.now_ms()
            self.session._record_assistant(msg)
        except Exception as exc:
            internal_error(exc, "@llm")

    def record_stream(self, stream: Any) -> Any:
        """A proxy of *stream* (anything iterable) that records the reply when it ends.

        For callers that know *stream* is one although :func:`is_stream` cannot
        tell (botocore's ``EventStream`` is only iterable); raises what
        wrapping raises, so call it inside a guard."""
        from . import _adapters

        wrapped = _adapters.wrap_stream(stream, self.record, usage=self.session._keep_usage)
        state = getattr(wrapped, "_self_state", None)
        if state is not None:
            # Finished by the session's end if the caller never finishes it.
            self.session._track_stream(state)
        return wrapped

    def record_result(self, result: Any) -> Any:
        """Record a finished result, or wrap a stream so it records when it ends."""
        try:
            from . import _adapters

            # Token usage on the recorded reply, unless Session(usage=False).
            if _adapters.is_stream(result):
                return self.record_stream(result)
            if inspect.isawaitable(result):
                # A plain function handing back the async client's coroutine:
                # the reply is known once the caller awaits it.
                return _run_llm_async(result, self)
            msg = _adapters.response_to_message(result, usage=self.session._keep_usage)
            if msg is None:
                logger.warning(
                    "ststrace: @llm got a %s it does not understand; recorded its JSON text",
                    type(result).__qualname__,
                )
                msg = {"role": "assistant", "content": json_text(result)}
            self.record(msg)
        except Exception as exc:
            internal_error(exc, "@llm")
        return result


class _LlmItems(_Observer):
    """Chunks yielded by a generator-function @llm, merged when it ends."""

    __slots__ = ("call", "chunks")

    def __init__(self, call: _LlmCall) -> None:
        self.call = call
        self.chunks: list[Any] = []

    def item(self, value: Any) -> None:
        self.chunks.append(value)

    def done(self) -> None:
        from . import _adapters

        self.call.record(_adapters.accumulate(self.chunks, usage=self.call.session._keep_usage))

    def failed(self, exc: BaseException) -> None:
        # A stream that fails half-way records what arrived; one that fails
        # before its first chunk is a failed model call: nothing to record.
        if self.chunks:
            self.done()


def _stateful_thread(kwargs: Any) -> str | None:
    """The server-side conversation a Responses call continues, if any.

    With ``previous_response_id`` (or ``conversation``) the ``input`` holds
    only the new turn, not the conversation so far: it cannot be matched
    against earlier inputs by position.
    """
    for key in ("previous_response_id", "conversation"):
        value = kwargs.get(key)
        if isinstance(value, str) and value:
            return f"{key}={value}"
        if isinstance(value, Mapping) and isinstance(value.get("id"), str):
            return f"{key}={value['id']}"
    return None


def _offered_tools(kwargs: Any) -> Any:
    """The tools a model call is offered, in its provider's shape: ``tools=``
    (OpenAI, Anthropic, LiteLLM, Hugging Face, Mistral), Bedrock Converse's
    ``toolConfig=``, google-genai's ``config=...(tools=)``."""
    if not isinstance(kwargs, Mapping):
        return None
    offered = kwargs.get("tools")
    if offered is None:
        offered = kwargs.get("toolConfig")
    if offered is None:
        config = kwargs.get("config")
        if isinstance(config, Mapping):
            offered = config.get("tools")
        elif config is not None and type(config).__name__ == "GenerateContentConfig":
            offered = getattr(config, "tools", None)
    return offered if isinstance(offered, (list, tuple, Mapping)) else None


def _begin_llm(session: Session, model: str | None, capture_input: bool, args: Any, kwargs: Any) -> _LlmCall | None:
    if capture_input:
        try:
            from . import _adapters

            stateful = _stateful_thread(kwargs)
            given = None if stateful is not None else _adapters.inputs.history(args, kwargs)
            if given is not None:
                _record_history(session, given, args, kwargs)
            else:
                inputs = _adapters.input_messages(args, kwargs)
                if inputs:
                    session._record_inputs(inputs, stateful)
        except Exception as exc:
            # The reply can still be recorded without its inputs.
            internal_error(exc, "@llm inputs")
        offered = _offered_tools(kwargs)
        if offered:
            try:
                _offer(session, offered)
            except Exception as exc:
                internal_error(exc, "@llm tools")
    try:
        if model is None:
            m = kwargs.get("model")
            model = m if isinstance(m, str) else None
        return _LlmCall(session, model)
    except Exception as exc:
        internal_error(exc, "@llm")
        return None


def _record_history(session: Session, given: tuple[Any, Any], args: Any, kwargs: Any) -> None:
    """The inputs of a call given the conversation as a list of messages:
    an agent loop resends it whole, grown by a few, on every call, and only
    what it grew by is converted (see ``_dedup.appended``)."""
    from ._adapters import inputs

    lead, raw = given
    convert = inputs.convert_items if kwargs.get("messages") is raw else inputs.convert_positional
    session._record_history(lead, raw, convert, lambda: inputs.collect_history(args, kwargs, raw))


def _offer(session: Session, offered: Any) -> None:
    # An agent loop passes the same tools= list on every call: when it is the
    # list offered last and still equal to what it was then (a C-level compare,
    # ~0.3 us), its set is known and the conversion (~5 us) is skipped.
    last = session._tools_last
    if last is not None and last[0] is offered and offered == last[1]:
        return
    # After the inputs: the reply the model gives with these tools carries them.
    session._offer_tools(_tools.definitions(offered))
    if type(offered) is list and all(type(t) is dict for t in offered):
        session._tools_last = (offered, copy.deepcopy(offered))


def _llm_observer(session: Session, model: str | None, capture_input: bool, args: Any, kwargs: Any) -> _Observer | None:
    call = _begin_llm(session, model, capture_input, args, kwargs)
    return None if call is None else _LlmItems(call)


def _make_llm(func: Any, model: str | None, capture_input: bool) -> Any:
    kind = _kind(func)

    if kind is _SYNC:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                return wrapped(*args, **kwargs)
            call = _begin_llm(session, model, capture_input, args, kwargs)
            if call is None:
                return wrapped(*args, **kwargs)
            token = in_llm_call.set(True)
            try:
                result = wrapped(*args, **kwargs)
            finally:
                in_llm_call.reset(token)
            return call.record_result(result)

    elif kind is _ASYNC:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                return wrapped(*args, **kwargs)
            coro = wrapped(*args, **kwargs)  # wrong arguments raise here, as undecorated
            call = _begin_llm(session, model, capture_input, args, kwargs)
            if call is None:
                return coro
            return _run_llm_async(coro, call)

    else:
        trace = _trace_gen if kind is _GEN else _trace_agen

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                return wrapped(*args, **kwargs)
            gen = wrapped(*args, **kwargs)
            begin = functools.partial(_llm_observer, session, model, capture_input, args, kwargs)
            return trace(gen, begin, True)

    return _Wrapper(func, wrapper)


async def _run_llm_async(coro: Any, call: _LlmCall) -> Any:
    # Set in the awaiting task's context for the duration of the await, so an
    # instrumented client awaited inside sees it and does not record the same
    # reply again.
    token = in_llm_call.set(True)
    try:
        result = await coro
    finally:
        in_llm_call.reset(token)
    return call.record_result(result)


@overload
def llm(func: F, /) -> F: ...
@overload
def llm(func: None = None, /, *, model: str | None = None, capture_input: bool = True) -> Callable[[F], F]: ...


def llm(func: Any = None, /, *, model: str | None = None, capture_input: bool = True) -> Any:
    """Record the decorated model call's reply (and new input messages)."""
    if func is None:
        return lambda f: _make_llm(f, model, capture_input)
    return _make_llm(func, model, capture_input)
