"""``@tool``: each call recorded as a tool result paired with the model's
tool call.

The function kind picks one of four small wrappers, at decoration. Every
wrapper first looks up the current session; with none it calls straight
through. Recording work runs inside ``try/except Exception`` guards that log
and carry on; the user's call itself is never inside a guard, and its
exceptions are re-raised with a bare ``raise`` (same object, same traceback).
"""

from __future__ import annotations

import functools
import itertools
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, overload

import orjson

from . import _context, _ids, _links, _records, _tools
from ._context import bound_tool_call_id, current, current_tool_call
from ._encode import dumps
from ._errors import internal_error
from ._generators import _Observer, _trace_agen, _trace_gen
from ._session import Session
from ._text import content_text, json_text
from ._wrapping import _ASYNC, _GEN, _SYNC, F, _Binder, _kind, _Wrapper

# Bound once: set around every @tool call (sub-agent links), so lookups count.
_enter_tool_scope = current_tool_call.set
_leave_tool_scope = current_tool_call.reset
_current_session = current.get
_bound_id = bound_tool_call_id.get
_orjson_dumps = orjson.dumps
_time_ns = time.time_ns
_RESULT_LINE_OWN_ID = _records.RESULT_LINE_OWN_ID


class _ToolSpec:
    __slots__ = ("name", "name_json", "binder", "capture_args", "capture_result", "schema", "call_format", "first", "lean")

    def __init__(
        self, func: Any, name: str | None, capture_args: bool, capture_result: bool, schema: Any = None
    ) -> None:
        target = getattr(func, "__func__", func)
        self.name = name or getattr(target, "__name__", None) or "tool"
        #: The name as JSON, for the call's line (see _records.single_call_line).
        self.name_json = _orjson_name(self.name)
        self.binder = _Binder(func)
        self.capture_args = capture_args
        self.capture_result = capture_result
        #: The tool's definition, built once here: a call only looks the spec
        #: up in the session's set of tools recorded (see _begin_tool).
        self.schema = _tool_schema(func, self.name, schema)
        #: The call's line with the name in place (see _records.call_line_format).
        self.call_format = None if self.name_json is None else _records.call_line_format(self.name_json)
        self.first = self.binder.first
        #: Calls of this tool may take the lean path (see _lean_call) when the
        #: session allows it: decided here, once.
        self.lean = capture_args and capture_result and self.binder.plain and self.call_format is not None


def _orjson_name(name: str) -> bytes | None:
    try:
        return orjson.dumps(name)
    except Exception:  # a name orjson refuses: the dict path, per call
        return None


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


