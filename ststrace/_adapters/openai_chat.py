"""OpenAI Chat Completions (and the same shape from HF, LiteLLM, vLLM, ...)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ststrace._text import json_text

from ._common import Message, assistant_message, get, new_call_id, parts_text
from .messages import from_blocks, message_from_message_like
from .tokens import TokenAccumulator, add_tokens


def _first_choice(choices: Any) -> Any:
    for choice in choices:
        if get(choice, "index") in (0, None):
            return choice
    return choices[0] if choices else None


def message_from_completion(obj: Any) -> Message:
    """``ChatCompletion``-shaped object or dict -> STS assistant message."""
    model = get(obj, "model")
    choice = _first_choice(get(obj, "choices") or [])
    if choice is None:
        return assistant_message("", model=model)
    message = get(choice, "message")
    if message is not None:
        msg = message_from_message_like(message, model)
        add_tokens(msg, obj, choice)
        return msg
    if get(choice, "delta") is not None:
        # A lone streaming chunk handed over as if it were a response.
        acc = ChatAccumulator()
        acc.add(obj)
        return acc.result()
    text = get(choice, "text")  # legacy Completions
    return assistant_message(text if isinstance(text, str) else "", model=model)


@dataclass
class _ToolBuffer:
    index: int
    seq: int
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)
    whole: str | None = None  # arguments that arrived as an object, not text

    def arguments(self) -> str:
        if self.whole is not None:
            return self.whole
        joined = "".join(self.parts)
        return joined if joined.strip() else "{}"


class ChatAccumulator:
    """Merges ``ChatCompletionChunk``-shaped chunks (objects or dicts)."""

    def __init__(self) -> None:
        self.model = ""
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._by_index: dict[int, _ToolBuffer] = {}
        self._calls: list[_ToolBuffer] = []
        self._tokens: TokenAccumulator | None = None  # made by the first chunk that carries any

    @property
    def seen_anything(self) -> bool:
        return bool(self._content or self._reasoning or self._refusal or self._calls)

    def add(self, chunk: Any) -> None:
        self.add_choices(chunk, get(chunk, "choices"))

    def add_choices(self, chunk: Any, choices: Any) -> None:
        """:meth:`add` for a caller that has read ``chunk``'s ``choices`` already."""
        if not self.model:
            model = get(chunk, "model")
            if isinstance(model, str) and model:
                self.model = model
            # vLLM (return_token_ids) sends the prompt's token ids on the first chunk.
            if self._tokens is None and get(chunk, "prompt_token_ids") is not None:
                self._tokens = TokenAccumulator()
        for choice in choices or ():
            if get(choice, "index") not in (0, None):
                continue  # n > 1: the first choice is the conversation
            delta = get(choice, "delta")
            if delta is not None:
                self._add_delta(delta)
            # Token ids and logprobs: only when the caller asked the provider for them.
            if self._tokens is not None or get(choice, "logprobs") is not None or get(choice, "token_ids") is not None:
                if self._tokens is None:
                    self._tokens = TokenAccumulator()
                self._tokens.add(chunk, choice)

    def _add_delta(self, delta: Any) -> None:
        content = get(delta, "content")
        if isinstance(content, str):
            self._content.append(content)
        elif isinstance(content, (list, tuple)):
            # Content chunks (Mistral): text, and reasoning as ``thinking`` chunks.
            text, thought, _ = from_blocks(content)
            self._content.append(text)
            if thought:
                self._reasoning.append(thought)
        elif content is not None:
            self._content.append(parts_text(content, ""))
        # Some servers send the same text as both fields; take one per delta.
        for key in ("reasoning_content", "reasoning"):
            value = get(delta, key)
            if isinstance(value, str) and value:
                self._reasoning.append(value)
                break
        refusal = get(delta, "refusal")
        if isinstance(refusal, str):
            self._refusal.append(refusal)
        for position, call in enumerate(get(delta, "tool_calls") or ()):
            self._add_tool_delta(position, call)

    def _add_tool_delta(self, position: int, call: Any) -> None:
        index = get(call, "index")
        if not isinstance(index, int):
            index = position
        call_id = get(call, "id")
        function = get(call, "function")
        buf = self._by_index.get(index)
        if buf is None or (
            # A server that reuses one index for several calls announces each
            # new call with a new id.
            isinstance(call_id, str) and call_id and buf.id and call_id != buf.id
        ):
            buf = _ToolBuffer(index=index, seq=len(self._calls))
            self._by_index[index] = buf
            self._calls.append(buf)
        if isinstance(call_id, str) and call_id and not buf.id:
            buf.id = call_id
        name = get(function, "name")
        if isinstance(name, str) and name and not buf.name:
            buf.name = name
        arguments = get(function, "arguments")
        if isinstance(arguments, str):
            buf.parts.append(arguments)
        elif arguments is not None:
            buf.whole = json_text(arguments)

    def result(self) -> Message:
        calls = []
        for buf in sorted(self._calls, key=lambda b: (b.index, b.seq)):
            if not buf.id:
                buf.id = new_call_id()  # kept, so a second result() agrees
            calls.append({"id": buf.id, "function": {"name": buf.name, "arguments": buf.arguments()}})
        content = "".join(self._content) or "".join(self._refusal)
        msg = assistant_message(content, "".join(self._reasoning), calls, self.model)
        if self._tokens is not None:
            self._tokens.finish(msg)
        return msg
