"""validate(): a good file is clean; one bad file per problem code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ststrace
from ststrace import Problem, Session, validate

H = '{"type":"session","harness":"h","id":"v1"}'


def m(body: str) -> str:
    return '{"type":"message","message":{%s}}' % body


USER = m('"role":"user","content":"q","timestamp":1700000000000')
CALL = m('"role":"assistant","content":"","model":"x","toolCalls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}]')
RESULT = m('"role":"tool","content":"r","toolCallId":"c1"')
ANSWER = m('"role":"assistant","content":"done","model":"x"')

GOOD = "\n".join([H, USER, CALL, RESULT, ANSWER]) + "\n"

# code -> (file text, line, severity)
CASES: dict[str, tuple[str, int, str]] = {
    "header-missing": ("\n".join([USER, ANSWER]) + "\n", 1, "error"),
    "header-invalid": ("\n".join(['{"type":"session","id":"x"}', USER, ANSWER]) + "\n", 1, "error"),
    "blank-line": ("\n".join([H, USER, "", ANSWER]) + "\n", 3, "warning"),
    "torn-line": ("\n".join([H, USER, ANSWER, m('"role":"user","cont')[:-2]]), 4, "error"),
    "invalid-json": ("\n".join([H, USER, "{oops", ANSWER]) + "\n", 3, "error"),
    "no-final-newline": ("\n".join([H, USER, ANSWER]), 3, "warning"),
    "not-object": ("\n".join([H, USER, "[1, 2]", ANSWER]) + "\n", 3, "error"),
    "not-sts": ("# a README\n\nprose\n", 1, "error"),
    "duplicate-header": ("\n".join([H, USER, H, ANSWER]) + "\n", 3, "error"),
    "envelope": ("\n".join([H, USER, '{"type":"msg","message":{"role":"user","content":""}}', ANSWER]) + "\n", 3, "error"),
    "unknown-role": ("\n".join([H, USER, m('"role":"robot","content":"beep"'), ANSWER]) + "\n", 3, "error"),
    "missing-content": ("\n".join([H, USER, m('"role":"assistant","model":"x"')]) + "\n", 3, "error"),
    "content-not-string": ("\n".join([H, USER, m('"role":"assistant","content":{"a":1}')]) + "\n", 3, "error"),
    "null-field": ("\n".join([H, USER, m('"role":"assistant","content":"","model":null')]) + "\n", 3, "warning"),
    "field-type": ("\n".join([H, USER, m('"role":"assistant","content":"","model":7')]) + "\n", 3, "error"),
    "bad-timestamp": ("\n".join([H, m('"role":"user","content":"q","timestamp":1.5'), ANSWER]) + "\n", 2, "error"),
    "tool-calls-malformed": (
        "\n".join([H, USER, m('"role":"assistant","content":"","toolCalls":[{"function":{"name":"f","arguments":"{}"}}]')]) + "\n",
        3,
        "error",
    ),
    "arguments-not-string": (
        "\n".join([H, USER, m('"role":"assistant","content":"","toolCalls":[{"id":"c1","function":{"name":"f","arguments":{}}}]'), RESULT])
        + "\n",
        3,
        "error",
    ),
    "arguments-not-json": (
        "\n".join([H, USER, m('"role":"assistant","content":"","toolCalls":[{"id":"c1","function":{"name":"f","arguments":"{x"}}]'), RESULT])
        + "\n",
        3,
        "warning",
    ),
    "usage-invalid": ("\n".join([H, USER, m('"role":"assistant","content":"","model":"x","usage":{"input":-1,"output":2}')]) + "\n", 3, "error"),
    "duplicate-tool-call-id": ("\n".join([H, USER, CALL, RESULT, CALL]) + "\n", 5, "error"),
    "missing-tool-call-id": ("\n".join([H, USER, CALL, m('"role":"tool","content":"r"')]) + "\n", 4, "error"),
    "orphan-tool-result": ("\n".join([H, USER, RESULT, ANSWER]) + "\n", 3, "error"),
    "duplicate-tool-result": ("\n".join([H, USER, CALL, RESULT, RESULT]) + "\n", 5, "error"),
    "unanswered-tool-call": ("\n".join([H, USER, CALL, ANSWER]) + "\n", 3, "warning"),
    "no-messages": (H + "\n", 1, "warning"),
    "outcome-invalid": ("\n".join([H, USER, ANSWER, '{"type":"outcome","outcome":{"reward":"high"}}']) + "\n", 4, "error"),
    "uniform-keys": ("\n".join([H, m('"role":"user","content":"a"'), m('"role":"assistant","content":"b"')]) + "\n", 1, "warning"),
}


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.jsonl"
    p.write_text(text, encoding="utf-8")
    return p


def test_every_code_in_the_validator_has_a_case() -> None:
    """Guards the table below: a new code in _reader.py needs a bad file here."""
    source = Path(ststrace._reader.__file__).read_text(encoding="utf-8")
    codes = set(re.findall(r'\b(?:err|warn)\(\s*\w+,\s*"([a-z][a-z-]+)"', source))
    assert len(codes) >= 24
    assert codes == set(CASES)


def test_good_file_has_no_problems(tmp_path: Path) -> None:
    assert validate(write(tmp_path, GOOD)) == []


def test_file_written_by_session_is_clean(tmp_path: Path) -> None:
    with Session(tmp_path) as s:
        s.system("sys")
        s.user("q")
        ids = s.assistant("", tool_calls=[{"name": "f", "arguments": {"a": 1}}], model="m")
        s.tool(ids[0], "r")
        s.assistant("done", model="m")
    assert validate(s.path) == []


@pytest.mark.parametrize("code", sorted(CASES))
def test_bad_file_reports_its_code(tmp_path: Path, code: str) -> None:
    text, line, severity = CASES[code]
    problems = validate(write(tmp_path, text))
    matching = [p for p in problems if p.code == code]
    assert matching, problems
    assert all(isinstance(p, Problem) for p in problems)
    assert (matching[0].line, matching[0].severity) == (line, severity)
    assert matching[0].message
    # Each bad file is bad for one reason (plus the harmless uniform-keys note
    # for files too short to vary their keys).
    others = {p.code for p in problems} - {code, "uniform-keys", "unanswered-tool-call"}
    assert others == set(), problems


def test_problems_are_sorted_by_line_and_print_nicely(tmp_path: Path) -> None:
    text = "\n".join([H, RESULT, "{bad", m('"role":"robot","content":"x"')]) + "\n"
    problems = validate(write(tmp_path, text))
    assert [p.line for p in problems] == sorted(p.line for p in problems)
    assert {p.code for p in problems} >= {"orphan-tool-result", "invalid-json", "unknown-role"}
    assert str(problems[0]).startswith("2: error: orphan-tool-result: ")


def test_empty_file(tmp_path: Path) -> None:
    assert [(p.line, p.code) for p in validate(write(tmp_path, ""))] == [(1, "header-missing")]


def test_torn_tail_left_by_a_crash_is_the_only_problem(tmp_path: Path) -> None:
    """A crash mid-write leaves exactly one torn-line error on the last line."""
    text = GOOD + ANSWER[:30]
    problems = validate(write(tmp_path, text))
    assert [(p.line, p.code) for p in problems] == [(6, "torn-line")]


def test_blank_first_line(tmp_path: Path) -> None:
    problems = validate(write(tmp_path, "\n" + GOOD))
    assert (1, "header-missing") in [(p.line, p.code) for p in problems]


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        validate(tmp_path)


def test_header_only_session_warns_and_exits_zero(tmp_path: Path) -> None:
    """A session that recorded nothing (its calls went unseen) is valid STS but
    suspicious: ``validate`` warns ``no-messages`` and still exits 0 (warnings
    never fail it); ``stats`` flags the file, alone and in the total."""
    import json
    import subprocess
    import sys

    with Session(tmp_path / "empty.jsonl") as s:
        pass
    good = write(tmp_path, GOOD)
    run = [sys.executable, "-m", "ststrace"]
    checked = subprocess.run([*run, "validate", str(s.path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    assert ":1: warning: no-messages: the session has a header and no messages" in checked.stdout + checked.stderr
    stats = subprocess.run([*run, "stats", str(s.path), str(good)], capture_output=True, text=True, timeout=60)
    assert stats.returncode == 0, stats.stderr
    assert "no messages (header only" in stats.stdout
    assert "no messages (1 file(s) with a header only" in stats.stdout
    as_json = subprocess.run([*run, "stats", "--json", str(s.path), str(good)], capture_output=True, text=True, timeout=60)
    report = json.loads(as_json.stdout)
    assert [f["header_only"] for f in report["files"]] == [1, 0] and report["total"]["header_only"] == 1
