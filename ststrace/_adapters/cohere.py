"""Cohere v2 chat replies (``V2ChatResponse``) and their stream events.

The reply's ``tool_plan`` (the model's stated plan before its tool calls) is
recorded as reasoning, after any ``thinking`` content.
"""

from __future__ import annotations

from typing import Any

from ._common import Message, assistant_message, get, tool_call
from .messages import message_from_message_like

EVENT_TYPES = frozenset(
    {
        "message-start",
        "content-start",
        "content-delta",
        "content-end",
        "tool-plan-delta",
        "tool-call-start",
        "tool-call-delta",
        "tool-call-end",
        "citation-start",
        "citation-end",
        "message-end",
        "debug",
    }
)


def is_chat_response(obj: Any) -> bool:
    message = get(obj, "message")
    return get(obj, "finish_reason") is not None and message is not None and get(message, "role") == "assistant"


def _with_plan(reasoning: str, plan: Any) -> str:
    if not isinstance(plan, str) or not plan:
        return reasoning
    return f"{reasoning}\n\n{plan}" if reasoning else plan


def message_from_chat_response(obj: Any) -> Message:
    message = get(obj, "message")
    out = message_from_message_like(message, get(obj, "model"))
    reasoning = _with_plan(out.pop("reasoningContent", ""), get(message, "tool_plan"))
    return assistant_message(out["content"], reasoning, out.get("toolCalls"), out.get("model"))


class CohereAccumulator:
    """Merges the typed events of a ``chat_stream``."""

    def __init__(self) -> None:
        self.model = ""
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._plan: list[str] = []
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, argument pieces]

    @property
    def seen_anything(self) -> bool:
        return bool(self._text or self._thinking or self._plan or self._calls)

    def add_event(self, kind: str, event: Any) -> None:
        message = get(get(event, "delta"), "message")
        if kind in ("content-start", "content-delta"):
            content = get(message, "content")
            text, thinking = get(content, "text"), get(content, "thinking")
            if isinstance(text, str) and text:
                self._text.append(text)
            if isinstance(thinking, str) and thinking:
                self._thinking.append(thinking)
        elif kind == "tool-plan-delta":
            plan = get(message, "tool_plan")
            if isinstance(plan, str):
                self._plan.append(plan)
        elif kind in ("tool-call-start", "tool-call-delta"):
            call = get(message, "tool_calls")
            index = get(event, "index")
            key = index if isinstance(index, int) else len(self._calls)
            entry = self._calls.setdefault(key, [None, None, []])
            if kind == "tool-call-start":
                entry[0], entry[1] = get(call, "id"), get(get(call, "function"), "name")
            arguments = get(get(call, "function"), "arguments")
            if isinstance(arguments, str):
                entry[2].append(arguments)

    def result(self) -> Message:
        calls = []
        for key in sorted(self._calls):
            entry = self._calls[key]
            made = tool_call(entry[0], entry[1], "".join(entry[2]))
            entry[0] = made["id"]  # a generated id is kept, so a second result() agrees
            calls.append(made)
        reasoning = _with_plan("".join(self._thinking), "".join(self._plan))
        return assistant_message("".join(self._text), reasoning, calls, self.model)


# -- the v1 API (``/v1/chat``): text at the top level, tool calls without ids --

V1_EVENT_TYPES = frozenset({"stream-start", "text-generation", "tool-calls-generation", "stream-end"})


def is_v1_response(obj: Any) -> bool:
    """A Cohere v1 chat reply: ``text``, a ``finish_reason`` and no ``message``."""
    return isinstance(get(obj, "text"), str) and get(obj, "finish_reason") is not None and get(obj, "message") is None


def _v1_calls(calls: Any) -> list[dict[str, Any]]:
    # v1 calls have no ids: each gets a generated one, and the results sent
    # back (by name) are paired in order.
    return [tool_call(None, get(c, "name"), get(c, "parameters")) for c in calls or ()]


def message_from_v1_response(obj: Any) -> Message:
    return assistant_message(get(obj, "text") or "", "", _v1_calls(get(obj, "tool_calls")), get(obj, "model"))


def is_v1_event(obj: Any) -> bool:
    return get(obj, "event_type") in V1_EVENT_TYPES


class CohereV1Accumulator:
    """Merges the NDJSON events of a v1 ``chat_stream``."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: list[dict[str, Any]] = []

    @property
    def seen_anything(self) -> bool:
        return bool(self._text or self._calls)

    def add_event(self, event: Any) -> None:
        kind = get(event, "event_type")
        if kind == "text-generation":
            text = get(event, "text")
            if isinstance(text, str):
                self._text.append(text)
        elif kind == "tool-calls-generation" and not self._calls:
            self._calls = _v1_calls(get(event, "tool_calls"))

    def result(self) -> Message:
        return assistant_message("".join(self._text), "", list(self._calls))
