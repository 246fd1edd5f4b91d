"""Traces in notebooks: ``Trace`` and a closed ``Session`` show as the viewer
in a sandboxed ``srcdoc`` iframe (``_repr_html_``), with a plain-text
``__repr__`` (roles, counts, first prompt). The page itself is checked in
Chromium in ``tests/browser/test_notebook_browser.py``."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

import ststrace
from ststrace import Session, Trace

XSS = '</iframe><script>alert(1)</script>"><img src=x onerror=alert(2)>'


def trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.jsonl"
    with Session(path, name="Weather run") as s:
        s.system("Be brief.")
        s.user("What's the weather\nin Paris?")
        s.assistant("", tool_calls=[{"id": "c1", "function": {"name": "get_weather", "arguments": "{}"}}])
        s.tool("c1", XSS)
        s.assistant("Sunny.")
    return path


def test_trace_repr_lists_roles_counts_and_the_first_prompt(tmp_path: Path) -> None:
    t = ststrace.read(trace(tmp_path))
    assert repr(t) == (
        f"<ststrace.Trace id={t.id!r} name='Weather run' 5 messages (1 system, 1 user, 2 assistant, 1 tool), "
        "1 tool calls, first prompt \"What's the weather in Paris?\">"
    )
    assert repr(Trace({"type": "session", "harness": "h", "id": "x"})) == "<ststrace.Trace id='x' 0 messages>"


def test_closed_session_repr_and_html(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = Session(path)
    assert s._repr_html_() is None  # nothing to show before it ends
    with s:
        s.user("hi")
        assert s._repr_html_() is None and repr(s).endswith(" open>")
    assert repr(s) == f"<ststrace.Session id={s.id!r} path={str(path)!r} closed: 1 messages (1 user), first prompt 'hi'>"
    assert (s._repr_html_() or "").startswith('<iframe sandbox="allow-scripts"')


def test_html_is_a_sandboxed_srcdoc_iframe(tmp_path: Path) -> None:
    page = ststrace.read(trace(tmp_path))._repr_html_()
    opening = page[: page.index(" srcdoc=")]
    assert opening.startswith('<iframe sandbox="allow-scripts" ')
    assert "allow-same-origin" not in page  # an opaque origin: the notebook is out of reach
    srcdoc = re.fullmatch(r'.* srcdoc="([^"]*)"></iframe>', page, re.S)
    assert srcdoc is not None, "the attribute must hold the whole page (quotes escaped)"
    inner = html.unescape(srcdoc.group(1))
    assert inner.startswith("<!DOCTYPE html>") and "default-src 'none'" in inner
    # The payload is neither markup in the iframe tag nor in the page.
    assert "<script>alert" not in page and "<img" not in page.replace("&lt;img", "")
    assert "<script>alert(1)" not in inner and "\\u003c/iframe\\u003e" in inner


def test_a_big_closed_session_is_not_read_for_its_repr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """repr() must stay cheap: past the cap the file is not read at all."""
    from ststrace import _session

    path = tmp_path / "big.jsonl"
    with Session(path) as s:
        s.user("x" * 2000)
    monkeypatch.setattr(_session, "_REPR_MAX_BYTES", 1000)
    assert repr(s).endswith(" closed>")
    assert s._repr_html_() is None
