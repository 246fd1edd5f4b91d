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


# -- STS to STS ----------------------------------------------------------------------


def test_convert_on_an_sts_file_normalises_it_and_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An STS file converts (exit 0): secrets redacted, a result before its call and a
    second answer dropped and counted, a reused call id made unique; the output validates."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    src = tmp_path / "in" / "run.jsonl"
    src.parent.mkdir()
    rows = [
        {"type": "session", "harness": "my-agent", "id": "run-1", "name": "deploy", "team": "infra"},
        {"role": "user", "content": f"deploy with {token}"},
        {"role": "tool", "toolCallId": "c1", "content": "too early"},
        {"role": "assistant", "content": "", "model": "m", "toolCalls": [{"id": "c1", "function": {"name": "sh", "arguments": "{\"cmd\": \"ls\"}"}}]},
        {"role": "tool", "toolCallId": "c1", "content": "a b"},
        {"role": "tool", "toolCallId": "c1", "content": "again"},
        {"role": "assistant", "content": "", "toolCalls": [{"id": "c1", "function": {"name": "sh", "arguments": "{}"}}]},
        {"role": "assistant", "content": "done", "model": "m", "usage": {"input": 5, "output": 2}},
    ]
    src.write_text("".join(json.dumps(r if r.get("type") else {"type": "message", "message": r}) + "\n" for r in rows))
    assert [p.code for p in validate(src) if p.severity == "error"] == [
        "orphan-tool-result", "duplicate-tool-result", "duplicate-tool-call-id",
    ]
    from ststrace.cli import main

    assert main(["convert", str(src), "-o", str(tmp_path / "out")]) == 0
    summary = capsys.readouterr().out
    assert "converted 1 of 1 file" in summary and "1 duplicate_tool_result, 1 orphan_tool_result" in summary
    assert "redacted: 1 github_token" in summary
    out = tmp_path / "out" / "run-1.jsonl"
    assert _errors(out) == []
    lines = _lines(out)
    assert lines[0] == {"type": "session", "harness": "my-agent", "id": "run-1", "name": "deploy", "team": "infra"}
    msgs = [x["message"] for x in lines[1:]]
    assert token not in out.read_text()
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant", "assistant"]
    assert [tc["id"] for m in msgs for tc in m.get("toolCalls", [])] == ["c1", "c1#2"]
    assert msgs[-1]["usage"] == {"input": 5, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 7}


# -- llama.app message trees ---------------------------------------------------------


