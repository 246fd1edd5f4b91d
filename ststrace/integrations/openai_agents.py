"""OpenAI Agents SDK (``openai-agents``, imported as ``agents``).

The model calls themselves are recorded by the openai integration (the SDK
calls ``responses.create``, ``responses.with_streaming_response.create`` or
``chat.completions.create``). What only the runner knows is how a run *ends*:

* tool outputs the model never gets to see (the last turn before
  ``max_turns``, a ``tool_use_behavior`` that stops on a tool's output) are
  recorded from the run's items, paired with their call ids;
* a run that stops with an exception (``MaxTurnsExceeded``, a guardrail
  tripwire, a failing model call) answers each tool call it left open with an
  error result and ends the trace with a ``system`` note saying what happened.

``AgentRunner.run`` covers ``Runner.run`` and ``Runner.run_sync``;
``AgentRunner.run_streamed`` plus ``RunResultStreaming.stream_events`` cover
``Runner.run_streamed`` (its errors surface from ``stream_events()``).

Agents as tools (``agent.as_tool(...)``): the SDK runs the inner agent with
``Runner.run`` (``run_streamed`` with ``on_stream=``) and passes it a
``ToolContext`` holding the provider's id of the tool call. A run that starts
with such a context, inside the session where that call is still unanswered,
records into a child session of its own (:func:`ststrace._subagents.new_child`:
beside the parent's file, named after the inner agent, header
``parentSessionId`` / ``parentToolCallId``), open for exactly that run. The
parent keeps the call and, from its next model call, the result as the SDK
gave it. Handoffs stay in the run's one session (a handoff is no new run).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from ststrace import _records
from ststrace._adapters import input_messages
from ststrace._adapters._common import get, parts_text
from ststrace._context import current
from ststrace._text import content_text
from ststrace._errors import internal_error
from ststrace._session import Session
from ststrace._subagents import new_child, tool_scope

LIBRARY = "agents"
DISTRIBUTION = "openai-agents"
MIN_VERSION = (0, 2)

_Wrapper = Any
_ATTR = "_ststrace_run"

#: The runs going on in each session (to tell whether a run had the session to itself).
_active: weakref.WeakKeyDictionary[Session, set[_Run]] = weakref.WeakKeyDictionary()


class _Run:
    """One runner invocation inside a session: which tool calls were already
    open when it started, so only its own are closed at its end."""

    __slots__ = ("session", "before", "agent", "input", "alone", "child")

    def __init__(self, session: Session, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.session = session
        # (starting_agent, input) as the runner takes them; kept to record the
        # run's prompt if it fails before any model call (a guardrail that does
        # not run in parallel).
        self.agent = kwargs.get("starting_agent", args[0] if args else None)
        self.input = kwargs.get("input", args[1] if len(args) > 1 else None)
        self.alone = True  # no other run in this session overlapped this one
        self.child: _Child | None = None  # the child session this run opened (streamed runs)
        with session._state_lock:
            self.before = frozenset(session._pending)
            runs = _active.get(session)
            if runs is None:
                runs = _active[session] = set()
            for other in runs:
                other.alone = self.alone = False
            runs.add(self)

    def finish(self, items: Any, exc: BaseException | None, responses: Any = None) -> None:
        try:
            with self.session._state_lock:
                _active.get(self.session, set()).discard(self)
            self._finish(items, exc, responses)
        except Exception as err:
            internal_error(err, "openai-agents run end")

    def _finish(self, items: Any, exc: BaseException | None, responses: Any) -> None:
        session = self.session
        if session.closed:
            return
        for item in items or ():
            raw = get(item, "raw_item")
            if get(raw, "type") != "function_call_output":
                continue
            call_id = get(raw, "call_id")
            if isinstance(call_id, str) and session._answer(call_id):
                session._emit(_records.tool_result(call_id, _output_text(get(raw, "output"))))
        if exc is None:
            return
        self._record_prompt()
        what = _describe(exc)
        mine = _call_ids(responses) or set()
        with session._state_lock:
            if self.alone:
                # The calls that appeared since the run started (its model
                # responses miss the turn that failed).
                open_calls = [cid for cid in session._pending if cid not in self.before]
            else:
                # Other runs share the session: only calls this run's own
                # responses hold, so no other run's call is closed.
                open_calls = [cid for cid in session._pending if cid in mine]
        for call_id in open_calls:
            if session._answer(call_id):
                session._emit(_records.tool_result(call_id, f"Error: {what}"))
        session._emit(_records.message("system", what))


    def _record_prompt(self) -> None:
        """The run's instructions and input, unless a model call recorded them
        already (the session's conversation matching leaves them out then)."""
        instructions = getattr(self.agent, "instructions", None)
        kwargs: dict[str, Any] = {"input": self.input}
        if isinstance(instructions, str) and instructions:
            kwargs["instructions"] = instructions
        if not isinstance(self.input, (str, list)):
            return
        messages = input_messages((), kwargs)
        if messages:
            self.session._record_inputs(messages)


def _call_ids(responses: Any) -> set[str] | None:
    """Tool-call ids in a run's ``ModelResponse`` list, or ``None`` if unknown."""
    if not isinstance(responses, (list, tuple)):
        return None
    ids: set[str] = set()
    for response in responses:
        for item in get(response, "output") or ():
            call_id = get(item, "call_id")
            if isinstance(call_id, str):
                ids.add(call_id)
    return ids


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, (list, tuple)):
        return parts_text(output, "")
    return content_text(output)


