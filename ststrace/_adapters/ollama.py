"""Ollama ``/api/chat`` replies (``ChatResponse`` objects or their dicts) and streams,
and ``/api/generate`` replies (``response`` and ``thinking`` at the top level).

The protocol has no tool-call ids: each call gets a generated one when its
reply is recorded, and the results the next request sends back (``role:
"tool"`` with ``tool_name``) are paired with the calls still waiting, by name
and in order (see ``Session._record_inputs``).
"""

from __future__ import annotations

from typing import Any

from ._common import Message, assistant_message, get, tool_call
from .messages import message_from_message_like


def is_chat_response(obj: Any) -> bool:
    """An Ollama reply or stream chunk: a ``done`` flag and a ``message`` (chat)
    or ``response`` text (generate)."""
    return get(obj, "done") is not None and (get(obj, "message") is not None or isinstance(get(obj, "response"), str))


def message_from_chat_response(obj: Any) -> Message:
    model = get(obj, "model")
    message = get(obj, "message")
    if message is None:
        # /api/generate: the text is the reply's own ``response``.
        return assistant_message(get(obj, "response") or "", get(obj, "thinking") or "", None, model)
    return message_from_message_like(message, model)


class OllamaAccumulator:
    """Merges the chunks of a streamed ``/api/chat`` reply."""

    def __init__(self) -> None:
        self.model = ""
        self._content: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[dict[str, Any]] = []

    @property
    def seen_anything(self) -> bool:
        return bool(self._content or self._thinking or self._calls)

    def add(self, chunk: Any) -> None:
        if not self.model:
            model = get(chunk, "model")
            if isinstance(model, str):
                self.model = model
        # A /api/generate chunk carries its fragments at the top level.
        message = get(chunk, "message") or chunk
        content = get(message, "content")
        if content is None:
            content = get(message, "response")
        if isinstance(content, str) and content:
            self._content.append(content)
        thinking = get(message, "thinking")
        if isinstance(thinking, str) and thinking:
            self._thinking.append(thinking)
        for call in get(message, "tool_calls") or ():
            # Whole calls, never split over chunks; the id is made once here.
            function = get(call, "function")
            self._calls.append(tool_call(get(call, "id"), get(function, "name"), get(function, "arguments")))

    def result(self) -> Message:
        return assistant_message("".join(self._content), "".join(self._thinking), list(self._calls), self.model)
