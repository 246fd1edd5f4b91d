"""Converters, second round: session shapes found in the wild (issue 14), the
default redaction of ``ststrace convert`` and bad input (issue 13, items 10 and 19).

The fixtures in tests/fixtures/convert-wild are hand-made (see the README
there). Every count below is taken from the source independently of the
converter, and every output is validated.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_redact import POSITIVES

from ststrace import validate
from ststrace._cli.convert import run as run_convert
from ststrace._convert import (
    ConvertError,
    convert,
    convert_file,
    detect,
    output_name,
    write_trace,
)
from ststrace._reader import Trace
from ststrace.cli import build_parser

HERE = Path(__file__).resolve().parent
WILD = HERE / "fixtures" / "convert-wild"
SAMPLES = HERE / "fixtures" / "agent-traces"
CC_MAIN = WILD / "cc-main-1.jsonl"
CC_AGENT = WILD / "cc-main-1" / "subagents" / "agent-a7f3c2d.jsonl"
HERMES_GATEWAY = WILD / "20260418_192600_a1b2c3d4.jsonl"

GITHUB = next(s for k, s, _ in POSITIVES if k == "github_token" and s.startswith("ghp_"))
OPENAI = next(s for k, s, _ in POSITIVES if k == "openai_key")


def _rows(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def _valid(trace: Trace, tmp_path: Path) -> Path:
    out = write_trace(trace, tmp_path / f"{len(list(tmp_path.iterdir()))}-{output_name(trace)}")
    assert [str(p) for p in validate(out) if p.severity == "error"] == []
    return out


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = run_convert(_parse(["convert", *argv]))
    out, err = capsys.readouterr()
    return code, out.strip().splitlines()[-1] if out.strip() else "", err


# -- 1. Codex: a prompt with images ------------------------------------------------


def test_codex_image_prompt_is_one_user_message(tmp_path: Path) -> None:
    """The <image>-wrapped prompt is one user message with one placeholder per image, counted once."""
    src = WILD / "codex_image_prompt.jsonl"
    images = sum(
        1
        for o in _rows(src)
        if o["type"] == "response_item" and o["payload"].get("role") == "user"
        for b in o["payload"]["content"]
        if b["type"] == "input_image"
    )
    prompts = [o["payload"]["message"] for o in _rows(src) if o["type"] == "event_msg" and o["payload"]["type"] == "user_message"]
    result = convert_file(src)
    (trace,) = result.traces
    users = [m["content"] for m in trace.messages if m["role"] == "user"]
    assert users == [
        f"{prompts[0]}\n[image: image/png]\n[image: image/jpeg]",
        prompts[1],
    ]
    systems = [m["content"] for m in trace.messages if m["role"] == "system"]
    assert not any(prompts[0] in s for s in systems)  # no system copy of the prompt
    assert not any("<image" in m["content"] for m in trace.messages)
    assert result.dropped == Counter({"image": images}) and images == 2
    _valid(trace, tmp_path)

    # The event first, then the item: the same single message and count.
    lines = src.read_text().splitlines()
    item = next(i for i, ln in enumerate(lines) if "input_image" in ln)
    lines[item], lines[item + 1] = lines[item + 1], lines[item]
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_text("\n".join(lines) + "\n")
    again = convert_file(swapped)
    assert again.traces[0].messages == trace.messages
    assert again.dropped == Counter({"image": 2})


# -- 2, 3, 8, 9. Claude Code -------------------------------------------------------------


def test_claude_title_from_own_summary_only(tmp_path: Path) -> None:
    """The title is a summary whose leafUuid is in the file, not the last summary (another session's)."""
    rows = _rows(CC_MAIN)
    uuids = {o.get("uuid") for o in rows}
    own = [o["summary"] for o in rows if o.get("type") == "summary" and o["leafUuid"] in uuids]
    assert rows[-1]["type"] == "summary" and rows[-1]["leafUuid"] not in uuids  # the trap
    main = convert_file(CC_MAIN).traces[0]
    assert main.header["name"] == own[-1] == "Checkout test currency mismatch"

    # With no summary of its own, the first prompt (first line, shortened) names it.
    no_own = tmp_path / "cc-main-1.jsonl"
    no_own.write_text("".join(json.dumps(o) + "\n" for o in rows if not (o.get("type") == "summary" and o["leafUuid"] in uuids)))
    trace = convert(no_own)[0]
    first_line = rows[2]["message"]["content"].splitlines()[0]
    assert len(first_line) > 80
    assert trace.header["name"] == first_line[:79].rstrip() + "…"


def test_claude_progress_blank_blocks_and_orphans_counted(tmp_path: Path) -> None:
    """progress / agent_progress lines are counted; blank text blocks vanish; an orphan in an empty subagent group is counted."""
    rows = _rows(CC_MAIN)
    progress = Counter("agent_progress" if o["data"]["type"] == "agent_progress" else "progress" for o in rows if o.get("type") == "progress")
    result = convert_file(CC_MAIN)
    assert result.dropped == Counter({**progress, "orphan_tool_result": 1})
    assert progress == Counter({"agent_progress": 2, "progress": 1})
    (main,) = result.traces  # the orphan-only subagent group yields no trace
    first = next(m for m in main.messages if m["role"] == "assistant")
    assert first["content"] == "Let me have a subagent search the test setup."
    assert [c["id"] for c in first["toolCalls"]] == ["toolu_task_1"]
    _valid(main, tmp_path)

    # The OpenClaw sample starts a reply with a "\n\n" text block.
    claw = convert(SAMPLES / "example_openclaw_session.jsonl")[0]
    assert next(m for m in claw.messages if m["role"] == "assistant")["content"].startswith("Hey! I just came online")


def test_claude_subagent_file_links_parent_and_counts_torn_line(tmp_path: Path) -> None:
    """A subagents/agent-*.jsonl file: its torn line is counted; the header names the parent session and Task call."""
    torn = sum(1 for line in CC_AGENT.read_text().splitlines() if line.strip() and not _parses(line))
    result = convert_file(CC_AGENT)
    assert torn == 1 and result.dropped == Counter({"invalid_line": 1})
    (trace,) = result.traces
    assert trace.id == "cc-main-1-agent-a7f3c2d"
    assert trace.header["parentSessionId"] == "cc-main-1"
    assert trace.header["parentToolCallId"] == "toolu_task_1"
    assert trace.header["name"] == "Find where the test currency is configured"
    assert [m["role"] for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
    _valid(trace, tmp_path)

    # Lines that do not say isSidechain / agentId: the subagents/agent-<id>.jsonl path does.
    bare = tmp_path / "cc-main-1" / "subagents" / CC_AGENT.name
    bare.parent.mkdir(parents=True)
    rows = [{k: v for k, v in o.items() if k not in ("isSidechain", "agentId")} for o in _rows(CC_AGENT)]
    bare.write_text("".join(json.dumps(o) + "\n" for o in rows))
    shutil.copy(CC_MAIN, tmp_path / CC_MAIN.name)
    (plain,) = convert(bare)
    assert plain.id == trace.id and plain.header["parentToolCallId"] == "toolu_task_1"
    assert plain.messages == trace.messages

    # Without the main file beside it, the call cannot be known; the session still can.
    alone = tmp_path / "x" / "subagents" / CC_AGENT.name
    alone.parent.mkdir(parents=True)
    shutil.copy(CC_AGENT, alone)
    header = convert(alone)[0].header
    assert header["parentSessionId"] == "cc-main-1" and "parentToolCallId" not in header


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


def test_cli_converts_the_subagents_folder_beside_a_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Given <id>.jsonl, the files in <id>/subagents/ are converted too, and the summary says how many were found."""
    out = tmp_path / "out"
    code, summary, err = _cli([str(CC_MAIN), "-o", str(out)], capsys)
    assert (code, err) == (0, "")
    assert sorted(p.name for p in out.iterdir()) == ["cc-main-1-agent-a7f3c2d.jsonl", "cc-main-1.jsonl"]
    assert summary.startswith(f"converted 2 of 2 files into 2 traces in {out}")
    assert "1 subagent file found" in summary
    assert "dropped: 2 agent_progress, 1 invalid_line, 1 orphan_tool_result, 1 progress" in summary
    for p in out.iterdir():
        assert [x for x in validate(p) if x.severity == "error"] == []


# -- 4. a wrong --from ----------------------------------------------------------------------


@pytest.mark.parametrize("wrong", ["codex", "hermes", "droid", "cursor"])
def test_wrong_from_is_a_failure(wrong: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--from of another agent on a Claude Code file: exit 1, "no messages found ... detected: claude-code"."""
    out = tmp_path / "out"
    code, summary, err = _cli(["--from", wrong, str(CC_AGENT), "-o", str(out)], capsys)
    assert code == 1
    assert err.strip() == f"ststrace convert: no messages found in {CC_AGENT} as {wrong}; detected: claude-code"
    assert summary.startswith("converted 0 of 1 file into 0 traces") and summary.endswith("; 1 failed")
    assert "from_" not in (err + summary).replace(str(tmp_path), "")
    with pytest.raises(ConvertError, match="no messages found"):
        convert_file(CC_AGENT, wrong)


def test_cli_never_says_from_underscore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every CLI message names the option --from, never the Python parameter from_."""
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": "world"}\n')
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    code, _, err = _cli([str(odd), str(garbage), "-o", str(tmp_path / "o")], capsys)
    assert code == 1 and err.count("\n") == 2
    assert "--from" in err and "from_" not in err.replace(str(tmp_path), "")
    with pytest.raises(ConvertError, match="from_="):  # the Python API says it the Python way
        detect(odd)


# -- 5. Hermes ------------------------------------------------------------------------------


def test_hermes_gateway_transcript(tmp_path: Path) -> None:
    """A session_meta line then chat lines: harness hermes, id from the file name, models per meta line."""
    rows = _rows(HERMES_GATEWAY)
    assert detect(HERMES_GATEWAY) == "hermes"
    result = convert_file(HERMES_GATEWAY)
    (trace,) = result.traces
    assert trace.header["harness"] == "hermes" and trace.id == HERMES_GATEWAY.stem
    assert trace.header["model"] == rows[0]["model"] and trace.header["source"] == "telegram"
    assert trace.header["tools"] == ["terminal", "web_search"]
    chat = [o for o in rows if o["role"] != "session_meta"]
    assert [m["role"] for m in trace.messages] == [o["role"] for o in chat]
    assert [m.get("model") for m in trace.messages if m["role"] == "assistant"] == [
        "anthropic/claude-sonnet-4",
        "anthropic/claude-sonnet-4",
        "openai/gpt-5-mini",
    ]
    call = trace.messages[1]
    assert call["reasoningContent"] == "Check with df." and call["toolCalls"][0]["id"] == "call_df"
    assert trace.messages[2]["toolCallId"] == "call_df"
    assert trace.messages[0]["timestamp"] == 1776540365000  # naive ISO read as UTC
    assert result.dropped == Counter()
    assert convert_file(HERMES_GATEWAY, "hermes").traces[0].messages == trace.messages
    _valid(trace, tmp_path)


def test_hermes_pretty_printed_export(tmp_path: Path) -> None:
    """An indented JSON export (one session, or a list of them) is read whole, not line by line."""
    src = WILD / "hermes_export.json"
    session = json.loads(src.read_text())
    assert detect(src) == "hermes"
    (trace,) = convert(src)
    assert trace.id == session["id"] and trace.header["name"] == session["title"]
    assert [m["role"] for m in trace.messages] == ["system"] + [m["role"] for m in session["messages"]]
    listed = tmp_path / "two.json"
    listed.write_text(json.dumps([session, {**session, "id": "second"}], indent=2))
    assert [t.id for t in convert(listed, "hermes")] == [session["id"], "second"]
    _valid(trace, tmp_path)


# -- 6. Droid ---------------------------------------------------------------------------------


def test_droid_message_model_and_compaction(tmp_path: Path) -> None:
    """Each assistant message keeps its own modelId (no sidecar needed); the compaction summary is a system message."""
    src = WILD / "droid_models.jsonl"
    rows = _rows(src)
    models = [o["message"]["modelId"] for o in rows if o.get("type") == "message" and o["message"]["role"] == "assistant"]
    summary = next(o["summaryText"] for o in rows if o.get("type") == "compaction_state")
    (trace,) = convert(src)
    assert [m["model"] for m in trace.messages if m["role"] == "assistant"] == models
    assert {"role": "system", "content": f"[compaction summary]\n{summary}", "timestamp": 1764684300000} in trace.messages
    # With a settings.json sidecar, the message's own model still wins.
    copy = tmp_path / "7d1e5c3b-2a4f-4b6d-8e9f-0a1b2c3d4e5f.jsonl"
    shutil.copy(src, copy)
    copy.with_suffix(".settings.json").write_text('{"model": "sidecar-model"}')
    (again,) = convert(copy)
    assert [m["model"] for m in again.messages if m["role"] == "assistant"] == models
    assert again.header["model"] == "sidecar-model"
    _valid(trace, tmp_path)


# -- 7. Codex early rollouts -----------------------------------------------------------------


def test_codex_early_rollout(tmp_path: Path) -> None:
    """A first line without instructions is still a Codex meta line: detected, id and cwd kept, also with --from."""
    src = WILD / "codex_early.jsonl"
    meta = _rows(src)[0]
    assert "instructions" not in meta
    assert detect(src) == "codex"
    for from_ in (None, "codex"):
        (trace,) = convert(src, from_)
        assert trace.id == meta["id"] and trace.header["cwd"] == meta["cwd"]
        assert [m["role"] for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
        assert trace.messages[1]["reasoningContent"] == "Use ls."
    _valid(trace, tmp_path)


# -- 10. re-running into the same folder ------------------------------------------------------


def test_rerun_skip_existing_and_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plain re-run fails; --skip-existing leaves outputs alone; --force replaces only ststrace-written files."""
    out = tmp_path / "out"
    src = WILD / "droid_models.jsonl"
    assert _cli([str(src), "-o", str(out)], capsys)[0] == 0
    target = out / "7d1e5c3b-2a4f-4b6d-8e9f-0a1b2c3d4e5f.jsonl"
    first = target.read_bytes()
    os.utime(target, (1, 1))

    code, summary, err = _cli([str(src), "-o", str(out)], capsys)
    assert code == 1 and "already exists; not overwritten (--skip-existing keeps it, --force replaces it)" in err

    code, summary, err = _cli(["--skip-existing", str(src), "-o", str(out)], capsys)
    assert (code, err) == (0, "")
    assert summary.startswith("converted 1 of 1 file into 0 traces") and "; 1 skipped (already converted)" in summary
    assert target.stat().st_mtime == 1

    code, summary, err = _cli(["--force", str(src), "-o", str(out)], capsys)
    assert (code, err) == (0, "") and "; 1 replaced" in summary
    assert target.read_bytes() == first and target.stat().st_mtime != 1
    assert sorted(p.name for p in out.iterdir()) == [target.name]  # no temp file left behind

    # A file ststrace did not write is never replaced, and never taken for "already converted".
    target.write_text("my notes\n")
    for flag in ("--force", "--skip-existing"):
        code, summary, err = _cli([flag, str(src), "-o", str(out)], capsys)
        assert code == 1 and "not overwritten" in err, flag
        assert target.read_text() == "my notes\n"


def test_skip_existing_refuses_another_session_with_the_same_file_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--skip-existing skips only an output holding the same session id."""
    out = tmp_path / "out"
    out.mkdir()
    other = Trace(header={"type": "session", "harness": "x", "id": "7d1e5c3b/2a4f-4b6d-8e9f-0a1b2c3d4e5f"}, messages=[{"role": "user", "content": "hi"}])
    write_trace(other, out / "7d1e5c3b_2a4f-4b6d-8e9f-0a1b2c3d4e5f.jsonl")
    src = tmp_path / "7d1e5c3b_2a4f-4b6d-8e9f-0a1b2c3d4e5f.jsonl"
    src.write_text((WILD / "droid_models.jsonl").read_text().replace("7d1e5c3b-2a4f", "7d1e5c3b_2a4f"))
    code, _, err = _cli(["--skip-existing", str(src), "-o", str(out)], capsys)
    assert code == 1 and "holds another session" in err


# -- redaction (issue 13, item 10) -------------------------------------------------------------


def _secret_chat(tmp_path: Path) -> Path:
    rows = [
        {"role": "user", "content": f"deploy with token {GITHUB}"},
        {"role": "assistant", "content": "", "model": "m", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": json.dumps({"cmd": f"export OPENAI_API_KEY={OPENAI}"})}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": f"OPENAI_API_KEY={OPENAI}\nHOME=/home/dev"},
        {"role": "assistant", "content": "done", "model": "m"},
    ]
    src = tmp_path / "secret-chat.json"
    src.write_text(json.dumps({"id": "secret-chat", "title": f"token {GITHUB}", "messages": rows}))
    return src


def test_convert_redacts_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Secrets in content, tool arguments, tool output and the title are redacted and counted; --no-redact keeps them."""
    src = _secret_chat(tmp_path)
    result = convert_file(src)
    text = json.dumps([result.traces[0].header, result.traces[0].messages])
    assert GITHUB not in text and OPENAI not in text
    assert "[REDACTED:github_token]" in text and "[REDACTED:openai_key]" in text
    assert result.redactions == {"github_token": 2, "openai_key": 2}
    json.loads(result.traces[0].messages[1]["toolCalls"][0]["function"]["arguments"])  # still JSON

    out = tmp_path / "out"
    code, summary, _ = _cli([str(src), "-o", str(out)], capsys)
    assert code == 0 and "; redacted: 2 github_token, 2 openai_key" in summary
    written = (out / "secret-chat.jsonl").read_text()
    assert GITHUB not in written and OPENAI not in written
    _ = [x for x in validate(out / "secret-chat.jsonl") if x.severity == "error"] == []

    kept = tmp_path / "kept"
    code, summary, _ = _cli(["--no-redact", str(src), "-o", str(kept)], capsys)
    assert code == 0 and summary.endswith("; redaction off")
    assert GITHUB in (kept / "secret-chat.jsonl").read_text()
    assert convert_file(src, redact=False).redactions == {}


def test_convert_honours_stsstrace_redact_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """STSTRACE_REDACT=0 turns the default redaction off, as for Session."""
    monkeypatch.setenv("STSTRACE_REDACT", "0")
    src = _secret_chat(tmp_path)
    assert GITHUB in json.dumps(convert(src)[0].messages)


# -- bad input (issue 13, item 19) ----------------------------------------------------------


def test_json_dump_array_of_messages_is_openai(tmp_path: Path) -> None:
    """A one-line JSON array of messages (json.dump's output) is detected and converted as OpenAI messages."""
    rows = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a1", "type": "function", "function": {"name": "add", "arguments": '{"a":2,"b":3}'}}]},
        {"role": "tool", "tool_call_id": "a1", "content": "5"},
        {"role": "assistant", "content": "5"},
    ]
    src = tmp_path / "chat.jsonl"
    with open(src, "w") as f:
        json.dump(rows, f)
    assert "\n" not in src.read_text()
    assert detect(src) == "openai"
    (trace,) = convert(src)
    assert [m["role"] for m in trace.messages] == [r["role"] for r in rows]
    assert trace.messages[3]["toolCallId"] == "a1"
    _valid(trace, tmp_path)


def test_type_confused_input_is_counted_not_fatal(tmp_path: Path) -> None:
    """A block type that is a list, "tool_calls": 5, a list role: converted, the odd parts counted."""
    rows = [
        {"role": "user", "content": [{"type": ["text"], "text": "hello"}, {"type": 7, "image_url": "x"}]},
        {"role": "assistant", "content": "hi", "tool_calls": 5},
        {"role": ["assistant"], "content": "?"},
        {"role": "assistant", "content": "ok", "tool_calls": [5, {"id": [], "function": {"name": {}, "arguments": 3}}]},
    ]
    src = tmp_path / "confused.json"
    src.write_text(json.dumps(rows))
    result = convert_file(src)
    (trace,) = result.traces
    assert trace.messages[0]["content"].startswith("hello\n")
    assert result.dropped["invalid_tool_calls"] == 1 and result.dropped["invalid_tool_call"] == 1
    assert result.dropped["block:untyped"] == 1 and result.dropped["message:['assistant']"] == 1
    assert trace.messages[2]["toolCalls"][0]["function"] == {"name": "unknown", "arguments": "3"}
    _valid(trace, tmp_path)


@pytest.mark.allow_internal_errors
def test_cli_reports_an_unforeseen_error_with_the_file_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A converter bug (here: a TypeError planted in the Droid converter) is one line naming the file; the batch continues."""
    from ststrace import _convert

    def broken(path: Path, **kwargs: Any) -> Any:
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setitem(_convert.FORMATS, "droid", broken)
    out = tmp_path / "out"
    src = WILD / "droid_models.jsonl"
    code, summary, err = _cli([str(src), str(WILD / "codex_early.jsonl"), "-o", str(out)], capsys)
    assert code == 1
    assert err.strip() == f"ststrace convert: {src}: internal error: TypeError: unhashable type: 'list' (STSTRACE_DEBUG=1 shows the traceback)"
    assert summary.startswith("converted 1 of 2 files into 1 trace") and summary.endswith("; 1 failed")
    assert [p.name for p in out.iterdir()] == ["4f6e2b1a-0c9d-4e8f-a7b6-5c4d3e2f1a0b.jsonl"]
