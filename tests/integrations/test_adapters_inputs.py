"""Input conversations -> ordered STS-like messages (ststrace._adapters.input_messages)."""

from __future__ import annotations

from typing import Any

import huggingface_hub
import openai.types.chat
import openai.types.responses
import pytest

from ststrace._adapters import input_messages


OPENAI_MESSAGES: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be brief."},
    {"role": "system", "content": [{"type": "text", "text": "You are a weather bot."}]},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "15:00"}]},
    {"role": "user", "content": "ok"},
]
OPENAI_EXPECTED = [
    {"role": "system", "content": "Be brief."},
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "What is in this picture?\n[image]"},
    {
        "role": "assistant",
        "content": "",
        "toolCalls": [
            {"id": "call_1", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "function": {"name": "get_time", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "content": "18C", "toolCallId": "call_1"},
    {"role": "tool", "content": "15:00", "toolCallId": "call_2"},
    {"role": "user", "content": "ok"},
]


def test_openai_chat_messages_keyword() -> None:
    """OpenAI form: developer->system, parts joined, image placeholder, assistant tool_calls, tool ids."""
    assert input_messages((), {"model": "gpt-4o", "messages": OPENAI_MESSAGES}) == OPENAI_EXPECTED


def test_openai_messages_positional_and_response_message_objects() -> None:
    """A positional messages list; a ChatCompletionMessage object appended from a previous reply."""
    previous = openai.types.chat.ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {"id": "call_9", "type": "function", "function": {"name": "lookup", "arguments": '{"q":1}'}}
            ],
        }
    )
    conversation = [
        {"role": "user", "content": "hi"},
        previous,
        {"role": "tool", "tool_call_id": "call_9", "content": "x"},
    ]
    expected = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "toolCalls": [{"id": "call_9", "function": {"name": "lookup", "arguments": '{"q":1}'}}],
        },
        {"role": "tool", "content": "x", "toolCallId": "call_9"},
    ]
    assert input_messages(("gpt-4o", conversation), {}) == expected
    assert input_messages((), {"messages": conversation}) == expected


def test_huggingface_input_message_objects() -> None:
    """huggingface_hub ChatCompletionInputMessage objects use the OpenAI form."""
    messages = [
        huggingface_hub.ChatCompletionInputMessage.parse_obj_as_instance({"role": "system", "content": "sys"}),
        huggingface_hub.ChatCompletionInputMessage.parse_obj_as_instance(
            {"role": "user", "content": [{"type": "text", "text": "hello"}]}
        ),
    ]
    assert input_messages((), {"messages": messages}) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hello"},
    ]


ANTHROPIC_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris and Lima?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "two calls", "signature": "sig"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_B", "name": "get_weather", "input": {"city": "Lima"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_A", "content": "18C"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_B",
                "content": [{"type": "text", "text": "25C"}, {"type": "text", "text": "sunny"}],
                "is_error": False,
            },
            {"type": "text", "text": "Also, which is warmer?"},
        ],
    },
]


