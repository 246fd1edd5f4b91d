"""``@tool`` and ``@llm``: wrapt decorators over every kind of function.

The function kind (sync, async, generator, async generator) is decided once, at
decoration time, and picks one of four small wrappers. Every wrapper first
looks up the current session; with none it calls straight through. Recording
work runs inside ``try/except Exception`` guards that log and carry on; the
user's call itself is never inside a guard, and its exceptions are re-raised
with a bare ``raise`` (same object, same traceback).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar, overload

import wrapt

from . import _records
from ._context import bound_tool_call_id, current, in_llm_call
from ._encode import content_text, json_text
from ._errors import internal_error, logger
from ._session import Session

F = TypeVar("F", bound=Callable[..., Any])

_SYNC, _ASYNC, _GEN, _ASYNCGEN = range(4)


def _kind(func: Any) -> int:
    target = getattr(func, "__func__", func)  # classmethod / staticmethod objects
    if inspect.isasyncgenfunction(target):
        return _ASYNCGEN
    if inspect.iscoroutinefunction(target):
        return _ASYNC
    if inspect.isgeneratorfunction(target):
        return _GEN
    return _SYNC


class _Binder:
    """Turns ``(instance, args, kwargs)`` into the argument dict to record.

    The signature is inspected once. Simple signatures (no ``*args`` /
    ``**kwargs``, no positional-only parameters) are bound with a ``zip``;
    everything else falls back to ``Signature.bind``.
    """

    def __init__(self, func: Any) -> None:
        target = getattr(func, "__func__", func)
        self.is_static = isinstance(func, staticmethod)
        try:
            sig = inspect.signature(target)
        except (TypeError, ValueError):
            sig = None
        self.sig = sig
        params = list(sig.parameters.values()) if sig is not None else []
        self.names = [p.name for p in params]
        self.defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        self.simple = sig is not None and all(
            p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) for p in params
        )

    def _names(self, instance: Any) -> list[str]:
        # wrapt passes the bound instance (or class) separately, so the first
        # parameter is already consumed for methods and classmethods.
        if instance is not None and not self.is_static and self.names:
            return self.names[1:]
        return self.names

    def bind(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        names = self._names(instance)
        if self.simple:
            bound = dict(zip(names, args))
            if kwargs:
                bound.update(kwargs)
            return bound
        if self.sig is None:
            out: dict[str, Any] = {f"arg{i}": a for i, a in enumerate(args)}
            out.update(kwargs)
            return out
        sig = self.sig
        if names is not self.names:
            sig = sig.replace(parameters=list(sig.parameters.values())[1:])
        try:
            ba = sig.bind_partial(*args, **kwargs)
        except TypeError:
            out = {f"arg{i}": a for i, a in enumerate(args)}
            out.update(kwargs)
            return out
        result: dict[str, Any] = {}
        for name, value in ba.arguments.items():
            kind = sig.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                result.update(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                result[name] = list(value)
            else:
                result[name] = value
        return result

    def with_defaults(self, instance: Any, bound: dict[str, Any]) -> dict[str, Any]:
        if not self.defaults:
            return bound
        out = {n: self.defaults[n] for n in self._names(instance) if n in self.defaults and n not in bound}
        if not out:
            return bound
        out.update(bound)
        return out


# ---------------------------------------------------------------------------
# @tool


class _ToolSpec:
    __slots__ = ("name", "binder", "capture_args", "capture_result")

    def __init__(self, func: Any, name: str | None, capture_args: bool, capture_result: bool) -> None:
        target = getattr(func, "__func__", func)
        self.name = name or getattr(target, "__name__", None) or "tool"
        self.binder = _Binder(func)
        self.capture_args = capture_args
        self.capture_result = capture_result


class _ToolCall:
    """One running @tool call: which id it answers and where to record."""

    __slots__ = ("session", "call_id", "spec")

    def __init__(self, session: Session, call_id: str, spec: _ToolSpec) -> None:
        self.session = session
        self.call_id = call_id
        self.spec = spec

    def finish(self, result: Any) -> None:
        try:
            content = content_text(result) if self.spec.capture_result else ""
            self.session._emit(_records.message("tool", content, tool_call_id=self.call_id))
        except Exception as exc:
            internal_error(exc, f"@tool {self.spec.name}")

    def fail(self, exc: BaseException) -> None:
        try:
            self.session._emit(_records.message("tool", _error_text(exc), tool_call_id=self.call_id))
        except Exception as err:
            internal_error(err, f"@tool {self.spec.name}")


def _error_text(exc: BaseException) -> str:
    name = type(exc).__name__
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, GeneratorExit)):
        return f"Error: the call was cancelled ({name})"
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable exception>"
    return f"Error: {name}: {text}" if text else f"Error: {name}"


def _begin_tool(spec: _ToolSpec, session: Session, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _ToolCall | None:
    try:
        bound_id = bound_tool_call_id.get()
        if bound_id is not None:
            # Consumed by this call: the *next* @tool call inside the block.
            bound_tool_call_id.set(None)
            session._answer(bound_id)
            return _ToolCall(session, bound_id, spec)
        binder = spec.binder
        bound = binder.bind(instance, args, kwargs) if spec.capture_args else {}
        if session._pending:
            call_id = session._claim_tool_call(
                spec.name, _LazyCandidates(binder, instance, bound)
            )
            if call_id is not None:
                return _ToolCall(session, call_id, spec)
        arguments = json_text(bound) if spec.capture_args else "{}"
        return _ToolCall(session, session._tool_call_then_result(spec.name, arguments), spec)
    except Exception as exc:
        internal_error(exc, f"@tool {spec.name}")
        return None


class _LazyCandidates:
    """The argument forms a pending call may match; defaults only computed if needed."""

    __slots__ = ("binder", "instance", "bound")

    def __init__(self, binder: _Binder, instance: Any, bound: dict[str, Any]) -> None:
        self.binder, self.instance, self.bound = binder, instance, bound

    def __iter__(self) -> Iterator[Any]:
        # JSON round-trip so tuples, numbers etc. compare like decoded arguments.
        yield _json_normal(self.bound)
        full = self.binder.with_defaults(self.instance, self.bound)
        if full is not self.bound:
            yield _json_normal(full)


def _json_normal(value: Any) -> Any:
    import orjson

    try:
        return orjson.loads(json_text(value))
    except Exception:
        return value


def _make_tool(func: Any, name: str | None, capture_args: bool, capture_result: bool) -> Any:
    spec = _ToolSpec(func, name, capture_args, capture_result)
    kind = _kind(func)

    if kind is _SYNC:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                return wrapped(*args, **kwargs)
            call = _begin_tool(spec, session, instance, args, kwargs)
            if call is None:
                return wrapped(*args, **kwargs)
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as exc:
                call.fail(exc)
                raise
            call.finish(result)
            return result

    elif kind is _ASYNC:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                return wrapped(*args, **kwargs)
            call = _begin_tool(spec, session, instance, args, kwargs)
            if call is None:
                return wrapped(*args, **kwargs)
            return _run_tool_async(wrapped(*args, **kwargs), call)

    elif kind is _GEN:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                return wrapped(*args, **kwargs)
            call = _begin_tool(spec, session, instance, args, kwargs)
            if call is None:
                return wrapped(*args, **kwargs)
            return _trace_gen(wrapped(*args, **kwargs), _ToolItems(call))

    else:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                return wrapped(*args, **kwargs)
            call = _begin_tool(spec, session, instance, args, kwargs)
            if call is None:
                return wrapped(*args, **kwargs)
            return _trace_agen(wrapped(*args, **kwargs), _ToolItems(call))

    return wrapt.FunctionWrapper(func, wrapper)


async def _run_tool_async(coro: Any, call: _ToolCall) -> Any:
    try:
        result = await coro
    except BaseException as exc:
        call.fail(exc)
        raise
    call.finish(result)
    return result


class _Observer:
    """What a traced generator reports to: each item, then exactly one ending."""

    def item(self, value: Any) -> None:
        raise NotImplementedError

    def done(self) -> None:
        raise NotImplementedError

    def failed(self, exc: BaseException) -> None:
        raise NotImplementedError


class _ToolItems(_Observer):
    __slots__ = ("call", "items")

    def __init__(self, call: _ToolCall) -> None:
        self.call = call
        self.items: list[Any] = []

    def item(self, value: Any) -> None:
        self.items.append(value)

    def done(self) -> None:
        items = self.items
        if all(isinstance(i, str) for i in items):
            self.call.finish("".join(items))
        else:
            self.call.finish(items)

    def failed(self, exc: BaseException) -> None:
        self.call.fail(exc)


def _safe(fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except Exception as exc:
        internal_error(exc, "generator tracing")


def _trace_gen(gen: Any, obs: _Observer) -> Any:
    """A generator that behaves exactly like *gen* (send/throw/close, return
    value) while reporting its items and how it ended. No context is held
    across a yield."""
    try:
        value = gen.send(None)
    except StopIteration as stop:
        _safe(obs.done)
        return stop.value
    except BaseException as exc:
        _safe(obs.failed, exc)
        raise
    while True:
        _safe(obs.item, value)
        try:
            sent = yield value
        except GeneratorExit:
            try:
                gen.close()
            finally:
                _safe(obs.done)
            raise
        except BaseException as thrown:
            try:
                value = gen.throw(thrown)
            except StopIteration as stop:
                _safe(obs.done)
                return stop.value
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise
        else:
            try:
                value = gen.send(sent)
            except StopIteration as stop:
                _safe(obs.done)
                return stop.value
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise


async def _trace_agen(agen: Any, obs: _Observer) -> Any:
    """The async-generator twin of :func:`_trace_gen` (asend/athrow/aclose)."""
    try:
        value = await agen.asend(None)
    except StopAsyncIteration:
        _safe(obs.done)
        return
    except BaseException as exc:
        _safe(obs.failed, exc)
        raise
    while True:
        _safe(obs.item, value)
        try:
            sent = yield value
        except GeneratorExit:
            try:
                await agen.aclose()
            finally:
                _safe(obs.done)
            raise
        except BaseException as thrown:
            try:
                value = await agen.athrow(thrown)
            except StopAsyncIteration:
                _safe(obs.done)
                return
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise
        else:
            try:
                value = await agen.asend(sent)
            except StopAsyncIteration:
                _safe(obs.done)
                return
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise


@overload
def tool(func: F, /) -> F: ...
@overload
def tool(
    func: None = None, /, *, name: str | None = None, capture_args: bool = True, capture_result: bool = True
) -> Callable[[F], F]: ...


def tool(
    func: Any = None,
    /,
    *,
    name: str | None = None,
    capture_args: bool = True,
    capture_result: bool = True,
) -> Any:
    """Record each call of the decorated function as a tool result paired with
    the model's tool call (see the README for the pairing rules)."""
    if func is None:
        return lambda f: _make_tool(f, name, capture_args, capture_result)
    return _make_tool(func, name, capture_args, capture_result)


