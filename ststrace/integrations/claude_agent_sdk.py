"""Claude Agent SDK (``claude-agent-sdk``): record a run from the SDK's own message stream.

The model calls are made by the bundled ``claude`` CLI, a subprocess; no
Python client ever sees them. What the SDK hands the caller is a stream of
typed messages, and the trace is built from it:

* the prompt (``query(prompt=...)``, ``ClaudeSDKClient.connect(prompt)`` /
  ``.query(prompt)``, and each user message of a streamed prompt as the CLI is
  sent it) and a custom ``system_prompt`` (a string or ``{"type": "custom"}``;
  Claude Code's preset prompt lives inside the CLI and is not known here);
* each model reply once: the CLI streams one ``AssistantMessage`` per content
  block (``ThinkingBlock``, ``TextBlock``, ``ToolUseBlock``), all with the
  same ``message_id``; they are merged into one assistant message with its
  reasoning, text and tool calls under the provider's ``toolu_`` ids (the
  CLI runs a tool as soon as its block is complete, so a result that comes
  before the reply's next parallel call waits for the reply to be recorded);
* each ``ToolResultBlock`` of a ``UserMessage`` as a ``tool`` message
  answering its call; server tools (``ServerToolUseBlock`` and its result)
  as a call and its result;
* the usage of each turn from its ``ResultMessage``: the CLI streams a reply
  before its final token counts exist (``AssistantMessage.usage`` holds the
  opening estimate), so the turn's exact totals over every model the CLI
  called (``model_usage``), sub-agents included, and the CLI's cost
  (``total_cost_usd``) go on the turn's last assistant message;
* a turn that ends in error (``ResultMessage.is_error``: ``error_max_turns``,
  ``error_during_execution``, ...) or a stream that raises ends with a
  ``system`` note saying so.

Sub-agents (the ``Agent`` / ``Task`` tool): their messages carry
``parent_tool_use_id``, the id of the call that started them. Each sub-agent
records into a linked child session (:func:`ststrace._subagents.new_child`:
beside its parent's file, named after the ``subagent_type``, header
``parentSessionId`` / ``parentToolCallId``) holding the agent definition's
prompt, the task prompt, its replies and tool results, and its final report
(the CLI does not forward a sub-agent's last text unless
``forward_subagent_text=True``; ``TaskNotificationMessage.summary`` has it).
The child is closed when its task ends (``task_notification``), or when the
run does. A sub-agent's sub-agents link to the sub-agent.

Like the OpenAI Agents SDK runner, this records into the current session; a
run outside any session records nothing. Tools of an in-process SDK MCP
server are recorded from the stream; one that is also an ``@ststrace.tool``
records nothing of its own unless its call's reply was already recorded,
then it answers that call (the CLI names the call it runs), so each call
has one result either way.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from .. import _records
from .._adapters._common import get, parts_text
from .._adapters.messages import from_blocks
from .._context import current
from .._decorators import _error_text, tool_call_id
from .._text import content_text
from .._errors import internal_error
from .._session import Session
from .._subagents import links_for, new_child, tool_scope

LIBRARY = "claude_agent_sdk"
DISTRIBUTION = "claude-agent-sdk"
MIN_VERSION = (0, 2, 170)

TARGETS = [
    ("claude_agent_sdk._internal.client", "InternalClient.process_query"),
    ("claude_agent_sdk.client", "ClaudeSDKClient.connect"),
    ("claude_agent_sdk.client", "ClaudeSDKClient.query"),
    ("claude_agent_sdk.client", "ClaudeSDKClient.receive_messages"),
    ("claude_agent_sdk.client", "ClaudeSDKClient.disconnect"),
    ("claude_agent_sdk._internal.query", "Query._handle_sdk_mcp_request"),
]

_Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

#: The tools that start a sub-agent (``Task`` before Claude Code renamed it ``Agent``).
AGENT_TOOLS = frozenset({"Agent", "Task"})

_ATTR = "_ststrace_conversation"
_numbers = itertools.count(1)

#: The conversations being recorded (an SDK MCP tool call looks its call up in them).
_live: weakref.WeakSet[_Conversation] = weakref.WeakSet()


class _Agent:
    """One agent's part of the stream: the main agent (``key is None``) or a
    sub-agent, the reply it is in the middle of, and the session it records into."""

    __slots__ = ("session", "key", "owned", "message_id", "blocks", "model", "prompt", "last_text", "notes", "held")

    def __init__(self, session: Session, key: str | None, owned: bool) -> None:
        self.session = session
        self.key = key
        self.owned = owned  # a child session this integration opened and closes
        self.message_id: Any = None
        self.blocks: list[dict[str, Any]] = []
        self.model: str | None = None
        self.prompt: str | None = None  # the task prompt recorded when the child opened
        self.last_text: str | None = None  # the text of the last reply recorded
        self.notes: list[str] = []  # system notes due after the reply being merged
        #: Results of calls in the reply being merged: the CLI runs a tool as
        #: soon as its block is complete, so a result can come before the
        #: reply's next (parallel) call. Recorded right after the reply.
        self.held: list[tuple[Any, Any, Any]] = []


class _Conversation:
    """One ``query()`` run or one ``ClaudeSDKClient`` connection."""

    def __init__(self, session: Session, options: Any) -> None:
        self.session = session
        self.options = options
        self.number = next(_numbers)
        self.turn = 0
        self.agents: dict[str | None, _Agent] = {None: _Agent(session, None, False)}
        self.owner: dict[str, _Agent] = {}  # tool call id -> the agent that made it
        self.agent_calls: dict[str, Any] = {}  # Agent/Task call id -> its input
        self.tasks: dict[str, str] = {}  # task id -> the Agent/Task call id that started it
        self.background: set[str] = set()  # Agent calls answered "launched in the background"
        self.ended: list[_Agent] = []  # child sessions to close
        _live.add(self)
        self.system_done = False
        self.noted = False  # the last turn ended with an error note
        #: The CLI's running totals at the last turn's end (its counts add up
        #: over a connection): input, output, cache read, cache write, cost.
        self.totals: list[float] = [0, 0, 0, 0, 0.0]

    # -- inputs ---------------------------------------------------------------

    def _key(self) -> str:
        self.turn += 1
        return f"claude-agent-sdk-{self.number}-{self.turn}"

    def prompt(self, content: Any) -> None:
        """A user prompt sent to the CLI (a string, or a message's content)."""
        self.noted = False
        messages: list[dict[str, Any]] = []
        if not self.system_done:
            self.system_done = True
            system = _system_prompt(get(self.options, "system_prompt"))
            if system:
                messages.append({"role": "system", "content": system})
        text = _user_text(content)
        if text is not None:
            messages.append({"role": "user", "content": text})
        if messages:
            self.session._record_inputs(messages, self._key())

    def streamed_prompt(self, message: Any) -> None:
        """One message of an ``AsyncIterable`` prompt, as the SDK sends it."""
        if get(message, "type") not in (None, "user") or get(message, "parent_tool_use_id"):
            return
        inner = get(message, "message")
        if get(inner, "role") in (None, "user"):
            self.prompt(get(inner, "content"))

    # -- the stream -------------------------------------------------------------

    def children_for(self, message: Any) -> list[_Agent]:
        """The child sessions *message* needs that do not exist yet (not opened)."""
        key = _parent_key(message)
        if key is None or key in self.agents:
            return []
        if key not in self.owner:
            self.settle(key)
        parent = self.owner.get(key)
        if parent is None:
            return []  # a call this run never saw: recorded in the main session
        call = self.agent_calls.get(key)
        name = get(call, "subagent_type") or get(call, "description")
        child = new_child(parent.session, name if isinstance(name, str) else None)
        with tool_scope(parent.session, key):
            child._links = links_for(child, parent.session)
        agent = self.agents[key] = _Agent(child, key, True)
        return [agent]

    def begin_child(self, agent: _Agent) -> None:
        """The child is open: its instructions and task prompt come first."""
        call = self.agent_calls.get(agent.key or "")
        messages: list[dict[str, Any]] = []
        definition = _agent_definition(self.options, get(call, "subagent_type"))
        system = get(definition, "prompt")
        if isinstance(system, str) and system:
            messages.append({"role": "system", "content": system})
        prompt = get(call, "prompt")
        if isinstance(prompt, str) and prompt:
            agent.prompt = prompt
            messages.append({"role": "user", "content": prompt})
        if messages:
            agent.session._record_inputs(messages, self._key())

    def handle(self, message: Any) -> list[_Agent]:
        """Record one stream message; returns the child sessions it ended."""
        self._handle(message)
        ended, self.ended = self.ended, []
        return ended

    def _handle(self, message: Any) -> None:
        kind = _kind(message)
        if kind == "AssistantMessage":
            self.assistant(message)
        elif kind == "UserMessage":
            self.user(message)
        elif kind == "ResultMessage":
            self.result(message)
        elif kind == "TaskStartedMessage":
            task, call = get(message, "task_id"), get(message, "tool_use_id")
            if isinstance(task, str) and isinstance(call, str):
                self.tasks[task] = call
                self.settle(call)
        elif kind == "TaskNotificationMessage":
            self.task_ended(get(message, "tool_use_id") or self.tasks.get(get(message, "task_id")), message)
        # A terminal TaskUpdatedMessage may come before the notification that
        # carries the report: the child stays open until that, the Agent
        # call's result or the run's end.

    def settle(self, call_id: str) -> None:
        """Record the reply holding tool call *call_id* if it is still being
        merged: something about that call (its sub-agent) has started."""
        for agent in list(self.agents.values()):
            if any(b.get("id") == call_id for b in agent.blocks):
                self.flush(agent)

    def _agent(self, message: Any) -> _Agent:
        return self.agents.get(_parent_key(message)) or self.agents[None]

    def assistant(self, message: Any) -> None:
        agent = self._agent(message)
        message_id = get(message, "message_id")
        if agent.blocks and (message_id is None or message_id != agent.message_id):
            self.flush(agent)
        agent.message_id = message_id
        model = get(message, "model")
        if isinstance(model, str) and model:
            agent.model = model
        for block in get(message, "content") or ():
            as_dict = _block(block)
            if as_dict is not None:
                agent.blocks.append(as_dict)
        error = get(message, "error")
        if error and not agent.blocks:
            agent.blocks.append({"type": "text", "text": f"Error: {error}"})

    def flush(self, agent: _Agent, usage: Any = None) -> bool:
        """Record the reply *agent* is in the middle of; False if there was none."""
        blocks, agent.blocks, agent.message_id = agent.blocks, [], None
        if not blocks:
            return False
        calls_in = [b for b in blocks if b["type"] != "server_tool_result"]
        text, reasoning, calls = from_blocks(calls_in)
        for b in blocks:
            if b["type"] == "server_tool_use":
                calls.append(_records.tool_call(b["id"], b["name"], b["input"]))
        msg = _records.message(
            "assistant", text, reasoning=reasoning or None, tool_calls=calls or None, model=agent.model, usage=usage
        )
        agent.session._record_assistant(msg)
        agent.last_text = text
        notes, agent.notes = agent.notes, []
        for note in notes:
            agent.session._emit(_records.message("system", note))
        for call in calls:
            self.owner[call["id"]] = agent
        for b in blocks:
            if b["type"] == "tool_use" and b["name"] in AGENT_TOOLS:
                self.agent_calls[b["id"]] = b["input"]
            elif b["type"] == "server_tool_result":
                self.answer(agent, b["tool_use_id"], b["content"])
        held, agent.held = agent.held, []
        for call_id, content, result in held:
            self.tool_result(agent, call_id, content, result)
        return True

    def answer(self, agent: _Agent, call_id: Any, content: Any) -> None:
        owner = self.owner.get(call_id, agent) if isinstance(call_id, str) else agent
        if isinstance(call_id, str) and owner.session._answer(call_id):
            owner.session._emit(_records.tool_result(call_id, _result_text(content)))

    def user(self, message: Any) -> None:
        agent = self._agent(message)
        content = get(message, "content")
        if isinstance(content, str):
            self.flush(agent)
            self.sub_prompt(agent, content)
            return
        merging = {b["id"] for b in agent.blocks if b["type"] == "tool_use"}
        results = [b for b in content or () if type(b).__name__ == "ToolResultBlock"]
        if not results or any(get(b, "tool_use_id") not in merging for b in results):
            self.flush(agent)
        texts: list[str] = []
        result = get(message, "tool_use_result")
        for block in content or ():
            name = type(block).__name__
            if name == "ToolResultBlock":
                if agent.blocks:
                    agent.held.append((get(block, "tool_use_id"), get(block, "content"), result))
                else:
                    self.tool_result(agent, get(block, "tool_use_id"), get(block, "content"), result)
            elif name == "TextBlock":
                texts.append(get(block, "text") or "")
        if texts:
            self.flush(agent)
            self.sub_prompt(agent, "".join(texts))

    def tool_result(self, agent: _Agent, call_id: Any, content: Any, result: Any) -> None:
        self.answer(agent, call_id, content)
        if isinstance(call_id, str) and _launched_async(result):
            self.background.add(call_id)
        elif isinstance(call_id, str) and call_id in self.agents:
            self.task_ended(call_id, None)

    def sub_prompt(self, agent: _Agent, text: str) -> None:
        """A sub-agent's user turn (its task prompt, recorded once). The main
        agent's prompts are recorded as they are sent, not from the echo."""
        if agent.key is None:
            return
        if agent.prompt is not None and text == agent.prompt:
            agent.prompt = None  # the echo of the prompt recorded at the start
            return
        agent.session._record_inputs([{"role": "user", "content": text}], self._key())

    def task_ended(self, call_id: Any, notification: Any) -> None:
        if notification is not None and call_id in self.background:
            self.background.discard(call_id)
            self.notify(call_id, notification)
        agent = self.agents.get(call_id) if isinstance(call_id, str) else None
        if agent is None or not agent.owned:
            return
        self.flush(agent)
        summary = get(notification, "summary")
        if isinstance(summary, str) and summary and summary != agent.last_text:
            # The sub-agent's final report, which the CLI keeps to itself by default.
            agent.session._record_assistant(_records.message("assistant", summary, model=agent.model))
            agent.last_text = summary
        del self.agents[call_id]
        self.ended.append(agent)

    def notify(self, call_id: str, notification: Any) -> None:
        """A background sub-agent finished: the CLI tells the parent agent in a
        turn of its own, which the stream does not show; the parent's trace
        says where its next reply comes from."""
        owner = self.owner.get(call_id, self.agents[None])
        status = get(notification, "status") or "ended"
        text = f"The background agent of tool call {call_id} {status}"
        summary = get(notification, "summary")
        note = f"{text}: {summary}" if isinstance(summary, str) and summary else text
        if owner.blocks:
            owner.notes.append(note)  # after the reply still being merged (its usage comes with the result)
        else:
            owner.session._emit(_records.message("system", note))

    def result(self, message: Any) -> None:
        main = self.agents[None]
        usage = _turn_usage(message, self.totals)
        if not self.flush(main, usage):
            for agent in list(self.agents.values()):
                self.flush(agent)
        if get(message, "is_error"):
            main.session._emit(_records.message("system", _describe_result(message)))
            self.noted = True  # the SDK may raise ResultError next: said already

    def stopped(self, exc: BaseException | None) -> list[_Agent]:
        """The stream ended (normally, by *exc*, or the caller stopped reading):
        record what is in flight; returns every child session still open."""
        for agent in list(self.agents.values()):
            self.flush(agent)
        children = [a for a in self.agents.values() if a.owned]
        for agent in children:
            del self.agents[agent.key]
        children.extend(self.ended)
        self.ended = []
        if exc is not None and not isinstance(exc, GeneratorExit):
            text = _error_text(exc)
            for agent in (*children, self.agents[None]):
                with agent.session._state_lock:
                    mine = [cid for cid, owner in self.owner.items() if owner is agent and cid in agent.session._pending]
                for call_id in mine:
                    if agent.session._answer(call_id):
                        agent.session._emit(_records.tool_result(call_id, text))
            if not self.noted:
                self.session._emit(_records.message("system", f"The agent run failed: {text.removeprefix('Error: ')}"))
        return children


# ---------------------------------------------------------------------------
# Reading the SDK's objects (by class name: the SDK is not imported here)


def _kind(message: Any) -> str:
    return type(message).__name__


def _parent_key(message: Any) -> str | None:
    key = get(message, "parent_tool_use_id")
    return key if isinstance(key, str) and key else None


def _block(block: Any) -> dict[str, Any] | None:
    """An SDK content block -> the Anthropic block dict the adapters read."""
    name = type(block).__name__
    if name == "TextBlock":
        return {"type": "text", "text": get(block, "text") or ""}
    if name == "ThinkingBlock":
        return {"type": "thinking", "thinking": get(block, "thinking") or ""}
    if name in ("ToolUseBlock", "ServerToolUseBlock"):
        kind = "tool_use" if name == "ToolUseBlock" else "server_tool_use"
        return {"type": kind, "id": get(block, "id"), "name": str(get(block, "name")), "input": get(block, "input")}
    if name == "ServerToolResultBlock":
        return {"type": "server_tool_result", "tool_use_id": get(block, "tool_use_id"), "content": get(block, "content")}
    return None


def _result_text(content: Any) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, (list, tuple)) and all(isinstance(p, dict) and "text" in p for p in content):
        return parts_text(content, "\n")
    return content_text(content)


