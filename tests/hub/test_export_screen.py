"""``export`` scans the strings of each session once (collected as its row is
built) and guards only the messages that scan flags (issue 32). A message left
unflagged must be one the guard would leave as it is, whatever field holds
the secret and whatever comes before and after it: checked here on every
detector sample of tests/redact/ (so detectors added there are covered), on
literals with JSON escapes in them, on data URLs and on the cap, and against
the guard on every message of random sessions."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import orjson
import pytest
from test_redact import NEGATIVES, POSITIVES
from test_redact_breadth import BREADTH

from ststrace import Redactor
from ststrace._convert import guard_trace
from ststrace._export import _guarded_row, _load, _row, _screen, _Texts, trace_row
from ststrace._guard import MessageGuard
from ststrace._reader import Trace, read

HEADER = b'{"type":"session","harness":"h","id":"s"}'
FILLER = {"role": "user", "content": "nothing to see here, just words", "timestamp": 1}


def _messages(text: str) -> Iterator[dict[str, Any]]:
    """*text* in each field the guard looks at."""
    yield {"role": "user", "content": text, "timestamp": 1}
    yield {"role": "assistant", "content": "", "reasoningContent": text, "model": "m", "timestamp": 1}
    args = orjson.dumps({"q": text}).decode()
    yield {"role": "assistant", "content": "", "toolCalls": [{"id": "c1", "function": {"name": "f", "arguments": args}}]}
    yield {"role": "assistant", "content": "", "toolCalls": [{"id": "c1", "function": {"name": "f", "arguments": text}}]}
    yield {"role": "assistant", "content": "", "toolCalls": [{"id": text, "function": {"name": text, "arguments": "{}"}}]}
    yield {"role": "assistant", "content": "ok", "model": text, "timestamp": 1}
    yield {"role": "tool", "content": "ok", "toolCallId": text, "timestamp": 1}
    yield {"role": "user", "content": "ok", "extra": {"k": [text, 1]}, "timestamp": 1}
    yield {"role": "user", "content": "ok", "extra": {text: 1}, "timestamp": 1}
    lines = text.split("\n")
    if len(lines) > 1:
        yield {"role": "user", "content": "ok", "extra": lines, "timestamp": 1}  # a key given as its lines


def _flagged(guard: MessageGuard, message: dict[str, Any]) -> set[int] | None:
    """The messages :func:`_screen` flags in a session of *message* between clean ones."""
    trace = Trace({"type": "session", "harness": "h", "id": "s"}, [dict(FILLER), message, dict(FILLER)])
    texts = _Texts(guard)
    _row(trace, "sft", Counter(), texts)
    hits = _screen(guard, texts)
    return None if hits is None else hits | texts.suspects | texts.pending.keys()


def _check(guard: MessageGuard, samples: list[str]) -> int:
    changed = 0
    for text in samples:
        for msg in _messages(text):
            if guard.message(msg) == msg:
                continue
            changed += 1
            flagged = _flagged(guard, msg)
            assert flagged is not None and 1 in flagged, msg
    return changed


SAMPLES = [t.format(s) for _, s, t in POSITIVES + BREADTH]


@pytest.mark.parametrize("around", [("", ""), ("x\n", "\\"), ('"', "\n"), ("\\", '"'), ("é ", " end"), ("token: ", " ok"), ("a b c d e f g h i j k l m n o p q r s t u v w x y z ", "\n\n-----END")])
def test_every_secret_the_guard_redacts_flags_its_line(around: tuple[str, str]) -> None:
    """Every detector sample, in every field, however escaped: its line is flagged."""
    before, after = around
    changed = _check(MessageGuard(Redactor(env=False)), [before + text + after for text in SAMPLES])
    assert changed >= len(SAMPLES) * 8  # the guard does change them (else this test proves nothing)


def test_literals_with_json_escapes_are_flagged() -> None:
    """A literal holding a quote, a backslash or non-ASCII is found in the escaped line."""
    literals = ['hunter2"pass\\word', "p\u00e4ss/w\u00f6rd-long", "plainlettersonly"]
    guard = MessageGuard(Redactor(env=False, builtin=False, literals=literals))
    assert guard.redactor is not None and guard.redactor.escapes_matter
    assert _check(guard, [f"the key is {lit}." for lit in literals]) >= 3 * 8


def test_data_urls_and_the_cap_are_flagged() -> None:
    """Media placeholders and the cap are the guard's too: data URLs (even escaped) and long fields."""
    url = "data:image/png;base64," + "iVBORw0KGgo" * 4
    guard = MessageGuard(None, max_field_chars=200)
    assert _check(guard, [f"see {url}", "a" * 201]) > 0
    assert _flagged(guard, {"role": "user", "content": "a" * 150, "timestamp": 1}) == set()


