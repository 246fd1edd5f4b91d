"""The viewer in headless Chromium: token usage on replies and in the header
card, and links between a session and its sub-agent sessions (``ststrace view DIR``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ststrace import Session, tool
from ststrace.cli import main

Open = Callable[..., Any]


def record(tmp_path: Path) -> tuple[Path, Session, Session]:
    children: list[Session] = []

    @tool
    def research(topic: str) -> None:
        with Session(tmp_path / "child.jsonl", name="Researcher") as child:
            child.user(topic)
            child.assistant("otters hold hands", model="m-small", usage={"input": 10, "output": 4})
            children.append(child)

    prices = {"m-big": {"input": 1e-6, "output": 2e-6}}
    with Session(tmp_path / "parent.jsonl", name="Planner", prices=prices) as parent:
        parent.user("tell me about otters")
        parent.assistant(
            "",
            model="m-big",
            tool_calls=[{"id": "call_r1", "name": "research", "arguments": {"topic": "otters"}}],
            usage={"input": 1000, "output": 20, "cacheRead": 500},
        )
        research("otters")
        parent.assistant("They hold hands.", model="m-big", usage={"input": 1200, "output": 30})
    return tmp_path, parent, children[0]


def test_usage_and_sub_agent_links(tmp_path: Path, open_page: Open, capsys: Any) -> None:
    """Tokens and cost in the header card and on each reply; the tool call links to
    the sub-agent's page, whose header links back to the parent."""
    directory, parent, child = record(tmp_path)
    assert main(["view", str(directory)]) == 0
    capsys.readouterr()
    page = open_page(directory / "parent.html")
    stats = page.text(".stats")
    assert "Tokens" in stats and "2,750" in stats  # 1,520 + 1,230
    assert "Cost" in stats
    chips = page.page.locator(".head .usage").all_inner_texts()
    assert [c.split(" \u00b7 ")[0] for c in chips] == ["1,520 tok", "1,230 tok"]
    link = page.page.locator(".call .subagents a.session-link")
    assert link.inner_text() == "Researcher"
    assert page.page.locator(".meta").inner_text().count("Researcher") == 1  # sub-agent row
    link.click()
    page.page.wait_for_url("**/child.html")
    page.page.wait_for_selector("html[data-ready]")
    back = page.page.locator(".meta a.session-link")
    assert back.inner_text() == "Planner"
    assert "14" in page.page.locator(".stats").inner_text()
    assert not page.errors
    assert all(url.startswith("file://") for url in page.requests)
