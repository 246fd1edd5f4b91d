"""``ststrace.instrument("bedrock")`` with real boto3 / botocore against the fake
server's Bedrock Runtime: ``converse`` (Converse JSON), ``converse_stream`` (AWS
event-stream framing), and ``invoke_model`` / ``invoke_model_with_response_stream``
with an Anthropic Messages body; ``system``, ``toolUseId``, ``reasoningContent``,
usage with cache reads and writes. Dummy credentials, a fixed region, no IMDS."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from botocore.parsers import ResponseParserError  # noqa: E402

import ststrace  # noqa: E402
from ststrace import Session, _instrument  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_decorators_helpers import valid_messages  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    ANTHROPIC_TOOLS,
    PREAMBLE,
    REASONING_ANSWER,
    REASONING_TOOLS,
    SYSTEM,
    TIME_ARGS,
    TIME_RESULT,
    USER,
    WEATHER_ARGS,
    WEATHER_RESULT,
    instrumented,
    new_trace,
    recorded,
    tool_calls,
)

MODEL = "anthropic.claude-sonnet-test-v1:0"
RESULTS = {"get_weather": WEATHER_RESULT, "get_time": TIME_RESULT}
TOOL_CONFIG = {
    "tools": [
        {"toolSpec": {"name": t["name"], "description": t["description"], "inputSchema": {"json": t["input_schema"]}}}
        for t in ANTHROPIC_TOOLS
    ]
}
THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}


@pytest.fixture(autouse=True)
def _no_aws_lookups(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def patched_bedrock() -> Iterator[None]:
    with instrumented("bedrock"):
        yield


def client(api: FakeAPI) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=api.bedrock_base_url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=5),
    )


def _calls(prefix: str) -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}weather01", "function": {"name": "get_weather", "arguments": WEATHER_ARGS}},
        {"id": f"{prefix}time02", "function": {"name": "get_time", "arguments": TIME_ARGS}},
    ]


def expected_loop(api: FakeAPI, prefix: str = "tooluse_", reasoning: bool = True) -> list[dict[str, Any]]:
    ask: dict[str, Any] = {"role": "assistant", "content": PREAMBLE}
    answer: dict[str, Any] = {"role": "assistant", "content": api.answer_for([WEATHER_RESULT, TIME_RESULT])}
    if reasoning:
        ask["reasoningContent"] = REASONING_TOOLS
        answer["reasoningContent"] = REASONING_ANSWER
    ask["toolCalls"] = _calls(prefix)
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        {**ask, "model": MODEL},
        {"role": "tool", "toolCallId": f"{prefix}weather01", "content": WEATHER_RESULT},
        {"role": "tool", "toolCallId": f"{prefix}time02", "content": TIME_RESULT},
        {**answer, "model": MODEL},
    ]


def converse_kwargs(messages: list[dict[str, Any]], thinking: bool = True) -> dict[str, Any]:
    extra = {"additionalModelRequestFields": THINKING} if thinking else {}
    return dict(modelId=MODEL, system=[{"text": SYSTEM}], messages=messages, toolConfig=TOOL_CONFIG, **extra)


def first_turn() -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"text": USER}]}]


def _next_turn(messages: list[dict[str, Any]], content: list[dict[str, Any]]) -> bool:
    """The Converse loop from the Bedrock docs: append the reply, answer each toolUse."""
    messages.append({"role": "assistant", "content": content})
    uses = [b["toolUse"] for b in content if "toolUse" in b]
    if uses:
        messages.append(
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": u["toolUseId"], "content": [{"text": RESULTS[u["name"]]}]}}
                    for u in uses
                ],
            }
        )
    return bool(uses)


def _content_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The content blocks a converse_stream adds up to, as the caller builds them."""
    blocks: dict[int, dict[str, Any]] = {}
    for event in events:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            use = start["start"]["toolUse"]
            blocks[start["contentBlockIndex"]] = {"toolUse": {**use, "input": ""}}
        elif "contentBlockDelta" in event:
            d = event["contentBlockDelta"]
            block = blocks.setdefault(d["contentBlockIndex"], {})
            if "text" in d["delta"]:
                block["text"] = block.get("text", "") + d["delta"]["text"]
            elif "toolUse" in d["delta"]:
                block["toolUse"]["input"] += d["delta"]["toolUse"]["input"]
            elif "reasoningContent" in d["delta"]:
                r = block.setdefault("reasoningContent", {"reasoningText": {"text": ""}})
                if "text" in d["delta"]["reasoningContent"]:
                    r["reasoningText"]["text"] += d["delta"]["reasoningContent"]["text"]
                else:
                    r["reasoningText"]["signature"] = d["delta"]["reasoningContent"]["signature"]
    out = [blocks[i] for i in sorted(blocks)]
    for block in out:
        if "toolUse" in block:
            block["toolUse"]["input"] = json.loads(block["toolUse"]["input"])
    return out


