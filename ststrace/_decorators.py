"""``@tool`` and ``@llm``: wrapt decorators over every kind of function.

The function kind (sync, async, generator, async generator) is decided once, at
decoration time, and picks one of four small wrappers. Every wrapper first
looks up the current session; with none it calls straight through. Recording
work runs inside ``try/except Exception`` guards that log and carry on; the
user's call itself is never inside a guard, and its exceptions are re-raised
with a bare ``raise`` (same object, same traceback).
"""

from __future__ import annotations

import concurrent.futures
import copy
import contextvars
import functools
import inspect
import itertools
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, TypeVar, overload

import orjson
import wrapt

from . import _context, _links, _records, _tools
from ._context import bound_tool_call_id, current, current_tool_call, in_llm_call
from ._encode import dumps
from ._text import content_text, json_text
from ._errors import internal_error, logger
from ._session import Session

class _BoundWrapper(wrapt.BoundFunctionWrapper):  # type: ignore[misc,type-arg]
    def __copy__(self) -> _BoundWrapper:
        return self

    def __deepcopy__(self, memo: Any) -> _BoundWrapper:
        return self


class _Wrapper(wrapt.FunctionWrapper):  # type: ignore[misc,type-arg]
    """The decorated function. Copied as itself and pickled by name, as a
    function is: SDKs deep-copy the tools they are given (google-genai copies
    its config, tool functions included, on every call), process pools pickle
    what they run, and wrapt's proxies refuse both."""

    __bound_function_wrapper__ = _BoundWrapper

    def __copy__(self) -> _Wrapper:
        return self

    def __deepcopy__(self, memo: Any) -> _Wrapper:
        return self

    def __reduce_ex__(self, protocol: Any) -> str:
        # A global name, looked up in the function's module on unpickling
        # (pickle checks it is this very object, as for a function).
        return str(self.__qualname__)


F = TypeVar("F", bound=Callable[..., Any])

