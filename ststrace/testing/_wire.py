"""Encoding helpers every wire protocol of :class:`~ststrace.testing.FakeAPI` shares."""

from __future__ import annotations

import json
from typing import Any


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def tokens(text: str) -> int:
    # A stable stand-in for a tokenizer: about four characters per token.
    return max(1, (len(text) + 3) // 4)


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else dumps(data)
    return f"{head}data: {payload}\n\n".encode()
