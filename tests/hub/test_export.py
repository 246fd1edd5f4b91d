"""``ststrace export`` and ``ststrace.export()``: traces -> TRL training rows.

Rows are checked exactly, loaded with the real ``datasets`` JSON and Parquet
loaders, and rendered with two real Hugging Face chat templates (Qwen2.5 and
Qwen3, vendored in tests/fixtures/chat_templates with their licence) in the
Jinja environment ``transformers``' ``apply_chat_template`` uses."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import ststrace
from ststrace import Session
from ststrace._cli import main
from ststrace._export import trace_row
from ststrace._reader import Trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AGENT_TRACES = FIXTURES / "agent-traces"
TEMPLATES = FIXTURES / "chat_templates"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
UNUSED = {
    "type": "function",
    "function": {"name": "send_mail", "description": "Send an email.", "parameters": {"type": "object", "properties": {}}},
}


def _weather_session(directory: Path, sid: str = "s-ok", *, error: bool = False, unanswered: bool = False) -> Path:
    with Session(directory, id=sid, name="weather", harness="my-agent") as s:
        s.tools([WEATHER, UNUSED])
        s.system("Be brief.")
        s.user("Weather in Paris?")
        (cid,) = s.assistant(
            "Checking.",
            reasoning="I need the weather tool.",
            tool_calls=[{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}],
            model="m-1",
            usage={"input": 10, "output": 5},
        )
        if not unanswered:
            s.tool(cid, "Error: ConnectionError: down" if error else "Sunny, 21 C")
            s.assistant("It is sunny.", model="m-1", usage={"input": 20, "output": 3})
    assert s.path is not None
    return s.path


EXPECTED_ROW = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "I need the weather tool.",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "Sunny, 21 C"},
        {"role": "assistant", "content": "It is sunny."},
    ],
    "tools": [WEATHER, UNUSED],
    "session_id": "s-ok",
    "harness": "my-agent",
    "name": "weather",
    "models": ["m-1"],
    "usage": {"input": 30, "output": 8, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 38},
    "num_tool_calls": 1,
    "errors": 0,
    "unanswered_tool_calls": 0,
    "parent_session_id": None,
}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sft_row_shape(tmp_path: Path) -> None:
    """One row: TRL's conversational shape, object arguments, reasoning on its turn,
    the tool's name on its result, the tools offered (the uncalled one too), metadata."""
    _weather_session(tmp_path / "in")
    result = ststrace.export(tmp_path / "in", tmp_path / "out.jsonl")
    assert _rows(tmp_path / "out.jsonl") == [EXPECTED_ROW]
    assert (result.rows, result.files, result.messages, result.tool_calls) == (1, 1, 5, 1)
    assert not result.failed and not result.dropped and not result.skipped


def test_messages_format_is_openai_fine_tuning_shape(tmp_path: Path) -> None:
    _weather_session(tmp_path / "in")
    result = ststrace.export(tmp_path / "in", tmp_path / "out.jsonl", format="messages")
    (row,) = _rows(tmp_path / "out.jsonl")
    assert set(row) == {"messages", "tools"}
    assert row["messages"][2] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}],
    }
    assert row["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"}
    assert result.dropped == {"reasoning (no field for it in the messages format)": 1}


def test_errors_unanswered_calls_and_filters(tmp_path: Path) -> None:
    """Sessions with a failed result or an unanswered call are kept and flagged;
    --no-errors and --min-tool-calls leave them out, counted."""
    d = tmp_path / "in"
    _weather_session(d, "s-ok")
    _weather_session(d, "s-err", error=True)
    _weather_session(d, "s-open", unanswered=True)
    with Session(d, id="s-chat") as s:
        s.user("hi")
        s.assistant("hello", model="m")
    ststrace.export(d, tmp_path / "all.jsonl")
    flags = {r["session_id"]: (r["errors"], r["unanswered_tool_calls"], r["num_tool_calls"]) for r in _rows(tmp_path / "all.jsonl")}
    assert flags == {"s-ok": (0, 0, 1), "s-err": (1, 0, 1), "s-open": (0, 1, 1), "s-chat": (0, 0, 0)}
    result = ststrace.export(d, tmp_path / "clean.jsonl", errors=False, min_tool_calls=1)
    assert [r["session_id"] for r in _rows(tmp_path / "clean.jsonl")] == ["s-ok"]
    assert result.skipped == {"sessions with errors or unanswered calls": 2, "sessions with fewer than 1 tool calls": 1}


