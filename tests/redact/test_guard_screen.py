"""The guard's screens: the cheap test hot paths run before the guard itself.

``MessageGuard.screen(text)`` (for text and tool-call arguments alike)
must be True for every field the guard would change: a False lets the field
through unscanned. These tests check that on every positive sample of
tests/redact/test_redact.py (so detectors added there are covered), on literals, user
patterns, data URLs, caps and JSON escapes, and that the @tool and s.user()
paths that use the screens write what the full guard would.
"""

from __future__ import annotations

import random
import re
import string
from pathlib import Path

import orjson
import pytest
from test_redact import NEGATIVES, POSITIVES

from ststrace import Redactor, Session, tool
from ststrace._guard import MessageGuard, make_guard
from ststrace._redact import _GROUPS, GATES

_rng = random.Random(11)


def _guards() -> list[MessageGuard]:
    return [
        MessageGuard(Redactor(env=False)),
        MessageGuard(Redactor(env=False), max_field_chars=None),
        MessageGuard(Redactor(env=False, literals=["hunter2-password!"])),
        MessageGuard(None, max_field_chars=1000),
    ]


@pytest.mark.parametrize("kind, secret, template", POSITIVES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(POSITIVES)])
def test_screen_flags_every_positive(kind: str, secret: str, template: str) -> None:
    """Text holding a secret is never screened out, as text or inside JSON arguments."""
    guard = MessageGuard(Redactor(env=False))
    text = template.format(secret)
    assert guard.screen(text)
    args = orjson.dumps({"text": text}).decode()
    assert guard.screen(args)
    assert guard.arguments(args) != args  # the guard itself does change it


def test_screen_passes_text_the_guard_leaves_alone() -> None:
    """A False from a screen always agrees with the guard (random text, and the negatives)."""
    alphabet = string.ascii_letters + string.digits + " .,:/\n\"'()[]{}=+*#@!?%&" + "-_;\\"
    texts = list(NEGATIVES) + ["".join(_rng.choice(alphabet) for _ in range(_rng.randint(0, 80))) for _ in range(3000)]
    for guard in _guards():
        screened_out = 0
        for text in texts:
            if not guard.screen(text):
                screened_out += 1
                assert guard.text(text) is text
                msg = {"role": "user", "content": text, "timestamp": 1}
                assert guard.message(msg) is msg
            args = orjson.dumps({"q": text}).decode()
            if not guard.screen(args):
                assert guard.arguments(args) is args
        assert screened_out > 0  # the screen does let clean text through


def test_screen_terms_cover_the_gates_literals_and_user_patterns() -> None:
    """Built-in gates and literals are terms; a user regex makes every text suspect."""
    terms = Redactor(env=False, literals=["correct-horse-battery"]).screen_terms()
    assert terms is not None and "correct-horse-battery" in terms and set(GATES) <= set(terms)
    assert len(GATES) <= len(_GROUPS)  # one term per built-in group
    assert Redactor(env=False, builtin=False).screen_terms() == ()
    assert Redactor(env=False, patterns=[r"\d{6}"]).screen_terms() is None
    guard = MessageGuard(Redactor(env=False, patterns=[r"\d{6}"]))
    assert guard.screen("plain words") and guard.screen('{"a":1}')
    assert guard.text("code 123456 here") == "code [REDACTED:custom] here"