def _guardrail_name(result: Any) -> str:
    guardrail = get(result, "guardrail")
    try:
        name = guardrail.get_name()
    except Exception:
        name = get(guardrail, "name")
    return name if isinstance(name, str) and name else "guardrail"


class _Cancelled(Exception):
    """Stands for ``RunResultStreaming.cancel()``: the run's events end
    normally, but the calls of the turn it cut short got no result."""


def _describe(exc: BaseException) -> str:
    """The note that ends a run stopped by *exc*."""
    if isinstance(exc, _Cancelled):
        return "The agent run stopped: cancelled by RunResultStreaming.cancel()"
    kind = type(exc).__name__
    if kind in ("InputGuardrailTripwireTriggered", "OutputGuardrailTripwireTriggered"):
        result = getattr(exc, "guardrail_result", None)
        side = "input" if kind.startswith("Input") else "output"
        text = f"The agent run stopped: {side} guardrail {_guardrail_name(result)!r} tripped"
        info = get(get(result, "output"), "output_info")
        if info is not None:
            text += f": {content_text(info)}"
        return text
    try:
        message = str(exc)
    except Exception:
        message = ""
    if kind == "MaxTurnsExceeded":
        return f"The agent run stopped: {message or kind}"
    return f"The agent run failed: {kind}: {message}" if message else f"The agent run failed: {kind}"


def _error_items(exc: BaseException) -> Any:
    return get(getattr(exc, "run_data", None), "new_items")


def _error_responses(exc: BaseException) -> Any:
    return get(getattr(exc, "run_data", None), "raw_responses")


class _Child:
    """The child session of an agent run as a tool: opened before the run,
    current while it runs, closed when it ends."""

    __slots__ = ("parent", "call_id", "session", "closed")

    def __init__(self, parent: Session, call_id: str, agent: Any) -> None:
        self.parent = parent
        self.call_id = call_id
        name = getattr(agent, "name", None)
        self.session = new_child(parent, name if isinstance(name, str) else None)
        self.closed = False

    def open(self) -> None:
        # In the scope of the parent's call: the header gets parentToolCallId.
        with tool_scope(self.parent, self.call_id):
            self.session._open_file()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        err = self.session._close_file()
        if err is not None:
            internal_error(err, "openai-agents child session close")


def _agent_tool_call(session: Session, kwargs: dict[str, Any]) -> str | None:
    """The parent's tool call a run is the body of, when it runs an agent as a tool.

    The SDK hands the nested run a ``ToolContext`` carrying the provider's id
    of the call; it counts only while that call is unanswered in *session*
    (so a run the user starts with some other context stays where it is)."""
    call_id = getattr(kwargs.get("context"), "tool_call_id", None)
    if not isinstance(call_id, str) or not call_id:
        return None
    with session._state_lock:
        return call_id if call_id in session._pending else None


