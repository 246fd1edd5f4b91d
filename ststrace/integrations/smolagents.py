"""smolagents: record what a ``ToolCallingAgent`` or ``CodeAgent`` run really did.

smolagents rebuilds the conversation it sends each step from its memory: its
own tool calls come back as assistant *text* ("Calling tools: ...") and tool
output as a *user* "Observation:" message. Recorded at the client level that
gives calls without results and observations as user turns. So, inside an
agent run, the client-level recording (openai, litellm, huggingface_hub) is
switched off, as inside an ``@llm`` function, and the run is recorded from
smolagents' own objects instead:

* the system prompt (once per session while it stays the same) and the task;
* each model step as an assistant message with its text, the reasoning and
  model name of the provider's reply when smolagents kept it (non-streamed
  steps; smolagents' stream deltas carry no reasoning), and its tool calls
  with their ids, recorded before any tool runs;
* each tool's output as a ``tool`` message answering its call (parallel calls
  each answered), or the error that took its place;
* a ``CodeAgent`` code action as a ``python_interpreter`` tool call whose
  ``code`` argument is the code, answered by its execution logs and output;
* planning steps as assistant messages, and the final answer as the last
  assistant message.

A ``@tool``-decorated function called by the agent answers its own call (the
result is then not recorded a second time).

Managed agents: a run started inside another agent's step (smolagents'
managed agents, or any agent a tool runs) records into the session
:func:`child_session` returns. By default that is a linked child session
(:func:`ststrace._subagents.new_child`: beside the manager's file, named after
the managed agent, header ``parentSessionId`` and ``parentToolCallId`` = the
manager's call that ran it), closed when the run ends. The manager's own
trace keeps its call to the agent and the agent's report. Which call runs a
tool is known from ``ToolCallingAgent.execute_tool_call`` (matched to the
step's parsed calls). A ``CodeAgent``'s code runs in an executor thread that
starts with an empty context, so ``local_python_executor.timeout`` (where this
smolagents has it) is wrapped to carry the running agent run, and nothing
else, into it: a managed agent called from the code links to that code
action's call.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import threading
import weakref
from contextvars import Context, ContextVar, Token
from typing import Any, Callable

from .. import _records, _tools
from .._context import current, current_tool_call, in_llm_call
from .._decorators import _error_text, _Observer, _trace_gen
from .._text import content_text, json_text
from .._errors import internal_error
from .._session import Session
from .._links import scope_session
from .._subagents import ToolScope, new_child, tool_scope

LIBRARY = "smolagents"
MIN_VERSION = (1, 20)

_TARGETS = [
    ("smolagents.agents", "MultiStepAgent._run_stream"),
    ("smolagents.agents", "ToolCallingAgent.process_tool_calls"),
    ("smolagents.agents", "CodeAgent._step_stream"),
    ("smolagents.agents", "ToolCallingAgent.execute_tool_call"),
]

#: The decorator that moves a CodeAgent's code to a worker thread (smolagents
#: >= 1.21 or so; before it, code runs in the agent's own thread and needs nothing).
_TIMEOUT = ("smolagents.local_python_executor", "timeout")


def __getattr__(name: str) -> Any:
    # ``TARGETS`` is read by instrument() once smolagents is imported: the
    # optional target is included only where this smolagents has it, so an
    # older release still instruments.
    if name == "TARGETS":
        try:
            module = importlib.import_module(_TIMEOUT[0])
        except ImportError:
            return list(_TARGETS)
        return [*_TARGETS, _TIMEOUT] if callable(getattr(module, _TIMEOUT[1], None)) else list(_TARGETS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: Name of the tool call a CodeAgent code action is recorded as (smolagents' own).
CODE_TOOL = "python_interpreter"

#: The agent run whose step is executing in this context (set per step, never across a yield).
_active: ContextVar[_Run | None] = ContextVar("ststrace.smolagents_run", default=None)

_run_ids = itertools.count(1)

#: Code-action ids each session has seen: smolagents numbers them per run
#: ("call_1", ...), so a later run in the same session would repeat them.
_code_ids: weakref.WeakKeyDictionary[Session, set[str]] = weakref.WeakKeyDictionary()


#: Child sessions made by the default :func:`child_session`: closed when their run ends.
_owned: weakref.WeakSet[Session] = weakref.WeakSet()


def child_session(parent: Session | None, agent: Any, task: Any) -> Session | None:
    """Where a managed agent's run records: ``None`` records nothing.

    Called when an agent starts a run inside another agent's step (smolagents'
    managed agents), within the manager's tool call: a ``Session`` opened here,
    or returned unopened, gets ``parentSessionId`` and ``parentToolCallId``
    (give it ``parent=parent`` if it is built elsewhere). *parent* is the
    session the outer run records into. The child run records into the
    returned session exactly like a top-level run. The default returns a new
    linked child session beside the parent's file, named after the agent, and
    closes it when the run ends; a session returned by a replacement of this
    hook is left open (closing it is the replacement's caller's job).
    """
    if parent is None or parent.disabled:
        return None
    name = getattr(agent, "name", None)
    child = new_child(parent, name if isinstance(name, str) else None)
    child._open_file()  # the header now, while the manager's call is in scope
    _owned.add(child)
    return child


def make_wrapper(path: str, patch: Any) -> Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]:
    """The wrapt wrapper for target *path* (see :data:`TARGETS`)."""
    if path.endswith("._run_stream"):
        return _run_stream_wrapper(patch)
    if path.endswith(".process_tool_calls"):
        return _observing_wrapper(patch, _ToolCallsObserver)
    if path.endswith(".execute_tool_call"):
        return _execute_tool_call_wrapper(patch)
    if path == "timeout":
        return _timeout_wrapper(patch)
    return _observing_wrapper(patch, _CodeStepObserver)


# ---------------------------------------------------------------------------
# One agent run


class _StepState:
    __slots__ = ("step", "recorded", "calls", "errored")

    def __init__(self, step: Any) -> None:
        self.step = step  # kept so its id() is not reused while we track it
        self.recorded = False  # the model's reply of this step
        self.calls: list[str] = []  # ids of the tool calls it made
        self.errored = False  # a failure already answered those calls


class _Run:
    """Records one agent run into *session* (``None``: a muted child run)."""

    def __init__(self, agent: Any, session: Session | None, task: Any) -> None:
        self.agent = agent
        self.session = session
        self.task = task
        self.number = next(_run_ids)
        self.key = f"smolagents-run-{self.number}"
        model_id = getattr(getattr(agent, "model", None), "model_id", None)
        self.model = model_id if isinstance(model_id, str) and model_id else None
        self.steps: dict[int, _StepState] = {}
        self.finalized: set[int] = set()
        self.open_calls: list[str] = []
        self.last_model: str | None = None
        # Sub-agent links: the tool calls of the current step not yet started
        # (id, name, arguments), the running code action's call id, and a
        # child session this run must close when it ends.
        self.queued: list[tuple[str, Any, Any]] = []
        self.lock = threading.Lock()  # parallel tool calls claim from queued
        self.code_call: str | None = None
        self.owned: Session | None = None

    # -- helpers ------------------------------------------------------------

    def state(self, step: Any) -> _StepState:
        st = self.steps.get(id(step))
        if st is None or st.step is not step:
            st = self.steps[id(step)] = _StepState(step)
        return st

    def assistant(self, chat_message: Any, content: Any, calls: list[dict[str, Any]]) -> None:
        session = self.session
        if session is None:
            return
        reply = _provider_reply(chat_message)
        reasoning = reply.get("reasoningContent") if reply else None
        model = reply.get("model") if reply else None
        if calls and reply and reply.get("toolCalls"):
            # The provider's own argument text, where smolagents re-parsed it.
            sent = {c.get("id"): c for c in reply["toolCalls"] if isinstance(c, dict)}
            calls = [sent.get(c["id"], c) for c in calls]
        if isinstance(model, str) and model:
            self.last_model = model
        msg = _records.message(
            "assistant",
            "" if content is None else content,
            reasoning=reasoning,
            tool_calls=calls or None,
            model=self.last_model or self.model,
        )
        session._record_assistant(msg)
        self.open_calls.extend(c["id"] for c in calls)

    def answer(self, call_id: str, content: Any) -> None:
        """Record the result of *call_id* unless something (``@tool``) already did."""
        session = self.session
        if session is None:
            return
        if call_id in self.open_calls:
            self.open_calls.remove(call_id)
        if session._answer(call_id):
            session._emit(_records.tool_result(call_id, content_text(content)))

    def claim(self, name: Any, arguments: Any) -> str | None:
        """The id of the call ``execute_tool_call(name, arguments)`` runs:
        smolagents passes the parsed call's own arguments object; the first
        unclaimed call of that name otherwise."""
        with self.lock:
            for i, (call_id, _, args) in enumerate(self.queued):
                if args is arguments:
                    del self.queued[i]
                    return call_id
            for i, (call_id, queued_name, _) in enumerate(self.queued):
                if queued_name == name:
                    del self.queued[i]
                    return call_id
        return None

    def answer_open(self, calls: list[str], text: str) -> None:
        for call_id in list(calls):
            if call_id in self.open_calls:
                self.answer(call_id, text)

    # -- run-level events -----------------------------------------------------

    def begin(self) -> None:
        session = self.session
        if session is None:
            return
        memory = getattr(self.agent, "memory", None)
        system = getattr(getattr(memory, "system_prompt", None), "system_prompt", None)
        inputs: list[dict[str, Any]] = []
        if isinstance(system, str) and system:
            inputs.append({"role": "system", "content": system})
        if self.task is not None:
            inputs.append({"role": "user", "content": content_text(self.task)})
        # A stateful turn of its own: every message is new, except a system
        # prompt equal to the last one recorded and messages the user
        # recorded with s.user() / s.system() just before.
        session._record_inputs(inputs, self.key)
        self._offer_tools(session)

    def _offer_tools(self, session: Session) -> None:
        """The agent's tools (and managed agents), in smolagents' own JSON-schema form."""
        try:
            # Looked up by name: smolagents ships no type information.
            schema_of = importlib.import_module("smolagents.models").get_tool_json_schema
            offered = [
                schema_of(t)
                for group in ("tools", "managed_agents")
                for t in (getattr(self.agent, group, None) or {}).values()
                if hasattr(t, "inputs")
            ]
            session._offer_tools(_tools.definitions(offered))
        except Exception as exc:
            internal_error(exc, "smolagents tools")

    def item(self, value: Any) -> None:
        kind = _kind(value)
        if kind == "ActionStep":
            self.end_step(value)
        elif kind == "PlanningStep":
            self.planning(value)
        elif kind == "FinalAnswerStep":
            self.final(value)

    def planning(self, step: Any) -> None:
        if self.session is None:
            return
        self.assistant(getattr(step, "model_output_message", None), content_text(step.plan), [])

    def end_step(self, step: Any) -> None:
        if id(step) in self.finalized:
            return  # smolagents yields the last step again when max_steps runs out
        self.finalized.add(id(step))
        st = self.steps.pop(id(step), None)
        if st is None or st.step is not step:
            st = _StepState(step)
        if self.session is None:
            return
        if not st.recorded and step.model_output_message is not None:
            # No tool call came out of this step (e.g. none could be parsed).
            self.assistant(step.model_output_message, _text(step.model_output_message.content), [])
            st.recorded = True
        error = step.error
        if error is None or not st.recorded:
            return
        if any(c in self.open_calls for c in st.calls):
            self.answer_open(st.calls, _error_text(error))
        elif not st.errored:
            # No call left to answer (none parsed, or a final answer check
            # failed): smolagents tells the model in a user turn.
            self.session._emit(_records.simple("user", f"Error:\n{error}"))

    def final(self, step: Any) -> None:
        session = self.session
        if session is None:
            return
        steps = getattr(getattr(self.agent, "memory", None), "steps", None) or []
        last = steps[-1] if steps else None
        error = getattr(last, "error", None)
        if error is not None and type(error).__name__ == "AgentMaxStepsError":
            # provide_final_answer(): one more model call, its text is the answer.
            output: Any = getattr(last, "action_output", None)
        else:
            output = step.output
        model = self.last_model or self.model
        session._record_assistant(_records.message("assistant", _answer_text(output), model=model))

    def stopped(self, exc: BaseException | None) -> None:
        if self.session is not None and self.open_calls:
            self.answer_open(self.open_calls, _error_text(exc or GeneratorExit()))

    def close_owned(self) -> None:
        owned, self.owned = self.owned, None
        if owned is not None:
            err = owned._close_file()
            if err is not None:
                internal_error(err, "smolagents child session close")


_KINDS = frozenset({"ActionStep", "PlanningStep", "FinalAnswerStep", "ToolCall", "ToolOutput", "ActionOutput"})


def _kind(value: Any) -> str | None:
    """Which smolagents object *value* is, by class name (smolagents is not
    imported here: it has no type information, and this runs per yielded item)."""
    for cls in type(value).__mro__:
        if cls.__name__ in _KINDS:
            return cls.__name__
    return None


def _text(content: Any) -> str:
    return "" if content is None else content_text(content)


def _answer_text(output: Any) -> str:
    if output is None:
        return ""
    if isinstance(output, str):
        return str(output)  # AgentText is a str subclass
    return content_text(output)


def _provider_reply(chat_message: Any) -> dict[str, Any] | None:
    raw = getattr(chat_message, "raw", None)
    if raw is None:
        return None
    from .. import _adapters

    return _adapters.response_to_message(raw)


def _tool_calls(chat_message: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for call in getattr(chat_message, "tool_calls", None) or []:
        fn = call.function
        out.append(_records.tool_call(str(call.id), str(fn.name), fn.arguments))
    return out


# ---------------------------------------------------------------------------
# Wrappers


def _run_stream_wrapper(patch: Any) -> Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        parent = _active.get()
        session = current.get()
        if not patch.active or (parent is None and session is None):
            return wrapped(*args, **kwargs)
        gen = wrapped(*args, **kwargs)
        try:
            task = kwargs.get("task", args[0] if args else None)
            if parent is not None and parent.agent is not instance:
                session = _child(parent, instance, task)
            run = _Run(instance, session, task)
            if session is not None and session in _owned:
                run.owned = session
        except Exception as exc:
            internal_error(exc, "smolagents run")
            return gen
        return _traced_run(gen, run)

    return wrapper


def _child(parent: _Run, agent: Any, task: Any) -> Session | None:
    """The session of a run started inside *parent*'s step (see :func:`child_session`),
    asked for inside the tool call that started it."""
    session = parent.session
    if session is None:
        return None  # a muted run's sub-runs are muted too
    scope = None
    running = current_tool_call.get()
    if running is None or scope_session(running) is not session:
        call_id = parent.code_call
        scope = tool_scope(session, call_id) if call_id else None
    # The parent as the current session: a session the hook builds with the
    # default parent=AUTO links to it (the executor thread has none current).
    token = current.set(session)
    try:
        if scope is None:
            child = child_session(session, agent, task)
            _open_linked(child)
        else:
            with scope:
                child = child_session(session, agent, task)
                _open_linked(child)
    finally:
        current.reset(token)
    return child


def _open_linked(child: Session | None) -> None:
    if child is not None and child._writer is None and not child.closed and not child.disabled:
        child._open_file()  # the header with its links, before the run makes it current


def _execute_tool_call_wrapper(patch: Any) -> Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]:
    """``ToolCallingAgent.execute_tool_call(tool_name, arguments)``: runs in the
    scope of the call it executes, so a sub-agent session (a managed agent's
    run, or one a tool opens) links to that call."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        run = _active.get()
        if run is None or run.session is None or not patch.active or run.agent is not instance:
            return wrapped(*args, **kwargs)
        try:
            name = kwargs.get("tool_name", args[0] if args else None)
            arguments = kwargs.get("arguments", args[1] if len(args) > 1 else None)
            call_id = run.claim(name, arguments)
        except Exception as exc:
            internal_error(exc, "smolagents tool call")
            call_id = None
        if not call_id:
            return wrapped(*args, **kwargs)
        token = current_tool_call.set(ToolScope(run.session, call_id))
        try:
            return wrapped(*args, **kwargs)
        finally:
            current_tool_call.reset(token)

    return wrapper


