"""The viewer in headless Chromium: a session's outcome in its header card."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import ststrace
from ststrace import Session
from ststrace.cli import main


def test_the_header_card_shows_the_outcome_and_messages_keep_their_lines(
    tmp_path: Path, open_page: Callable[..., Any], capsys: Any
) -> None:
    path = tmp_path / "run.jsonl"
    with Session(path, name="Fix the bug", task_id="bug-7", sample=3) as s:
        s.user("fix it")
        s.outcome(0.25, labels={"verifier": "pytest"})  # between two messages
        s.assistant("done", model="m")
    ststrace.outcome(path, rewards={"tests": 1.0}, success=False)
    assert main(["view", str(path)]) == 0
    capsys.readouterr()
    page = open_page(tmp_path / "run.html")
    stats = page.text(".stats")
    assert "Reward" in stats and "0.25" in stats
    assert "failure" in stats
    meta = page.text(".meta")
    for text in ("reward tests", "label verifier", "pytest", "taskId", "bug-7", "sample"):
        assert text in meta
    # The reply's file line skips the outcome line before it (line 4, not 3).
    assert page.page.locator("a.line").all_inner_texts() == ["L2", "L4"]
    assert not page.errors
