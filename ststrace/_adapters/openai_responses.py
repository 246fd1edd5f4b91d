"""OpenAI Responses API: ``Response`` objects and streamed ``response.*`` events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._common import Message, assistant_message, get, new_call_id, parts_text, reasoning_text, tool_call


def _reasoning_of_item(item: Any) -> str:
    # Full reasoning text (open-weight models behind compatible servers) is
    # more faithful than the summary, which is what OpenAI models return.
    full = [reasoning_text(get(p, "text")) for p in get(item, "content") or ()]
    text = "\n\n".join(t for t in full if t)
    if text:
        return text
    summary = [reasoning_text(get(p, "text")) for p in get(item, "summary") or ()]
    return "\n\n".join(t for t in summary if t)


def message_from_items(items: Any, model: Any) -> Message:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in items:
        kind = get(item, "type")
        if kind == "message":
            text = parts_text(get(item, "content"), "")
            if text:
                texts.append(text)
        elif kind == "function_call":
            call_id = get(item, "call_id") or get(item, "id")
            calls.append(tool_call(call_id, get(item, "name"), get(item, "arguments")))
        elif kind == "custom_tool_call":
            call_id = get(item, "call_id") or get(item, "id")
            calls.append(tool_call(call_id, get(item, "name"), get(item, "input")))
        elif kind == "reasoning":
            text = _reasoning_of_item(item)
            if text:
                thoughts.append(text)
        # Hosted tools (web_search_call, file_search_call, ...) run at the
        # provider and have no client tool result to pair with.
    return assistant_message("\n\n".join(texts), "\n\n".join(thoughts), calls, model)


def message_from_response(obj: Any) -> Message:
    return message_from_items(get(obj, "output") or (), get(obj, "model"))


@dataclass
class _Slot:
    """What is known about one output item while its events stream in."""

    kind: str = ""
    item: Any = None  # the finished item from response.output_item.done
    call_id: Any = None
    name: Any = None
    text: dict[int, list[str]] = field(default_factory=dict)
    summary: dict[int, list[str]] = field(default_factory=dict)
    reasoning: dict[int, list[str]] = field(default_factory=dict)
    arguments: list[str] = field(default_factory=list)

    def as_item(self) -> Any:
        if self.item is not None:
            return self.item
        if self.kind == "message":
            parts = [{"type": "output_text", "text": "".join(self.text[k])} for k in sorted(self.text)]
            return {"type": "message", "content": parts}
        if self.kind in ("function_call", "custom_tool_call"):
            if not (isinstance(self.call_id, str) and self.call_id):
                self.call_id = new_call_id()  # kept, so a second result() agrees
            key = "arguments" if self.kind == "function_call" else "input"
            return {"type": self.kind, "call_id": self.call_id, "name": self.name, key: "".join(self.arguments)}
        if self.kind == "reasoning":
            return {
                "type": "reasoning",
                "summary": [{"text": "".join(self.summary[k])} for k in sorted(self.summary)],
                "content": [{"text": "".join(self.reasoning[k])} for k in sorted(self.reasoning)],
            }
        return {"type": self.kind}


def _index(event: Any, key: str) -> int:
    value = get(event, key)
    return value if isinstance(value, int) else 0


class ResponsesAccumulator:
    def __init__(self) -> None:
        self.model = ""
        self.final: Any = None
        self._slots: dict[int, _Slot] = {}

    def _slot(self, event: Any) -> _Slot:
        index = _index(event, "output_index")
        slot = self._slots.get(index)
        if slot is None:
            slot = self._slots[index] = _Slot()
        return slot

    def add(self, event: Any) -> None:
        self.add_event(get(event, "type"), event)

    def add_event(self, kind: Any, event: Any) -> None:
        """:meth:`add` for a caller that has read ``event``'s ``type`` already."""
        response = get(event, "response")
        if response is not None:
            model = get(response, "model")
            if isinstance(model, str) and model:
                self.model = model
            if kind in ("response.completed", "response.incomplete", "response.failed") and get(response, "output"):
                self.final = response
            return
        if kind == "response.output_item.added":
            item = get(event, "item")
            slot = self._slot(event)
            slot.kind = get(item, "type") or ""
            slot.call_id = get(item, "call_id") or get(item, "id")
            slot.name = get(item, "name")
            initial = get(item, "arguments") or get(item, "input")
            if isinstance(initial, str) and initial:
                slot.arguments = [initial]
        elif kind == "response.output_item.done":
            slot = self._slot(event)
            slot.item = get(event, "item")
            slot.kind = get(slot.item, "type") or slot.kind
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            slot = self._slot(event)
            slot.kind = slot.kind or "message"
            slot.text.setdefault(_index(event, "content_index"), []).append(get(event, "delta") or "")
        elif kind == "response.reasoning_summary_text.delta":
            slot = self._slot(event)
            slot.kind = slot.kind or "reasoning"
            slot.summary.setdefault(_index(event, "summary_index"), []).append(get(event, "delta") or "")
        elif kind == "response.reasoning_text.delta":
            slot = self._slot(event)
            slot.kind = slot.kind or "reasoning"
            slot.reasoning.setdefault(_index(event, "content_index"), []).append(get(event, "delta") or "")
        elif kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            slot = self._slot(event)
            slot.kind = slot.kind or ("function_call" if "function" in kind else "custom_tool_call")
            slot.arguments.append(get(event, "delta") or "")
        elif kind == "response.function_call_arguments.done":
            whole = get(event, "arguments")
            if isinstance(whole, str):
                self._slot(event).arguments = [whole]

    @property
    def seen_anything(self) -> bool:
        return bool(self._slots) or self.final is not None

    def result(self) -> Message:
        if self.final is not None:
            message = message_from_response(self.final)
        else:
            items = [self._slots[k].as_item() for k in sorted(self._slots)]
            message = message_from_items(items, None)
        if self.model and "model" not in message:
            message["model"] = self.model
        return message