def test_anthropic_messages_with_system_and_tool_results() -> None:
    """Anthropic form: system= first, tool_result blocks -> one tool message each, then remaining text."""
    system = [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Use tools."}]
    got = input_messages((), {"model": "claude", "system": system, "messages": ANTHROPIC_MESSAGES, "max_tokens": 5})
    assert got == [
        {"role": "system", "content": "You are terse.\nUse tools."},
        {"role": "user", "content": "Weather in Paris and Lima?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "toolCalls": [
                {"id": "toolu_A", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
                {"id": "toolu_B", "function": {"name": "get_weather", "arguments": '{"city":"Lima"}'}},
            ],
        },
        {"role": "tool", "content": "18C", "toolCallId": "toolu_A"},
        {"role": "tool", "content": "25C\nsunny", "toolCallId": "toolu_B"},
        {"role": "user", "content": "Also, which is warmer?"},
    ]


def test_anthropic_user_turn_with_only_tool_results() -> None:
    """A user turn of only tool_result blocks adds no empty user message."""
    got = input_messages(
        (), {"system": "s", "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]}
    )
    assert got == [{"role": "system", "content": "s"}, {"role": "tool", "content": "", "toolCallId": "t"}]


def test_anthropic_tool_result_with_is_error_is_marked_as_an_error() -> None:
    """is_error: true becomes the "Error:" prefix STS readers count as a failed tool; an
    existing prefix is not doubled, and is_error: false changes nothing."""
    blocks = [
        {"type": "tool_result", "tool_use_id": "a", "content": "city not found", "is_error": True},
        {"type": "tool_result", "tool_use_id": "b", "content": "Error: timeout", "is_error": True},
        {"type": "tool_result", "tool_use_id": "c", "content": "18C", "is_error": False},
    ]
    got = input_messages((), {"messages": [{"role": "user", "content": blocks}]})
    assert [m["content"] for m in got] == ["Error: city not found", "Error: timeout", "18C"]


def test_responses_input_string_and_instructions() -> None:
    """Responses: instructions= is a leading system message, a string input is the user turn."""
    assert input_messages((), {"model": "gpt-5", "instructions": "Be nice.", "input": "hi"}) == [
        {"role": "system", "content": "Be nice."},
        {"role": "user", "content": "hi"},
    ]


def test_responses_input_items() -> None:
    """Responses items: messages with input_text parts, function_call items merged, outputs as tool messages."""
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "two"}]},
        {"type": "function_call", "call_id": "call_w1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
        {"type": "function_call", "call_id": "call_w2", "name": "get_weather", "arguments": '{"city":"Rome"}'},
        {"type": "function_call_output", "call_id": "call_w1", "output": "3C"},
        {"type": "function_call_output", "call_id": "call_w2", "output": [{"type": "input_text", "text": "21C"}]},
        {"type": "item_reference", "id": "msg_0"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "And this?"},
                {"type": "input_image", "image_url": "https://example.invalid/x.png"},
            ],
        },
    ]
    assert input_messages((), {"input": items}) == [
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [
                {"id": "call_w1", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
                {"id": "call_w2", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}},
            ],
        },
        {"role": "tool", "content": "3C", "toolCallId": "call_w1"},
        {"role": "tool", "content": "21C", "toolCallId": "call_w2"},
        {"role": "user", "content": "And this?\n[image]"},
    ]


def test_responses_input_with_previous_output_objects() -> None:
    """A previous Response's output objects (message + function_call) fed back as input form one assistant turn."""
    previous = openai.types.responses.Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-5",
            "status": "completed",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "On it.", "annotations": []}],
                },
                {
                    "id": "fc_1",
                    "type": "function_call",
                    "call_id": "call_x",
                    "name": "run",
                    "arguments": "{}",
                    "status": "completed",
                },
            ],
        }
    )
    output = {"type": "function_call_output", "call_id": "call_x", "output": "done"}
    items = [{"role": "user", "content": "go"}, *previous.output, output]
    assert input_messages((), {"input": items}) == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "On it.",
            "toolCalls": [{"id": "call_x", "function": {"name": "run", "arguments": "{}"}}],
        },
        {"role": "tool", "content": "done", "toolCallId": "call_x"},
    ]


def test_sts_shaped_messages() -> None:
    """STS-shaped dicts (toolCalls / toolCallId) are read as they are."""
    messages = [
        {"role": "assistant", "content": "", "toolCalls": [{"id": "t1", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "toolCallId": "t1", "content": "r"},
    ]
    assert input_messages((), {"messages": messages}) == messages


def test_no_conversation_gives_none() -> None:
    """Calls without a recognisable conversation give None; an empty list is an empty conversation."""
    assert input_messages((), {}) is None
    assert input_messages(("just a prompt", 3), {"temperature": 0}) is None
    assert input_messages(([1, 2, 3],), {}) is None
    assert input_messages((), {"messages": "not a list"}) is None
    assert input_messages((), {"messages": []}) == []


def test_unknown_items_are_skipped_in_order() -> None:
    """Unknown roles and item types are skipped; the rest keeps its order."""
    messages = [{"role": "user", "content": "a"}, {"role": "critic", "content": "?"}, {"role": "user", "content": "b"}]
    assert input_messages((), {"messages": messages}) == [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ]
