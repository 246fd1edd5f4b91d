"""LlamaIndex ``FunctionAgent`` over ``BedrockConverse`` with ``ststrace.instrument()``
alone, against the local fake server's Bedrock Runtime.

Without aioboto3, BedrockConverse's async streaming path runs boto3 through
``loop.run_in_executor`` (its non-streaming one through ``asyncio.to_thread``,
which carries the context itself): the model call happens on an executor
thread, which records into the session only because ``instrument()`` makes
executor work follow the session that was current when it was handed over
(issue 33, item 2).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip("llama_index.llms.bedrock_converse", reason="llama-index-llms-bedrock-converse is not installed")

from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from llama_index.llms.bedrock_converse import BedrockConverse  # noqa: E402
from llama_index.llms.bedrock_converse import base as converse_base  # noqa: E402

import ststrace  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_instrument_helpers import instrumented  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning"),
]

MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
SYSTEM = "Answer briefly; use the tools for facts."
PROMPT = "What's the weather in Paris, and the time there?"


def get_weather(city: str) -> str:
    """The weather in a city."""
    return "Sunny, 21 C"


def get_time(tz: str) -> str:
    """The time in a time zone."""
    return "15:00"


@pytest.fixture(autouse=True)
def _no_aws_lookups(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"):
        monkeypatch.delenv(var, raising=False)
    yield


def converse_llm(api: FakeAPI) -> Any:
    return BedrockConverse(
        model=MODEL,
        endpoint_url=api.bedrock_base_url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        max_retries=1,
        timeout=5,
    )


@pytest.mark.parametrize("streaming", [True, False])
async def test_function_agent_over_bedrock_converse_records_from_the_executor_thread(
    streaming: bool,
    fake_api: FakeAPI,
    trace: Path,
    messages_of: Callable[[Path], list[dict[str, Any]]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The agent's model calls run boto3 on an executor thread: both are
    recorded with their tool calls, each result paired, and no warning that
    botocore was called outside any session."""
    assert not converse_base.HAS_AIOBOTO3  # the executor path is the one under test
    tools = [FunctionTool.from_defaults(get_weather), FunctionTool.from_defaults(get_time)]
    with instrumented(), caplog.at_level(logging.WARNING, logger="ststrace"):
        agent = FunctionAgent(tools=tools, llm=converse_llm(fake_api), system_prompt=SYSTEM, streaming=streaming)
        async with ststrace.Session(trace):
            answer = str(await agent.run(PROMPT))
    assert "Sunny, 21 C" in answer and "15:00" in answer
    assert len(fake_api.requests_to("bedrock")) == 2
    messages = messages_of(trace)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    calls = messages[2]["toolCalls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]
    assert [m["toolCallId"] for m in messages[3:5]] == [c["id"] for c in calls]
    assert [m["content"] for m in messages[3:5]] == ["Sunny, 21 C", "15:00"]
    assert messages[5]["content"] == answer
    assert not [r for r in caplog.records if "outside any session" in r.getMessage()]
