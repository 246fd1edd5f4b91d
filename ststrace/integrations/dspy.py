"""DSPy: record what a ``dspy.ReAct`` agent and a ``dspy.Predict`` call really did.

DSPy speaks a text protocol to the model: every call sends the adapter's
rendering of a signature (``[[ ## field ## ]]`` sections), and a ReAct step's
tool call and the tools' observations travel inside a ``trajectory`` text
field. Recorded at the client level (LiteLLM, with ``engine="litellm"``; DSPy's
own native engine reaches no instrumented client at all) that is a series of
unrelated text turns. So inside a DSPy module call the client-level recording
is switched off, as inside an ``@llm`` function, and the trace is built from
DSPy's own objects:

* ``dspy.ReAct`` (``forward`` / ``aforward``): the agent's instructions (with
  its tool list) as the system prompt and the inputs as the user turn; each
  step as an assistant message whose ``reasoningContent`` is the
  ``next_thought`` and whose tool call is ``next_tool_name`` with
  ``next_tool_args`` (ReAct has no call ids: each call gets a generated one),
  recorded before the tool runs; each observation as the ``tool`` message
  answering it (``finish`` too, with its ``"Completed."``); then the extracted
  outputs as the last assistant message (the extractor's ``reasoning`` as its
  reasoning).
* ``dspy.Predict`` (and the modules built on it, ``ChainOfThought`` ...) called
  outside a ReAct run: the signature's instructions and the inputs, then the
  outputs as one assistant message; a ``dspy.ToolCalls`` output becomes the
  message's tool calls (the provider's ids with native function calling,
  generated ones otherwise), and ``ToolCall.execute()`` records the result
  answering its call.

Each model call's token usage, model (the response's) and text are read from
DSPy's own bookkeeping of the call (``dspy.clients.execution.finalize``); a
cache hit reports no usage. A reply DSPy cannot parse (it then asks again with
another adapter, or raises) is recorded as the model wrote it, with a
``system`` note; a ReAct run that raises ends with ``The agent run failed: ...``.

A ReAct run's tool runs inside its call (:func:`ststrace._subagents.tool_scope`):
a ``Session`` it opens links to the call, an ``@ststrace.tool`` function answers
it, and a ReAct run it starts records into a child session (beside the
parent's file, named after the tool, ``parentToolCallId`` = the call), closed
when that run ends. Model calls a tool makes otherwise (a bare ``Predict``, a
client) record nothing, as inside smolagents' tools.
"""

from __future__ import annotations

import itertools
import sys
import weakref
from contextvars import ContextVar, Token
from typing import Any, Callable

from .. import _records
from .._adapters.usage import usage_of
from .._context import current, in_llm_call
from .._decorators import _error_text
from .._text import content_text
from .._errors import internal_error
from .._ids import new_tool_call_id
from .._session import Session
from .._subagents import new_child, tool_scope

LIBRARY = "dspy"
MIN_VERSION = (3, 4)

TARGETS = [
    ("dspy.predict.react", "ReAct.forward"),
    ("dspy.predict.react", "ReAct.aforward"),
    ("dspy.predict.react", "ReAct._call_with_potential_trajectory_truncation"),
    ("dspy.predict.react", "ReAct._async_call_with_potential_trajectory_truncation"),
    ("dspy.predict.predict", "Predict.forward"),
    ("dspy.predict.predict", "Predict.aforward"),
    ("dspy.adapters.types.tool", "ToolCalls.ToolCall.execute"),
    ("dspy.adapters.types.tool", "Tool.__call__"),
    ("dspy.adapters.types.tool", "Tool.acall"),
    ("dspy.clients.execution", "finalize"),
]

_Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

#: The DSPy module call recording in this context (a ReAct run or a Predict call).
_active: ContextVar[Any] = ContextVar("ststrace.dspy_call", default=None)
#: Model calls DSPy finished in this context while a module call records: (usage, model, text).
_lm_calls: ContextVar[list[tuple[Any, Any, Any]] | None] = ContextVar("ststrace.dspy_lm_calls", default=None)

_numbers = itertools.count(1)

#: ``id(ToolCall)`` of recorded Predict replies -> (a weak reference to it, session, call id).
#: By identity: pydantic models are unhashable; each entry leaves with its object.
_calls: dict[int, tuple[weakref.ref[Any], Session, str]] = {}