def test_subagents_only_when_asked(tmp_path: Path) -> None:
    d = tmp_path / "in"
    with Session(d, id="parent") as p:
        p.user("delegate")
        with Session(d, id="child", parent=p) as c:
            c.user("sub task")
            c.assistant("done", model="m")
        p.assistant("ok", model="m")
    result = ststrace.export(d, tmp_path / "a.jsonl")
    assert [r["session_id"] for r in _rows(tmp_path / "a.jsonl")] == ["parent"]
    assert result.skipped == {"sub-agent sessions (--include-subagents keeps them)": 1}
    ststrace.export(d, tmp_path / "b.jsonl", include_subagents=True)
    parents = {r["session_id"]: r["parent_session_id"] for r in _rows(tmp_path / "b.jsonl")}
    assert parents == {"parent": None, "child": "parent"}


def test_secrets_redacted_by_default(tmp_path: Path) -> None:
    secret = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0" * 2
    path = tmp_path / "in" / "t.jsonl"
    trace = Trace(
        {"type": "session", "harness": "h", "id": "t"},
        [{"role": "user", "content": f"my key is {secret}", "timestamp": 1}, {"role": "assistant", "content": "ok", "model": "m", "timestamp": 2}],
    )
    ststrace.write_trace(trace, path)  # written by hand: a Session would have redacted it already
    result = ststrace.export(path, tmp_path / "out.jsonl")
    assert secret not in (tmp_path / "out.jsonl").read_text()
    assert sum(result.redactions.values()) == 1
    ststrace.export(path, tmp_path / "raw.jsonl", redact=False)
    assert secret in (tmp_path / "raw.jsonl").read_text()


def test_other_agents_formats_export(tmp_path: Path) -> None:
    """Every sample session of the agents convert reads becomes rows; Claude Code's and
    Codex's calls come with object arguments and named results."""
    out = tmp_path / "out.jsonl"
    result = ststrace.export(sorted(AGENT_TRACES.glob("*.jsonl")), out)
    assert result.files == 7 and not result.failed
    rows = _rows(out)
    assert {r["harness"] for r in rows} >= {"claude-code", "codex", "pi", "hermes"}
    calls = [c for r in rows for m in r["messages"] for c in m.get("tool_calls", ())]
    assert calls and all(isinstance(c["function"]["arguments"], dict) for c in calls)
    names = {c["id"]: c["function"]["name"] for c in calls}
    results = [m for r in rows for m in r["messages"] if m["role"] == "tool"]
    assert results and all(m["name"] == names[m["tool_call_id"]] for m in results)


def test_losses_are_counted(tmp_path: Path) -> None:
    """What a row cannot hold is counted: arguments that are not a JSON object,
    a result whose call is missing."""
    trace = Trace(
        {"type": "session", "harness": "h", "id": "t"},
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "toolCalls": [
                {"id": "a", "function": {"name": "f", "arguments": "not json"}},
                {"id": "b", "function": {"name": "f", "arguments": "[1, 2]"}},
            ]},
            {"role": "tool", "toolCallId": "a", "content": "1"},
            {"role": "tool", "toolCallId": "b", "content": "2"},
            {"role": "tool", "toolCallId": "zzz", "content": "stray"},
        ],
    )
    from collections import Counter

    lost: Counter[str] = Counter()
    row = trace_row(trace, "sft", lost)
    args = [c["function"]["arguments"] for c in row["messages"][1]["tool_calls"]]
    assert args == [{"input": "not json"}, {"input": [1, 2]}]
    assert [m.get("tool_call_id") for m in row["messages"][2:]] == ["a", "b"]
    assert lost == {
        'arguments that are not JSON (kept as {"input": text})': 1,
        'arguments that are not a JSON object (kept as {"input": value})': 1,
        "tool results without their call": 1,
    }


# -- the CLI: one clear line per bad input, nothing clobbered ------------------------


