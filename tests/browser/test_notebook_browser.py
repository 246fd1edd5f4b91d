"""``Trace._repr_html_`` in real headless Chromium: a host page standing in
for the notebook holds the iframe exactly as Jupyter inserts it. The viewer
renders inside, no request leaves it, and an XSS payload in the trace stays
text and cannot reach the host page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ststrace
from ststrace import Session

pytestmark = pytest.mark.browser

PAYLOAD = (
    '</script><script>parent.document.title="pwned";window.top.pwned=1</script>'
    '<img src="http://example.com/x.png" onerror="parent.pwned=2">'
)

HOST = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>notebook</title></head>
<body><div class="output_html">{cell}</div>
<script>window.notebookSecret = "cookie-ish";</script></body></html>
"""


def notebook_with(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    with Session(path, name="Notebook run") as s:
        s.user("Plan a trip to Lyon")
        s.assistant("", tool_calls=[{"id": "c1", "function": {"name": "fetch", "arguments": '{"url": "x"}'}}])
        s.tool("c1", PAYLOAD)
        s.assistant("Done: " + PAYLOAD)
    host = tmp_path / "notebook.html"
    host.write_text(HOST.format(cell=ststrace.read(path)._repr_html_()), encoding="utf-8")
    return host


def test_viewer_renders_inside_the_sandboxed_iframe(browser: Any, tmp_path: Path) -> None:
    host = notebook_with(tmp_path)
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = ctx.new_page()
        requests: list[str] = []
        errors: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(host.resolve().as_uri())
        frame = page.frame_locator("iframe")
        frame.locator("html[data-ready]").wait_for()
        roles = frame.locator("article.msg > .head .role").all_text_contents()
        assert roles == ["User", "Assistant", "Assistant"]  # the tool result sits with its call
        texts = " ".join(frame.locator("article.msg").all_text_contents())
        assert "Plan a trip to Lyon" in texts
        # The payload is shown as the text it is, never run or loaded.
        assert frame.locator(".call .result .text-body").text_content() == PAYLOAD
        assert PAYLOAD in (frame.locator("article.msg").last.text_content() or "")
        assert frame.locator("img[src^='http']").count() == 0
        page.wait_for_timeout(300)
        assert page.title() == "notebook"
        assert page.evaluate("[window.pwned, window.top.pwned]") == [None, None]
        # Only the host page was fetched: nothing from inside the iframe.
        assert requests == [host.resolve().as_uri()]
        assert errors == []
        # The page inside is an opaque origin: its script cannot touch the notebook.
        inner = next(f for f in page.frames if f is not page.main_frame)
        assert inner.evaluate("(() => { try { return parent.document.title } catch (e) { return 'blocked' } })()") == "blocked"
        assert inner.evaluate("(() => { try { return String(parent.notebookSecret) } catch (e) { return 'blocked' } })()") == "blocked"
        assert inner.evaluate("(() => { try { localStorage.length; return 'open' } catch (e) { return 'blocked' } })()") == "blocked"
    finally:
        ctx.close()


def test_a_fetch_from_inside_is_refused(browser: Any, tmp_path: Path) -> None:
    """The page's own Content-Security-Policy holds inside the iframe: even a
    script that got in could not send the trace anywhere."""
    host = notebook_with(tmp_path)
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(host.resolve().as_uri())
        page.frame_locator("iframe").locator("html[data-ready]").wait_for()
        inner = next(f for f in page.frames if f is not page.main_frame)
        outcome = inner.evaluate(
            "fetch('http://127.0.0.1:9/steal').then(() => 'sent', e => 'refused: ' + e.name)"
        )
        assert outcome.startswith("refused")
        assert [u for u in requests if "127.0.0.1:9" in u] == []
    finally:
        ctx.close()