def _remember(tc: Any, session: Session, call_id: str) -> None:
    key = id(tc)
    _calls[key] = (weakref.ref(tc, lambda _: _calls.pop(key, None)), session, call_id)


def _recall(tc: Any) -> tuple[Session, str] | None:
    entry = _calls.get(id(tc))
    if entry is None or entry[0]() is not tc:
        return None
    del _calls[id(tc)]
    return entry[1], entry[2]


def _fields_text(values: dict[str, Any]) -> str:
    """Signature fields as one text: a lone field's value, else ``name: value`` lines."""
    if len(values) == 1:
        return content_text(next(iter(values.values())))
    return "\n".join(f"{name}: {content_text(value)}" for name, value in values.items())


def _usage_model(usage: Any, model: Any) -> tuple[dict[str, Any] | None, str | None]:
    return usage_of(usage) if isinstance(usage, dict) and usage else None, model if isinstance(model, str) else None


def _output_text(outputs: Any) -> str | None:
    """The text of a finished model call's first output (a string or ``{"text": ...}``)."""
    first = outputs[0] if isinstance(outputs, (list, tuple)) and outputs else outputs
    text = first.get("text") if isinstance(first, dict) else first
    return text if isinstance(text, str) else None


def _model_name(module: Any) -> str | None:
    lm = getattr(module, "lm", None)
    if lm is None:
        # dspy's global settings (dspy is imported: this runs inside a dspy call).
        lm = getattr(getattr(sys.modules.get("dspy"), "settings", None), "lm", None)
    model = getattr(lm, "model", None)
    return model if isinstance(model, str) and model else None


class _Call:
    """One recorded DSPy module call: its session, its model calls, its turn."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.lm_calls: list[tuple[Any, Any, Any]] = []
        self.key = f"dspy-{next(_numbers)}"

    def inputs(self, system: Any, values: dict[str, Any]) -> None:
        messages: list[dict[str, Any]] = []
        if isinstance(system, str) and system:
            messages.append({"role": "system", "content": system})
        if values:
            messages.append({"role": "user", "content": _fields_text(values)})
        if messages:
            self.session._record_inputs(messages, self.key)

    def unparsed(self, keep_last: bool, fallback_model: str | None) -> None:
        """Model replies DSPy could not parse (it then asks again, with another
        adapter, or gives up): each as the model wrote it, then a note. The
        last one is kept for :meth:`reply` when *keep_last*."""
        calls, rest = list(self.lm_calls), []
        if keep_last and calls:
            calls, rest = calls[:-1], calls[-1:]
        self.lm_calls[:] = rest
        for usage_raw, model_raw, text in calls:
            usage, model = _usage_model(usage_raw, model_raw)
            msg = _records.message("assistant", text or "", model=model or fallback_model, usage=usage)
            self.session._record_assistant(msg)
            self.session._emit(_records.message("system", "DSPy could not parse this reply into the signature's fields"))

    def reply(
        self, content: str, reasoning: Any, calls: list[dict[str, Any]] | None, fallback_model: str | None
    ) -> None:
        self.unparsed(True, fallback_model)
        usage, model = _usage_model(*self.lm_calls[-1][:2]) if self.lm_calls else (None, None)
        self.lm_calls.clear()
        msg = _records.message(
            "assistant",
            content,
            reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
            tool_calls=calls or None,
            model=model or fallback_model,
            usage=usage,
        )
        self.session._record_assistant(msg)


class _Run(_Call):
    """One ``ReAct.forward`` / ``aforward``: which of its calls still wait for an observation."""

    def __init__(self, session: Session, react: Any) -> None:
        super().__init__(session)
        self.react = react
        self.step = 0
        self.open: list[tuple[int, str]] = []  # (step, call id)
        self.names: dict[str, str] = {}  # call id -> tool name
        self.owned = False  # a child session this run closes at its end

    def begin(self, input_args: dict[str, Any]) -> None:
        predictor = getattr(self.react, "react", None)
        system = getattr(getattr(predictor, "signature", None), "instructions", None)
        values = {k: v for k, v in input_args.items() if k != "max_iters"}
        self.inputs(system, values)

    def observations(self, trajectory: Any) -> None:
        """Record the observations that arrived since the last step."""
        if not isinstance(trajectory, dict):
            return
        for step, call_id in list(self.open):
            key = f"observation_{step}"
            if key in trajectory:
                self.open.remove((step, call_id))
                if self.session._answer(call_id):
                    self.session._emit(_records.tool_result(call_id, content_text(trajectory[key])))

    def after(self, module: Any, pred: Any) -> None:
        model = _model_name(module)
        if module is getattr(self.react, "react", None):
            name, args = getattr(pred, "next_tool_name", None), getattr(pred, "next_tool_args", None)
            call_id = new_tool_call_id()
            call = _records.tool_call(call_id, str(name), args if args is not None else {})
            self.reply("", getattr(pred, "next_thought", None), [call], model)
            self.open.append((self.step, call_id))
            self.names[call_id] = str(name)
            self.step += 1
        elif module is getattr(self.react, "extract", None):
            outputs = getattr(getattr(self.react, "signature", None), "output_fields", None) or {}
            values = {name: getattr(pred, name, None) for name in outputs}
            self.reply(_fields_text(values) if values else "", getattr(pred, "reasoning", None), None, model)

    def stopped(self, exc: BaseException | None) -> None:
        text = _error_text(exc) if exc is not None else "Error: the agent run ended before this call's observation"
        for _, call_id in self.open:
            if self.session._answer(call_id):
                self.session._emit(_records.tool_result(call_id, text))
        self.open.clear()
        if exc is not None and not isinstance(exc, GeneratorExit):
            first = text.removeprefix("Error: ").strip().splitlines()
            self.session._emit(_records.message("system", f"The agent run failed: {first[0] if first else text}"))
        if self.owned:
            self.owned = False
            err = self.session._close_file()
            if err is not None:
                internal_error(err, "dspy child session close")

    def running(self, tool: Any) -> str | None:
        """The call a run's tool answers: the latest waiting call of its name."""
        tools = getattr(self.react, "tools", None)
        name = getattr(tool, "name", None)
        if not isinstance(tools, dict) or not isinstance(name, str) or tools.get(name) is not tool:
            return None
        return next((c for _, c in reversed(self.open) if self.names.get(c) == name), None)