def test_cli_bad_inputs_one_line_each_others_exported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "in"
    _weather_session(d, "good")
    (d / "damaged.jsonl").write_text('{"type":"session","harness":"h","id":"x"}\n{"type":"message","message":{"role":"user","content":"a"}}\n{not json}\n')
    (d / "unknown.jsonl").write_text('{"hello": "world"}\n')
    out = tmp_path / "out.jsonl"
    assert main(["export", str(d), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    errors = captured.err.strip().splitlines()
    assert len(errors) == 2, errors
    assert any("damaged.jsonl" in e for e in errors) and any("unknown.jsonl" in e and "cannot tell" in e for e in errors)
    assert all(e.startswith("ststrace export: ") for e in errors)
    assert [r["session_id"] for r in _rows(out)] == ["good"]
    assert "exported 1 session from 1 of 3 files" in captured.out and "2 failed" in captured.out


def test_cli_never_clobbers_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _weather_session(tmp_path / "in")
    out = tmp_path / "out.jsonl"
    out.write_text("precious\n")
    assert main(["export", str(tmp_path / "in"), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"ststrace export: {out} already exists; not overwritten (force=True / --force replaces it)"]
    assert out.read_text() == "precious\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    assert main(["export", str(tmp_path / "in"), "-o", str(out), "--force"]) == 0
    assert _rows(out)[0]["session_id"] == "s-ok"


def test_cli_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "in"
    _weather_session(d, "s-ok")
    _weather_session(d, "s-err", error=True)
    out = tmp_path / "o.jsonl"
    assert main(["export", str(d), "-o", str(out), "--no-errors", "--min-tool-calls", "1", "--format", "sft"]) == 0
    assert [r["session_id"] for r in _rows(out)] == ["s-ok"]
    text = capsys.readouterr().out
    assert "left out: 1 sessions with errors or unanswered calls" in text
    assert main(["export", str(d), "-o", str(tmp_path / "x.jsonl"), "--min-tool-calls", "-1"]) == 1
    assert main(["export", str(tmp_path / "nothing"), "-o", str(tmp_path / "y.jsonl")]) == 1
    assert "no such file" in capsys.readouterr().err.lower() or not (tmp_path / "y.jsonl").exists()


def test_python_api_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown export format 'csv'"):
        ststrace.export(tmp_path, tmp_path / "o.jsonl", format="csv")
    with pytest.raises(ValueError, match="min_tool_calls"):
        ststrace.export(tmp_path, tmp_path / "o.jsonl", min_tool_calls=-2)
    with pytest.raises(IsADirectoryError):
        ststrace.export(tmp_path, tmp_path)


def test_parquet_needs_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import builtins

    _weather_session(tmp_path / "in")
    real_import = builtins.__import__

    def no_pyarrow(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError("No module named 'pyarrow'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    assert main(["export", str(tmp_path / "in"), "-o", str(tmp_path / "o.parquet")]) == 1
    err = capsys.readouterr().err
    assert "pip install 'ststrace[datasets]'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.parquet").exists()


# -- the real loaders -----------------------------------------------------------------


@pytest.fixture
def load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``load(kind, file)``: ``datasets.load_dataset(kind, data_files=file)``, offline
    (no download-count ping; the settings are read at import, so patched here)."""
    datasets = pytest.importorskip("datasets")
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", False)

    def run(kind: str, files: Any) -> Any:
        return datasets.load_dataset(kind, data_files=files, split="train", cache_dir=str(tmp_path / "hf-cache"))

    return run


def _sessions(d: Path) -> None:
    _weather_session(d, "s-ok")
    _weather_session(d, "s-err", error=True)
    with Session(d, id="s-chat") as s:
        s.user("hi")
        s.assistant("hello", model="m")


def test_datasets_loads_the_jsonl_export(tmp_path: Path, load: Any) -> None:
    _sessions(tmp_path / "in")
    out = tmp_path / "train.jsonl"
    ststrace.export(tmp_path / "in", out)
    ds = load("json", str(out))
    assert ds.num_rows == 3
    rows = {r["session_id"]: r for r in ds}
    assert rows["s-ok"]["messages"] == EXPECTED_ROW["messages"]  # no null-filled keys: arguments exact
    assert rows["s-ok"]["tools"] == [WEATHER, UNUSED]
    assert rows["s-chat"]["messages"] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert rows["s-err"]["errors"] == 1


def test_datasets_loads_the_parquet_export(tmp_path: Path, load: Any) -> None:
    pytest.importorskip("pyarrow")
    _sessions(tmp_path / "in")
    out = tmp_path / "train.parquet"
    result = ststrace.export(tmp_path / "in", out)
    assert result.rows == 3
    ds = load("parquet", str(out))
    jsonl = tmp_path / "train.jsonl"
    ststrace.export(tmp_path / "in", jsonl)
    assert sorted(ds, key=lambda r: r["session_id"]) == sorted(_rows(jsonl), key=lambda r: r["session_id"])


# -- a real chat template renders every row ---------------------------------------------


def _render(template: str, row: dict[str, Any]) -> str:
    """As transformers' apply_chat_template renders (utils/chat_template_utils.py):
    a sandboxed environment, trim_blocks / lstrip_blocks, its tojson filter."""
    jinja2 = pytest.importorskip("jinja2")
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(
        messages=row["messages"], tools=row.get("tools") or None, add_generation_prompt=False,
        bos_token="", eos_token="<|im_end|>",
    )


@pytest.mark.parametrize("template", ["qwen2.5.jinja", "qwen3.jinja"])
def test_chat_templates_render_every_exported_row(template: str, tmp_path: Path) -> None:
    text = (TEMPLATES / template).read_text()
    _weather_session(tmp_path / "in", "s-ok")
    _weather_session(tmp_path / "in", "s-err", error=True)
    out = tmp_path / "rows.jsonl"
    ststrace.export([tmp_path / "in", *sorted(AGENT_TRACES.glob("*.jsonl"))], out)
    rows = _rows(out)
    assert len(rows) >= 9
    for row in rows:
        rendered = _render(text, row)
        for m in row["messages"]:
            for call in m.get("tool_calls", ()):
                # The object arguments come out as JSON, not as a Python repr or a quoted string.
                assert json.dumps(call["function"]["arguments"], ensure_ascii=False) in rendered
    ok = _render(text, rows[[r["session_id"] for r in rows].index("s-ok")])
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in ok
    assert json.dumps(UNUSED, ensure_ascii=False) in ok  # the tool never called is offered too
    assert "<tool_response>\nSunny, 21 C\n</tool_response>" in ok
    if template == "qwen3.jinja":
        assert "<think>\nI need the weather tool.\n</think>" in ok


# -- constant memory ---------------------------------------------------------------------


def _many(d: Path, n: int, turns: int = 20) -> None:
    d.mkdir(parents=True)
    line = b'{"type":"message","message":{"role":"user","content":"' + b"x" * 2000 + b'","timestamp":1}}\n'
    reply = b'{"type":"message","message":{"role":"assistant","content":"ok","model":"m","timestamp":2}}\n'
    for i in range(n):
        (d / f"s{i:05d}.jsonl").write_bytes(b'{"type":"session","harness":"h","id":"s%d"}\n' % i + (line + reply) * turns)


def _peak_export(d: Path, out: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        result = ststrace.export(d, out)
        return result.rows, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_export_memory_does_not_grow_with_sessions(tmp_path: Path) -> None:
    """Peak memory of 200 sessions is that of 20 (within the list of file names)."""
    _many(tmp_path / "small", 20)
    _many(tmp_path / "big", 200)
    rows_small, peak_small = _peak_export(tmp_path / "small", tmp_path / "small.jsonl")
    rows_big, peak_big = _peak_export(tmp_path / "big", tmp_path / "big.jsonl")
    assert (rows_small, rows_big) == (20, 200)
    assert peak_big < peak_small + 200 * 1024, (peak_small, peak_big)


@pytest.mark.slow
def test_export_of_10000_sessions_runs_in_constant_memory(tmp_path: Path) -> None:
    """10,000 sessions, 1 GB of traces."""
    _many(tmp_path / "small", 100, turns=48)
    _many(tmp_path / "big", 10_000, turns=48)
    assert sum(f.stat().st_size for f in (tmp_path / "big").iterdir()) > 1_000_000_000
    _, peak_small = _peak_export(tmp_path / "small", tmp_path / "small.jsonl")
    rows, peak_big = _peak_export(tmp_path / "big", tmp_path / "big.jsonl")
    assert rows == 10_000
    # The list of 10,000 input paths is the only thing that grows (a few MB).
    assert peak_big < peak_small + 8 * 1024 * 1024, (peak_small, peak_big)
    assert os.path.getsize(tmp_path / "big.jsonl") > 10_000 * 96_000


def test_cursor_tool_list_reaches_the_row(tmp_path: Path) -> None:
    """Cursor transcripts list their tools: convert keeps them, export writes them."""
    ststrace.export(AGENT_TRACES / "example_cursor_session.jsonl", tmp_path / "o.jsonl")
    (row,) = _rows(tmp_path / "o.jsonl")
    assert row["tools"] == [{
        "type": "function",
        "function": {"name": "Shell", "description": "Run shell commands.",
                     "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    }]