# Bound once: set around every @tool call (sub-agent links), so lookups count.
_enter_tool_scope = current_tool_call.set
_leave_tool_scope = current_tool_call.reset

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
        # wrapt passes the bound instance (or class) separately, so for methods
        # and classmethods the first parameter is already consumed.
        self.tail = self.names[1:]
        self.sig_tail = sig.replace(parameters=params[1:]) if sig is not None and params else sig
        self.defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        self.simple = sig is not None and all(
            p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) for p in params
        )
        # Since Python 3.13 ``classmethod`` no longer binds through the
        # wrapper's ``__get__``: with @classmethod written above @tool, the
        # wrapper is called unbound with the class as its first argument.
        # A function defined in a class whose first parameter is ``cls``,
        # called that way, is such a classmethod.
        qualname = getattr(target, "__qualname__", "")
        self.cls_first = bool(self.names) and self.names[0] == "cls" and "." in qualname.rsplit("<locals>.", 1)[-1]
        # Calls of a plain function (no instance) with a simple signature:
        # bound without any of the checks below.
        self.plain = self.simple and not self.cls_first
        self.first = self.names[0] if self.names else ""

    def _names(self, instance: Any) -> list[str]:
        return self.names if instance is None or self.is_static else self.tail

    def bind(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if instance is None and self.plain:
            if not args:
                # wrapt's own dict for this call: read here, never changed.
                return kwargs
            if len(args) == 1:
                bound = {self.first: args[0]}
            else:
                bound = dict(zip(self.names, args))
            if kwargs:
                bound.update(kwargs)
            return bound
        if instance is None and self.cls_first and args and isinstance(args[0], type):
            instance, args = args[0], args[1:]
        if self.simple:
            bound = dict(zip(self.names if instance is None or self.is_static else self.tail, args))
            if kwargs:
                bound.update(kwargs)
            return bound
        sig = self.sig if instance is None or self.is_static else self.sig_tail
        if sig is None:
            out: dict[str, Any] = {f"arg{i}": a for i, a in enumerate(args)}
            out.update(kwargs)
            return out
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

    def without_defaults(self, bound: dict[str, Any]) -> dict[str, Any]:
        """*bound* minus the arguments passed with their default value (models
        often leave those out)."""
        defaults = self.defaults
        if not defaults:
            return bound
        out = {k: v for k, v in bound.items() if not (k in defaults and _same(v, defaults[k]))}
        return bound if len(out) == len(bound) else out

    def with_defaults(self, instance: Any, bound: dict[str, Any]) -> dict[str, Any]:
        if not self.defaults:
            return bound
        out = {n: self.defaults[n] for n in self._names(instance) if n in self.defaults and n not in bound}
        if not out:
            return bound
        out.update(bound)
        return out


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # e.g. numpy arrays: no single truth value
        return False


# ---------------------------------------------------------------------------
# @tool


class _ToolSpec:
    __slots__ = ("name", "binder", "capture_args", "capture_result", "schema")

    def __init__(
        self, func: Any, name: str | None, capture_args: bool, capture_result: bool, schema: Any = None
    ) -> None:
        target = getattr(func, "__func__", func)
        self.name = name or getattr(target, "__name__", None) or "tool"
        self.binder = _Binder(func)
        self.capture_args = capture_args
        self.capture_result = capture_result
        #: The tool's definition, built once here: a call only looks the spec
        #: up in the session's set of tools recorded (see _begin_tool).
        self.schema = _tool_schema(func, self.name, schema)


def _tool_schema(func: Any, name: str, given: Any) -> dict[str, Any] | None:
    if given is not None:
        d = _tools.definition(given if not isinstance(given, Mapping) or "name" in given or "function" in given
                              else {"name": name, "parameters": given})
        if d is None:
            raise ValueError(f"@tool(schema=...) for {name!r}: not a tool definition or a parameters schema: {given!r}")
        return d
    try:
        return _tools.function_schema(func, name)
    except Exception as exc:
        internal_error(exc, f"@tool {name} schema")
        return None


def _offer_schema(spec: _ToolSpec, session: Session) -> None:
    if spec.schema is not None:
        session._offer_tools([spec.schema], spec)


class _ToolCall:
    """One running @tool call: which id it answers and where to record."""

    # ``children``: ids of sub-agent sessions opened inside this call (see _subagents).
    __slots__ = ("session", "call_id", "spec", "children")

    def __init__(self, session: Session, call_id: str, spec: _ToolSpec) -> None:
        self.session = session
        self.call_id = call_id
        self.spec = spec
        self.children: list[str] | None = None

    def finish(self, result: Any) -> None:
        _finish_tool(self.spec, self.session, self.call_id, result, self.children)

    def fail(self, exc: BaseException) -> None:
        _fail_tool(self.spec, self.session, self.call_id, exc)


def _finish_tool(
    spec: _ToolSpec, session: Session, call_id: str, result: Any, children: list[str] | None = None
) -> None:
    try:
        if result is None and children:
            # Nothing returned but sub-agents ran: point at their sessions.
            # A result the user returned is never rewritten.
            session._tool_result(call_id, _links.mention(children))
        elif spec.capture_result:
            session._tool_result(call_id, result if type(result) is str else content_text(result))
        else:
            session._tool_result(call_id, "")
    except Exception as exc:
        internal_error(exc, f"@tool {spec.name}")


def _fail_tool(spec: _ToolSpec, session: Session, call_id: str, exc: BaseException) -> None:
    try:
        session._tool_result(call_id, _error_text(exc))
    except Exception as err:
        internal_error(err, f"@tool {spec.name}")


#: Integrations import it from here; it is a record builder (``_session`` uses it too).
_error_text = _records.error_text


class _BoundId(str):
    """A tool-call id bound by :func:`tool_call_id`.

    Tasks and worker threads run in copies of the context, where clearing the
    variable does not reach the other copies; the counter makes sure only one
    @tool call, wherever it runs, takes the id (``next`` is atomic under the GIL).
    """

    def __init__(self, _value: str) -> None:
        self._takers = itertools.count()

    def take(self) -> bool:
        return next(self._takers) == 0


def _take_bound(session: Session) -> tuple[str, bool] | None:
    """The id bound for the next @tool call, consumed and marked answered now:
    ``(id, whether the session was waiting for it)``, or ``None``."""
    bound_id = bound_tool_call_id.get()
    if bound_id is None:
        return None
    bound_tool_call_id.set(None)
    if isinstance(bound_id, _BoundId) and not bound_id.take():
        return None
    bound_id = str(bound_id)
    return bound_id, session._answer(bound_id)


def _begin_tool(
    spec: _ToolSpec, session: Session, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str | None:
    """The id of the tool call this call answers, or ``None`` if tracing failed."""
    try:
        if spec not in session._tools_seen:
            _offer_schema(spec, session)
        if bound_tool_call_id.get() is not None:
            return _start_tool(spec, session, instance, args, kwargs, _take_bound(session))
        if session._pending:
            return _start_tool(spec, session, instance, args, kwargs, None)
        # The common case, inline: no bound id, no call waiting for a result.
        arguments = json_text(spec.binder.bind(instance, args, kwargs)) if spec.capture_args else "{}"
        return session._tool_call_then_result(spec.name, arguments)
    except Exception as exc:
        internal_error(exc, f"@tool {spec.name}")
        return None


def _start_tool(
    spec: _ToolSpec,
    session: Session,
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    bound: tuple[str, bool] | None,
) -> str:
    """Pair this call with the tool call it answers (recording one if nobody
    asked); returns that call's id."""
    binder = spec.binder
    if bound is not None:
        bound_id, was_pending = bound
        if was_pending:
            return bound_id
        # A model call this session never recorded: keep the trace valid by
        # recording the call, with the caller's id, before the result.
        arguments = json_text(binder.bind(instance, args, kwargs)) if spec.capture_args else "{}"
        return session._tool_call_then_result(spec.name, arguments, bound_id)
    # Bound even with capture_args=False: the arguments still pick the right
    # pending call, they are just not written.
    bound_args = binder.bind(instance, args, kwargs)
    if session._pending:
        call_id = session._claim_tool_call(spec.name, _LazyCandidates(binder, instance, bound_args))
        if call_id is not None:
            return call_id
    arguments = json_text(bound_args) if spec.capture_args else "{}"
    return session._tool_call_then_result(spec.name, arguments)


class _LazyCandidates:
    """The argument forms a pending call may match; defaults only computed if needed."""

    __slots__ = ("binder", "instance", "bound")

    def __init__(self, binder: _Binder, instance: Any, bound: dict[str, Any]) -> None:
        self.binder, self.instance, self.bound = binder, instance, bound

    def __iter__(self) -> Iterator[Any]:
        # JSON round-trip so tuples, numbers etc. compare like decoded arguments.
        bound = self.bound
        yield _json_normal(bound)
        full = self.binder.with_defaults(self.instance, bound)
        if full is not bound:
            yield _json_normal(full)
        lean = self.binder.without_defaults(bound)
        if lean is not bound:
            yield _json_normal(lean)


def _json_normal(value: Any) -> Any:
    try:
        # dumps, not json_text: compared with the model's raw arguments, so
        # nothing may be replaced by placeholders here.
        return orjson.loads(dumps(value))
    except Exception:
        return value


def _tool_observer(
    spec: _ToolSpec,
    session: Session,
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    bound: tuple[str, bool] | None,
) -> _Observer:
    if spec not in session._tools_seen:
        _offer_schema(spec, session)
    return _ToolItems(_ToolCall(session, _start_tool(spec, session, instance, args, kwargs, bound), spec))


def _take_bound_safely(session: Session, spec: _ToolSpec) -> tuple[str, bool] | None:
    try:
        return _take_bound(session)
    except Exception as exc:
        internal_error(exc, f"@tool {spec.name}")
        return None


def _make_tool(func: Any, name: str | None, capture_args: bool, capture_result: bool, schema: Any = None) -> Any:
    spec = _ToolSpec(func, name, capture_args, capture_result, schema)
    kind = _kind(func)

    if kind is _SYNC:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                if _context.replayed_tools is not None:
                    found = _replayed(spec, None, instance, args, kwargs)
                    if found is not _NOT_RECORDED:
                        return found
                return wrapped(*args, **kwargs)
            call_id = _begin_tool(spec, session, instance, args, kwargs)
            if call_id is None:
                return wrapped(*args, **kwargs)
            if _context.replayed_tools is not None:
                found = _replayed(spec, call_id, instance, args, kwargs)
                if found is not _NOT_RECORDED:
                    _finish_tool(spec, session, call_id, found)
                    return found
            # The running call, so a Session opened inside links to it (sub-agents).
            call = _ToolCall(session, call_id, spec)
            scope = _enter_tool_scope(call)
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as exc:
                _leave_tool_scope(scope)
                _fail_tool(spec, session, call_id, exc)
                raise
            _leave_tool_scope(scope)
            _finish_tool(spec, session, call_id, result, call.children)
            return result

    elif kind is _ASYNC:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                coro = wrapped(*args, **kwargs)
                if _context.replayed_tools is not None:
                    found = _replayed(spec, None, instance, args, kwargs)
                    if found is not _NOT_RECORDED:
                        coro.close()
                        return _value(found)
                return coro
            # Created first: wrong arguments raise here, before anything is
            # recorded, exactly as for the undecorated function.
            coro = wrapped(*args, **kwargs)
            call_id = _begin_tool(spec, session, instance, args, kwargs)
            if call_id is None:
                return coro
            if _context.replayed_tools is not None:
                found = _replayed(spec, call_id, instance, args, kwargs)
                if found is not _NOT_RECORDED:
                    coro.close()
                    _finish_tool(spec, session, call_id, found)
                    return _value(found)
            return _run_tool_async(coro, spec, session, call_id)

    else:
        trace = _trace_gen if kind is _GEN else _trace_agen

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None:
                return wrapped(*args, **kwargs)
            gen = wrapped(*args, **kwargs)
            # A bound id is taken (and its call marked answered) now: the
            # ``with`` block may be over by the first next(). Other pairing and
            # all recording wait until the body first runs, so a generator that
            # is never started records nothing.
            bound = _take_bound_safely(session, spec)
            begin = functools.partial(_tool_observer, spec, session, instance, args, kwargs, bound)
            return trace(gen, begin, False)

    decorated = _Wrapper(func, wrapper)
    # Read by s.tools([...]) and ststrace's own integrations (see _tools.definition).
    setattr(decorated, "_self_ststrace_schema", spec.schema)
    return decorated


_NOT_RECORDED: Any = object()


def _replayed(spec: _ToolSpec, call_id: str | None, instance: Any, args: Any, kwargs: Any) -> Any:
    """The recorded result a replay gives this call instead of running it
    (``replay(..., tools="recorded")``), or ``_NOT_RECORDED``."""
    try:
        replay = _context.replayed_tools
        if replay is None:
            return _NOT_RECORDED
        arguments = _json_normal(spec.binder.bind(instance, args, kwargs))
        found, value = replay.take(spec.name, call_id, arguments)
        return value if found else _NOT_RECORDED
    except Exception as exc:
        internal_error(exc, f"@tool {spec.name}")
        return _NOT_RECORDED


async def _value(value: Any) -> Any:
    return value


async def _run_tool_async(coro: Any, spec: _ToolSpec, session: Session, call_id: str) -> Any:
    call = _ToolCall(session, call_id, spec)
    scope = _enter_tool_scope(call)  # see the sync wrapper: sub-agent links
    try:
        result = await coro
    except BaseException as exc:
        _leave_tool_scope(scope)
        _fail_tool(spec, session, call_id, exc)
        raise
    _leave_tool_scope(scope)
    _finish_tool(spec, session, call_id, result, call.children)
    return result


class _Observer:
    """What a traced generator reports to: each item, then exactly one ending."""

    __slots__ = ()

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


def _begin_safely(begin: Callable[[], _Observer | None]) -> _Observer | None:
    try:
        return begin()
    except Exception as exc:
        internal_error(exc, "generator tracing")
        return None


def _flagged(method: Callable[[Any], Any], arg: Any) -> Any:
    # An instrumented client stepped by an @llm generator sees the flag and
    # does not record the reply a second time; set per step, never across a yield.
    token = in_llm_call.set(True)
    try:
        return method(arg)
    finally:
        in_llm_call.reset(token)


async def _aflagged(method: Callable[[Any], Any], arg: Any) -> Any:
    token = in_llm_call.set(True)
    try:
        return await method(arg)
    finally:
        in_llm_call.reset(token)


def _trace_gen(gen: Any, begin: Callable[[], _Observer | None], flag: bool) -> Any:
    """A generator that behaves exactly like *gen* (send/throw/close, return
    value) while reporting its items and how it ended to the observer *begin*
    makes when the generator first runs. No context is held across a yield."""
    obs = _begin_safely(begin)
    if obs is None:
        return (yield from gen)
    try:
        value = _flagged(gen.send, None) if flag else gen.send(None)
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
                value = _flagged(gen.throw, thrown) if flag else gen.throw(thrown)
            except StopIteration as stop:
                _safe(obs.done)
                return stop.value
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise
        else:
            try:
                value = _flagged(gen.send, sent) if flag else gen.send(sent)
            except StopIteration as stop:
                _safe(obs.done)
                return stop.value
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise


async def _trace_agen(agen: Any, begin: Callable[[], _Observer | None], flag: bool) -> Any:
    """The async-generator twin of :func:`_trace_gen` (asend/athrow/aclose)."""
    obs = _begin_safely(begin)
    if obs is None:
        # Not ``async for``: asend/athrow must reach *agen* unchanged.
        obs = _Passthrough()
    try:
        value = await (_aflagged(agen.asend, None) if flag else agen.asend(None))
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
                value = await (_aflagged(agen.athrow, thrown) if flag else agen.athrow(thrown))
            except StopAsyncIteration:
                _safe(obs.done)
                return
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise
        else:
            try:
                value = await (_aflagged(agen.asend, sent) if flag else agen.asend(sent))
            except StopAsyncIteration:
                _safe(obs.done)
                return
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise


class _Passthrough(_Observer):
    """Records nothing: tracing could not start, the generator still runs."""

    __slots__ = ()

    def item(self, value: Any) -> None:
        pass

    def done(self) -> None:
        pass

    def failed(self, exc: BaseException) -> None:
        pass


@overload
def tool(func: F, /) -> F: ...
@overload
def tool(
    func: None = None,
    /,
    *,
    name: str | None = None,
    capture_args: bool = True,
    capture_result: bool = True,
    schema: Mapping[str, Any] | None = None,
) -> Callable[[F], F]: ...


def tool(
    func: Any = None,
    /,
    *,
    name: str | None = None,
    capture_args: bool = True,
    capture_result: bool = True,
    schema: Mapping[str, Any] | None = None,
) -> Any:
    """Record each call of the decorated function as a tool result paired with
    the model's tool call (see docs/decorators.md for the pairing rules).

    The tool's JSON schema is built once, here, from the signature, type hints
    and docstring (*schema* gives one instead: a whole definition or just its
    ``parameters``); it is recorded when the tool is first called in a session."""
    if func is None:
        return lambda f: _make_tool(f, name, capture_args, capture_result, schema)
    return _make_tool(func, name, capture_args, capture_result, schema)


@contextmanager
def tool_call_id(call_id: str) -> Iterator[None]:
    """The next ``@tool`` call inside this block answers tool call *call_id*."""
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"tool_call_id needs a non-empty string, got {call_id!r}")
    token = bound_tool_call_id.set(_BoundId(call_id))
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