def test_converse_tool_loop_is_recorded_with_tool_use_ids(
    fake_api: FakeAPI, patched_bedrock: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    messages = first_turn()
    c = client(fake_api)
    with Session(path):
        for _ in range(3):
            reply = c.converse(**converse_kwargs(messages))
            assert reply["ResponseMetadata"]["HTTPStatusCode"] == 200
            if not _next_turn(messages, reply["output"]["message"]["content"]):
                break
    assert reply["output"]["message"]["content"][-1]["text"] == fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert recorded(path) == expected_loop(fake_api)
    assert fake_api.requests[0].path == "/model/anthropic.claude-sonnet-test-v1%3A0/converse"


def test_converse_usage_counts_cache_reads_and_writes(
    fake_api: FakeAPI, patched_bedrock: None, tmp_path: Path
) -> None:
    fake_api.cached_tokens, fake_api.cache_write_tokens = 30, 7
    path = new_trace(tmp_path)
    with Session(path):
        reply = client(fake_api).converse(modelId=MODEL, messages=first_turn())
    u = reply["usage"]
    [assistant] = [m for m in valid_messages(path) if m["role"] == "assistant"]
    assert assistant["usage"] == {
        "input": u["inputTokens"],
        "output": u["outputTokens"],
        "cacheRead": 30,
        "cacheWrite": 7,
        "totalTokens": u["totalTokens"],
    }


def test_converse_stream_tool_loop_is_recorded(fake_api: FakeAPI, patched_bedrock: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages = first_turn()
    c = client(fake_api)
    with Session(path):
        for _ in range(3):
            response = c.converse_stream(**converse_kwargs(messages))
            events = list(response["stream"])
            assert next(iter(events[0])) == "messageStart" and next(iter(events[-1])) == "metadata"
            if not _next_turn(messages, _content_of(events)):
                break
    assert recorded(path) == expected_loop(fake_api)
    usage = [m["usage"] for m in valid_messages(path) if m["role"] == "assistant"]
    assert len(usage) == 2 and all(u["input"] > 0 and u["output"] > 0 for u in usage)


def test_converse_stream_events_are_unchanged(fake_api: FakeAPI, tmp_path: Path) -> None:
    """The caller reads the same events with and without instrumentation."""
    c = client(fake_api)
    plain = list(c.converse_stream(**converse_kwargs(first_turn()))["stream"])
    with instrumented("bedrock"), Session(new_trace(tmp_path)):
        response = c.converse_stream(**converse_kwargs(first_turn()))
        assert type(response) is dict
        seen = list(response["stream"])
    assert seen == plain


def test_invoke_model_anthropic_body_is_recorded(fake_api: FakeAPI, patched_bedrock: None, tmp_path: Path) -> None:
    """An Anthropic Messages body: recorded from the reply, and the caller still
    reads the whole body from ``response["body"]``."""
    path = new_trace(tmp_path)
    messages: list[dict[str, Any]] = [{"role": "user", "content": USER}]
    c = client(fake_api)
    with Session(path):
        for _ in range(3):
            body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 512, "system": SYSTEM,
                    "messages": messages, "tools": ANTHROPIC_TOOLS, **THINKING}
            response = c.invoke_model(modelId=MODEL, body=json.dumps(body))
            reply = json.loads(response["body"].read())
            messages.append({"role": "assistant", "content": reply["content"]})
            uses = [b for b in reply["content"] if b["type"] == "tool_use"]
            if not uses:
                break
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": u["id"], "content": RESULTS[u["name"]]} for u in uses]})
    assert recorded(path) == expected_loop(fake_api, prefix="toolu_")
    assert response["body"].read() == b""  # read to its end, as without ststrace


def test_invoke_model_with_response_stream_is_recorded(
    fake_api: FakeAPI, patched_bedrock: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 512, "system": SYSTEM,
            "messages": [{"role": "user", "content": USER}], "tools": ANTHROPIC_TOOLS}
    with Session(path):
        response = client(fake_api).invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(body))
        events = [json.loads(e["chunk"]["bytes"]) for e in response["body"]]
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    ask = {"role": "assistant", "content": PREAMBLE, "toolCalls": tool_calls("toolu_"), "model": MODEL}
    assert recorded(path) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}, ask]


def test_throttling_error_propagates_unchanged(fake_api: FakeAPI, patched_bedrock: None, tmp_path: Path) -> None:
    fake_api.fail_next(429, "Too many requests")
    path = new_trace(tmp_path)
    with Session(path):
        with pytest.raises(ClientError) as caught:
            client(fake_api).converse(**converse_kwargs(first_turn()))
    assert caught.value.response["Error"]["Code"] == "ThrottlingException"
    assert recorded(path) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]


def test_other_services_pass_straight_through(fake_api: FakeAPI, patched_bedrock: None, tmp_path: Path) -> None:
    """A non-Bedrock botocore call in a session records nothing."""
    sts = boto3.client("sts", endpoint_url=fake_api.url, region_name="us-east-1",
                       aws_access_key_id="test", aws_secret_access_key="test",
                       config=Config(retries={"total_max_attempts": 1}))
    path = new_trace(tmp_path)
    with Session(path):
        with pytest.raises(ResponseParserError):
            sts.get_caller_identity()  # the fake answers 404, in JSON where STS expects XML
    assert recorded(path) == []


def test_instrument_waits_for_botocore_without_importing_it() -> None:
    """``instrument()`` in a fresh interpreter does not import boto3 or botocore;
    importing boto3 later patches ``_make_api_call``."""
    code = (
        "import sys, ststrace\n"
        "names = ststrace.instrument()\n"
        "assert 'bedrock' in names, names\n"
        "assert 'botocore' not in sys.modules and 'boto3' not in sys.modules\n"
        "import boto3, botocore.client\n"
        "from ststrace import _instrument\n"
        "assert 'bedrock' in _instrument.instrumented()\n"
        "print(type(botocore.client.BaseClient.__dict__['_make_api_call']).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "FunctionWrapper"


def test_instrument_by_name_and_alias() -> None:
    try:
        assert ststrace.instrument("boto3") == ["bedrock"]
        assert "bedrock" in _instrument.instrumented()
    finally:
        ststrace.uninstrument()
