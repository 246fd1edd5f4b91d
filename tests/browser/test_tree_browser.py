"""The viewer in headless Chromium on a llama.app message tree: the active path
is the conversation; the branches the user moved away from are collapsed and marked."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from ststrace.cli import main

WILD = Path(__file__).resolve().parents[1] / "fixtures" / "convert-wild"
Open = Callable[..., Any]


def test_llama_tree_shows_the_active_path_and_collapses_the_other_branches(
    tmp_path: Path, open_page: Open, capsys: Any
) -> None:
    src = Path(shutil.copy(WILD / "llama_tools.jsonl", tmp_path / "t.jsonl"))
    assert main(["view", str(src)]) == 0
    capsys.readouterr()
    page = open_page(tmp_path / "t.html")
    roles = page.page.locator("#list > article .head .role").all_inner_texts()
    assert [r.lower() for r in roles] == ["user", "assistant", "assistant"]  # the tool result sits inside its call
    assert "Lyon: clear skies" in page.text("#list")
    branches = page.page.locator("details.branch")
    assert branches.count() == 2
    summaries = page.page.locator("details.branch > summary").all_inner_texts()
    assert sorted(summaries) == [
        "Not shown: another branch \u00b7 2 messages",
        "Not shown: another reply (regenerated) \u00b7 1 message",
    ]
    assert "It's 21" not in page.text("#list")  # collapsed: not drawn until opened
    page.page.locator("details.branch > summary", has_text="regenerated").click()
    # The branch is drawn on its "toggle" event, which the browser fires in a
    # task after the click: wait for it (asserting at once failed ~1 run in 6).
    page.page.locator("#list", has_text="It's 21 °C and clear in Lyon.").wait_for(timeout=5000)
    assert "It's 21 °C and clear in Lyon." in page.text("#list")
    assert not page.errors
    assert all(url.startswith("file://") for url in page.requests)