def _user_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return parts_text(content, "\n")
    return None


def _system_prompt(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if get(value, "type") == "custom":
        prompt = get(value, "prompt")
        return prompt if isinstance(prompt, str) and prompt else None
    return None


def _agent_definition(options: Any, name: Any) -> Any:
    agents = get(options, "agents")
    return agents.get(name) if isinstance(agents, dict) and isinstance(name, str) else None


def _launched_async(result: Any) -> bool:
    """Whether an Agent tool result only says the sub-agent went on in the background."""
    return get(result, "isAsync") is True or get(result, "status") == "async_launched"


def _turn_usage(message: Any, totals: list[float]) -> dict[str, Any] | None:
    """The usage of a turn from its ``ResultMessage``, in the STS shape: the
    CLI reports running totals, so the turn's share is what they grew by
    since *totals* (updated here)."""
    now: list[float] = [0, 0, 0, 0, 0.0]
    per_model = get(message, "model_usage")
    if isinstance(per_model, dict) and per_model:
        keys = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")
        for counts in per_model.values():
            for i, key in enumerate(keys):
                now[i] += _count(get(counts, key))
    else:
        raw = get(message, "usage")
        if raw is None:
            return None
        keys = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        for i, key in enumerate(keys):
            now[i] = _count(get(raw, key))
    cost = get(message, "total_cost_usd")
    has_cost = isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0
    now[4] = float(cost) if has_cost else totals[4]
    if any(n < t for n, t in zip(now, totals)):
        totals[:] = [0, 0, 0, 0, 0.0]  # a new count (the CLI restarted): all of it is this turn's
    delta = [n - t for n, t in zip(now, totals)]
    totals[:] = now
    usage: dict[str, Any] = {
        "input": int(delta[0]),
        "output": int(delta[1]),
        "cacheRead": int(delta[2]),
        "cacheWrite": int(delta[3]),
    }
    if has_cost:
        usage["cost"] = {"total": max(0.0, delta[4])}
    return usage


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _describe_result(message: Any) -> str:
    subtype = get(message, "subtype") or "error"
    detail = get(message, "errors") or get(message, "result")
    if isinstance(detail, (list, tuple)):
        detail = "; ".join(str(d) for d in detail)
    what = f"The agent run stopped: {subtype}"
    return f"{what}: {detail}" if isinstance(detail, str) and detail else what


# ---------------------------------------------------------------------------
# Opening and closing child sessions off the event loop


async def _in_thread(fn: Callable[[], Any]) -> None:
    import anyio.to_thread  # the SDK's own event-loop layer (asyncio or trio)

    await anyio.to_thread.run_sync(fn)


def _open(agent: _Agent) -> None:
    agent.session._open_file()


def _close(agent: _Agent) -> None:
    err = agent.session._close_file()
    if err is not None:
        internal_error(err, "claude-agent-sdk child session close")


async def _record(conv: _Conversation, message: Any) -> None:
    """Record one message of the stream (never raises)."""
    try:
        children = conv.children_for(message)
    except Exception as exc:
        internal_error(exc, "claude-agent-sdk sub-agent")
        children = []
    for agent in children:
        try:
            await _in_thread(functools.partial(_open, agent))
            conv.begin_child(agent)
        except Exception as exc:
            internal_error(exc, "claude-agent-sdk child session open")
    try:
        ended = conv.handle(message)
    except Exception as exc:
        internal_error(exc, "claude-agent-sdk message")
        return
    for agent in ended:
        try:
            await _in_thread(functools.partial(_close, agent))
        except Exception as exc:
            internal_error(exc, "claude-agent-sdk child session close")


def _finish(conv: _Conversation, exc: BaseException | None) -> None:
    try:
        children = conv.stopped(exc)
    except Exception as err:
        internal_error(err, "claude-agent-sdk run end")
        return
    for agent in children:
        # Synchronously: the stream may be ending by cancellation or at
        # interpreter shutdown, where awaiting a thread is not possible.
        try:
            _close(agent)
        except Exception as err:
            internal_error(err, "claude-agent-sdk child session close")


async def _traced(messages: Any, conv: _Conversation, finish: bool) -> AsyncIterator[Any]:
    """*messages* unchanged, each recorded after it arrives; *finish*: the
    stream is the whole run (``query()``), so its end ends the run."""
    try:
        async for message in messages:
            await _record(conv, message)
            yield message
    except BaseException as exc:
        if finish or not isinstance(exc, GeneratorExit):
            _finish(conv, exc)
        # A client's reader closed early (``receive_response()`` leaves it to be
        # finalized later, maybe while the next turn streams): the
        # conversation goes on in the next reader; disconnect() ends it.
        raise
    finally:
        aclose = getattr(messages, "aclose", None)
        if aclose is not None:
            await aclose()
    if finish:
        _finish(conv, None)
    else:
        _flush_all(conv)


def _flush_all(conv: _Conversation) -> None:
    try:
        for agent in list(conv.agents.values()):
            conv.flush(agent)
    except Exception as exc:
        internal_error(exc, "claude-agent-sdk stream end")


async def _recorded_prompt(prompt: AsyncIterable[Any], conv: _Conversation) -> AsyncIterator[Any]:
    """A streamed prompt, each user message recorded as the SDK takes it."""
    async for message in prompt:
        try:
            conv.streamed_prompt(message)
        except Exception as exc:
            internal_error(exc, "claude-agent-sdk prompt")
        yield message


def _prompt_arg(conv: _Conversation, prompt: Any) -> Any:
    """Record a string prompt now; wrap a streamed one. Returns what to pass on."""
    try:
        if isinstance(prompt, str):
            conv.prompt(prompt)
        elif isinstance(prompt, AsyncIterable):
            return _recorded_prompt(prompt, conv)
        else:
            conv.prompt(None)  # no prompt yet: the system prompt still comes first
    except Exception as exc:
        internal_error(exc, "claude-agent-sdk prompt")
    return prompt


# ---------------------------------------------------------------------------
# Wrappers


def _session(patch: Any) -> Session | None:
    session: Session | None = current.get()
    if session is None or not patch.active or session.disabled or session.closed:
        return None
    return session


def _conversation_of(client: Any, patch: Any, create: bool) -> _Conversation | None:
    conv = getattr(client, _ATTR, None)
    if isinstance(conv, _Conversation) and not conv.session.closed:
        return conv
    if not create:
        return None
    session = _session(patch)
    if session is None:
        return None
    conv = _Conversation(session, getattr(client, "options", None))
    try:
        object.__setattr__(client, _ATTR, conv)
    except Exception:
        return None
    return conv


def _mcp_wrapper(patch: Any) -> _Wrapper:
    """``Query._handle_sdk_mcp_request(server_name, message)``: the CLI runs a
    tool of an in-process SDK MCP server. A ``tools/call`` names the model's
    call (``_meta["claudecode/toolUseId"]``): when its reply is recorded
    already, an ``@ststrace.tool`` function in the handler answers that very
    call and sessions opened there link to it; otherwise (the usual case: the
    CLI runs a tool as soon as its block is complete, before the reply's
    other blocks) the handler runs with no session, and the call and its
    result come from the stream, so nothing is recorded twice."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not patch.active or current.get() is None:
            return wrapped(*args, **kwargs)
        message = kwargs.get("message", args[1] if len(args) > 1 else None)
        meta = get(get(message, "params"), "_meta") if get(message, "method") == "tools/call" else None
        call_id = get(meta, "claudecode/toolUseId")
        if not isinstance(call_id, str) or not call_id:
            return wrapped(*args, **kwargs)
        return _mcp_call(wrapped(*args, **kwargs), call_id)

    return wrapper


def _owner_session(call_id: str) -> Session | None:
    """The session waiting for the result of *call_id*, if its reply is
    recorded already (not while it is still being merged: more parallel
    calls may follow, and the reply is recorded once)."""
    for conv in list(_live):
        owner = conv.owner.get(call_id)
        if owner is not None:
            with owner.session._state_lock:
                return owner.session if call_id in owner.session._pending else None
    return None


async def _mcp_call(coro: Any, call_id: str) -> Any:
    try:
        session = _owner_session(call_id)
    except Exception as exc:
        internal_error(exc, "claude-agent-sdk tool call")
        session = None
    if session is not None:
        with tool_scope(session, call_id), tool_call_id(call_id):
            return await coro
    token = current.set(None)
    try:
        return await coro
    finally:
        current.reset(token)


def make_wrapper(path: str, patch: Any) -> _Wrapper:
    if path.endswith("._handle_sdk_mcp_request"):
        return _mcp_wrapper(patch)
    if path == "InternalClient.process_query":
        return _process_query_wrapper(patch)
    if path.endswith(".connect") or path.endswith(".query"):
        return _send_wrapper(patch)
    if path.endswith(".receive_messages"):
        return _receive_wrapper(patch)
    return _disconnect_wrapper(patch)


def _process_query_wrapper(patch: Any) -> _Wrapper:
    """``InternalClient.process_query(prompt, options, transport)``: the body of ``query()``."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        session = _session(patch)
        if session is None:
            return wrapped(*args, **kwargs)
        try:
            options = kwargs.get("options", args[1] if len(args) > 1 else None)
            conv = _Conversation(session, options)
            if "prompt" in kwargs:
                kwargs = {**kwargs, "prompt": _prompt_arg(conv, kwargs["prompt"])}
            elif args:
                args = (_prompt_arg(conv, args[0]), *args[1:])
        except Exception as exc:
            internal_error(exc, "claude-agent-sdk query")
            return wrapped(*args, **kwargs)
        return _traced(wrapped(*args, **kwargs), conv, True)

    return wrapper


def _send_wrapper(patch: Any) -> _Wrapper:
    """``ClaudeSDKClient.connect(prompt=None)`` and ``.query(prompt)``: the user's turns."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            conv = _conversation_of(instance, patch, True)
            if conv is not None:
                if "prompt" in kwargs:
                    kwargs = {**kwargs, "prompt": _prompt_arg(conv, kwargs["prompt"])}
                elif args:
                    args = (_prompt_arg(conv, args[0]), *args[1:])
                elif not conv.system_done:
                    _prompt_arg(conv, None)
        except Exception as exc:
            internal_error(exc, "claude-agent-sdk client prompt")
        return wrapped(*args, **kwargs)

    return wrapper


def _receive_wrapper(patch: Any) -> _Wrapper:
    """``ClaudeSDKClient.receive_messages()`` (``receive_response()`` reads through it)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        messages = wrapped(*args, **kwargs)
        if not patch.active:
            return messages
        try:
            conv = _conversation_of(instance, patch, True)
        except Exception as exc:
            internal_error(exc, "claude-agent-sdk receive")
            return messages
        return messages if conv is None else _traced(messages, conv, False)

    return wrapper


def _disconnect_wrapper(patch: Any) -> _Wrapper:
    """``ClaudeSDKClient.disconnect()``: the conversation ends."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        conv = getattr(instance, _ATTR, None)
        if isinstance(conv, _Conversation):
            try:
                object.__delattr__(instance, _ATTR)
            except Exception:
                pass
            _finish(conv, None)
        return wrapped(*args, **kwargs)

    return wrapper