def _timeout_wrapper(patch: Any) -> Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]:
    """``local_python_executor.timeout(seconds)``, the decorator that runs a
    ``CodeAgent``'s code in a fresh worker thread: the code runs with the agent
    run that executes it (only that: no session, so clients and ``@tool``
    functions in the code behave as before), so a managed agent it calls
    becomes a child session linked to the code action."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        decorator = wrapped(*args, **kwargs)
        run = _active.get()
        if run is None or run.session is None or not patch.active or not callable(decorator):
            return decorator

        def carrying(func: Any) -> Any:
            @functools.wraps(func)
            def in_run(*a: Any, **kw: Any) -> Any:
                ctx = Context()
                ctx.run(_active.set, run)
                return ctx.run(func, *a, **kw)

            return decorator(in_run)

        return carrying

    return wrapper


def _observing_wrapper(
    patch: Any, observer: Callable[[_Run, tuple[Any, ...], dict[str, Any]], _Observer]
) -> Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        run = _active.get()
        if run is None or run.session is None or not patch.active or run.agent is not instance:
            return wrapped(*args, **kwargs)
        gen = wrapped(*args, **kwargs)
        return _trace_gen(gen, lambda: observer(run, args, kwargs), False)

    return wrapper


class _ToolCallsObserver(_Observer):
    """``ToolCallingAgent.process_tool_calls(chat_message, memory_step)``: the
    model's reply, with every tool call, is recorded before the first tool runs."""

    __slots__ = ("run", "state")

    def __init__(self, run: _Run, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.run = run
        chat_message = kwargs.get("chat_message", args[0] if args else None)
        step = kwargs.get("memory_step", args[1] if len(args) > 1 else None)
        self.state = state = run.state(step)
        with run.lock:
            run.queued = []  # a new step: calls of the last one that never ran are gone
        calls = _tool_calls(chat_message)
        run.assistant(chat_message, _text(getattr(chat_message, "content", None)), calls)
        state.recorded = True
        state.calls = [c["id"] for c in calls]

    def item(self, value: Any) -> None:
        kind = _kind(value)
        if kind == "ToolOutput":
            self.run.answer(str(value.id), value.observation)
        elif kind == "ToolCall":
            with self.run.lock:
                self.run.queued.append((str(value.id), value.name, value.arguments))

    def done(self) -> None:
        pass

    def failed(self, exc: BaseException) -> None:
        self.state.errored = True
        self.run.answer_open(self.state.calls, _error_text(exc))


class _CodeStepObserver(_Observer):
    """``CodeAgent._step_stream(memory_step)``: the code action is recorded as a
    tool call when smolagents has parsed it, its logs and output as the result."""

    __slots__ = ("run", "step", "state")

    def __init__(self, run: _Run, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.run = run
        self.step: Any = kwargs.get("memory_step", args[0] if args else None)
        self.state = run.state(self.step)

    def item(self, value: Any) -> None:
        kind = _kind(value)
        if kind == "ToolCall":
            step, session = self.step, self.run.session
            call_id = str(value.id)
            if session is not None:
                used = _code_ids.setdefault(session, set())
                if call_id in used:
                    call_id = f"{call_id}_run{self.run.number}"
                used.add(call_id)
            code = value.arguments
            call = _records.tool_call(call_id, CODE_TOOL, json_text({"code": code}))
            message = step.model_output_message
            self.run.assistant(message, _text(step.model_output), [call])
            self.state.recorded = True
            self.state.calls = [call_id]
            self.run.code_call = call_id  # a managed agent the code calls links here
        elif kind == "ActionOutput" and self.state.calls:
            self.run.code_call = None
            self.run.answer(self.state.calls[0], self.step.observations or "")

    def done(self) -> None:
        self.run.code_call = None

    def failed(self, exc: BaseException) -> None:
        self.run.code_call = None
        if not self.state.calls:
            return
        self.state.errored = True
        logs = self.step.observations
        text = _error_text(exc)
        self.run.answer_open(self.state.calls, f"{logs}\n{text}" if logs else text)


# ---------------------------------------------------------------------------
# The run generator


def _enter(run: _Run) -> tuple[Token[Any], ...]:
    # Client-level recording steps aside, as inside an @llm function; a muted
    # child run hides the session from @tool functions and clients alike.
    return (
        _active.set(run),
        in_llm_call.set(True),
        current.set(run.session),
    )


def _exit(tokens: tuple[Token[Any], ...]) -> None:
    t_active, t_flag, t_current = tokens
    current.reset(t_current)
    in_llm_call.reset(t_flag)
    _active.reset(t_active)


def _safe(fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except Exception as exc:
        internal_error(exc, "smolagents run")


def _traced_run(gen: Any, run: _Run) -> Any:
    """A generator that behaves exactly like *gen* (send/throw/close, return
    value) and records the run; each step runs with the run active in the
    context, never across a yield."""
    started = False
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        tokens = _enter(run)
        try:
            if not started:
                started = True
                _safe(run.begin)
            if thrown is not None:
                exc, thrown = thrown, None
                value = gen.throw(exc)
            else:
                value = gen.send(sent)
        except StopIteration as stop:
            _safe(run.stopped, None)
            _safe(run.close_owned)
            return stop.value
        except BaseException as exc:
            _safe(run.stopped, exc)
            _safe(run.close_owned)
            raise
        finally:
            _exit(tokens)
        _safe(run.item, value)
        try:
            sent = yield value
        except GeneratorExit:
            tokens = _enter(run)
            try:
                gen.close()
            finally:
                _exit(tokens)
                _safe(run.stopped, None)
                _safe(run.close_owned)
            raise
        except BaseException as exc:
            thrown = exc
