"""Agent loops over the real SDKs for the replay tests: one per API and mode.

Each loop asks for tools, runs the ``@tool`` functions, sends their results
back and returns the final text, as users write such loops."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ststrace import tool
from test_instrument_helpers import ANTHROPIC_TOOLS, CHAT_TOOLS, MODEL, RESPONSES_TOOLS, SYSTEM, USER

#: What the tools return; tests change it to make a tool result differ.
WEATHER = {"Paris": "Sunny, 21 C"}
CALLS: list[str] = []


@tool
def get_weather(city: str) -> str:
    CALLS.append(f"get_weather({city})")
    return WEATHER.get(city, f"Clear in {city}")


@tool
def get_time(tz: str) -> str:
    CALLS.append(f"get_time({tz})")
    return "15:00"


TOOLS: dict[str, Callable[..., str]] = {"get_weather": get_weather, "get_time": get_time}
TURNS = 4


def run_tool(name: str, arguments: str) -> str:
    return TOOLS[name](**json.loads(arguments))


def chat(client: Any, stream: bool, prompt: str = USER) -> str:
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    for _ in range(TURNS):
        if stream:
            with client.chat.completions.stream(
                model=MODEL, messages=messages, tools=CHAT_TOOLS, stream_options={"include_usage": True}
            ) as s:
                message = s.get_final_completion().choices[0].message
        else:
            message = client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS).choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": run_tool(call.function.name, call.function.arguments)})
    raise AssertionError("the agent did not finish")


async def achat(client: Any, stream: bool, prompt: str = USER) -> str:
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    for _ in range(TURNS):
        if stream:
            async with client.chat.completions.stream(
                model=MODEL, messages=messages, tools=CHAT_TOOLS, stream_options={"include_usage": True}
            ) as s:
                message = (await s.get_final_completion()).choices[0].message
        else:
            message = (await client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)).choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": run_tool(call.function.name, call.function.arguments)})
    raise AssertionError("the agent did not finish")


def _responses_next(items: list[Any], response: Any) -> bool:
    calls = [item for item in response.output if item.type == "function_call"]
    if not calls:
        return False
    items += [item.model_dump(exclude_none=True) for item in response.output]
    for call in calls:
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": run_tool(call.name, call.arguments)})
    return True


def responses(client: Any, stream: bool, prompt: str = USER) -> str:
    items: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(TURNS):
        kwargs = dict(model=MODEL, instructions=SYSTEM, input=items, tools=RESPONSES_TOOLS)
        if stream:
            with client.responses.stream(**kwargs) as s:
                response = s.get_final_response()
        else:
            response = client.responses.create(**kwargs)
        if not _responses_next(items, response):
            return str(response.output_text)
    raise AssertionError("the agent did not finish")


async def aresponses(client: Any, stream: bool, prompt: str = USER) -> str:
    items: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(TURNS):
        kwargs = dict(model=MODEL, instructions=SYSTEM, input=items, tools=RESPONSES_TOOLS)
        if stream:
            async with client.responses.stream(**kwargs) as s:
                response = await s.get_final_response()
        else:
            response = await client.responses.create(**kwargs)
        if not _responses_next(items, response):
            return str(response.output_text)
    raise AssertionError("the agent did not finish")


def _anthropic_next(messages: list[Any], reply: Any) -> bool:
    uses = [b for b in reply.content if b.type == "tool_use"]
    if not uses:
        return False
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
    results = [
        {"type": "tool_result", "tool_use_id": b.id, "content": run_tool(b.name, json.dumps(b.input))} for b in uses
    ]
    messages.append({"role": "user", "content": results})
    return True


def _anthropic_text(reply: Any) -> str:
    return "".join(b.text for b in reply.content if b.type == "text")


def messages(client: Any, stream: bool, prompt: str = USER) -> str:
    history: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(TURNS):
        kwargs = dict(model=MODEL, max_tokens=512, system=SYSTEM, messages=history, tools=ANTHROPIC_TOOLS)
        if stream:
            with client.messages.stream(**kwargs) as s:
                reply = s.get_final_message()
        else:
            reply = client.messages.create(**kwargs)
        if not _anthropic_next(history, reply):
            return _anthropic_text(reply)
    raise AssertionError("the agent did not finish")


async def amessages(client: Any, stream: bool, prompt: str = USER) -> str:
    history: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(TURNS):
        kwargs = dict(model=MODEL, max_tokens=512, system=SYSTEM, messages=history, tools=ANTHROPIC_TOOLS)
        if stream:
            async with client.messages.stream(**kwargs) as s:
                reply = await s.get_final_message()
        else:
            reply = await client.messages.create(**kwargs)
        if not _anthropic_next(history, reply):
            return _anthropic_text(reply)
    raise AssertionError("the agent did not finish")


def hf_chat(client: Any, stream: bool, prompt: str = USER) -> str:
    """``huggingface_hub.InferenceClient.chat_completion``: its tool calls come
    back as dataclass-like outputs, sent back as plain dicts."""
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    for _ in range(TURNS):
        out = client.chat_completion(messages=messages, model=MODEL, tools=CHAT_TOOLS, stream=False)
        message = out.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in message.tool_calls
        ]
        messages.append({"role": "assistant", "content": message.content or "", "tool_calls": calls})
        for c in calls:
            args = c["function"]["arguments"]
            text = args if isinstance(args, str) else json.dumps(args)
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": run_tool(c["function"]["name"], text)})
    raise AssertionError("the agent did not finish")


def responses_stateful(client: Any, stream: bool, prompt: str = USER) -> str:
    """Responses with ``previous_response_id``: each request sends the new items only."""
    items: list[Any] = [{"role": "user", "content": prompt}]
    previous = None
    for _ in range(TURNS):
        response = client.responses.create(
            model=MODEL, instructions=SYSTEM, input=items, tools=RESPONSES_TOOLS, previous_response_id=previous
        )
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return str(response.output_text)
        previous = response.id
        items = [{"type": "function_call_output", "call_id": c.call_id, "output": run_tool(c.name, c.arguments)} for c in calls]
    raise AssertionError("the agent did not finish")