def _child_for(patch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Child | None:
    session = current.get()
    if session is None or not patch.active or session.disabled:
        return None
    try:
        call_id = _agent_tool_call(session, kwargs)
        if call_id is None:
            return None
        return _Child(session, call_id, kwargs.get("starting_agent", args[0] if args else None))
    except Exception as exc:
        internal_error(exc, "openai-agents agent-as-tool run")
        return None


def _begin(patch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Run | None:
    session = current.get()
    if session is None or not patch.active:
        return None
    try:
        return _Run(session, args, kwargs)
    except Exception as exc:
        internal_error(exc, "openai-agents run start")
        return None


def run_wrapper(patch: Any) -> _Wrapper:
    """``AgentRunner.run`` (async)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        child = _child_for(patch, args, kwargs)
        if child is not None:
            return _run_child(wrapped(*args, **kwargs), child, patch, args, kwargs)
        run = _begin(patch, args, kwargs)
        coro = wrapped(*args, **kwargs)
        if run is None:
            return coro
        return _run(coro, run)

    return wrapper


async def _run_child(coro: Any, child: _Child, patch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """An agent run as a tool, recorded in its own child session."""
    try:
        await asyncio.to_thread(child.open)  # file creation off the event loop
    except Exception as exc:
        # Recorded in the parent session then, as without sub-agent sessions.
        internal_error(exc, "openai-agents child session open")
        run = _begin(patch, args, kwargs)
        return await (coro if run is None else _run(coro, run))
    token = current.set(child.session)
    try:
        run = _begin(patch, args, kwargs)
        return await (coro if run is None else _run(coro, run))
    finally:
        current.reset(token)
        await asyncio.to_thread(child.close)


async def _run(coro: Any, run: _Run) -> Any:
    try:
        result = await coro
    except BaseException as exc:
        run.finish(_error_items(exc), exc, _error_responses(exc))
        raise
    run.finish(getattr(result, "new_items", None), None)
    return result


def run_streamed_wrapper(patch: Any) -> _Wrapper:
    """``AgentRunner.run_streamed``: the run goes on in a task; its end is seen
    by ``stream_events()``."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        child = _child_for(patch, args, kwargs)
        token = None
        if child is not None:
            try:
                # Here, on the event loop thread: the run's task is created
                # inside run_streamed and must start with the child current.
                # One file creation per sub-agent run, never per model call.
                child.open()
                token = current.set(child.session)
            except Exception as exc:
                internal_error(exc, "openai-agents child session open")
                child = None
        try:
            run = _begin(patch, args, kwargs)
            result = wrapped(*args, **kwargs)
        except BaseException:
            if child is not None:
                child.close()
            raise
        finally:
            if token is not None:
                current.reset(token)
        if run is not None:
            run.child = child
            try:
                object.__setattr__(result, _ATTR, run)
            except Exception as exc:
                run.child = None
                if child is not None:
                    child.close()
                internal_error(exc, "openai-agents run_streamed")
        return result

    return wrapper


def stream_events_wrapper(patch: Any) -> _Wrapper:
    """``RunResultStreaming.stream_events`` (an async generator)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        events = wrapped(*args, **kwargs)
        run = getattr(instance, _ATTR, None) if patch.active else None
        if not isinstance(run, _Run):
            return events
        try:
            object.__delattr__(instance, _ATTR)  # one ending per run
        except Exception:
            return events
        return _events(events, instance, run)

    return wrapper


async def _events(events: Any, result: Any, run: _Run) -> Any:
    try:
        async for event in events:
            yield event
    except GeneratorExit:
        # The caller stopped listening: the run did not end here.
        await events.aclose()
        raise
    except BaseException as exc:
        items = _error_items(exc) or getattr(result, "new_items", None)
        responses = _error_responses(exc)
        run.finish(items, exc, responses if responses is not None else getattr(result, "raw_responses", None))
        await _close_child(run)
        raise
    if getattr(result, "_cancel_mode", None) == "immediate":
        # cancel() stops the run mid-turn: the calls of that turn are answered
        # with the cancellation (as a failed run's are), not left unanswered.
        run.finish(getattr(result, "new_items", None), _Cancelled(), getattr(result, "raw_responses", None))
    else:
        run.finish(getattr(result, "new_items", None), None)
    await _close_child(run)


async def _close_child(run: _Run) -> None:
    child, run.child = run.child, None
    if child is not None:
        await asyncio.to_thread(child.close)


TARGETS = [
    ("agents.run", "AgentRunner.run", run_wrapper),
    ("agents.run", "AgentRunner.run_streamed", run_streamed_wrapper),
    ("agents.result", "RunResultStreaming.stream_events", stream_events_wrapper),
]
