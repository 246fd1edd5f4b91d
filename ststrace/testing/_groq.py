"""GroqCloud's dialect of OpenAI Chat Completions, as the fake server speaks it.

Groq serves the OpenAI protocol under ``/openai/v1``; its SDK validates
``service_tier`` against Groq's own tiers (``on_demand``, ``flex``, ...), which
do not include OpenAI's ``default``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

PATH_PREFIX = "/openai/"
SERVICE_TIER = "on_demand"


def adapt_json(payload: Any) -> Any:
    if isinstance(payload, dict) and "service_tier" in payload:
        payload = {**payload, "service_tier": SERVICE_TIER}
    return payload


def adapt_sse(events: Iterator[bytes]) -> Iterator[bytes]:
    for event in events:
        head, sep, data = event.partition(b"data: ")
        text = data.strip()
        if not sep or not text.startswith(b"{"):
            yield event
            continue
        chunk = adapt_json(json.loads(text))
        yield head + sep + json.dumps(chunk, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"
