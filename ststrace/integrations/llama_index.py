"""LlamaIndex: record what a ``ReActAgent`` really did.

``FunctionAgent`` (LlamaIndex's default agent) uses the model's native tool
calls and sends results back as tool messages, so the client instrumentation
(litellm, openai) records it correctly and nothing here touches it.

``ReActAgent`` speaks a text protocol: the model writes ``Thought: / Action: /
Action Input:`` and gets the tool's output back as a *user* ``Observation:``
turn. Recorded at the client level that gives no tool call, no tool result and
observations as user turns. So inside ``ReActAgent.take_step`` the client-level
recording is switched off, as inside an ``@llm`` function, and the step is
recorded from LlamaIndex's own objects: the thought as ``reasoningContent``,
the action as a tool call with LlamaIndex's tool id, its output (from
``handle_tool_call_results``) as the ``tool`` message answering it, and the
``Answer:`` as the assistant's content. A reply LlamaIndex cannot parse is
recorded as it came, followed by the correction LlamaIndex sends as a user turn.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import _records, _tools
from .._context import current, in_llm_call
from .._text import content_text
from .._errors import internal_error
from .._session import Session

LIBRARY = "llama_index.core"
#: The version from the distribution: llama-index-core 0.14.0's own
#: ``__version__`` says 0.13.6.
DISTRIBUTION = "llama-index-core"
MIN_VERSION = (0, 14)

_MODULE = "llama_index.core.agent.workflow.react_agent"
TARGETS = [
    (_MODULE, "ReActAgent.take_step"),
    (_MODULE, "ReActAgent.handle_tool_call_results"),
]

_Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def make_wrapper(path: str, patch: Any) -> _Wrapper:
    """The wrapt wrapper for target *path* (see :data:`TARGETS`)."""
    if path.endswith(".take_step"):
        return _take_step_wrapper(patch)
    return _results_wrapper(patch)


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
    # Methods: wrapt passes the arguments after ``self``.
    if name in kwargs:
        return kwargs[name]
    return args[index] if len(args) > index else None


def _take_step_wrapper(patch: Any) -> _Wrapper:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        session = current.get()
        if session is None or not patch.active or in_llm_call.get():
            return wrapped(*args, **kwargs)
        coro = wrapped(*args, **kwargs)  # wrong arguments raise here, before anything is recorded
        return _take_step(coro, session, instance, args, kwargs)

    return wrapper


async def _take_step(coro: Any, session: Session, agent: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        _record_inputs(session, agent, _arg(args, kwargs, 1, "llm_input"), _arg(args, kwargs, 2, "tools"))
    except Exception as exc:
        internal_error(exc, "llama_index ReActAgent inputs")
    # The model call inside records nothing itself: the step is recorded below.
    token = in_llm_call.set(True)
    try:
        output = await coro
    finally:
        in_llm_call.reset(token)
    try:
        _record_output(session, agent, output)
    except Exception as exc:
        internal_error(exc, "llama_index ReActAgent step")
    return output


def _results_wrapper(patch: Any) -> _Wrapper:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        session = current.get()
        if session is not None and patch.active:
            try:
                for result in _arg(args, kwargs, 1, "results") or ():
                    call_id = str(result.tool_id)
                    # Unless a @tool function already answered it.
                    if session._answer(call_id):
                        session._emit(_records.tool_result(call_id, content_text(result.tool_output.content)))
            except Exception as exc:
                internal_error(exc, "llama_index ReActAgent tool results")
        return wrapped(*args, **kwargs)

    return wrapper


def _role(message: Any) -> str:
    role = getattr(message, "role", None)
    return str(getattr(role, "value", role))


def _record_inputs(session: Session, agent: Any, llm_input: Any, tools: Any) -> None:
    """The system prompt ReAct builds and the chat history, without the
    scratchpad of thoughts and observations (recorded as calls and results)."""
    history = list(llm_input or ())
    if history and _role(history[0]) == "system":
        history = history[1:]  # take_step folds it into the ReAct header
    formatted = agent.formatter.format(list(tools or ()), chat_history=history, current_reasoning=[])
    messages: list[dict[str, Any]] = []
    for m in formatted:
        role = _role(m)
        if role in ("system", "user", "assistant"):
            msg = {"role": role, "content": "" if m.content is None else content_text(m.content)}
            # A retry resends the user's message right after the same one
            # from memory: one turn, not two.
            if not (role == "user" and messages and messages[-1] == msg):
                messages.append(msg)
    if messages:
        session._record_inputs(messages)
    # The tools the ReAct prompt describes, as the schemas a function-calling model would get.
    offered = [t.metadata.to_openai_tool(skip_length_check=True) for t in tools or () if hasattr(t, "metadata")]
    session._offer_tools(_tools.definitions(offered))


def _model(agent: Any, output: Any) -> str | None:
    raw = getattr(output, "raw", None)
    model = raw.get("model") if isinstance(raw, dict) else getattr(raw, "model", None)
    if isinstance(model, str) and model:
        return model
    try:
        name = agent.llm.metadata.model_name
    except Exception:
        return None
    return name if isinstance(name, str) and name else None


def _record_output(session: Session, agent: Any, output: Any) -> None:
    text = content_text(output.response.content or "")
    model = _model(agent, output)
    calls = list(getattr(output, "tool_calls", None) or ())
    retry = list(getattr(output, "retry_messages", None) or ())
    step: Any = None
    if not retry:
        try:
            step = agent.output_parser.parse(text, is_streaming=False)
        except Exception:
            step = None  # take_step parsed it; a custom parser may not parse twice
    # Only a thought the model wrote: LlamaIndex makes one up for a reply
    # without "Thought:" (an implicit answer).
    thought = getattr(step, "thought", None) if "Thought:" in text else None
    if calls:
        tool_calls = [_records.tool_call(str(c.tool_id), str(c.tool_name), c.tool_kwargs) for c in calls]
        # Parsed: the thought is reasoning and the action is the call, so
        # the "Thought/Action" text itself is not repeated as content.
        content = "" if step is not None else text
        msg = _records.message("assistant", content, reasoning=thought, tool_calls=tool_calls, model=model)
    elif not retry and getattr(step, "is_done", False) and isinstance(getattr(step, "response", None), str):
        msg = _records.message("assistant", step.response, reasoning=thought, model=model)
    else:
        msg = _records.message("assistant", text, model=model)
    # A reply LlamaIndex could not use comes back to the model, with its
    # correction as a user turn, in the next step's chat history: recorded
    # from there.
    session._record_assistant(msg)