def _enter(call: _Call) -> tuple[Token[Any], ...]:
    # Client-level recording steps aside, as inside an @llm function.
    return (_active.set(call), in_llm_call.set(True), _lm_calls.set(call.lm_calls))


def _exit(tokens: tuple[Token[Any], ...]) -> None:
    t_active, t_flag, t_calls = tokens
    _lm_calls.reset(t_calls)
    in_llm_call.reset(t_flag)
    _active.reset(t_active)


def _session(patch: Any) -> Session | None:
    session: Session | None = current.get()
    if session is None or not patch.active or session.disabled or session.closed or _active.get() is not None:
        return None
    return session


class _InTool:
    """A ReAct run's tool is running (tool call *call_id*): a ReAct run it
    starts records into a child session linked to that call."""

    __slots__ = ("run", "call_id")

    def __init__(self, run: _Run, call_id: str) -> None:
        self.run = run
        self.call_id = call_id


def _safe(fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except Exception as exc:
        internal_error(exc, "dspy")


# ---------------------------------------------------------------------------
# ReAct


def _start_run(patch: Any, instance: Any, kwargs: dict[str, Any]) -> _Run | None:
    outer = _active.get()
    try:
        if isinstance(outer, _InTool) and patch.active:
            session = _child(outer)
            if session is None:
                return None
            run = _Run(session, instance)
            run.owned = True
        else:
            session = _session(patch)
            if session is None:
                return None
            run = _Run(session, instance)
        run.begin(kwargs)
        return run
    except Exception as exc:
        internal_error(exc, "dspy ReAct run")
        return None


def _child(outer: _InTool) -> Session | None:
    """The child session of a ReAct run started by another run's tool, open and linked to that call."""
    parent = outer.run.session
    if parent.closed or parent.disabled:
        return None
    name = outer.run.names.get(outer.call_id)
    child = new_child(parent, name)
    with tool_scope(parent, outer.call_id):
        child._open_file()  # the header with its links, once per sub-agent run
    return child


def _forward_wrapper(patch: Any) -> _Wrapper:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        run = _start_run(patch, instance, kwargs)
        if run is None:
            return wrapped(*args, **kwargs)
        tokens = _enter(run)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            _safe(run.stopped, exc)
            raise
        finally:
            _exit(tokens)
        _safe(run.stopped, None)
        return result

    return wrapper


def _aforward_wrapper(patch: Any) -> _Wrapper:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        run = _start_run(patch, instance, kwargs)
        if run is None:
            return wrapped(*args, **kwargs)
        return _arun(wrapped, args, kwargs, run)

    return wrapper


async def _arun(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run: _Run) -> Any:
    tokens = _enter(run)
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _safe(run.stopped, exc)
        raise
    finally:
        _exit(tokens)
    _safe(run.stopped, None)
    return result


def _step_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    module = kwargs.get("module", args[0] if args else None)
    trajectory = kwargs.get("trajectory", args[1] if len(args) > 1 else None)
    return module, trajectory


def _step_wrapper(patch: Any) -> _Wrapper:
    """``ReAct._call_with_potential_trajectory_truncation(module, trajectory, **inputs)``:
    one model call of the run (a step, or the final extraction)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        run = _active.get()
        if not isinstance(run, _Run) or run.react is not instance or not patch.active:
            return wrapped(*args, **kwargs)
        module, trajectory = _step_args(args, kwargs)
        _safe(run.observations, trajectory)
        try:
            pred = wrapped(*args, **kwargs)
        except Exception:
            _safe(run.unparsed, False, _model_name(module))
            raise
        _safe(run.after, module, pred)
        return pred

    return wrapper


def _astep_wrapper(patch: Any) -> _Wrapper:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        run = _active.get()
        if not isinstance(run, _Run) or run.react is not instance or not patch.active:
            return wrapped(*args, **kwargs)
        return _astep(wrapped, args, kwargs, run)

    return wrapper


async def _astep(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run: _Run) -> Any:
    module, trajectory = _step_args(args, kwargs)
    _safe(run.observations, trajectory)
    try:
        pred = await wrapped(*args, **kwargs)
    except Exception:
        _safe(run.unparsed, False, _model_name(module))
        raise
    _safe(run.after, module, pred)
    return pred


def _tool_scope(patch: Any, instance: Any) -> tuple[_Run, str] | None:
    run = _active.get()
    if not isinstance(run, _Run) or not patch.active:
        return None
    try:
        call_id = run.running(instance)
    except Exception as exc:
        internal_error(exc, "dspy tool")
        return None
    return None if call_id is None else (run, call_id)


def _tool_wrapper(patch: Any) -> _Wrapper:
    """``Tool.__call__``: a run's tool runs inside its call (``tool_scope``),
    so a session, or a ReAct run, it starts links to that call."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        scope = _tool_scope(patch, instance)
        if scope is None:
            return wrapped(*args, **kwargs)
        run, call_id = scope
        token = _active.set(_InTool(run, call_id))
        try:
            with tool_scope(run.session, call_id):
                return wrapped(*args, **kwargs)
        finally:
            _active.reset(token)

    return wrapper


def _atool_wrapper(patch: Any) -> _Wrapper:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        scope = _tool_scope(patch, instance)
        if scope is None:
            return wrapped(*args, **kwargs)
        return _atool(wrapped, args, kwargs, *scope)

    return wrapper


async def _atool(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run: _Run, call_id: str) -> Any:
    token = _active.set(_InTool(run, call_id))
    try:
        with tool_scope(run.session, call_id):
            return await wrapped(*args, **kwargs)
    finally:
        _active.reset(token)


# ---------------------------------------------------------------------------
# Predict


def _is_tool_calls(annotation: Any) -> bool:
    return isinstance(annotation, type) and annotation.__name__ == "ToolCalls"


def _start_predict(patch: Any, instance: Any, kwargs: dict[str, Any]) -> _Call | None:
    session = _session(patch)
    if session is None:
        return None
    try:
        call = _Call(session)
        signature = kwargs.get("signature", getattr(instance, "signature", None))
        inputs = getattr(signature, "input_fields", None) or {}
        values = {name: kwargs[name] for name in inputs if name in kwargs and not _is_tools(kwargs[name])}
        call.inputs(getattr(signature, "instructions", None), values)
        return call
    except Exception as exc:
        internal_error(exc, "dspy Predict")
        return None


def _is_tools(value: Any) -> bool:
    """A ``list[dspy.Tool]`` input: the tools offered, not part of the prompt text."""
    return isinstance(value, (list, tuple)) and bool(value) and all(type(v).__name__ == "Tool" for v in value)


def _finish_predict(call: _Call, instance: Any, kwargs: dict[str, Any], pred: Any) -> None:
    signature = kwargs.get("signature", getattr(instance, "signature", None))
    outputs = getattr(signature, "output_fields", None) or {}
    values: dict[str, Any] = {}
    calls: list[dict[str, Any]] = []
    reasoning = None
    for name, field in outputs.items():
        value = getattr(pred, name, None)
        if _is_tool_calls(getattr(field, "annotation", None)):
            for tc in getattr(value, "tool_calls", None) or ():
                call_id = getattr(tc, "id", None)
                if not isinstance(call_id, str) or not call_id:
                    call_id = new_tool_call_id()
                calls.append(_records.tool_call(call_id, str(getattr(tc, "name", "")), getattr(tc, "args", None) or {}))
                try:
                    _remember(tc, call.session, call_id)
                except TypeError:
                    pass  # not weakly referenceable: its result is not paired
        elif name == "reasoning":
            reasoning = value
        else:
            values[name] = value
    call.reply(_fields_text(values) if values else "", reasoning, calls, _model_name(instance))


def _predict_wrapper(patch: Any) -> _Wrapper:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = _start_predict(patch, instance, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        tokens = _enter(call)
        try:
            pred = wrapped(*args, **kwargs)
        except Exception:
            _safe(call.unparsed, False, _model_name(instance))
            raise
        finally:
            _exit(tokens)
        _safe(_finish_predict, call, instance, kwargs, pred)
        return pred

    return wrapper


def _apredict_wrapper(patch: Any) -> _Wrapper:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = _start_predict(patch, instance, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        return _apredict(wrapped, instance, args, kwargs, call)

    return wrapper


async def _apredict(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], call: _Call) -> Any:
    tokens = _enter(call)
    try:
        pred = await wrapped(*args, **kwargs)
    except Exception:
        _safe(call.unparsed, False, _model_name(instance))
        raise
    finally:
        _exit(tokens)
    _safe(_finish_predict, call, instance, kwargs, pred)
    return pred


def _execute_wrapper(patch: Any) -> _Wrapper:
    """``ToolCalls.ToolCall.execute()``: the result of a call a recorded Predict reply holds."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        known = _recall(instance) if patch.active else None
        if known is None:
            return wrapped(*args, **kwargs)
        session, call_id = known
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            _safe(_answer, session, call_id, _error_text(exc))
            raise
        _safe(_answer, session, call_id, content_text(result))
        return result

    return wrapper


def _answer(session: Session, call_id: str, text: str) -> None:
    if not session.closed and session._answer(call_id):
        session._emit(_records.tool_result(call_id, text))


# ---------------------------------------------------------------------------
# Model calls


def _finalize_wrapper(patch: Any) -> _Wrapper:
    """``dspy.clients.execution.finalize(lm, call, result)``: DSPy's bookkeeping
    of one finished model call, whatever engine made it."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        calls = _lm_calls.get()
        if calls is not None and patch.active:
            try:
                result = kwargs.get("result", args[2] if len(args) > 2 else None)
                usage = None if getattr(result, "cache_hit", False) else getattr(result, "usage", None)
                text = _output_text(getattr(result, "outputs", None))
                calls.append((usage, getattr(result, "response_model", None), text))
            except Exception as exc:
                internal_error(exc, "dspy model call")
        return wrapped(*args, **kwargs)

    return wrapper


_FACTORIES: dict[str, Callable[[Any], _Wrapper]] = {
    "ReAct.forward": _forward_wrapper,
    "ReAct.aforward": _aforward_wrapper,
    "ReAct._call_with_potential_trajectory_truncation": _step_wrapper,
    "ReAct._async_call_with_potential_trajectory_truncation": _astep_wrapper,
    "Predict.forward": _predict_wrapper,
    "Predict.aforward": _apredict_wrapper,
    "ToolCalls.ToolCall.execute": _execute_wrapper,
    "Tool.__call__": _tool_wrapper,
    "Tool.acall": _atool_wrapper,
    "finalize": _finalize_wrapper,
}


def make_wrapper(path: str, patch: Any) -> _Wrapper:
    """The wrapt wrapper for target *path* (see :data:`TARGETS`)."""
    return _FACTORIES[path](patch)
