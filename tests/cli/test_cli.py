"""The ``ststrace`` command line: validate, view, stats, cat, tail and their errors.

Trace files are written by hand (JSONL per STS-FORMAT.md), so these tests do not
depend on the Session writer. Most run ``main()`` in-process; the ones about
processes, terminals and pipes run ``python -m ststrace`` for real.
"""

from __future__ import annotations

import json
import os
import pty
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ststrace.cli import COMMANDS, main
from ststrace import validate
from ststrace import Session
from test_convert import CLINE, HERE, OPENCODE, WILD, _CLINE_RESULT, _json_lines, _llama, _source_cline, _source_gemini, _source_opencode

T0 = 1_767_268_800_000  # 2026-01-01T12:00:00Z


def write_trace(
    path: Path,
    messages: list[dict[str, Any]],
    header: dict[str, Any] | None = None,
    *,
    tail: bytes = b"",
) -> Path:
    hdr = header if header is not None else {"type": "session", "harness": "test-agent", "id": "s1", "name": "Test run"}
    with open(path, "wb") as f:
        f.write(json.dumps(hdr).encode() + b"\n")
        for m in messages:
            f.write(json.dumps({"type": "message", "message": m}).encode() + b"\n")
        f.write(tail)
    return path


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Be brief.", "timestamp": T0},
        {"role": "user", "content": "weather in Paris? book a table", "timestamp": T0 + 1000},
        {
            "role": "assistant",
            "content": "",
            "reasoningContent": "call both tools",
            "model": "model-a",
            "timestamp": T0 + 2000,
            "toolCalls": [
                {"id": "c1", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
                {"id": "c2", "function": {"name": "book_table", "arguments": '{"people": 2}'}},
                {"id": "c3", "function": {"name": "never_answered", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "toolCallId": "c1", "content": "18C cloudy", "timestamp": T0 + 2500},
        {"role": "tool", "toolCallId": "c2", "content": "Error: fully booked", "timestamp": T0 + 4000},
        {"role": "assistant", "content": "18C; no table.", "model": "model-b", "timestamp": T0 + 9000},
    ]


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "good.jsonl", conversation())


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ststrace", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


# ---- validate -----------------------------------------------------------------


def test_validate_good_file_exits_0(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A valid trace: exit 0; the only problem line is the unanswered-call warning."""
    assert main(["validate", str(good)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{good}:4: warning: unanswered-tool-call: tool call 'c3' has no result"]


def test_validate_clean_file_says_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file without any problem gets one `FILE: ok` line."""
    msgs = [m for m in conversation() if m.get("role") != "assistant" or "toolCalls" not in m]
    msgs = [m for m in msgs if m["role"] != "tool"]
    path = write_trace(tmp_path / "clean.jsonl", msgs)
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok\n"


def test_validate_bad_file_prints_problem_lines_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Errors are printed as `file:line: severity: code: message` and give exit 1."""
    path = write_trace(
        tmp_path / "bad.jsonl",
        [{"role": "user", "content": "hi"}, {"role": "tool", "toolCallId": "nope", "content": "x"}],
        tail=b"{not json}\n",
    )
    assert main(["validate", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"{path}:3: error: orphan-tool-result: toolCallId 'nope' answers no earlier tool call" in lines
    assert any(line.startswith(f"{path}:4: error: invalid-json: ") for line in lines)
    for line in lines:
        where, severity, code, _ = line.split(": ", 3)
        assert where.startswith(f"{path}:") and severity in ("error", "warning") and code


def test_validate_json_document(good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints one document with per-file results; a missing file is an error entry."""
    missing = tmp_path / "missing.jsonl"
    assert main(["validate", "--json", str(good), str(missing)]) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["ok"] is False
    first, second = doc["files"]
    assert first["path"] == str(good) and first["ok"] is True
    assert first["errors"] == 0 and first["warnings"] == 1
    assert first["problems"] == [
        {"line": 4, "code": "unanswered-tool-call", "message": "tool call 'c3' has no result", "severity": "warning"}
    ]
    assert second["path"] == str(missing) and second["ok"] is False and second["problems"][0]["code"] == "unreadable"
    assert str(missing) in captured.err


def test_validate_json_ok_when_only_warnings(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--json", str(good)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_validate_continues_after_a_missing_file(good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One unreadable file does not stop the others from being checked."""
    assert main(["validate", str(tmp_path / "nope.jsonl"), str(good)]) == 1
    captured = capsys.readouterr()
    assert f"{good}:4: warning: unanswered-tool-call" in captured.out
    assert captured.err.strip() == f"ststrace validate: {tmp_path / 'nope.jsonl'}: no such file"


def test_python_dash_m_validate(good: Path, tmp_path: Path) -> None:
    """`python -m ststrace validate` works as a real process, with the same exit codes."""
    ok = run_cli("validate", str(good))
    assert ok.returncode == 0, ok.stderr
    assert "unanswered-tool-call" in ok.stdout
    bad = write_trace(tmp_path / "bad.jsonl", [{"role": "wizard", "content": "x"}])
    res = run_cli("validate", str(bad))
    assert res.returncode == 1
    assert f"{bad}:2: error: unknown-role:" in res.stdout
    usage = run_cli("validate")
    assert usage.returncode == 2
    assert "usage:" in usage.stderr and "Traceback" not in usage.stderr


# ---- usage ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["validate"],
        ["view"],
        ["stats"],
        ["cat"],
        ["tail"],
        ["tail", "x.jsonl", "-n", "-1"],
        ["tail", "x.jsonl", "--interval", "0"],
        ["tail", "x.jsonl", "--timeout", "soon"],
        ["validate", "--bogus", "x.jsonl"],
    ],
)
def test_bad_usage_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage:" in err or "error:" in err
    assert "Traceback" not in err


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for cmd in COMMANDS:
        assert cmd.name in out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("ststrace ")


# ---- errors common to every command -----------------------------------------

# Each command with the extra arguments it needs to terminate on its own.
ALL_COMMANDS = [
    ["validate"],
    ["view"],
    ["stats"],
    ["cat"],
    ["tail", "--timeout", "0.3", "--interval", "0.05"],
]


def _make_bad(kind: str, tmp_path: Path) -> tuple[Path, str | None]:
    """Returns (path, expected "file:line" or None when no line applies)."""
    if kind == "missing":
        return tmp_path / "missing.jsonl", None
    if kind == "directory":
        d = tmp_path / "adir.jsonl"
        d.mkdir()
        return d, None
    if kind == "not-a-trace":
        p = tmp_path / "notes.jsonl"
        p.write_text("just some notes\nnot json at all\n")
        return p, f"{p}:1"
    if kind == "binary":
        p = tmp_path / "blob.jsonl"
        p.write_bytes(bytes(range(256)) * 4)
        return p, f"{p}:1"
    if kind == "json-but-not-sts":
        p = tmp_path / "other.jsonl"
        p.write_text('{"event": "start"}\n{"event": "stop"}\n')
        return p, f"{p}:1"
    if kind == "damaged":
        p = write_trace(tmp_path / "damaged.jsonl", [{"role": "user", "content": "hi"}], tail=b'{"type": "message", "mess\n')
        with open(p, "ab") as f:
            f.write(json.dumps({"type": "message", "message": {"role": "user", "content": "after"}}).encode() + b"\n")
        return p, f"{p}:3"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["missing", "directory", "not-a-trace", "binary", "json-but-not-sts", "damaged"])
@pytest.mark.parametrize("cmd", ALL_COMMANDS, ids=lambda c: c[0])
def test_unusable_input_gives_one_line_error_and_exit_1(
    cmd: list[str], kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Missing file, directory, non-trace or damaged trace: one line naming the file (and line), exit 1."""
    path, where = _make_bad(kind, tmp_path)
    assert main([*cmd, str(path)]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    if cmd[0] == "validate" and kind not in ("missing", "directory"):
        # validate reports a readable-but-wrong file on stdout: a file that is
        # no trace at all in one line, a damaged trace as problem lines.
        assert where is not None
        out = captured.out.splitlines()
        if kind in ("not-a-trace", "binary", "json-but-not-sts"):
            assert out == [line for line in out if line.startswith(f"{path}: not an STS trace (line 1: ")] and len(out) == 1, out
        else:
            assert any(line.startswith(where + ": error: ") for line in out)
        return
    err_lines = captured.err.strip().splitlines()
    assert len(err_lines) == 1, captured.err
    assert err_lines[0].startswith(f"ststrace {cmd[0]}: {where or path}")
    if cmd[0] == "view" and kind != "directory":
        assert not path.with_suffix(".html").exists()


def test_errors_in_a_real_process_have_no_traceback(tmp_path: Path) -> None:
    path, where = _make_bad("damaged", tmp_path)
    for cmd in ALL_COMMANDS[1:]:
        res = run_cli(*cmd, str(path))
        assert res.returncode == 1
        assert res.stderr.startswith(f"ststrace {cmd[0]}: {where}: ")
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


# ---- view ---------------------------------------------------------------------


def test_view_writes_html_next_to_the_trace(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Default output: FILE with .html, path printed, same permissions as the trace."""
    good.chmod(0o600)
    assert main(["view", str(good)]) == 0
    out = good.with_suffix(".html")
    assert capsys.readouterr().out.strip() == str(out)
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert '<meta name="generator" content="ststrace">' in page
    assert "get_weather" in page and "Error: fully booked" in page
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    # no temp files left behind
    assert sorted(p.name for p in good.parent.iterdir()) == ["good.html", "good.jsonl"]


def test_view_replaces_its_own_page_but_not_a_foreign_file(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = good.with_suffix(".html")
    out.write_text("<html>my own notes</html>")
    assert main(["view", str(good)]) == 1
    err = capsys.readouterr().err
    assert f"{out}: exists and was not written by ststrace" in err
    assert out.read_text() == "<html>my own notes</html>"

    assert main(["view", str(good), "--force"]) == 0
    first = out.read_text()
    assert "get_weather" in first
    # A page ststrace wrote earlier is simply regenerated.
    write_trace(good, conversation() + [{"role": "user", "content": "one more thing"}])
    assert main(["view", str(good)]) == 0
    assert "one more thing" in out.read_text()


def test_view_output_option_overwrites_the_named_file(good: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    assert main(["view", str(good), "-o", str(target)]) == 0
    assert "get_weather" in target.read_text()


def test_view_never_overwrites_the_trace_itself(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = good.read_bytes()
    assert main(["view", str(good), "-o", str(good), "--force"]) == 1
    assert "is the trace itself" in capsys.readouterr().err
    assert good.read_bytes() == before
    html_named = good.parent / "trace.html"
    html_named.write_bytes(before)
    assert main(["view", str(html_named), "--force"]) == 1
    assert html_named.read_bytes() == before


def test_view_to_stdout(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(good), "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!DOCTYPE html>") and "book_table" in out
    assert not good.with_suffix(".html").exists()


def test_view_output_in_missing_directory(good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(good), "-o", str(tmp_path / "no" / "such" / "x.html")]) == 1
    assert "no such directory" in capsys.readouterr().err


def test_view_skips_a_torn_last_line_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A crashed run's torn tail is skipped (warning); --strict refuses it with file:line."""
    path = write_trace(tmp_path / "crashed.jsonl", conversation(), tail=b'{"type":"message","message":{"role":"us')
    assert main(["view", str(path)]) == 0
    captured = capsys.readouterr()
    assert f"{path}:8" in captured.err and "torn" in captured.err
    assert "18C; no table." in path.with_suffix(".html").read_text()

    path.with_suffix(".html").unlink()
    assert main(["view", "--strict", str(path)]) == 1
    assert capsys.readouterr().err.startswith(f"ststrace view: {path}:8: ")
    assert not path.with_suffix(".html").exists()


def test_view_open_starts_the_browser_from_BROWSER(good: Path, tmp_path: Path) -> None:
    """--open hands the page's file:// URL to the user's browser ($BROWSER here)."""
    log = tmp_path / "opened.txt"
    fake = tmp_path / "fake-browser"
    # Written whole, then renamed: the test sees no file or the whole URL.
    fake.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {log}.tmp && mv {log}.tmp {log}\n')
    fake.chmod(0o755)
    res = run_cli("view", str(good), "--open", env={"BROWSER": str(fake)})
    assert res.returncode == 0, res.stderr
    deadline = time.monotonic() + 120  # the browser is started in the background
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.read_text() == good.with_suffix(".html").resolve().as_uri()


# ---- stats --------------------------------------------------------------------


def test_stats_json_counts(good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = write_trace(
        tmp_path / "other.jsonl",
        [
            {"role": "user", "content": "x", "timestamp": T0},
            {"role": "tool", "toolCallId": "ghost", "content": "Error: who called me"},
            {"role": "assistant", "content": "y", "model": "model-a", "timestamp": T0 + 500},
        ],
    )
    assert main(["stats", "--json", str(good), str(other)]) == 0
    doc = json.loads(capsys.readouterr().out)
    a, b = doc["files"]
    assert a["path"] == str(good)
    assert a["messages"] == 6
    assert a["roles"] == {"user": 1, "assistant": 2, "system": 1, "tool": 2}
    assert a["tool_calls"] == 3 and a["tool_results"] == 2
    assert a["unanswered_calls"] == 1 and a["unpaired_results"] == 0
    assert a["errors"] == 1
    assert a["models"] == {"model-a": 1, "model-b": 1}
    assert a["duration_ms"] == 9000 and a["first_timestamp"] == T0
    assert a["bytes"] == good.stat().st_size
    assert b["unpaired_results"] == 1 and b["errors"] == 1 and b["duration_ms"] == 500
    t = doc["total"]
    assert t["files"] == 2 and t["messages"] == 9
    assert t["models"] == {"model-a": 2, "model-b": 1}
    assert t["errors"] == 2 and t["duration_ms"] == 9500
    assert t["bytes"] == good.stat().st_size + other.stat().st_size


def test_stats_text(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(good)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == str(good)
    assert "user 1, assistant 2, system 1, tool 2" in out
    assert "unanswered calls  1" in out
    assert "9.00 s" in out
    assert "model-a (1), model-b (1)" in out
    assert "total" not in out  # one file: no total block


def test_stats_reports_good_files_even_when_one_is_bad(good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad, where = _make_bad("damaged", tmp_path)
    assert main(["stats", str(good), str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith(str(good))
    assert captured.err.startswith(f"ststrace stats: {where}: ")


# ---- cat ----------------------------------------------------------------------


def test_cat_plain_transcript(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cat", str(good)]) == 0
    out = capsys.readouterr().out
    assert "\033[" not in out  # not a TTY: no colour
    assert out.startswith("# Test run\n")
    # Messages in file order, tool results named after their call.
    order = [out.index(s) for s in ("SYSTEM", "Be brief.", "USER", "ASSISTANT · model-a", "│ call both tools",
                                    "→ get_weather (c1)", '"city": "Paris"', "TOOL · get_weather (c1)",
                                    "18C cloudy", "TOOL · book_table (c2) · ERROR", "Error: fully booked",
                                    "ASSISTANT · model-b", "18C; no table.")]
    assert order == sorted(order)
    assert "took 500 ms" in out and "+5.00 s" in out


def test_cat_escapes_terminal_control_sequences(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Escape sequences in a trace are shown, not sent to the terminal."""
    path = write_trace(tmp_path / "esc.jsonl", [{"role": "user", "content": "red\x1b[31m bell\x07 cr\roops\r\nok"}])
    assert main(["cat", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "red\\x1b[31m bell\\x07 cr\\x0doops\n  ok" in out


def _run_in_pty(args: list[str], env: dict[str, str] | None = None) -> str:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ststrace", *args],
        stdout=slave,
        stderr=subprocess.PIPE,
        env={**{k: v for k, v in os.environ.items() if k != "NO_COLOR"}, **(env or {})},
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=30)
    os.close(master)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode("utf-8", "replace")


def test_cat_colours_only_on_a_tty(good: Path) -> None:
    coloured = _run_in_pty(["cat", str(good)])
    assert "\033[1;34mUSER\033[0m" in coloured
    assert "\033[1;31mERROR\033[0m" in coloured
    assert "\033[" not in _run_in_pty(["cat", "--no-color", str(good)])
    assert "\033[" not in _run_in_pty(["cat", str(good)], env={"NO_COLOR": "1"})


def test_cat_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`ststrace cat big.jsonl | head -1`: no traceback when the reader goes away."""
    path = write_trace(tmp_path / "big.jsonl", [{"role": "user", "content": f"message {i}"} for i in range(20000)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "ststrace", "cat", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"# Test run\n"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=30)
    assert err == ""
    assert proc.returncode == 1


def test_cat_unencodable_output_does_not_crash(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "u.jsonl", [{"role": "user", "content": "snowman \u2603 and emoji \U0001f600"}])
    res = run_cli("cat", str(path), env={"PYTHONIOENCODING": "ascii"})
    assert res.returncode == 0, res.stderr
    assert "snowman \\u2603 and emoji \\U0001f600" in res.stdout


# ---- tail ---------------------------------------------------------------------


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)
        f.flush()


def _line(msg: dict[str, Any]) -> bytes:
    return json.dumps({"type": "message", "message": msg}).encode() + b"\n"


def test_tail_follows_a_growing_file_with_a_half_written_line(tmp_path: Path) -> None:
    """A real `ststrace tail` prints messages as they are appended; half a line waits for its newline."""
    path = write_trace(tmp_path / "live.jsonl", [{"role": "user", "content": "old message"}])
    proc = subprocess.Popen(
        [sys.executable, "-m", "ststrace", "tail", str(path), "-n", "0", "--interval", "0.05",
         "--max-messages", "3", "--timeout", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        # The header is printed at once, before any new message arrives.
        assert [proc.stdout.readline() for _ in range(3)] == ["# Test run\n", "  harness test-agent · id s1\n", "\n"]
        _append(path, _line({"role": "user", "content": "first new"}))
        lines = [proc.stdout.readline() for _ in range(3)]
        assert lines == ["USER\n", "  first new\n", "\n"]
        whole = _line(
            {"role": "assistant", "content": "", "toolCalls": [{"id": "k", "function": {"name": "probe", "arguments": "{}"}}]}
        )
        _append(path, whole[:25])  # the writer is mid-line
        time.sleep(0.4)  # several polls see only the half line
        _append(path, whole[25:])
        _append(path, _line({"role": "tool", "toolCallId": "k", "content": "Error: probe failed"}))
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert err == ""
    assert out == "ASSISTANT\n  → probe (k)\n      {}\n\nTOOL · probe (k) · ERROR\n  Error: probe failed\n\n"
    assert "old message" not in out


def test_tail_shows_the_last_n_then_stops_at_timeout(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-n 2 shows only the last two messages; an earlier call still names its result."""
    start = time.monotonic()
    assert main(["tail", str(good), "-n", "2", "--timeout", "0.3", "--interval", "0.05"]) == 0
    assert time.monotonic() - start < 5
    out = capsys.readouterr().out
    assert out.startswith("# Test run\n")
    assert "TOOL · book_table (c2) · ERROR" in out
    assert "18C; no table." in out
    assert "18C cloudy" not in out and "USER" not in out


def test_tail_waits_for_the_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty file (the agent has not written yet) is not an error."""
    path = tmp_path / "empty.jsonl"
    path.touch()
    assert main(["tail", str(path), "--timeout", "0.2", "--interval", "0.05"]) == 0
    assert capsys.readouterr().out == ""


def test_follower_recovers_when_a_torn_tail_is_cut_off(tmp_path: Path) -> None:
    """Session(resume=True) truncates a torn last line and appends; tail keeps going."""
    from ststrace._cli.tail import Follower

    path = write_trace(tmp_path / "r.jsonl", [{"role": "user", "content": "a"}], tail=b'{"type":"message","mes')
    f = Follower(path)
    try:
        assert [m["content"] for m in f.poll()] == ["a"]
        assert f.header is not None and f.header["id"] == "s1"
        size_before_tail = path.stat().st_size - len(b'{"type":"message","mes')
        with open(path, "r+b") as fh:
            fh.truncate(size_before_tail)
        _append(path, _line({"role": "user", "content": "b"}))
        assert [m["content"] for m in f.poll()] == ["b"]
        with open(path, "r+b") as fh:
            fh.truncate(10)
        from ststrace import TraceFormatError

        with pytest.raises(TraceFormatError, match="truncated"):
            f.poll()
    finally:
        f.close()


def test_tail_stops_on_a_damaged_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "t.jsonl", [{"role": "user", "content": "a"}], tail=b"garbage\n")
    assert main(["tail", str(path), "--timeout", "5", "--interval", "0.05"]) == 1
    captured = capsys.readouterr()
    assert captured.out.endswith("USER\n  a\n\n")  # what came before the damage is shown
    assert captured.err.startswith(f"ststrace tail: {path}:3: not valid JSON")



# -- cat and tail print deeply nested values ---------------------------------------


def _nested(depth: int) -> str:
    """JSON text of a value *depth* objects deep (json.dumps itself recurses)."""
    return '{"k":' * depth + '"bottom"' + "}" * depth


def _deep_trace(path: Path) -> Path:
    deep = _nested(1000)
    call = {"id": "c1", "function": {"name": "f", "arguments": deep}}
    lines = [
        '{"type": "session", "harness": "h", "id": "deep", "config": ' + deep + "}",
        json.dumps({"type": "message", "message": {"role": "assistant", "content": "", "toolCalls": [call]}}),
        json.dumps({"type": "message", "message": {"role": "tool", "toolCallId": "c1", "content": "done"}}),
    ]
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["cat", "tail"])
def test_cat_and_tail_print_values_nested_1000_deep(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate accepts the file; cat and tail print it, the deep part cut visibly."""
    path = _deep_trace(tmp_path / "deep.jsonl")
    assert [p for p in validate(path) if p.severity == "error"] == []
    args = [command, str(path)] if command == "cat" else [command, str(path), "--timeout", "0.1"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "→ f" in out and "done" in out
    assert "nested deeper" in out
    assert "bottom" not in out  # below the cut
    assert out.count("nested deeper") == 2  # the header's value and the arguments



# -- every command that takes traces takes directories ------------------------------


def _two_traces(root: Path) -> list[Path]:
    out = []
    for n in range(2):
        with Session(root / "sub" / f"t{n}.jsonl") as s:
            s.user(f"q{n}")
            s.assistant(f"a{n}", model="m")
        out.append(s.path)
    return out


def test_validate_takes_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ststrace.cli import main

    paths = _two_traces(tmp_path / "traces")
    assert main(["validate", str(tmp_path / "traces")]) == 0
    assert capsys.readouterr().out == "".join(f"{p}: ok\n" for p in paths)
    (tmp_path / "empty").mkdir()
    assert main(["validate", str(tmp_path / "empty"), str(paths[0])]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"{paths[0]}: ok\n"
    assert captured.err == f"ststrace validate: {tmp_path / 'empty'}: is a directory with no trace files (*.jsonl)\n"


# -- tail on a finished trace ends ---------------------------------


def test_tail_on_a_finished_trace_ends_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from ststrace._cli import tail
    from ststrace.cli import main

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to tell that no process writes the file")
    monkeypatch.setattr(tail, "IDLE_SECONDS", 0.3)
    (path,) = _two_traces(tmp_path)[:1]
    start = time.monotonic()
    assert main(["tail", "--no-color", "--interval", "0.05", str(path)]) == 0
    assert time.monotonic() - start < 10
    captured = capsys.readouterr()
    assert "q0" in captured.out and "a0" in captured.out
    assert captured.err == f"ststrace tail: {path}: the session is closed (no process is writing it); stopping\n"


def test_tail_on_a_live_idle_session_says_it_waits_and_how_to_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ststrace._cli import tail
    from ststrace.cli import main

    monkeypatch.setattr(tail, "IDLE_SECONDS", 0.2)
    with Session(tmp_path / "live.jsonl") as s:
        s.user("hello")
        s.flush()
        assert main(["tail", "--no-color", "--interval", "0.05", "--timeout", "1", str(s.path)]) == 0
    captured = capsys.readouterr()
    assert "hello" in captured.out
    assert "ststrace tail: waiting for " in captured.err and "; Ctrl-C to stop\n" in captured.err
    assert "closed" not in captured.err
    assert captured.err.count("waiting") == 1  # said once, not on every check


SAMPLES = HERE / "fixtures" / "agent-traces"


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
