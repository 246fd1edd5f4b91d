"""Non-streamed model replies -> STS assistant messages (ststrace._adapters)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import anthropic.types
import huggingface_hub
import openai.types.chat
import openai.types.responses
import pytest

from ststrace._adapters import response_to_message


def _assert_no_none(value: Any) -> None:
    if isinstance(value, dict):
        for item in value.values():
            assert item is not None
            _assert_no_none(item)
    elif isinstance(value, list):
        for item in value:
            _assert_no_none(item)


CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "qwen3-32b",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Checking both.",
                "reasoning_content": "The user wants weather and time.",
                "tool_calls": [
                    {
                        "id": "call_Ab9",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {"id": "call_Zz1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
                ],
            },
        }
    ],
}
CHAT_MESSAGE = {
    "role": "assistant",
    "content": "Checking both.",
    "reasoningContent": "The user wants weather and time.",
    "toolCalls": [
        {"id": "call_Ab9", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_Zz1", "function": {"name": "get_time", "arguments": "{}"}},
    ],
    "model": "qwen3-32b",
}


def test_openai_chat_completion_object_with_reasoning_extra() -> None:
    """A real ChatCompletion keeps ids, arguments text, the reasoning_content extra and the model."""
    completion = openai.types.chat.ChatCompletion.model_validate(CHAT)
    message = response_to_message(completion)
    assert message == CHAT_MESSAGE
    _assert_no_none(message)


def test_openai_chat_completion_dict_form_matches_object() -> None:
    """The model_dump() form converts exactly like the object."""
    completion = openai.types.chat.ChatCompletion.model_validate(CHAT)
    assert response_to_message(completion.model_dump()) == CHAT_MESSAGE
    assert response_to_message(json.loads(completion.model_dump_json())) == CHAT_MESSAGE


def test_openai_chat_reasoning_extra_named_reasoning() -> None:
    """Servers that name the extra field `reasoning` (vLLM, OpenRouter) are read too."""
    data = json.loads(json.dumps(CHAT))
    message_data = data["choices"][0]["message"]
    message_data["reasoning"] = message_data.pop("reasoning_content")
    message = response_to_message(openai.types.chat.ChatCompletion.model_validate(data))
    assert message is not None
    assert message["reasoningContent"] == "The user wants weather and time."


def test_openai_chat_refusal_becomes_content_and_empty_fields_are_omitted() -> None:
    """A refusal with no content is the content; no reasoning/toolCalls keys appear."""
    completion = openai.types.chat.ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
                }
            ],
        }
    )
    assert response_to_message(completion) == {
        "role": "assistant",
        "content": "I can't help with that.",
        "model": "gpt-4o",
    }


def test_openai_chat_message_object_and_dicts() -> None:
    """ChatCompletionMessage objects and OpenAI-shaped message dicts are understood."""
    message_obj = openai.types.chat.ChatCompletion.model_validate(CHAT).choices[0].message
    assert isinstance(message_obj, openai.types.chat.ChatCompletionMessage)
    expected = {k: v for k, v in CHAT_MESSAGE.items() if k != "model"}
    assert response_to_message(message_obj) == expected
    assert response_to_message(CHAT["choices"][0]["message"]) == expected  # type: ignore[index]


def test_sts_message_dict_passes_through() -> None:
    """An STS-shaped dict comes back equal, including toolCalls and reasoningContent."""
    assert response_to_message(CHAT_MESSAGE) == CHAT_MESSAGE


def test_plain_string_and_unknown_objects() -> None:
    """A string is the content; unknown values give None without an error."""
    assert response_to_message("hello") == {"role": "assistant", "content": "hello"}
    assert response_to_message("") == {"role": "assistant", "content": ""}
    for unknown in (None, 42, 3.5, b"bytes", object(), {"foo": 1}, [1, 2], {"role": "user", "content": "hi"}):
        assert response_to_message(unknown) is None


def test_tool_call_arguments_edge_cases() -> None:
    """Invalid JSON is kept as-is, objects become JSON text, empty means '{}', a missing id is generated."""
    message = response_to_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "function": {"name": "a", "arguments": "{not json"}},
                {"id": "call_2", "function": {"name": "b", "arguments": {"x": [1, 2]}}},
                {"id": "call_3", "function": {"name": "c", "arguments": ""}},
                {"function": {"name": "d", "arguments": "{}"}},
            ],
        }
    )
    assert message is not None
    calls = message["toolCalls"]
    assert [c["function"]["arguments"] for c in calls] == ["{not json", '{"x":[1,2]}', "{}", "{}"]
    assert [c["id"] for c in calls[:3]] == ["call_1", "call_2", "call_3"]
    assert calls[3]["id"].startswith("call_") and len(calls[3]["id"]) == 29
    assert message["content"] == ""
    _assert_no_none(message)


def test_openai_custom_tool_call() -> None:
    """A custom (free-form) tool call keeps its raw input as the arguments text."""
    completion = openai.types.chat.ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-5",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "call_c", "type": "custom", "custom": {"name": "shell", "input": "ls -la"}}
                        ],
                    },
                }
            ],
        }
    )
    message = response_to_message(completion)
    assert message is not None
    assert message["toolCalls"] == [{"id": "call_c", "function": {"name": "shell", "arguments": "ls -la"}}]


RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1700000000,
    "model": "gpt-5-mini",
    "status": "completed",
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "output": [
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [
                {"type": "summary_text", "text": "Need the weather."},
                {"type": "summary_text", "text": "Then answer."},
            ],
        },
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
        },
        {
            "id": "fc_1",
            "type": "function_call",
            "call_id": "call_w1",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
            "status": "completed",
        },
        {
            "id": "fc_2",
            "type": "function_call",
            "call_id": "call_w2",
            "name": "get_weather",
            "arguments": '{"city":"Rome"}',
            "status": "completed",
        },
    ],
}
RESPONSE_MESSAGE = {
    "role": "assistant",
    "content": "Let me look.",
    "reasoningContent": "Need the weather.\n\nThen answer.",
    "toolCalls": [
        {"id": "call_w1", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
        {"id": "call_w2", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}},
    ],
    "model": "gpt-5-mini",
}


def test_openai_responses_object_and_dict() -> None:
    """Response output items: call_id (not the item id) is the tool-call id; summaries are the reasoning."""
    response = openai.types.responses.Response.model_validate(RESPONSE)
    assert response_to_message(response) == RESPONSE_MESSAGE
    assert response_to_message(response.model_dump()) == RESPONSE_MESSAGE


def test_openai_responses_reasoning_text_preferred_over_summary() -> None:
    """Full reasoning_text content (open-weight models) wins over the summary."""
    data = json.loads(json.dumps(RESPONSE))
    data["output"][0]["content"] = [{"type": "reasoning_text", "text": "Full chain of thought."}]
    message = response_to_message(openai.types.responses.Response.model_validate(data))
    assert message is not None
    assert message["reasoningContent"] == "Full chain of thought."


ANTHROPIC = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 20},
    "content": [
        {"type": "thinking", "thinking": "Two cities.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "I'll check "},
        {"type": "text", "text": "both."},
        {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris", "units": "c"}},
        {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {"city": "Lima"}},
    ],
}
ANTHROPIC_MESSAGE = {
    "role": "assistant",
    "content": "I'll check both.",
    "reasoningContent": "Two cities.\n\n[redacted thinking]",
    "toolCalls": [
        {"id": "toolu_01A", "function": {"name": "get_weather", "arguments": '{"city":"Paris","units":"c"}'}},
        {"id": "toolu_01B", "function": {"name": "get_weather", "arguments": '{"city":"Lima"}'}},
    ],
    "model": "claude-sonnet-4-5",
}


def test_anthropic_message_object_and_dict() -> None:
    """Anthropic blocks: text joined, thinking + redacted placeholder, tool_use ids kept, input as JSON text."""
    message_obj = anthropic.types.Message.model_validate(ANTHROPIC)
    assert response_to_message(message_obj) == ANTHROPIC_MESSAGE
    assert response_to_message(message_obj.model_dump()) == ANTHROPIC_MESSAGE
    assert json.loads(ANTHROPIC_MESSAGE["toolCalls"][0]["function"]["arguments"]) == {  # type: ignore[index]
        "city": "Paris",
        "units": "c",
    }


def test_huggingface_chat_completion_output() -> None:
    """huggingface_hub ChatCompletionOutput (a dataclass and a dict) with dict and str arguments."""
    output = huggingface_hub.ChatCompletionOutput.parse_obj_as_instance(
        {
            "id": "hf-1",
            "created": 1,
            "model": "meta-llama/Llama-3.3-70B-Instruct",
            "system_fingerprint": "tgi",
            "usage": {"completion_tokens": 1, "prompt_tokens": 1, "total_tokens": 2},
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "reasoning": "Think first.",
                        "tool_calls": [
                            {
                                "id": "0",
                                "type": "function",
                                "function": {"name": "search", "arguments": {"q": "ststrace"}},
                            },
                            {"id": "1", "type": "function", "function": {"name": "open", "arguments": '{"n": 1}'}},
                        ],
                    },
                }
            ],
        }
    )
    assert isinstance(output, huggingface_hub.ChatCompletionOutput)
    assert isinstance(output.choices[0].message, huggingface_hub.ChatCompletionOutputMessage)
    assert response_to_message(output) == {
        "role": "assistant",
        "content": "",
        "reasoningContent": "Think first.",
        "toolCalls": [
            {"id": "0", "function": {"name": "search", "arguments": '{"q":"ststrace"}'}},
            {"id": "1", "function": {"name": "open", "arguments": '{"n": 1}'}},
        ],
        "model": "meta-llama/Llama-3.3-70B-Instruct",
    }


def test_litellm_shaped_model_response_by_duck_typing() -> None:
    """An attribute-only object shaped like LiteLLM's ModelResponse (litellm is not imported)."""
    function = SimpleNamespace(name="lookup", arguments='{"id": 7}')
    message = SimpleNamespace(
        role="assistant",
        content="Looking it up.",
        reasoning_content="Need the record.",
        tool_calls=[SimpleNamespace(id="call_lite", type="function", function=function)],
    )
    response = SimpleNamespace(
        id="chatcmpl-lite", model="anthropic/claude-3-5", choices=[SimpleNamespace(index=0, message=message)]
    )
    assert response_to_message(response) == {
        "role": "assistant",
        "content": "Looking it up.",
        "reasoningContent": "Need the record.",
        "toolCalls": [{"id": "call_lite", "function": {"name": "lookup", "arguments": '{"id": 7}'}}],
        "model": "anthropic/claude-3-5",
    }


