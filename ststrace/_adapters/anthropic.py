"""Anthropic Messages streaming events -> STS assistant message.

Non-streamed ``Message`` objects go through :mod:`.messages`. Streams come as raw
events (``messages.create(stream=True)``) or, from ``messages.stream()``, as the
same raw events interleaved with derived ones (``text``, ``thinking``,
``input_json``, ...) that repeat the raw deltas; only the raw ones are merged,
so nothing is counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from ._common import Message, get, new_call_id
from .messages import message_from_message_like

EVENT_TYPES = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    id: Any = None
    name: Any = None
    input: Any = None
    json_parts: list[str] = field(default_factory=list)
    final: Any = None  # the finished block, when the stream hands it over

    @classmethod
    def start(cls, block: Any) -> _Block:
        kind = get(block, "type") or ""
        new = cls(kind=kind, id=get(block, "id"), name=get(block, "name"), input=get(block, "input"))
        initial = get(block, "thinking" if kind == "thinking" else "text")
        if isinstance(initial, str) and initial:
            new.text.append(initial)
        return new

    def as_block(self) -> Any:
        if self.final is not None:
            return self.final
        if self.kind == "tool_use":
            if not (isinstance(self.id, str) and self.id):
                self.id = new_call_id()  # kept, so a second result() agrees
            return {"type": "tool_use", "id": self.id, "name": self.name, "input": self._input()}
        if self.kind == "thinking":
            return {"type": "thinking", "thinking": "".join(self.text)}
        if self.kind == "text":
            return {"type": "text", "text": "".join(self.text)}
        return {"type": self.kind}

    def _input(self) -> Any:
        joined = "".join(self.json_parts)
        if not joined.strip():
            return self.input if self.input is not None else {}
        try:
            # Parsed so a streamed call encodes exactly like a non-streamed one.
            return orjson.loads(joined)
        except orjson.JSONDecodeError:
            return joined  # cut off mid-way: kept as the text that arrived


class AnthropicAccumulator:
    def __init__(self) -> None:
        self.model = ""
        self.final: Any = None
        self._blocks: dict[int, _Block] = {}

    @property
    def seen_anything(self) -> bool:
        return bool(self._blocks) or self.final is not None

    def add(self, event: Any) -> None:
        self.add_event(get(event, "type"), event)

    def add_event(self, kind: Any, event: Any) -> None:
        """:meth:`add` for a caller that has read ``event``'s ``type`` already."""
        if kind == "message_start":
            message = get(event, "message")
            model = get(message, "model")
            if isinstance(model, str) and model:
                self.model = model
            for position, block in enumerate(get(message, "content") or ()):
                self._blocks[position] = _Block.start(block)
        elif kind == "content_block_start":
            index = get(event, "index")
            self._blocks[index if isinstance(index, int) else len(self._blocks)] = _Block.start(
                get(event, "content_block")
            )
        elif kind == "content_block_delta":
            self._add_delta(get(event, "index"), get(event, "delta"))
        elif kind == "content_block_stop":
            finished = get(event, "content_block")  # only MessageStream adds it
            block = self._blocks.get(get(event, "index"))
            if finished is not None and block is not None:
                block.final = finished
        elif kind == "message_stop":
            message = get(event, "message")  # only MessageStream adds it
            if message is not None:
                self.final = message

    def _add_delta(self, index: Any, delta: Any) -> None:
        block = self._blocks.get(index)
        if block is None:
            return
        kind = get(delta, "type")
        if kind == "text_delta":
            block.text.append(get(delta, "text") or "")
        elif kind == "thinking_delta":
            block.text.append(get(delta, "thinking") or "")
        elif kind == "input_json_delta":
            block.json_parts.append(get(delta, "partial_json") or "")

    def result(self) -> Message:
        if self.final is not None:
            message = message_from_message_like(self.final)
        else:
            blocks = [self._blocks[k].as_block() for k in sorted(self._blocks)]
            message = message_from_message_like({"content": blocks})
        if self.model and "model" not in message:
            message["model"] = self.model
        return message
