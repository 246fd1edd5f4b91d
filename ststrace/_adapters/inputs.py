"""The conversation a model call receives -> STS-like messages, in order.

Reads OpenAI Chat ``messages`` (also used by HF and LiteLLM), Anthropic
``messages`` plus ``system=``, and OpenAI Responses ``input`` plus
``instructions=``, and Gemini ``contents`` plus ``config.system_instruction``;
items may be dicts, TypedDicts or pydantic objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import gemini
from ._common import Message, get, internal_error, parts_text
from .messages import from_blocks, openai_tool_call
from .openai_responses import message_from_items

_ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant", "model": "assistant"}
_TOOL_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
_ASSISTANT_ITEMS = frozenset({"function_call", "custom_tool_call", "reasoning"})


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _looks_like_message(item: Any) -> bool:
    return get(item, "role") is not None or get(item, "type") in _TOOL_OUTPUTS | _ASSISTANT_ITEMS


def _tool_message(call_id: Any, content: Any, name: Any = None) -> Message:
    message: Message = {"role": "tool", "content": parts_text(content, "\n")}
    if isinstance(call_id, str) and call_id:
        message["toolCallId"] = call_id
    elif isinstance(name, str) and name:
        message["name"] = name  # to pair a result that lost its call's id (see Session._record_inputs)
    return message


def _tool_result_block(block: Any) -> Message:
    message = _tool_message(get(block, "tool_use_id"), get(block, "content"))
    if get(block, "is_error") is True and not message["content"].lstrip().startswith("Error:"):
        # Anthropic flags a failed tool with is_error; STS readers (the viewer,
        # `ststrace stats`) know a failed result by its "Error:" prefix, as
        # @tool writes it.
        message["content"] = "Error: " + message["content"]
    return message


def _assistant(item: Any) -> Message:
    content = get(item, "content")
    calls: list[dict[str, Any]] = []
    if isinstance(content, (list, tuple)):
        text, _, calls = from_blocks(content)
    else:
        text = parts_text(content, "")
    for key in ("toolCalls", "tool_calls"):
        listed = get(item, key)
        if _is_sequence(listed):
            calls.extend(openai_tool_call(call) for call in listed)
    message: Message = {"role": "assistant", "content": text}
    if calls:
        message["toolCalls"] = calls
    return message


def _user(item: Any) -> list[Message]:
    content = get(item, "content")
    if not _is_sequence(content):
        return [{"role": "user", "content": parts_text(content, "\n")}]
    # Anthropic sends tool results as tool_result blocks inside a user turn.
    results = [b for b in content if get(b, "type") == "tool_result"]
    if not results:
        return [{"role": "user", "content": parts_text(content, "\n")}]
    out = [_tool_result_block(b) for b in results]
    rest = [b for b in content if get(b, "type") != "tool_result"]
    text = parts_text(rest, "\n")
    if text:
        out.append({"role": "user", "content": text})
    return out


def _message(item: Any) -> list[Message]:
    role = get(item, "role")
    if role in ("tool", "function"):
        call_id = get(item, "tool_call_id") or get(item, "toolCallId")
        # Ollama's results carry no call id, only ``tool_name``.
        return [_tool_message(call_id, get(item, "content"), get(item, "name") or get(item, "tool_name"))]
    role = _ROLES.get(role) if isinstance(role, str) else None
    if role == "assistant":
        return [_assistant(item)]
    if role == "user":
        return _user(item)
    if role == "system":
        return [{"role": "system", "content": parts_text(get(item, "content"), "\n")}]
    return []


def _messages(items: Any) -> list[Message]:
    out: list[Message] = []
    for item in items:
        out.extend(_message(item))
    return out


def _responses_input(items: Any) -> list[Message]:
    """Responses ``input`` items; one assistant turn may span several items."""
    out: list[Message] = []
    turn: list[Any] = []  # consecutive assistant-side items

    def close_turn() -> None:
        if turn:
            merged = message_from_items(turn, None)
            message: Message = {"role": "assistant", "content": merged["content"]}
            if "toolCalls" in merged:
                message["toolCalls"] = merged["toolCalls"]
            out.append(message)
            turn.clear()

    for item in items:
        kind = get(item, "type")
        role = get(item, "role")
        if kind in _ASSISTANT_ITEMS or (role == "assistant" and kind in ("message", None)):
            if role == "assistant":
                item = {"type": "message", "content": get(item, "content")}
            turn.append(item)
            continue
        close_turn()
        if kind in _TOOL_OUTPUTS:
            out.append(_tool_message(get(item, "call_id"), get(item, "output")))
        elif role is not None:
            out.extend(_message(item))
        # item_reference and hosted-tool items carry no conversation text.
    close_turn()
    return out


def _system(value: Any) -> list[Message]:
    if isinstance(value, str):
        return [{"role": "system", "content": value}] if value else []
    if _is_sequence(value):
        text = parts_text(value, "\n")
        return [{"role": "system", "content": text}] if text else []
    return []


def _positional_messages(args: tuple[Any, ...]) -> Any:
    for arg in args:
        if _is_sequence(arg) and arg and all(_looks_like_message(item) for item in arg):
            return arg
    return None


def history(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[list[Message], Any] | None:
    """``(system messages given beside it, the message sequence)`` when the
    call's conversation is a list of messages that :func:`convert_items`
    converts item by item (OpenAI Chat, Anthropic, LiteLLM, HF: what
    :func:`collect` reads from ``messages``); ``None`` for other shapes
    (Responses ``input``, Gemini ``contents``), which are converted whole.

    A list passed positionally is taken when its first and last items look
    like messages (:func:`collect` checks every item: the items between were
    checked by an earlier call, when they were new)."""
    if kwargs.get("contents") is not None or kwargs.get("input") is not None:
        return None
    messages = kwargs.get("messages")
    if messages is None:
        for arg in args:
            if _is_sequence(arg) and arg and _looks_like_message(arg[0]) and _looks_like_message(arg[-1]):
                messages = arg
                break
    if not _is_sequence(messages) or not messages:
        return None
    lead: list[Message] = []
    for key in ("system", "instructions"):
        lead.extend(_system(kwargs.get(key)))
    return lead, messages


def convert_items(items: Any) -> list[Message]:
    """The messages of *items*, each item converted on its own (see :func:`history`)."""
    return _messages(items)


def convert_positional(items: Any) -> list[Message] | None:
    """:func:`convert_items` for a list passed positionally: ``None`` if an
    item does not look like a message (:func:`collect` would not take the list)."""
    if not all(_looks_like_message(item) for item in items):
        return None
    return _messages(items)


def collect_history(args: tuple[Any, ...], kwargs: Mapping[str, Any], raw: Any) -> tuple[list[Message] | None, bool]:
    """:func:`collect`, and whether its messages are those of *raw* (found by
    :func:`history`) after the system messages, converted item by item."""
    messages = collect(args, kwargs)
    return messages, kwargs.get("messages") is raw or _positional_messages(args) is raw


def collect(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[Message] | None:
    """Like :func:`input_messages`, but lets internal errors propagate."""
    contents = kwargs.get("contents")
    if contents is not None:
        # google-genai's generate_content(model=, contents=, config=).
        return gemini.input_messages(contents, kwargs.get("config"))
    out: list[Message] = []
    found = False
    for key in ("system", "instructions"):
        system = _system(kwargs.get(key))
        found = found or bool(system)
        out.extend(system)
    messages = kwargs.get("messages")
    if messages is None:
        messages = _positional_messages(args)
    if _is_sequence(messages):
        found = True
        out.extend(_messages(messages))
    given = kwargs.get("input")
    if isinstance(given, str):
        found = True
        out.append({"role": "user", "content": given})
    elif _is_sequence(given):
        found = True
        out.extend(_responses_input(given))
    return out if found else None


def input_messages(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[Message] | None:
    """The conversation a model call receives, normalised, in order.

    Each item is ``{"role": "user" | "system" | "assistant" | "tool", "content":
    str}`` plus ``toolCallId`` on tool results and ``toolCalls`` on assistant
    turns. ``None`` when the call carries no recognisable conversation. Never
    raises: an internal failure is logged and gives ``None``.
    """
    try:
        return collect(args, kwargs)
    except Exception:
        internal_error("input_messages")
        return None
