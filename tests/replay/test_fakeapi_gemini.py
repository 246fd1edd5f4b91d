"""The fake server's Gemini protocol on the wire, read with the standard library
(the real google-genai client is run against it in test_integration_google_genai.py,
in .venv-google): the reply shapes, the SSE framing, Vertex AI paths, function
calls with and without ids, thoughts only when asked, usage, errors."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from ststrace.testing import FakeAPI, ScriptedReply

TOOLS = [{"functionDeclarations": [{"name": "get_weather"}, {"name": "get_time"}]}]
USER = {"role": "user", "parts": [{"text": "Weather?"}]}
GEMINI = "/v1beta/models/gemini-2.5-flash"
VERTEX = "/v1beta1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash"


def post(api: FakeAPI, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        api.gemini_base_url + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def events(raw: bytes) -> list[dict[str, Any]]:
    blocks = raw.decode().split("\n\n")
    assert blocks[-1] == "" and all(b.startswith("data: ") for b in blocks[:-1])
    return [json.loads(b[len("data: ") :]) for b in blocks[:-1]]


def test_a_tool_request_gets_id_less_function_calls_then_an_answer(fake_api: FakeAPI) -> None:
    status, raw = post(fake_api, f"{GEMINI}:generateContent", {"contents": [USER], "tools": TOOLS})
    assert status == 200
    reply = json.loads(raw)
    [candidate] = reply["candidates"]
    parts = candidate["content"]["parts"]
    assert candidate["content"]["role"] == "model" and candidate["finishReason"] == "STOP"
    assert parts[0]["text"] == "Let me look that up." and "thoughtSignature" in parts[0]
    assert [p["functionCall"] for p in parts[1:]] == [
        {"name": "get_weather", "args": {"city": "Paris"}},
        {"name": "get_time", "args": {"tz": "Europe/Paris"}},
    ]
    assert reply["modelVersion"] == "gemini-2.5-flash" and "createTime" not in reply
    usage = reply["usageMetadata"]
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]

    answered = [
        USER,
        candidate["content"],
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"result": "Sunny"}}},
                                   {"functionResponse": {"name": "get_time", "response": {"output": "15:00"}}}]},
    ]
    _, raw = post(fake_api, f"{GEMINI}:generateContent", {"contents": answered, "tools": TOOLS})
    [answer] = json.loads(raw)["candidates"][0]["content"]["parts"]
    assert answer["text"] == fake_api.answer_for(["Sunny", "15:00"])
    assert set(answer) == {"text", "thoughtSignature"}  # no thought part: none was asked for
    assert [r.endpoint for r in fake_api.requests] == ["gemini", "gemini"]


def test_call_ids_thoughts_and_vertex(fake_api: FakeAPI) -> None:
    fake_api.gemini_call_ids = True
    body = {"contents": [USER], "tools": TOOLS, "generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    _, raw = post(fake_api, f"{VERTEX}:generateContent", body)
    reply = json.loads(raw)
    parts = reply["candidates"][0]["content"]["parts"]
    assert parts[0] == {"text": "I should call get_weather and get_time.", "thought": True, "thoughtSignature": parts[0]["thoughtSignature"]}
    assert [p["functionCall"]["id"] for p in parts[2:]] == ["call_weather01", "call_time02"]
    assert reply["createTime"] == "2026-01-01T00:00:00.000000Z"


def test_a_stream_splits_text_and_ends_with_usage(fake_api: FakeAPI) -> None:
    fake_api.script(ScriptedReply(text="Hello there"))
    status, raw = post(fake_api, f"{GEMINI}:streamGenerateContent?alt=sse", {"contents": [USER]})
    assert status == 200 and fake_api.last_request.stream
    chunks = events(raw)
    texts = [c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks]
    assert texts == ["Hell", "o th", "ere"]
    assert ["usageMetadata" in c for c in chunks] == [False, False, True]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


@pytest.mark.parametrize("status, expected", [(429, "RESOURCE_EXHAUSTED"), (400, "INVALID_ARGUMENT")])
def test_errors_in_the_gemini_shape(fake_api: FakeAPI, status: int, expected: str) -> None:
    fake_api.fail_next(status, "no")
    got, raw = post(fake_api, f"{GEMINI}:generateContent", {"contents": [USER]})
    assert got == status
    assert json.loads(raw) == {"error": {"code": status, "message": "no", "status": expected}}


def test_no_tools_offered_when_function_calling_is_off(fake_api: FakeAPI) -> None:
    body = {"contents": [USER], "tools": TOOLS, "toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}
    _, raw = post(fake_api, f"{GEMINI}:generateContent", body)
    [part] = json.loads(raw)["candidates"][0]["content"]["parts"]
    assert part["text"] == "Hello from the fake API."
