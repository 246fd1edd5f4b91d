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
result is then not recorded a second time). A managed agent's own run does
not record into the manager's session: the manager records the call to it and
its report. :func:`child_session` is where a linked child session would plug in.
"""

from __future__ import annotations

import itertools
import weakref
from contextvars import ContextVar, Token
from typing import Any, Callable

from .. import _records
from .._context import current, in_llm_call
from .._decorators import _error_text, _Observer, _trace_gen
from .._encode import content_text, json_text
from .._errors import internal_error
from .._session import Session

LIBRARY = "smolagents"
MIN_VERSION = (1, 20)

TARGETS = [
    ("smolagents.agents", "MultiStepAgent._run_stream"),
    ("smolagents.agents", "ToolCallingAgent.process_tool_calls"),
    ("smolagents.agents", "CodeAgent._step_stream"),
]

#: Name of the tool call a CodeAgent code action is recorded as (smolagents' own).
CODE_TOOL = "python_interpreter"

#: The agent run whose step is executing in this context (set per step, never across a yield).
_active: ContextVar[_Run | None] = ContextVar("ststrace.smolagents_run", default=None)

_run_ids = itertools.count(1)

#: Code-action ids each session has seen: smolagents numbers them per run
#: ("call_1", ...), so a later run in the same session would repeat them.
_code_ids: weakref.WeakKeyDictionary[Session, set[str]] = weakref.WeakKeyDictionary()


def child_session(parent: Session | None, agent: Any, task: Any) -> Session | None:
    """Where a managed agent's run records: ``None`` records nothing.

    Called when an agent starts a run inside another agent's step (smolagents'
    managed agents). *parent* is the session the outer run records into. A
    linked child session can be returned here; the child run then records into
    it exactly like a top-level run, and closing it stays the caller's job.
    """
    return None


def make_wrapper(path: str, patch: Any) -> Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]:
    """The wrapt wrapper for target *path* (see :data:`TARGETS`)."""
    if path.endswith("._run_stream"):
        return _run_stream_wrapper(patch)
    if path.endswith(".process_tool_calls"):
        return _observing_wrapper(patch, _ToolCallsObserver)
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
                session = child_session(parent.session, instance, task)
            run = _Run(instance, session, task)
        except Exception as exc:
            internal_error(exc, "smolagents run")
            return gen
        return _traced_run(gen, run)

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
        calls = _tool_calls(chat_message)
        run.assistant(chat_message, _text(getattr(chat_message, "content", None)), calls)
        state.recorded = True
        state.calls = [c["id"] for c in calls]

    def item(self, value: Any) -> None:
        if _kind(value) == "ToolOutput":
            self.run.answer(str(value.id), value.observation)

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
        elif kind == "ActionOutput" and self.state.calls:
            self.run.answer(self.state.calls[0], self.step.observations or "")

    def done(self) -> None:
        pass

    def failed(self, exc: BaseException) -> None:
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
            return stop.value
        except BaseException as exc:
            _safe(run.stopped, exc)
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
            raise
        except BaseException as exc:
            thrown = exc
