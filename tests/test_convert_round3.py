"""Converters and readers, third round (issue 25): Claude Code titles past slash
commands, STS to STS, llama.app message trees, every reading command on every
format, Gemini CLI and the other new agents.

Counts are taken from the sources by the small parsers here, written apart
from the converters; every output is validated.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ststrace import validate, write_trace
from ststrace._convert import convert_file

HERE = Path(__file__).resolve().parent
WILD = HERE / "fixtures" / "convert-wild"
SAMPLES = HERE / "fixtures" / "agent-traces"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _errors(path: Path) -> list[Any]:
    return [p for p in validate(path) if p.severity == "error"]


# -- Claude Code titles -----------------------------------------------------------

_WRAPPER = re.compile(r"^\s*(<(command-name|command-message|command-args|local-command-stdout)>|Caveat: The messages below)")


def _claude_first_prompt(path: Path) -> tuple[str, int]:
    """The first user turn typed by the user (not a command wrapper, not meta), and how many user lines hold text."""
    first, texts = None, 0
    for o in _lines(path):
        if o.get("type") != "user":
            continue
        c = o["message"]["content"]
        text = c if isinstance(c, str) else "\n".join(b["text"] for b in c if b.get("type") == "text")
        if not text:
            continue
        texts += 1
        if first is None and not o.get("isMeta") and not _WRAPPER.match(text):
            first = text
    assert first is not None
    return first, texts


@pytest.mark.parametrize("name", ["cc_clear.jsonl", "cc_init.jsonl"])
def test_claude_code_title_is_the_first_real_prompt_not_the_slash_command(name: str, tmp_path: Path) -> None:
    """``/clear`` and ``/init`` sessions are named by the prompt that follows the
    command; the wrapper turns stay in the trace, word for word."""
    src = WILD / name
    prompt, texts = _claude_first_prompt(src)
    [trace] = convert_file(src).traces
    title = trace.header["name"]
    assert title == " ".join(prompt.splitlines()[0].split())[:79].rstrip() + ("…" if len(prompt.splitlines()[0]) > 80 else "")
    assert not title.startswith("<") and "Caveat" not in title
    contents = [m["content"] for m in trace.messages if m["role"] in ("user", "system")]
    assert len(contents) == texts
    assert any(c.lstrip().startswith(("<command-name>", "<command-message>")) for c in contents)
    caveats = [m for m in trace.messages if m["content"].startswith("Caveat:")]
    assert all(m["role"] == "system" for m in caveats)
    assert _errors(write_trace(trace, tmp_path / "t.jsonl")) == []
