"""Anthropic-style content blocks (``text``, ``thinking``, ``tool_use``,
``tool_result``, ``image``), shared by the Droid and Cursor converters."""

from __future__ import annotations

from typing import Any

from ._common import Builder, blocks_text, str_or_none


def user_text(b: Builder, content: Any, ts: int | None) -> str | None:
    """The text of a user turn, after adding its ``tool_result`` blocks as tool
    messages (in order); ``None`` when the turn held only tool results."""
    if not isinstance(content, list):
        return blocks_text(content, b.dropped)
    rest: list[Any] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            b.tool_result(
                str_or_none(block.get("tool_use_id")),
                blocks_text(block.get("content"), b.dropped),
                is_error=block.get("is_error") is True,
                timestamp=ts,
            )
        else:
            rest.append(block)
    return blocks_text(rest, b.dropped) if rest else None


def add_user(b: Builder, content: Any, ts: int | None, *, as_system: bool = False) -> None:
    """A user turn: its ``tool_result`` blocks become tool messages (first, in
    order), the rest one user (or system) message."""
    text = user_text(b, content, ts)
    if text is None:
        return
    if as_system:
        b.system(text, ts)
    else:
        b.user(text, ts)


def add_assistant(b: Builder, content: Any, ts: int | None, model: str | None) -> dict[str, Any]:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[tuple[str | None, str, Any]] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            text.append(block)
        elif not isinstance(block, dict):
            continue
        elif block.get("type") == "text":
            value = block.get("text")
            text.append(value if isinstance(value, str) else blocks_text([block], b.dropped))
        elif block.get("type") == "thinking":
            value = block.get("thinking", block.get("text"))
            if isinstance(value, str) and value.strip():
                reasoning.append(value)
        elif block.get("type") == "redacted_thinking":
            b.dropped["redacted_thinking"] += 1
        elif block.get("type") == "tool_use":
            name = block.get("name")
            calls.append((str_or_none(block.get("id")), name if isinstance(name, str) else "", block.get("input")))
        else:
            text.append(blocks_text([block], b.dropped))
    return b.assistant(
        "\n\n".join(t for t in text if t.strip()),
        reasoning="\n\n".join(reasoning) or None,
        tool_calls=calls,
        model=model,
        timestamp=ts,
    )
