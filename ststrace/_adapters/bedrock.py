"""Amazon Bedrock Runtime (botocore's plain dicts): Converse requests, replies and
``converse_stream`` events, and the ``chunk`` events of
``invoke_model_with_response_stream``, whose ``bytes`` hold the model's own
stream events (Anthropic Messages events for Claude).

Converse content blocks: ``text``, ``toolUse`` (``toolUseId``, ``name``,
``input``), ``toolResult`` (``toolUseId``, ``content``, ``status``),
``reasoningContent`` (``reasoningText``, or ``redactedContent``), and media.
"""

from __future__ import annotations

import json
from typing import Any

from ststrace._text import json_text

from ._common import Message, assistant_message, get, tool_call
from .messages import REDACTED_THINKING

#: The members of a ``converse_stream`` event (each event is a one-key dict).
EVENT_KEYS = frozenset(
    {"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"}
)
_MEDIA = {"image": "[image]", "document": "[document]", "video": "[video]", "audio": "[audio]"}


def _text(blocks: Any) -> str:
    pieces: list[str] = []
    for block in blocks or ():
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            pieces.append(block["text"])
        elif "json" in block:
            pieces.append(json_text(block["json"]))
        else:
            pieces.extend(label for key, label in _MEDIA.items() if key in block)
    return "".join(pieces)


def _tool_result(result: dict[str, Any]) -> dict[str, Any]:
    content = _text(result.get("content"))
    if result.get("status") == "error" and not content.lstrip().startswith("Error:"):
        content = "Error: " + content  # how STS readers know a failed tool (as for Anthropic's is_error)
    return {"role": "tool", "tool_call_id": result.get("toolUseId"), "content": content}


def converse_request(params: Any) -> dict[str, Any]:
    """A Converse request's ``modelId`` / ``system`` / ``messages`` as the Chat
    Completions-shaped arguments the shared input reader takes."""
    messages: list[dict[str, Any]] = []
    system = _text(params.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in params.get("messages") or ():
        blocks = [b for b in message.get("content") or () if isinstance(b, dict)]
        if message.get("role") == "assistant":
            calls = [
                {"id": b["toolUse"].get("toolUseId"), "function": {"name": b["toolUse"].get("name"),
                                                                    "arguments": json_text(b["toolUse"].get("input"))}}
                for b in blocks
                if isinstance(b.get("toolUse"), dict)
            ]
            messages.append({"role": "assistant", "content": _text(blocks), "tool_calls": calls})
            continue
        results = [b["toolResult"] for b in blocks if isinstance(b.get("toolResult"), dict)]
        messages.extend(_tool_result(r) for r in results)
        text = _text(blocks)
        if text or not results:
            messages.append({"role": "user", "content": text})
    return {"model": params.get("modelId"), "messages": messages}


def invoke_request(params: Any) -> dict[str, Any] | None:
    """An ``invoke_model`` request whose body is an Anthropic Messages request,
    as arguments for the shared input reader; ``None`` for other bodies."""
    body = params.get("body")
    if isinstance(body, (bytes, bytearray, str)):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return None
    named = {"model": params.get("modelId"), "messages": body["messages"]}
    if body.get("system") is not None:
        named["system"] = body["system"]
    return named


def is_converse_response(obj: Any) -> bool:
    output = get(obj, "output")
    return isinstance(output, dict) and isinstance(output.get("message"), dict)


def _reasoning(block: Any) -> str:
    text = get(get(block, "reasoningText"), "text")
    if isinstance(text, str):
        return text
    return REDACTED_THINKING if get(block, "redactedContent") is not None else ""


def message_from_converse(obj: Any) -> Message:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in get(get(obj, "output"), "message").get("content") or ():
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            calls.append(tool_call(use.get("toolUseId"), use.get("name"), use.get("input")))
        elif isinstance(block.get("reasoningContent"), dict):
            thought = _reasoning(block["reasoningContent"])
            if thought:
                thoughts.append(thought)
    return assistant_message("".join(texts), "\n\n".join(thoughts), calls)


def is_stream_event(chunk: Any) -> bool:
    return type(chunk) is dict and len(chunk) == 1 and next(iter(chunk)) in EVENT_KEYS


def invoke_stream_event(chunk: Any) -> Any:
    """The model's own event inside an ``invoke_model_with_response_stream`` event, or ``None``."""
    if type(chunk) is not dict:
        return None
    payload = chunk.get("chunk")
    data = payload.get("bytes") if isinstance(payload, dict) else None
    if not isinstance(data, (bytes, bytearray)):
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


class ConverseAccumulator:
    """Merges the events of a ``converse_stream``."""

    def __init__(self) -> None:
        self.model = ""
        self._blocks: dict[int, list[Any]] = {}  # index -> [kind, id, name, pieces]
        self.usage: Any = None

    @property
    def seen_anything(self) -> bool:
        return bool(self._blocks)

    def _block(self, index: Any, kind: str) -> list[Any]:
        key = index if isinstance(index, int) else len(self._blocks)
        return self._blocks.setdefault(key, [kind, None, None, []])

    def add_event(self, chunk: dict[str, Any]) -> None:
        [(key, event)] = chunk.items()
        if key == "contentBlockStart":
            use = get(get(event, "start"), "toolUse")
            if use is not None:
                block = self._block(get(event, "contentBlockIndex"), "toolUse")
                block[1], block[2] = get(use, "toolUseId"), get(use, "name")
        elif key == "contentBlockDelta":
            delta = get(event, "delta") or {}
            index = get(event, "contentBlockIndex")
            if isinstance(delta.get("text"), str):
                self._block(index, "text")[3].append(delta["text"])
            elif isinstance(delta.get("toolUse"), dict):
                piece = delta["toolUse"].get("input")
                if isinstance(piece, str):
                    self._block(index, "toolUse")[3].append(piece)
            elif isinstance(delta.get("reasoningContent"), dict):
                reasoning = delta["reasoningContent"]
                block = self._block(index, "reasoning")
                if isinstance(reasoning.get("text"), str):
                    block[3].append(reasoning["text"])
                elif reasoning.get("redactedContent") is not None and not block[3]:
                    block[3].append(REDACTED_THINKING)
        elif key == "metadata":
            self.usage = get(event, "usage")

    def result(self) -> Message:
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[dict[str, Any]] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            kind, joined = block[0], "".join(block[3])
            if kind == "toolUse":
                made = tool_call(block[1], block[2], joined)
                block[1] = made["id"]  # a generated id is kept, so a second result() agrees
                calls.append(made)
            elif kind == "reasoning":
                if joined:
                    thoughts.append(joined)
            else:
                texts.append(joined)
        return assistant_message("".join(texts), "\n\n".join(thoughts), calls, self.model)