def test_clean_sessions_flag_nothing() -> None:
    """The point of the scan: ordinary text leaves every message to the row alone."""
    guard = MessageGuard(Redactor(env=False))
    assert guard.redactor is not None
    for text in NEGATIVES:
        if not guard.redactor.find(text):
            assert _flagged(guard, {"role": "user", "content": text, "timestamp": 1}) == set()


def test_export_guards_as_convert_does(tmp_path: Path) -> None:
    """Random sessions with secrets sprinkled in: the traces export reads, and their
    rows, equal reading every message through the guard (convert's ``guard_trace``)."""
    rng = random.Random(32)
    words = ["the", "build", "failed", "src/app.py", "x = 1;", "--flag", "user@example.com", "é", '"q"', "\\", "\n"]
    secrets = [t.format(s) for _, s, t in POSITIVES]
    redacted = 0
    for i in range(60):
        lines = [HEADER]
        for j in range(rng.randint(1, 12)):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
            if rng.random() < 0.15:
                text += " " + rng.choice(secrets)
            msg = next(m for k, m in enumerate(_messages(text)) if k == j % 9)
            msg.setdefault("role", "assistant")
            if msg["role"] == "tool":
                msg["toolCallId"] = "c1"
            encode = rng.choice([orjson.dumps, lambda o: json.dumps(o).encode(), lambda o: json.dumps(o).replace("/", "\\/").encode()])
            lines.append(encode({"type": "message", "message": msg}))
        path = tmp_path / f"{i}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        guard = MessageGuard(Redactor(env=False))
        (trace,), _, _, screen = _load(path, None, True, guard)
        assert screen
        row = _guarded_row(guard, trace, "sft", Counter(), screen)[0]
        expected = read(path)
        other = MessageGuard(Redactor(env=False))
        guard_trace(other, expected)
        assert (trace.header, trace.messages) == (expected.header, expected.messages)
        assert guard.counts == other.counts
        assert orjson.dumps(row) == orjson.dumps(trace_row(expected, "sft", Counter()))
        redacted += sum(other.counts.values())
    assert redacted > 10  # secrets were found and redacted on both sides


def test_clean_extra_fields_are_judged_once_per_guard() -> None:
    """Tool schemas the guard left alone are not flagged again; extra fields with a
    secret always are (never remembered as clean); a new redactor starts afresh."""
    guard = MessageGuard(Redactor(env=False))
    # A backslash makes the screen look (an escape may hide a secret); no secret here.
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read C:\\work", "parameters": {}}}]
    secret = POSITIVES[0][2].format(POSITIVES[0][1])
    system = {"role": "system", "content": "You are an agent.", "tools": tools, "timestamp": 1}
    leaky = {"role": "user", "content": "ok", "meta": {"note": secret}, "timestamp": 1}

    def run() -> tuple[set[int], list[dict[str, Any]]]:
        trace = Trace({"type": "session", "harness": "h", "id": "s"}, [dict(system), dict(leaky)])
        texts = _Texts(guard)
        _row(trace, "sft", Counter(), texts)
        flagged = set(texts.pending)
        _guarded_row(guard, trace, "sft", Counter(), True)
        return flagged, trace.messages

    flagged, messages = run()
    assert flagged == {0, 1}  # the guard's screen looks at both (the backslash; the secret)
    assert messages[0] == system and secret not in orjson.dumps(messages[1]).decode()
    flagged, messages = run()
    assert flagged == {1}  # the schemas were clean; the secret is judged again, and redacted
    assert secret not in orjson.dumps(messages[1]).decode()
    assert guard.counts[POSITIVES[0][0]] == 2
    guard._use(Redactor(env=False, literals=["You are an agent."]))  # as when an environment secret appears
    flagged, messages = run()
    assert flagged == {0, 1}
