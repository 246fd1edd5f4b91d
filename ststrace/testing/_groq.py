"""GroqCloud's dialect of OpenAI Chat Completions, as the fake server speaks it.

Groq serves the OpenAI protocol under ``/openai/v1``; its SDK validates
``service_tier`` against Groq's own tiers (``on_demand``, ``flex``, ...), which
do not include OpenAI's ``default``.
"""

from __future__ import annotations

from typing import Any

from ._wire import each

PATH_PREFIX = "/openai/"
SERVICE_TIER = "on_demand"


def adapt(payload: Any) -> Any:
    """A Chat Completions reply or stream chunk, in Groq's words."""
    if isinstance(payload, dict) and "service_tier" in payload:
        payload = {**payload, "service_tier": SERVICE_TIER}
    return payload


adapt_stream = each(adapt)