def test_literal_without_a_gate_character_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment secret made of letters only (no gate character) is still caught."""
    monkeypatch.setenv("MY_SERVICE_TOKEN", "qwertyuiopasdfgh")
    guard = make_guard(True)
    assert guard is not None
    text = "the token is qwertyuiopasdfgh ok"
    assert guard.screen(text)
    assert "qwertyuiopasdfgh" not in guard.text(text)


def test_screen_flags_media_caps_and_escapes() -> None:
    """Data URLs, fields over the cap and JSON escapes (which can hide a secret) are flagged."""
    guard = MessageGuard(Redactor(env=False), max_field_chars=100)
    assert guard.screen("see data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==")
    assert guard.screen("a" * 101) and not guard.screen("a" * 100)
    escaped = '{"k": "\\u0073kabc"}'  # no gate character, but an escape
    # Redactor.find looks behind escapes in any field (a reader may decode it):
    # text and arguments alike need the full look.
    assert guard.screen(escaped)
    no_redaction = MessageGuard(None, max_field_chars=100)
    assert not no_redaction.screen('{"k": "\\n"}')  # escapes only matter to redaction


def _lines(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line)["message"] for line in path.read_bytes().splitlines()[1:]]


def test_tool_and_user_fast_paths_write_what_the_guard_would(tmp_path: Path) -> None:
    """Secrets in @tool arguments and results and in s.user() are redacted; clean ones kept exactly."""
    key = "sk-" + "proj-" + "".join(_rng.choice(string.ascii_letters + string.digits) for _ in range(60))

    @tool
    def search(query: str, units: str = "metric", limit: int = 3) -> str:
        return f"results for {query}"

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.user("What is the weather in Paris today, and should I take an umbrella?")
        s.user(f"my key is {key}")
        search(query="weather in Paris", units="metric", limit=3)
        search(key)
    text = path.read_text()
    assert key not in text
    msgs = _lines(path)
    assert msgs[0]["content"] == "What is the weather in Paris today, and should I take an umbrella?"
    assert msgs[1]["content"] == "my key is [REDACTED:openai_key]"
    call = msgs[2]["toolCalls"][0]["function"]  # type: ignore[index]
    assert call == {"name": "search", "arguments": '{"query":"weather in Paris","units":"metric","limit":3}'}
    assert msgs[3]["content"] == "results for weather in Paris"
    assert orjson.loads(msgs[4]["toolCalls"][0]["function"]["arguments"]) == {"query": "[REDACTED:openai_key]"}  # type: ignore[index]
    assert msgs[5]["content"] == "results for [REDACTED:openai_key]"


def test_redacted_user_turn_is_still_matched_against_model_inputs(tmp_path: Path) -> None:
    """A user turn with a secret, recorded with s.user(), is written redacted and
    not written a second time when the model call's input resends it."""
    from ststrace import llm

    key = "sk-" + "proj-" + "".join(_rng.choice(string.ascii_letters + string.digits) for _ in range(60))
    turn = f"use the key {key} please"

    @llm
    def model(messages: list[dict[str, str]]) -> dict[str, str]:
        return {"role": "assistant", "content": "done"}

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.user(turn)
        model(messages=[{"role": "user", "content": turn}])
    msgs = _lines(path)
    assert [(m["role"], m["content"]) for m in msgs] == [("user", "use the key [REDACTED:openai_key] please"), ("assistant", "done")]


@pytest.mark.parametrize(
    "pattern, flags, lead",
    [
        (r"A(?:(?=[KS]IA)(?P<aws>)|(?=Iza)(?P<google>))", 0, "A"),
        (r"-(?:(?<=sk-)(?P<sk>)|(?=----BEGIN)(?P<pem>))", 0, "-"),
        (r"sk|xox", 0, None),  # a match need not start with s
        (r"s[|]k", 0, "s"),
        (r"s\|k", 0, "s"),
        (r"a?b", 0, None),
        (r"a{0,2}b", 0, None),
        (r"[ab]c", 0, None),
        (r"(?i)abc", 0, None),
        (r"abc", re.IGNORECASE, None),
        (r"\dabc", 0, None),
        (r"a(b|c)|d", 0, None),
    ],
)
def test_leading_literal_is_only_taken_when_every_match_starts_with_it(pattern: str, flags: int, lead: str | None) -> None:
    """A group's screen term is its anchor's first character only when no match can start elsewhere."""
    from ststrace._redact import _leading_literal

    assert _leading_literal(re.compile(pattern, flags)) == lead
