"""The HTML viewer page, checked as text (the browser tests run it in Chromium)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import ststrace
from ststrace._view import embed_json, is_viewer_html, render_html

HEADER = {"type": "session", "harness": "h", "id": "view-1", "name": "A viewer test"}


def write_trace(path: Path, messages: list[dict[str, Any]], header: dict[str, Any] | None = None, sep: bytes = b"\n") -> Path:
    with open(path, "wb") as f:
        f.write(json.dumps(header or HEADER).encode() + b"\n")
        for m in messages:
            f.write(json.dumps({"type": "message", "message": m}).encode() + sep)
    return path


def page_data(page: str) -> Any:
    m = re.search(r'<script id="ststrace-data" type="application/json">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def inline(page: str, tag: str) -> list[str]:
    return re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.S)


NASTY = [
    "</script><script>window.__pwned=1</script>",
    "</SCRIPT >",
    "<!--<script>",
    "a & b > c < d",
    "line\u2028separator\u2029paragraph",
    "{{DATA}} {{JS}} {{CSS}}",
    "\x00\x1f",
]


@pytest.mark.parametrize("text", NASTY)
def test_embed_json_cannot_end_the_script_element(text: str) -> None:
    """Data JSON holds no '<', '>', '&' or U+2028/9 and still decodes to the same value."""
    obj = {"k": text, text: [text]}
    out = embed_json(obj)
    for ch in "<>&\u2028\u2029":
        assert ch not in out
    assert json.loads(out) == obj


def test_page_round_trips_hostile_text(tmp_path: Path) -> None:
    """Trace text that looks like markup or placeholders arrives in the page data unchanged."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": t} for t in NASTY]
    header = {**HEADER, "name": NASTY[0], "meta": NASTY[5]}
    path = write_trace(tmp_path / "t.jsonl", msgs, header)
    page = render_html(path)
    data = page_data(page)
    assert [m["content"] for m in data["messages"]] == NASTY
    assert data["header"]["name"] == NASTY[0] and data["header"]["meta"] == NASTY[5]
    # Exactly our two scripts end: the data element and the viewer script.
    assert len(re.findall(r"</script", page, re.I)) == 2
    # The <title> is escaped text.
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    assert title is not None and "<script>" not in title.group(1) and "&lt;/script&gt;" in title.group(1)


def test_csp_allows_exactly_our_script_and_style(tmp_path: Path) -> None:
    """The Content-Security-Policy carries the hashes of the inline script and style, and forbids the network."""
    page = render_html(write_trace(tmp_path / "t.jsonl", [{"role": "user", "content": "hi"}]))
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp is not None
    policy = dict(part.strip().split(" ", 1) for part in csp.group(1).split(";"))
    assert policy["default-src"] == "'none'"

    def sha(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    (style,) = inline(page, "style")
    (script,) = inline(page, "script")
    assert policy["script-src"] == sha(script)
    assert policy["style-src"] == sha(style)
    assert "connect-src" not in policy  # falls back to default-src 'none'


def test_assets_load_nothing_and_never_parse_html() -> None:
    """The template, stylesheet and script reference no URL and use no HTML-parsing sink."""
    pkg = resources.files("ststrace._view")
    texts = {name: pkg.joinpath(name).read_text(encoding="utf-8") for name in ("template.html", "viewer.css", "viewer.js")}
    for name, text in texts.items():
        assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/|@import|url\(", text, re.I), name
    js = texts["viewer.js"]
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "srcdoc"):
        assert sink not in js, sink
    assert "</script" not in js.lower()
    # Markdown: marked's lexer only, never its HTML renderer or parser.
    assert "marked.Lexer" in js
    assert not re.search(r"marked\.(parse|parseInline|Parser|Renderer|use)\b|marked\(", js)


def test_render_accepts_a_trace_object(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.jsonl", [{"role": "user", "content": "from a Trace object"}])
    trace = ststrace.read(path)
    data = page_data(render_html(trace))
    assert data["messages"] == trace.messages and data["header"] == trace.header
    assert data["source"]["file"] == "t.jsonl"


def test_line_table_only_when_blank_lines_shift_numbers(tmp_path: Path) -> None:
    plain = write_trace(tmp_path / "a.jsonl", [{"role": "user", "content": str(i)} for i in range(3)])
    assert "lines" not in page_data(render_html(plain))
    gappy = write_trace(tmp_path / "b.jsonl", [{"role": "user", "content": str(i)} for i in range(3)], sep=b"\n\n")
    assert page_data(render_html(gappy))["lines"] == [2, 4, 6]


def test_torn_tail_is_skipped_unless_strict(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.jsonl", [{"role": "user", "content": "kept"}])
    with open(path, "ab") as f:
        f.write(b'{"type": "message", "message": {"ro')
    assert [m["content"] for m in page_data(render_html(path))["messages"]] == ["kept"]
    with pytest.raises(ststrace.TraceFormatError) as exc:
        render_html(path, strict=True)
    assert exc.value.line == 3


def test_is_viewer_html(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text(render_html(write_trace(tmp_path / "t.jsonl", [])))
    assert is_viewer_html(page)
    other = tmp_path / "o.html"
    other.write_text("<html><body>hand-written</body></html>")
    assert not is_viewer_html(other)
    assert not is_viewer_html(tmp_path / "missing.html")


def test_vendored_markdown_lexer_is_shipped_and_inlined(tmp_path: Path) -> None:
    """marked (vendor/README.md) ships in the package with its licence and goes
    into the page's one script, without its source-map comment; nothing in it
    can end or open a script element."""
    vendor = resources.files("ststrace._view").joinpath("vendor")
    marked = vendor.joinpath("marked.umd.js").read_text(encoding="utf-8")
    assert marked.startswith("/**\n * marked v18.3.0")
    assert "Copyright (c) 2018+, MarkedJS" in vendor.joinpath("LICENSE-marked").read_text(encoding="utf-8")
    readme = vendor.joinpath("README.md").read_text(encoding="utf-8")
    assert "18.3.0" in readme and hashlib.sha256(marked.encode()).hexdigest() in readme
    assert not re.search(r"</?script", marked, re.I)
    page = render_html(write_trace(tmp_path / "t.jsonl", [{"role": "user", "content": "*hi*"}]))
    (script,) = inline(page, "script")
    assert script.startswith("/**\n * marked v18.3.0") and "sourceMappingURL" not in script
    assert script.endswith(resources.files("ststrace._view").joinpath("viewer.js").read_text(encoding="utf-8"))
