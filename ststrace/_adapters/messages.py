"""Assistant messages in their many shapes -> STS assistant message.

One reader covers Anthropic ``Message`` (content blocks), OpenAI
``ChatCompletionMessage`` and its dict form (``tool_calls``, ``refusal``, the
``reasoning_content`` / ``reasoning`` extras of OpenAI-compatible servers),
Hugging Face and LiteLLM messages, OpenAI Responses ``message`` output items and
STS-shaped dicts (``toolCalls``, ``reasoningContent``).
"""

from __future__ import annotations

from typing import Any

from ._common import (
    Message,
    assistant_message,
    first_str,
    get,
    part_text,
    reasoning_text,
    tool_call,
)

REDACTED_THINKING = "[redacted thinking]"


def openai_tool_call(call: Any) -> dict[str, Any]:
    """One OpenAI / HF / LiteLLM / STS tool call -> STS tool call."""
    function = get(call, "function")
    if function is None:
        custom = get(call, "custom")
        if custom is not None:
            return tool_call(get(call, "id"), get(custom, "name"), get(custom, "input"))
    return tool_call(get(call, "id"), get(function, "name"), get(function, "arguments"))


def anthropic_tool_call(block: Any) -> dict[str, Any]:
    return tool_call(get(block, "id"), get(block, "name"), get(block, "input"))


def from_blocks(blocks: Any) -> tuple[str, str, list[dict[str, Any]]]:
    """Content blocks -> (text, reasoning, tool calls).

    Text blocks are joined without a separator: Anthropic splits one answer into
    several text blocks around citations.
    """
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = get(block, "type")
        if kind == "thinking":
            # A string (Anthropic) or a list of text parts (Mistral).
            thinking = reasoning_text(get(block, "thinking"))
            if thinking:
                thoughts.append(thinking)
        elif kind == "redacted_thinking":
            thoughts.append(REDACTED_THINKING)
        elif kind == "tool_use":
            calls.append(anthropic_tool_call(block))
        elif kind in ("text", "output_text", "refusal") or isinstance(block, str):
            text = part_text(block)
            if text:
                texts.append(text)
        # Server-side tool blocks (server_tool_use, web_search_tool_result, ...)
        # are executed by the provider and have no client tool result to pair.
    return "".join(texts), "\n\n".join(thoughts), calls


def message_from_message_like(obj: Any, model: Any = None) -> Message:
    content = get(obj, "content")
    calls: list[dict[str, Any]] = []
    block_reasoning = ""
    if isinstance(content, str):
        text = content
    elif isinstance(content, (list, tuple)):
        text, block_reasoning, calls = from_blocks(content)
    else:
        text = ""
    if not text:
        text = first_str(obj, "refusal")

    for key in ("toolCalls", "tool_calls"):
        listed = get(obj, key)
        if isinstance(listed, (list, tuple)):
            calls.extend(openai_tool_call(call) for call in listed)
    legacy = get(obj, "function_call")
    if not calls and legacy is not None and get(legacy, "name"):
        calls.append(tool_call(None, get(legacy, "name"), get(legacy, "arguments")))

    reasoning = block_reasoning
    if not reasoning:
        # ``thinking``: Ollama's message field.
        for key in ("reasoningContent", "reasoning_content", "reasoning", "thinking_blocks", "thinking"):
            reasoning = reasoning_text(get(obj, key))
            if reasoning:
                break

    own_model = get(obj, "model")
    return assistant_message(text, reasoning, calls, own_model if isinstance(own_model, str) else model)
