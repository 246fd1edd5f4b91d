"""Headless Chromium for the viewer tests: Debian's /usr/bin/chromium driven by Playwright.

Without Chromium or Playwright the browser tests skip, so a developer can run the
rest of the suite; with ``STSTRACE_REQUIRE_BROWSER=1`` (CI) they fail instead.
No browser is ever downloaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is not installed (apt-get install chromium, or .ci/install-browser)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; no browser download needed)"
    return None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line when the browser tests skipped, above pytest's summary: among
    hundreds of dots, 39 's' are easy to miss."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if r.nodeid.startswith("tests/browser/")]
    if skipped:
        reason = _missing() or "see the skip reasons below"
        terminalreporter.write_line(
            f"NOTE: {len(skipped)} browser test(s) in tests/browser/ skipped: {reason}", yellow=True, bold=True
        )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = _missing()
    if reason is not None:
        if os.environ.get("STSTRACE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"STSTRACE_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@dataclass
class Opened:
    """A loaded viewer page and everything it asked of the outside world."""

    page: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def text(self, selector: str) -> str:
        return str(self.page.locator(selector).inner_text())


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    contexts: list[Any] = []

    def _open(html: Path, *, fragment: str = "", **context_options: Any) -> Opened:
        context_options.setdefault("viewport", {"width": 1200, "height": 900})
        ctx = browser.new_context(**context_options)
        contexts.append(ctx)
        page = ctx.new_page()
        opened = Opened(page)
        page.on("request", lambda r: opened.requests.append(r.url))
        page.on("pageerror", lambda e: opened.errors.append(f"pageerror: {e}"))
        page.on("console", lambda m: opened.errors.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.goto(html.resolve().as_uri() + fragment)
        page.wait_for_selector("html[data-ready]")
        return opened

    yield _open
    for ctx in contexts:
        ctx.close()
