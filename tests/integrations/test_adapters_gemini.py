"""The Gemini adapter on the shapes google-genai is given and hands back, as
plain dicts (the wire's camelCase and the SDK's snake_case): requests, replies,
stream chunks and usage. The real SDK runs in test_integration_google_genai.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ststrace._adapters import accumulate, input_messages, response_to_message
from ststrace._adapters.usage import usage_of

WIRE_REPLY: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "I should look it up.", "thought": True, "thoughtSignature": "c2ln"},
                    {"text": "Let me "},
                    {"text": "check."},
                    {"functionCall": {"id": "fc1", "name": "get_weather", "args": {"city": "Paris"}}},
                ],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 40,
        "cachedContentTokenCount": 30,
        "candidatesTokenCount": 7,
        "thoughtsTokenCount": 5,
        "totalTokenCount": 52,
    },
    "modelVersion": "gemini-2.5-flash",
}
CALL = {"id": "fc1", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
USAGE = {"input": 10, "output": 12, "cacheRead": 30, "cacheWrite": 0, "totalTokens": 52, "reasoning": 5}


def test_a_wire_reply_becomes_one_assistant_message_with_usage() -> None:
    assert response_to_message(WIRE_REPLY, usage=True) == {
        "role": "assistant",
        "content": "Let me check.",
        "reasoningContent": "I should look it up.",
        "toolCalls": [CALL],
        "model": "gemini-2.5-flash",
        "usage": USAGE,
    }


def test_stream_chunks_merge_like_the_whole_reply() -> None:
    """Text and thought deltas are joined per run; usage is the last chunk's."""
    parts = WIRE_REPLY["candidates"][0]["content"]["parts"]
    deltas = [{"text": "I should ", "thought": True}, {"text": "look it up.", "thought": True}, *parts[1:]]
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [d]}}], "modelVersion": "gemini-2.5-flash"} for d in deltas
    ]
    chunks[-1]["usageMetadata"] = WIRE_REPLY["usageMetadata"]
    assert accumulate(chunks, usage=True) == response_to_message(WIRE_REPLY, usage=True)


def test_usage_in_the_sdks_spelling() -> None:
    assert usage_of({"prompt_token_count": 40, "cached_content_token_count": 30, "candidates_token_count": 7, "thoughts_token_count": 5}) == USAGE
    assert usage_of({"promptTokenCount": 3, "candidatesTokenCount": 2}) == {
        "input": 3,
        "output": 2,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 5,
    }


def test_contents_in_every_shape_the_sdk_accepts() -> None:
    """A string; loose parts grouped into one turn; contents as dicts in both
    spellings; function responses as tool results (an error with the
    ``Error:`` prefix, an id-less one by name); media as placeholders."""
    contents = [
        "What is in",
        {"inline_data": {"mime_type": "image/png", "data": "iVBO"}},
        {"role": "model", "parts": [{"functionCall": {"name": "look", "args": {}}}, {"text": "Looking."}]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "look", "response": {"error": "no camera"}}},
                {"function_response": {"id": "c2", "name": "look", "response": {"result": {"seen": "a cat"}}}},
                {"text": "And now?"},
            ],
        },
    ]
    config = {"system_instruction": ["Be brief.", {"text": "Be kind."}]}
    assert input_messages((), {"model": "m", "contents": contents, "config": config}) == [
        {"role": "system", "content": "Be brief.\nBe kind."},
        {"role": "user", "content": "What is in\n[image]"},
        {"role": "assistant", "content": "Looking.", "toolCalls": [{"id": "", "function": {"name": "look", "arguments": "{}"}}]},
        {"role": "tool", "content": "Error: no camera", "name": "look"},
        {"role": "tool", "content": '{"seen":"a cat"}', "toolCallId": "c2"},
        {"role": "user", "content": "And now?"},
    ]
    assert input_messages((), {"contents": "hi", "config": {"systemInstruction": {"parts": [{"text": "S"}]}}}) == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "hi"},
    ]


def test_a_reply_without_candidates_is_an_empty_message() -> None:
    """A prompt blocked by safety filters: usage but no candidates."""
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4, "totalTokenCount": 4}}
    assert response_to_message(blocked) == {"role": "assistant", "content": ""}


def test_uploaded_files_and_images_are_placeholders() -> None:
    """A ``types.File`` (mime type and uri) and a PIL image passed as parts."""

    class PngImageFile:  # what PIL hands back, by class name
        pass

    upload = SimpleNamespace(name="files/abc", mime_type="application/pdf", uri="https://example.invalid/files/abc")
    assert input_messages((), {"contents": ["Compare", upload, PngImageFile()]}) == [
        {"role": "user", "content": "Compare\n[file]\n[image]"}
    ]