def _lean_call(spec: _ToolSpec, session: Session, append: Callable[[bytes], bool], args: Any, kwargs: Any) -> str:
    """Record the call line of a plain function's call in the common case (no
    bound id, no call waiting for a result, the schema recorded, the file open
    with no tools waiting: the wrapper checked); returns the new call's id.

    Everything the shape allows was decided at decoration (the binding plan,
    the line with the name in it); per call: bind, the arguments as JSON text,
    their screen, the line, the append."""
    if not args:
        bound = kwargs  # wrapt's own dict for this call: read here, never changed
    elif not kwargs and len(args) == 1:
        bound = {spec.first: args[0]}
    else:
        bound = spec.binder.bind(None, args, kwargs)
    arguments = json_text(bound)
    guard = session._guard
    if guard is not None and len(arguments) >= guard._short and guard.screen(arguments):
        arguments = guard.arguments(arguments)
    call_id = next(_ids.call_ids)  # new_tool_call_id() without its frame; read each time: reseeded after fork
    try:
        line = spec.call_format % (call_id.encode(), _orjson_dumps(arguments), _time_ns() // 1_000_000)  # type: ignore[operator]
    except Exception:  # a str orjson refuses: the dict path, whose encoder has fallbacks
        session._write(_records.single_call(call_id, spec.name, arguments))
        return call_id
    append(line)
    return call_id


def _lean_result(spec: _ToolSpec, session: Session, call_id: str, result: Any, children: list[str] | None) -> None:
    """Record the result of a call :func:`_lean_call` began (*call_id* is one
    ststrace made); a result that is not a string or a number, a call that ran
    sub-agents, or a failure here goes to :func:`_finish_tool` (which logs
    what fails there)."""
    try:
        kind = type(result)
        if children:
            text = None
        elif kind is str:
            text = result
        elif kind is int or kind is float or kind is bool:
            text = _orjson_dumps(result).decode()  # content_text's bytes; an int past 64 bits raises: below
        else:
            text = None
        if text is None:
            _finish_tool(spec, session, call_id, result, children)
            return
        guard = session._guard
        if guard is not None and len(text) >= guard._short and guard.screen(text):
            text = guard.text(text)
        # Read again: tools offered during the call wait for this record.
        append = session._append
        if append is not None:
            try:
                line = _RESULT_LINE_OWN_ID % (_orjson_dumps(text), call_id.encode(), _time_ns() // 1_000_000)
            except Exception:
                pass  # a str orjson refuses: the dict path below
            else:
                append(line)
                return
        session._write(_records.tool_result(call_id, text))
    except Exception:
        _finish_tool(spec, session, call_id, result, children)


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
        return session._tool_call_then_result(spec.name, arguments, None, spec.name_json)
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
        return session._tool_call_then_result(spec.name, arguments, bound_id, spec.name_json)
    # Bound even with capture_args=False: the arguments still pick the right
    # pending call, they are just not written.
    bound_args = binder.bind(instance, args, kwargs)
    if session._pending:
        call_id = session._claim_tool_call(spec.name, _LazyCandidates(binder, instance, bound_args))
        if call_id is not None:
            return call_id
    arguments = json_text(bound_args) if spec.capture_args else "{}"
    return session._tool_call_then_result(spec.name, arguments, None, spec.name_json)


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
    lean = spec.lean

    if kind is _SYNC:

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = _current_session()
            if session is None:
                if _context.replayed_tools is not None:
                    found = _replayed(spec, None, instance, args, kwargs)
                    if found is not _NOT_RECORDED:
                        return found
                return wrapped(*args, **kwargs)
            append = session._append
            if (
                append is not None
                and lean
                and instance is None
                and not session._pending
                and _context.replayed_tools is None
                and _bound_id() is None
                and spec in session._tools_seen
            ):
                # The common case, decided in one test (see _lean_call).
                try:
                    own_id = _lean_call(spec, session, append, args, kwargs)
                except Exception as exc:
                    internal_error(exc, f"@tool {spec.name}")
                    return wrapped(*args, **kwargs)
                # The running call as a (session, id) tuple: sessions opened
                # inside link to it; their ids land in session._call_children.
                scope = _enter_tool_scope((session, own_id))
                try:
                    result = wrapped(*args, **kwargs)
                except BaseException as exc:
                    _leave_tool_scope(scope)
                    if session._call_children:
                        session._call_children.pop(own_id, None)
                    _fail_tool(spec, session, own_id, exc)
                    raise
                _leave_tool_scope(scope)
                _lean_result(spec, session, own_id, result,
                             session._call_children.pop(own_id, None) if session._call_children else None)
                return result
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
            append = session._append
            if (
                append is not None
                and lean
                and instance is None
                and not session._pending
                and _context.replayed_tools is None
                and _bound_id() is None
                and spec in session._tools_seen
            ):
                try:  # see the sync wrapper
                    own_id = _lean_call(spec, session, append, args, kwargs)
                except Exception as exc:
                    internal_error(exc, f"@tool {spec.name}")
                    return coro
                return _run_lean_async(coro, spec, session, own_id)
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


async def _run_lean_async(coro: Any, spec: _ToolSpec, session: Session, call_id: str) -> Any:
    """:func:`_run_tool_async` for a call :func:`_lean_call` began (see the sync wrapper)."""
    scope = _enter_tool_scope((session, call_id))
    try:
        result = await coro
    except BaseException as exc:
        _leave_tool_scope(scope)
        if session._call_children:
            session._call_children.pop(call_id, None)
        _fail_tool(spec, session, call_id, exc)
        raise
    _leave_tool_scope(scope)
    _lean_result(spec, session, call_id, result,
                 session._call_children.pop(call_id, None) if session._call_children else None)
    return result



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