def _llama(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """(header, active path, every root-to-leaf path), walking ``children`` down
    and ``parent`` up as llama.app does; the ``root`` row is no message."""
    rows = _lines(path)
    head, msgs = rows[0], [r["message"] for r in rows[1:]]
    by_id = {m["id"]: m for m in msgs}

    def up(node: dict[str, Any] | None) -> list[dict[str, Any]]:
        out = []
        while node is not None:
            if node["type"] != "root":
                out.append(node)
            node = by_id.get(node["parent"]) if node["parent"] else None
        return out[::-1]

    leaves = [m for m in msgs if not m["children"] and m["type"] != "root"]
    start = by_id.get(head.get("currNode") or "") or max(leaves, key=lambda m: m["timestamp"])
    return head, up(start), [up(leaf) for leaf in leaves]


LLAMA = ["llama_regenerated.jsonl", "llama_tools.jsonl"]


@pytest.mark.parametrize("name", LLAMA)
def test_llama_tree_reads_as_its_active_path(name: str) -> None:
    """``read`` / ``iter_messages`` give the path root -> currNode: no placeholder,
    one reply where a regeneration left two; no final newline, ``harness`` first: fine."""
    from ststrace import iter_messages, read

    src = WILD / name
    assert not src.read_bytes().endswith(b"\n")
    head, active, _ = _llama(src)
    trace = read(src)
    assert [m["id"] for m in trace.messages] == [m["id"] for m in active]
    assert [m["id"] for m in iter_messages(src)] == [m["id"] for m in active]
    assert not any(m.get("type") == "root" for m in trace.messages)
    assert trace.messages[-1]["id"] == head["currNode"]
    assert _errors(src) == []
    from ststrace import read_tree

    assert [m["id"] for m in read_tree(src).messages] == [x["message"]["id"] for x in _lines(src)[1:]]


@pytest.mark.parametrize("name", LLAMA)
def test_llama_tree_converts_to_its_active_path_or_one_file_per_leaf(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ststrace.cli import main

    src = WILD / name
    head, active, every = _llama(src)
    [trace] = convert_file(src).traces
    assert [(m["role"], m["content"]) for m in trace.messages] == [(m["role"], m["content"]) for m in active]
    assert trace.header["harness"] == "llama.app" and trace.header["id"] == head["id"] and "currNode" not in trace.header
    calls = [tc["id"] for m in active for tc in m.get("toolCalls", [])]
    assert [tc["id"] for m in trace.messages for tc in m.get("toolCalls", [])] == calls
    assert [m["toolCallId"] for m in trace.messages if m["role"] == "tool"] == [m["toolCallId"] for m in active if m["role"] == "tool"]
    timed = [m for m in active if "timings" in m]
    assert [m["usage"]["output"] for m in trace.messages if "usage" in m] == [m["timings"]["predicted_n"] for m in timed]
    assert [m["usage"]["cacheRead"] for m in trace.messages if "usage" in m] == [m["timings"]["cache_n"] for m in timed]

    assert main(["convert", "--all-branches", str(src), "-o", str(tmp_path / "all")]) == 0
    capsys.readouterr()
    outs = sorted((tmp_path / "all").iterdir())
    assert len(outs) == len(every)
    got = sorted([m["message"]["content"] for m in _lines(o)[1:]] for o in outs)
    assert got == sorted([m["content"] for m in path] for path in every)
    assert all(_errors(o) == [] for o in outs)


@pytest.mark.parametrize("name", LLAMA)
def test_llama_tree_to_pi_shows_one_answer_and_the_hub_loader_takes_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--to pi`` chains the active path only: a regenerated reply is not followed
    by the old one. The Hub's ``datasets`` loader takes the output for a trace."""
    from hub_loader import hub_detects, offline
    from ststrace.cli import main

    offline(monkeypatch)
    src = WILD / name
    head, active, _ = _llama(src)
    assert main(["convert", "--to", "pi", str(src), "-o", str(tmp_path / "pi")]) == 0
    capsys.readouterr()
    [out] = (tmp_path / "pi").iterdir()
    pi_msgs = [o["message"] for o in _lines(out) if o["type"] == "message"]
    replies = [b["text"] for m in pi_msgs if m["role"] == "assistant" for b in m["content"] if b["type"] == "text"]
    assert replies == [m["content"] for m in active if m["role"] == "assistant" and m["content"]]
    first_user = next(m["content"] for m in active if m["role"] == "user")
    assert hub_detects(out, tmp_path / "cache") == (True, head["id"], first_user)


# -- Gemini CLI ------------------------------------------------------------------------

GEMINI = HERE / "fixtures" / "gemini"
GEMINI_RECORDINGS = ["session-2025-12-01T21-45-5b959dae.json", "session-2026-01-16T11-01-file-ops-37b7abef.json"]


def _source_gemini(path: Path) -> tuple[int, int, str]:
    """(calls, results, first prompt) of a chat recording or a checkpoint."""
    doc = json.loads(path.read_text())
    if isinstance(doc, dict):
        msgs = doc["messages"]
        calls = [c for m in msgs if m["type"] == "gemini" for c in m.get("toolCalls", [])]
        return len(calls), sum(1 for c in calls if c.get("result")), next(m["content"] for m in msgs if m["type"] == "user")
    calls = [p for c in doc if c["role"] == "model" for p in c["parts"] if "functionCall" in p]
    results = [p for c in doc if c["role"] == "user" for p in c["parts"] if "functionResponse" in p]
    prompts = [p["text"] for c in doc if c["role"] == "user" for p in c["parts"] if "text" in p]
    return len(calls), len(results), next(t for t in prompts if not t.startswith("This is the Gemini CLI."))


def _gemini_usage(path: Path) -> list[dict[str, int]]:
    out = []
    for m in json.loads(path.read_text())["messages"]:
        t = m.get("tokens")
        if m["type"] == "gemini" and t:
            out.append(
                {
                    "input": t["input"] - t["cached"] + t["tool"],
                    "output": t["output"] + t["thoughts"],
                    "cacheRead": t["cached"],
                    "cacheWrite": 0,
                    "totalTokens": t["total"],
                    "reasoning": t["thoughts"],
                }
            )
    return out


@pytest.mark.parametrize("name", [*GEMINI_RECORDINGS, "checkpoint-auth-fix.json"])
def test_gemini_cli_sessions_convert_with_calls_results_and_usage(name: str, tmp_path: Path) -> None:
    """Real Gemini CLI chat recordings (and a checkpoint): every call and its result,
    paired; thoughts as reasoning; Gemini's token counts in the Pi shape (cached
    tokens out of input, thoughts in output) adding up to Gemini's own total."""
    src = GEMINI / name
    calls, results, prompt = _source_gemini(src)
    r = convert_file(src)
    assert r.format == "gemini"
    [trace] = r.traces
    assert trace.header["harness"] == "gemini-cli"
    msgs = trace.messages
    assert sum(len(m.get("toolCalls", [])) for m in msgs) == calls
    assert sum(1 for m in msgs if m["role"] == "tool") == results
    assert next(m["content"] for m in msgs if m["role"] == "user") == prompt
    assert trace.header["name"] == " ".join(prompt.splitlines()[0].split())[:80]
    if name.startswith("session-"):
        doc = json.loads(src.read_text())
        assert trace.id == doc["sessionId"]
        assert [m["usage"] for m in msgs if "usage" in m] == _gemini_usage(src)
        assert all(u["totalTokens"] == u["input"] + u["output"] + u["cacheRead"] for u in _gemini_usage(src))
        thoughts = sum(1 for m in doc["messages"] if m.get("thoughts"))
        assert sum(1 for m in msgs if "reasoningContent" in m) == thoughts
    else:
        assert [m["content"] for m in msgs if m["role"] == "tool"][-1] == "Error: Tool execution denied by user."
        assert msgs[0]["role"] == "system"  # the context turn the CLI sends first
    assert r.dropped == {}
    assert _errors(write_trace(trace, tmp_path / "t.jsonl")) == []


def test_gemini_to_pi_and_the_hub_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder of Gemini CLI sessions converts (``session-*.json`` are picked up);
    ``--to pi`` output is taken for a trace by the Hub's ``datasets`` loader."""
    import shutil

    from hub_loader import hub_detects, offline
    from ststrace.cli import main

    offline(monkeypatch)
    chats = tmp_path / "tmp" / "abc123" / "chats"
    chats.mkdir(parents=True)
    for name in GEMINI_RECORDINGS:
        shutil.copy(GEMINI / name, chats / name)
    assert main(["convert", "--to", "pi", str(tmp_path / "tmp"), "-o", str(tmp_path / "pi")]) == 0
    summary = capsys.readouterr().out
    assert "converted 2 of 2 files" in summary and "token usage kept: 20 replies" in summary
    for name in GEMINI_RECORDINGS:
        doc = json.loads((GEMINI / name).read_text())
        out = tmp_path / "pi" / f"{doc['sessionId']}.jsonl"
        first = next(m["content"] for m in doc["messages"] if m["type"] == "user")
        assert hub_detects(out, tmp_path / "cache" / name) == (True, doc["sessionId"], first)


# -- OpenCode ------------------------------------------------------------------------------

OPENCODE = WILD / "opencode_export.json"


def _source_opencode(path: Path) -> tuple[int, int, str]:
    doc = json.loads(path.read_text())
    tools = [p for m in doc["messages"] for p in m["parts"] if p["type"] == "tool"]
    done = [p for p in tools if p["state"]["status"] in ("completed", "error")]
    first = next(p["text"] for m in doc["messages"] if m["info"]["role"] == "user" for p in m["parts"] if p["type"] == "text")
    return len(tools), len(done), first


def test_opencode_export_one_message_per_step_with_its_tokens(tmp_path: Path) -> None:
    """Each model call (step-start .. step-finish) is one assistant message carrying that
    step's tokens and cost; tool parts give the call and, after it, the result (errors
    marked); a synthetic text part is a system message; an aborted reply says so."""
    calls, results, prompt = _source_opencode(OPENCODE)
    r = convert_file(OPENCODE)
    assert r.format == "opencode"
    [trace] = r.traces
    doc = json.loads(OPENCODE.read_text())
    assert (trace.id, trace.header["name"]) == (doc["info"]["id"], doc["info"]["title"])
    msgs = trace.messages
    assert sum(len(m.get("toolCalls", [])) for m in msgs) == calls
    assert sum(1 for m in msgs if m["role"] == "tool") == results
    assert next(m["content"] for m in msgs if m["role"] == "user") == prompt
    finishes = [p for m in doc["messages"] for p in m["parts"] if p["type"] == "step-finish"]
    usages = [m["usage"] for m in msgs if "usage" in m]
    assert len(usages) == len(finishes)
    for u, f in zip(usages, finishes):
        t = f["tokens"]
        assert u["totalTokens"] == t["input"] + t["output"] + t["reasoning"] + t["cache"]["read"] + t["cache"]["write"]
        assert (u["input"], u["cacheRead"], u["reasoning"]) == (t["input"], t["cache"]["read"], t["reasoning"])
        assert u["cost"]["total"] == pytest.approx(f["cost"])
    assert usages[0]["totalTokens"] == 8006  # the step's own total in the real log this shape comes from
    tool_texts = [m["content"] for m in msgs if m["role"] == "tool"]
    assert tool_texts[-1] == "Error: File is outside the allowed directories"
    assert [m["role"] for m in msgs][-3:] == ["system", "user", "assistant"]
    assert msgs[-1]["content"] == "Error: The operation was aborted."
    assert r.dropped == {"image": 1}
    assert _errors(write_trace(trace, tmp_path / "t.jsonl")) == []


def test_opencode_to_pi_and_the_hub_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from hub_loader import hub_detects, offline
    from ststrace.cli import main

    offline(monkeypatch)
    assert main(["convert", "--to", "pi", str(OPENCODE), "-o", str(tmp_path / "pi")]) == 0
    assert "token usage kept: 2 replies, 16,297 tokens" in capsys.readouterr().out
    [out] = (tmp_path / "pi").iterdir()
    doc = json.loads(OPENCODE.read_text())
    assert hub_detects(out, tmp_path / "cache") == (True, doc["info"]["id"], _source_opencode(OPENCODE)[2])


# -- Cline ---------------------------------------------------------------------------------

CLINE = WILD / "cline" / "1745512345678" / "api_conversation_history.json"
_CLINE_RESULT = re.compile(r"^\[(\w+)(?: for .*)?\] Result:", re.S)


def _source_cline(path: Path) -> tuple[int, int, str]:
    """Calls are ``tool_use`` blocks; results the next user turn's ``[tool ...] Result:`` blocks."""
    doc = json.loads(path.read_text())
    calls = results = 0
    for i, m in enumerate(doc):
        if m["role"] != "assistant":
            continue
        uses = [b for b in m["content"] if b["type"] == "tool_use"]
        calls += len(uses)
        if i + 1 < len(doc):
            heads = [b["text"] for b in doc[i + 1]["content"] if b["type"] == "text" and _CLINE_RESULT.match(b["text"])]
            results += min(len(uses), len(heads))
    task = doc[0]["content"][0]["text"]
    return calls, results, task.split("<task>")[1].split("</task>")[0].strip()


def test_cline_task_pairs_results_by_order_and_keeps_clines_notes_apart(tmp_path: Path) -> None:
    calls, results, prompt = _source_cline(CLINE)
    r = convert_file(CLINE)
    assert r.format == "cline"
    [trace] = r.traces
    assert (trace.id, trace.header["name"]) == ("1745512345678", prompt)
    msgs = trace.messages
    ids = [c["id"] for m in msgs for c in m.get("toolCalls", [])]
    assert len(ids) == calls and [m["toolCallId"] for m in msgs if m["role"] == "tool"] == ids[:results]
    assert [m["content"] for m in msgs if m["role"] == "user"] == [prompt, "Use Math.round on cents."]
    assert all(not m["content"].startswith("<environment_details>") for m in msgs if m["role"] == "user")
    errors = [m for m in msgs if m["role"] == "tool" and m["content"].startswith("Error:")]
    assert len(errors) == 1 and "exit code 1" in errors[0]["content"]
    doc = json.loads(CLINE.read_text())
    tokens = [m["metrics"]["tokens"] for m in doc if m["role"] == "assistant"]
    assert [m["usage"] for m in msgs if "usage" in m] == [
        {"input": t["prompt"] - t["cached"], "output": t["completion"], "cacheRead": t["cached"], "cacheWrite": 0,
         "totalTokens": t["prompt"] + t["completion"]}
        for t in tokens
    ]
    assert _errors(write_trace(trace, tmp_path / "t.jsonl")) == []


def test_cline_tasks_folder_converts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``convert <globalStorage>/tasks`` finds each task's ``api_conversation_history.json``."""
    from ststrace.cli import main

    assert main(["convert", str(WILD / "cline"), "-o", str(tmp_path / "out")]) == 0
    assert "converted 1 of 1 file" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["1745512345678.jsonl"]


# -- every reading command on every format -------------------------------------------


def _source_openai(path: Path) -> tuple[int, int, str]:
    doc = json.loads(path.read_text())
    msgs = doc["messages"]
    calls = {c["id"] for m in msgs for c in m.get("tool_calls") or []}
    results = sum(1 for m in msgs if m["role"] == "tool" and m["tool_call_id"] in calls)
    first = next(m["content"] for m in msgs if m["role"] == "user")
    return len(calls), results, first if isinstance(first, str) else first[0]["text"]


def _source_llama(path: Path) -> tuple[int, int, str]:
    _, active, _ = _llama(path)
    calls = {c["id"] for m in active for c in m.get("toolCalls", [])}
    results = sum(1 for m in active if m["role"] == "tool" and m["toolCallId"] in calls)
    return len(calls), results, next(m["content"] for m in active if m["role"] == "user")


def _cases() -> list[tuple[Path, str, Any]]:
    from test_convert import SAMPLE_CASES

    cases = [(SAMPLES / name, fmt, count) for name, fmt, count in SAMPLE_CASES]
    cases.append((HERE / "fixtures" / "convert" / "openai_messages.json", "openai", _source_openai))
    cases.append((WILD / "llama_tools.jsonl", "sts", _source_llama))
    cases.append((HERE / "fixtures" / "gemini" / "session-2025-12-01T21-45-5b959dae.json", "gemini", _source_gemini))
    cases.append((HERE / "fixtures" / "gemini" / "checkpoint-auth-fix.json", "gemini", _source_gemini))
    cases.append((OPENCODE, "opencode", _source_opencode))
    cases.append((CLINE, "cline", _source_cline))
    return cases


CASES = _cases()


@pytest.mark.parametrize(("src", "fmt", "count"), CASES, ids=[f"{c[0].name}" for c in CASES])
def test_every_reading_command_reads_every_format(
    src: Path, fmt: str, count: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``stats``, ``cat`` and ``view`` open any file ``convert`` reads (converted in
    memory, the format named), with the counts of the source; ``validate`` says
    what a non-STS file is and how to turn it into STS."""
    from ststrace.cli import main

    calls, results, prompt = count(src)
    assert main(["stats", "--json", str(src)]) == 0
    doc = json.loads(capsys.readouterr().out)
    main_file = doc["files"][0]
    assert (main_file["tool_calls"], main_file["tool_results"]) == (calls, results)
    assert main_file["format"] == (None if fmt == "sts" else fmt)
    assert main(["stats", str(src)]) == 0
    text = capsys.readouterr().out
    assert (f"({fmt}, converted in memory)" in text) is (fmt != "sts")

    assert main(["cat", "--no-color", str(src)]) == 0
    out = capsys.readouterr().out
    assert " ".join(prompt.split())[:60] in " ".join(out.split())
    assert ("converted in memory from " in out) is (fmt != "sts")

    page = tmp_path / "page.html"
    assert main(["view", str(src), "-o", str(page)]) == 0
    capsys.readouterr()
    from test_usage_cli import page_data

    data = page_data(page)
    assert sum(len(m.get("toolCalls", [])) for m in data["messages"]) == calls
    assert ("note" in data["source"]) is (fmt != "sts")

    code = main(["validate", str(src)])
    out = capsys.readouterr().out
    if fmt == "sts":
        assert code == 0 and "error" not in out
    else:
        assert code == 1
        assert out.strip().endswith("not STS; `ststrace convert` turns it into STS")
        assert out.count("\n") == 1


def test_view_and_stats_on_a_claude_code_projects_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``ststrace view ~/.claude/projects/<project>``: one page per session file, the
    subagent's page linked to its parent's, as for STS folders; ``stats`` totals them."""
    import shutil

    from ststrace.cli import main
    from test_usage_cli import page_data

    project = tmp_path / "proj"
    shutil.copytree(WILD / "cc-main-1", project / "cc-main-1")
    shutil.copy(WILD / "cc-main-1.jsonl", project / "cc-main-1.jsonl")
    shutil.copy(WILD / "cc_clear.jsonl", project / "cc_clear.jsonl")
    assert main(["view", str(project)]) == 0
    assert capsys.readouterr().err == ""
    sub = page_data(project / "cc-main-1" / "subagents" / "agent-a7f3c2d.html")
    assert sub["links"]["parent"]["href"] == "../../cc-main-1.html"
    assert "converted in memory from a Claude Code session" in sub["source"]["note"]
    assert page_data(project / "cc_clear.html")["header"]["name"].startswith("why does `make test` fail")

    assert main(["stats", "--json", str(project)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {f["format"] for f in doc["files"]} == {"claude-code"}
    assert doc["total"]["sub_agents"] >= 1


def test_cline_to_pi_and_the_hub_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from hub_loader import hub_detects, offline
    from ststrace.cli import main

    offline(monkeypatch)
    assert main(["convert", "--to", "pi", str(CLINE), "-o", str(tmp_path / "pi")]) == 0
    capsys.readouterr()
    [out] = (tmp_path / "pi").iterdir()
    assert hub_detects(out, tmp_path / "cache") == (True, "1745512345678", _source_cline(CLINE)[2])


def test_a_flat_sts_file_with_a_stray_curr_node_stays_flat() -> None:
    """Only messages linked by ``id`` / ``parent`` make a tree: a flat file whose
    header happens to carry ``currNode`` keeps every message."""
    import tempfile

    from ststrace import iter_messages, read

    rows = [
        {"type": "session", "harness": "x", "id": "s", "currNode": "nope"},
        {"type": "message", "message": {"role": "user", "content": "a"}},
        {"type": "message", "message": {"role": "assistant", "content": "b", "model": "m"}},
    ]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert [m["content"] for m in read(p).messages] == ["a", "b"]
        assert [m["content"] for m in iter_messages(p)] == ["a", "b"]