@contextmanager
def tool_call_id(call_id: str) -> Iterator[None]:
    """The next ``@tool`` call inside this block answers tool call *call_id*."""
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"tool_call_id needs a non-empty string, got {call_id!r}")
    token = bound_tool_call_id.set(call_id)
    try:
        yield
    finally:
        bound_tool_call_id.reset(token)


# ---------------------------------------------------------------------------
# @llm


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

    def record_result(self, result: Any) -> Any:
        """Record a finished result, or wrap a stream so it records when it ends."""
        try:
            from . import _adapters

            if _adapters.is_stream(result):
                return _adapters.wrap_stream(result, self.record)
            msg = _adapters.response_to_message(result)
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

        self.call.record(_adapters.accumulate(self.chunks))

    failed = done  # a failed stream still records what arrived


def _begin_llm(session: Session, model: str | None, capture_input: bool, args: Any, kwargs: Any) -> _LlmCall | None:
    try:
        if capture_input:
            from . import _adapters

            inputs = _adapters.input_messages(args, kwargs)
            if inputs:
                session._record_inputs(inputs)
        if model is None:
            m = kwargs.get("model")
            model = m if isinstance(m, str) else None
        return _LlmCall(session, model)
    except Exception as exc:
        internal_error(exc, "@llm")
        return None


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
            call = _begin_llm(session, model, capture_input, args, kwargs)
            if call is None:
                return wrapped(*args, **kwargs)
            return _run_llm_async(wrapped, args, kwargs, call)

    elif kind is _GEN:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                return wrapped(*args, **kwargs)
            call = _begin_llm(session, model, capture_input, args, kwargs)
            if call is None:
                return wrapped(*args, **kwargs)
            return _trace_gen(wrapped(*args, **kwargs), _LlmItems(call))

    else:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                return wrapped(*args, **kwargs)
            call = _begin_llm(session, model, capture_input, args, kwargs)
            if call is None:
                return wrapped(*args, **kwargs)
            return _trace_agen(wrapped(*args, **kwargs), _LlmItems(call))

    return wrapt.FunctionWrapper(func, wrapper)


async def _run_llm_async(wrapped: Any, args: Any, kwargs: Any, call: _LlmCall) -> Any:
    # The flag lives in this coroutine's context, so an instrumented client
    # awaited inside sees it and does not record the same reply again.
    token = in_llm_call.set(True)
    try:
        result = await wrapped(*args, **kwargs)
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


# ---------------------------------------------------------------------------
# Threads


class ThreadPoolExecutor(concurrent.futures.ThreadPoolExecutor):
    """A ThreadPoolExecutor whose workers see the submitter's current session.

    A plain ``threading.Thread`` starts with an empty context and so records
    nothing; submit work through this executor (or ``asyncio.to_thread``).
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        ctx = contextvars.copy_context()
        return super().submit(ctx.run, fn, *args, **kwargs)
