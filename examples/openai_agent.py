"""A tool-using agent on the official ``openai`` client, traced by ststrace.

The agent is ordinary Chat Completions code; tracing adds exactly two things:
``ststrace.instrument()`` (records every model call made inside a session) and
``@ststrace.tool`` (records every tool run and pairs it with the model's call).

Run it with::

    pip install 'ststrace[openai]'
    python examples/openai_agent.py

With ``OPENAI_API_KEY`` set it talks to the real API (model from ``OPENAI_MODEL``,
default ``gpt-4.1-mini``). Without one it starts ststrace's local fake server on
127.0.0.1, which asks for ``get_weather`` and ``get_time`` in parallel and then
answers with their results, so the example runs offline. Either way it prints
the answer and the path of the trace file (under ``./traces`` unless
``STSTRACE_DIR`` says otherwise).
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import openai
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

import ststrace

ststrace.instrument()

QUESTION = "What's the weather in Paris right now, and what time is it there?"


@ststrace.tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    forecasts = {"paris": "Sunny, 21 C", "london": "Light rain, 14 C", "tokyo": "Clear, 18 C"}
    return forecasts.get(city.strip().lower(), "Cloudy, 16 C")


@ststrace.tool
def get_time(tz: str) -> str:
    """Local time in an IANA time zone such as Europe/Paris."""
    try:
        return datetime.now(ZoneInfo(tz)).strftime("%H:%M")
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {tz!r}"


TOOL_FUNCTIONS: dict[str, Callable[..., str]] = {"get_weather": get_weather, "get_time": get_time}

TOOLS: list[ChatCompletionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time in an IANA time zone.",
            "parameters": {
                "type": "object",
                "properties": {"tz": {"type": "string", "description": "IANA zone, e.g. Europe/Paris"}},
                "required": ["tz"],
            },
        },
    },
]


def run_tool(name: str, arguments: str) -> str:
    """Run one requested tool; a bad request becomes a tool result the model can read."""
    function = TOOL_FUNCTIONS.get(name)
    if function is None:
        return f"error: no tool named {name!r}"
    try:
        kwargs = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"error: arguments are not valid JSON ({exc})"
    if not isinstance(kwargs, dict):
        return "error: arguments must be a JSON object"
    try:
        inspect.signature(function).bind(**kwargs)
    except TypeError as exc:
        return f"error: {exc}"
    return function(**kwargs)


def run_agent(client: openai.OpenAI, model: str, question: str, max_turns: int = 6) -> str:
    """Call the model, run the tools it asks for, repeat until it answers."""
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are a concise assistant. Use the tools for facts."},
        {"role": "user", "content": question},
    ]
    for _ in range(max_turns):
        completion = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        message = completion.choices[0].message
        calls = [call for call in message.tool_calls or [] if call.type == "function"]
        if not calls:
            return message.content or ""
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.function.name, "arguments": call.function.arguments},
                    }
                    for call in calls
                ],
            }
        )
        for call in calls:
            result = run_tool(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return "(no answer after the maximum number of turns)"


def main() -> None:
    with ExitStack() as stack:
        if os.environ.get("OPENAI_API_KEY"):
            client = stack.enter_context(openai.OpenAI())
            model = os.environ.get("OPENAI_MODEL", "gpt-4.1-mini")
        else:
            from ststrace.testing import FakeAPI

            api = stack.enter_context(FakeAPI())
            print(f"OPENAI_API_KEY is not set: using the local fake API at {api.openai_base_url}")
            client = stack.enter_context(openai.OpenAI(base_url=api.openai_base_url, api_key="fake-key"))
            model = "fake-model"

        with ststrace.Session(name="weather agent") as s:
            answer = run_agent(client, model, QUESTION)

    print(answer)
    print(f"trace: {s.path}")


if __name__ == "__main__":
    main()