def test_chat_completion_without_choices() -> None:
    """A completion with no choices (content filtered) is an empty reply, not an error."""
    assert response_to_message({"object": "chat.completion", "model": "m", "choices": []}) == {
        "role": "assistant",
        "content": "",
        "model": "m",
    }


def test_raising_attribute_is_not_an_error() -> None:
    """Objects whose attributes raise are read as missing, never propagate."""

    class Weird:
        role = "assistant"

        @property
        def content(self) -> str:
            raise RuntimeError("boom")

    assert response_to_message(Weird()) == {"role": "assistant", "content": ""}


def test_content_parts_with_thinking_parts() -> None:
    """Assistant content given as parts, with Mistral-style thinking parts holding text parts."""
    message = response_to_message(
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": [{"type": "text", "text": "Let me think."}]},
                {"type": "text", "text": "Answer."},
            ],
        }
    )
    assert message == {"role": "assistant", "content": "Answer.", "reasoningContent": "Let me think."}


def test_importing_adapters_imports_no_client_library() -> None:
    """The adapters import no client library (or pydantic) at import time."""
    import subprocess
    import sys

    code = (
        "import sys, ststrace._adapters\n"
        "libs = ('openai', 'anthropic', 'huggingface_hub', 'litellm', 'pydantic')\n"
        "print(sorted(m for m in libs if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
