"""A Gemini agent on ``google-genai`` with automatic function calling, traced by ststrace.

The tools are plain Python functions handed to the SDK (``tools=[...]``), which
calls them itself between model requests; ``ststrace.instrument()`` alone
records every request, so the trace holds each function call and its result,
in order, although the program only sees the final answer.

Run it with::

    pip install 'ststrace[google-genai]'
    python examples/gemini_agent.py

With ``GOOGLE_API_KEY`` (or ``GEMINI_API_KEY``) set it talks to the Gemini API
(model from ``GEMINI_MODEL``, default ``gemini-2.5-flash``). Without one it
starts ststrace's local fake server on 127.0.0.1, which asks for ``get_weather``
and ``get_time`` and then answers with their results, so the example runs
offline. Either way it prints the answer and the path of the trace file (under
``./traces`` unless ``STSTRACE_DIR`` says otherwise).
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from google import genai
from google.genai import types

import ststrace

ststrace.instrument()

QUESTION = "What's the weather in Paris right now, and what time is it there?"


def get_weather(city: str) -> str:
    """Current weather for a city."""
    forecasts = {"paris": "Sunny, 21 C", "london": "Light rain, 14 C", "tokyo": "Clear, 18 C"}
    return forecasts.get(city.strip().lower(), "Cloudy, 16 C")


def get_time(tz: str) -> str:
    """Local time in an IANA time zone such as Europe/Paris."""
    try:
        return datetime.now(ZoneInfo(tz)).strftime("%H:%M")
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {tz!r}"


def main() -> None:
    with ExitStack() as stack:
        if os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY"):
            client = genai.Client()
            model = os.environ.get("GEMINI_MODEL", "gemini-2.5-flash")
        else:
            from ststrace.testing import FakeAPI

            api = stack.enter_context(FakeAPI())
            client = genai.Client(api_key="offline", http_options={"base_url": api.gemini_base_url})
            model = "gemini-2.5-flash"
        config = types.GenerateContentConfig(
            system_instruction="You are a concise assistant. Use the tools for facts.",
            tools=[get_weather, get_time],
        )
        with ststrace.Session(name="gemini weather agent") as session:
            chat = client.chats.create(model=model, config=config)
            reply = chat.send_message(QUESTION)
        print(reply.text)
        print(f"trace: {session.path}")


if __name__ == "__main__":
    main()
