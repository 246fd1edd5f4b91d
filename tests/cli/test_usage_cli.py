"""``ststrace stats`` and ``ststrace view`` with token usage and sub-agent sessions,
and the Hub's detection code on files that carry ``usage``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hub_loader import hub_detects, offline
from ststrace import Session, tool
from ststrace.cli import main
from test_usage import BIG


def make_run(directory: Path) -> tuple[Session, list[Session]]:
    """A planner whose tool runs two sub-agents; replies with usage, one priced model."""
    kids: list[Session] = []

    @tool
    def delegate(n: int) -> None:
        for i in range(n):
            with Session(directory / f"worker {i}#.jsonl", name=f"worker {i}") as k:
                k.user("go")
                k.assistant("done", model="small", usage={"input": 10, "output": 5, "reasoning": 2})
                kids.append(k)

    with Session(directory / "planner.jsonl", name="planner", prices={"big": {"input": 1e-6, "output": 4e-6}}) as p:
        p.user("plan")
        p.assistant(
            "", model="big", tool_calls=[{"id": "c1", "name": "delegate", "arguments": {"n": 2}}],
            usage={"input": 100, "output": 10, "cacheRead": 50, "cacheWrite": 5},
        )
        delegate(2)
        p.assistant("all done", model="big", usage={"input": 200, "output": 20})
    return p, kids


def test_stats_totals_tokens_per_model_and_session_and_counts_sub_agents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planner, kids = make_run(tmp_path)
    assert main(["stats", "--json", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_name = {Path(f["path"]).stem: f for f in doc["files"]}
    p = by_name["planner"]
    assert p["usage"] == {"input": 300, "output": 30, "cacheRead": 50, "cacheWrite": 5, "totalTokens": 385}
    assert p["cost"] == pytest.approx(300e-6 + 30 * 4e-6)
    assert p["sub_agents"] == 2 and p["parent_session_id"] is None
    w = by_name["worker 0#"]
    assert w["parent_session_id"] == planner.id and w["sub_agents"] == 0
    assert w["usage"] == {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15, "reasoning": 2}
    assert w["cost"] is None
    t = doc["total"]
    assert t["usage"]["totalTokens"] == 385 + 30 and t["sub_agents"] == 2
    assert t["usage_by_model"]["small"]["totalTokens"] == 30
    assert t["usage_by_model"]["big"]["cost"] == pytest.approx(p["cost"])

    assert main(["stats", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "tokens            385 total, 300 in, 30 out, 50 cache read, 5 cache write" in out
    assert "sub-agents        2" in out
    assert f"parent session    {planner.id}" in out
    assert re.search(r"small +30 total", out)


def test_stats_of_a_trace_without_usage_shows_no_token_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Session(tmp_path / "a.jsonl") as s:
        s.assistant("hi", model="m")
    assert main(["stats", str(tmp_path / "a.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "tokens" not in out and "sub-agents" not in out


def page_data(html: Path) -> dict[str, Any]:
    text = html.read_text()
    raw = re.search(r'<script id="ststrace-data" type="application/json">(.*?)</script>', text, re.S)
    assert raw is not None
    return dict(json.loads(raw.group(1)))


def test_view_dir_links_parent_and_children(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One page per trace; hrefs relative, percent-encoded and anchored."""
    planner, kids = make_run(tmp_path)
    assert main(["view", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 3
    links = page_data(tmp_path / "planner.html")["links"]
    assert "parent" not in links
    assert sorted(c["href"] for c in links["children"]) == ["./worker%200%23.html", "./worker%201%23.html"]
    assert {c["parentToolCallId"] for c in links["children"]} == {"c1"}
    child = page_data(tmp_path / "worker 0#.html")["links"]
    assert child == {"parent": {"id": planner.id, "href": "./planner.html", "name": "planner"}}


def test_view_several_files_into_an_output_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path)
    out = tmp_path / "pages"
    out.mkdir()
    files = [str(tmp_path / "planner.jsonl"), str(tmp_path / "worker 1#.jsonl")]
    assert main(["view", *files, "-o", str(out)]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["planner.html", "worker 1#.html"]
    assert [c["href"] for c in page_data(out / "planner.html")["links"]["children"]] == ["./worker%201%23.html"]
    assert main(["view", *files, "-o", "-"]) == 1
    assert "single trace" in capsys.readouterr().err
    assert main(["view", *files, "-o", str(tmp_path / "nope")]) == 1
    assert "existing directory" in capsys.readouterr().err


def test_hub_detection_still_finds_traces_with_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hub's own detection code (``datasets`` JSON loader, offline, on a local
    file): traces whose assistant messages carry ``usage`` (with cost) are still
    traces, with the right session id and prompt; a file the loader does not take
    for a trace (identical message keys) shows the check can fail."""
    offline(monkeypatch)

    path = tmp_path / "a" / "trace.jsonl"
    path.parent.mkdir()
    with Session(path, id="abc123", name="usage", prices={"m": {"input": 1e-6, "output": 1e-6}}) as s:
        s.user("what time is it?")
        ids = s.assistant("", model="m", tool_calls=[{"name": "get_time", "arguments": {}}], usage={"input": 12, "output": 3})
        s.tool(ids[0], "15:00")
        s.assistant("it is 15:00", model="m", usage={"input": 20, "output": 6, "cacheRead": 12})
    assert '"cost":{' in path.read_text()
    assert hub_detects(path, tmp_path / "cache1") == (True, "abc123", "what time is it?")

    # Usage is what tells the messages apart: user and assistant otherwise alike.
    plain = tmp_path / "b" / "trace.jsonl"
    plain.parent.mkdir()
    with Session(plain, id="def456") as s:
        s.user("hello")
        s.record({"role": "assistant", "content": "hi", "usage": {"input": 1, "output": 1}})
    assert hub_detects(plain, tmp_path / "cache2")[:2] == (True, "def456")

    control = tmp_path / "c" / "trace.jsonl"
    control.parent.mkdir()
    with Session(control, id="ghi789") as s:
        s.user("hello")
        s.record({"role": "assistant", "content": "hi"})
    assert hub_detects(control, tmp_path / "cache3")[0] is False



def _write_trace(path: Path, *messages: dict[str, Any]) -> Path:
    import json  # not orjson: it cannot write integers of 2**64 and more

    lines = [{"type": "session", "harness": "t", "id": "s1"}] + [{"type": "message", "message": m} for m in messages]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_validate_and_stats_agree_on_bad_usage_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file written by someone else with a count as a string, a count >= 2**64 and a negative one:
    validate reports each (file:line), stats counts only the valid ones."""
    import orjson

    from ststrace import validate
    from ststrace.cli import main

    path = _write_trace(
        tmp_path / "t.jsonl",
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "model": "m", "usage": {"input": "18446744073709551616", "output": 3}},
        {"role": "assistant", "content": "b", "model": "m", "usage": {"input": 5, "output": BIG}},
        {"role": "assistant", "content": "c", "model": "m", "usage": {"input": -2, "output": 1}},
        {"role": "assistant", "content": "d", "model": "m", "usage": "lots"},
    )
    problems = [(p.line, p.code) for p in validate(path) if p.severity == "error"]
    assert problems == [(3, "usage-invalid"), (4, "usage-invalid"), (5, "usage-invalid"), (6, "usage-invalid")]
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:4: error: usage-invalid: usage.output must be an integer from 0 to 2**53 - 1" in out
    assert main(["stats", "--json", str(path)]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["files"][0]["usage"] == {"input": 5, "output": 4}
