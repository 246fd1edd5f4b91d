"""Tool schemas from the frameworks: a smolagents agent's tools (smolagents' own
JSON schemas), recorded when its run begins, besides what its model calls are
offered through the instrumented client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

smolagents = pytest.importorskip("smolagents", reason="smolagents is not installed (pip install 'ststrace[test]')")

from smolagents.models import get_tool_json_schema  # noqa: E402

import ststrace  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_smolagents import FINAL_REPLY, TASK, TOOLS_REPLY, get_time, get_weather, tool_calling_agent  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")


def _offered(path: Path) -> list[tuple[int, list[str]]]:
    return [(i, [t["function"]["name"] for t in m["tools"]]) for i, m in enumerate(ststrace.read(path).messages) if "tools" in m]


def test_smolagents_agent_tools_recorded_once_with_its_schemas(
    fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    fake_api.script(TOOLS_REPLY, FINAL_REPLY)
    agent = tool_calling_agent(fake_api)
    with ststrace.Session(trace):
        agent.run(TASK)
    messages = ststrace.read(trace).messages
    offered = _offered(trace)
    # One set, on the first reply: the agent's tools at the start of the run and the
    # model call's tools= are the same set (smolagents adds final_answer to both).
    assert offered == [(2, ["get_weather", "get_time", "final_answer"])], offered
    assert messages[2]["role"] == "assistant"
    schemas = {t["function"]["name"]: t for t in messages[2]["tools"]}
    assert schemas["get_weather"] == get_tool_json_schema(get_weather)
    assert schemas["get_time"] == get_tool_json_schema(get_time)


def test_a_second_run_in_the_same_session_records_nothing_new(
    fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    fake_api.script(TOOLS_REPLY, FINAL_REPLY, TOOLS_REPLY, FINAL_REPLY)
    agent: Any = tool_calling_agent(fake_api)
    with ststrace.Session(trace):
        agent.run(TASK)
        agent.run(TASK, reset=False)
    assert len(_offered(trace)) == 1
