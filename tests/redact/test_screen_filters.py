"""The groups' filters (issue 32): cheap patterns searched before a group's anchor.

A filter must match wherever its group's anchor does (it may match more): a
miss would let a secret through unredacted. These tests check that on every
sample of the detector corpus, on the fixtures and on the benchmark's agent
texts, and that redaction with the filters gives exactly what it gives without
them, there and at the edges a filter could get wrong (a secret first or last
in the text, behind JSON escapes, at the end of a long field, glued to the
letters of a prefix).
"""

from __future__ import annotations

import json
import random
import string
import sys
from pathlib import Path

import pytest
from test_redact import NEGATIVES, POSITIVES
from test_redact_breadth import BREADTH
from test_redact_breadth import NEGATIVES as BREADTH_NEGATIVES

from ststrace import _redact
from ststrace._redact import _DASH_PREFIXES, _GROUPS, _SCORE_PREFIXES, Redactor

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_redact import AGENT_TEXTS, TEXTS  # noqa: E402

_rng = random.Random(32)


def _samples() -> list[str]:
    texts = [t.format(s) for _, s, t in POSITIVES + BREADTH]
    texts += list(NEGATIVES) + list(BREADTH_NEGATIVES) + list(AGENT_TEXTS.values()) + list(TEXTS.values())
    texts += [p.read_text(errors="replace") for p in sorted((ROOT / "tests" / "fixtures" / "agent-traces").glob("*.jsonl"))]
    return texts


SAMPLES = _samples()
FILTERED = [g for g in _GROUPS if g.pre_source]


def test_some_groups_have_filters() -> None:
    """The "-", "_", "A" and "S" groups are filtered (a filter that fell off would only cost time)."""
    assert {g.gate[0] for g in FILTERED} >= {"-", "_", "K", "S"}


@pytest.mark.parametrize("group", FILTERED, ids=[g.gate[0] for g in FILTERED])
def test_filter_matches_wherever_the_anchor_does(group: _redact._Group) -> None:
    """Every anchor match of every sample is a filter match at the same place."""
    anchor = group.compile()
    pre = group.pre
    assert pre is not None
    seen = 0
    for text in SAMPLES:
        for m in anchor.finditer(text):
            seen += 1
            assert pre.match(text, m.start()) is not None, (group.gate, text[max(0, m.start() - 30) : m.start() + 30])
    assert seen > 0


@pytest.mark.parametrize(
    "prefixes, anchor_group",
    [(_DASH_PREFIXES, "-"), (_SCORE_PREFIXES, "_")],
    ids=["dash", "underscore"],
)
def test_filter_matches_every_prefix_row(prefixes: tuple[tuple[str, str], ...], anchor_group: str) -> None:
    """Each prefix row of the table, followed by a random body, passes its group's filter
    at the anchor wherever the anchor itself matches there (rows added later included)."""
    group = next(g for g in _GROUPS if g.gate == (anchor_group,))
    anchor = group.compile()
    assert group.pre is not None
    for row in group.rows:
        behind, ahead = row[0], row[1]
        text = "x " + behind + ahead + "".join(_rng.choice(string.ascii_letters + string.digits) for _ in range(80))
        at = len("x ") + len(behind) - 1
        if anchor.match(text, at) is not None:
            assert group.pre.match(text, at) is not None, behind + ahead
    # and the hand-written prefixes are listed (a row is derived; these are not)
    assert {b for b, _ in prefixes} >= {row[0] for row in group.rows}


def _edges(text: str) -> list[str]:
    return [
        text,
        text + " " + text,
        "x" * 3 + text,
        json.dumps({"a": text}),  # escapes (\n, \", \u....) around and inside it
        json.dumps(json.dumps({"a": text})),
        AGENT_TEXTS["agent code"] * 40 + text,  # at the end of a long field
        text + AGENT_TEXTS["agent diff"] * 40,
        text.replace("-", "_"),
        text.replace("_", "-"),
    ]


def _redacted(texts: list[str]) -> list[str]:
    r = Redactor(env=False)
    return [r.redact(t)[0] for t in texts]


def test_filtered_and_unfiltered_redaction_are_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole corpus, and each sample at the edges, redacts byte for byte as without filters."""
    texts = [e for t in SAMPLES for e in _edges(t)]
    # Secrets glued to letters of other prefixes: "get_" + a token, "client-" + a key.
    texts += [w + t.format(s) for w in ("get_", "client_", "et", "sk", "x-", "A", "S") for _, s, t in POSITIVES[:40]]
    with_filters = _redacted(texts)
    for group in _GROUPS:
        group.compile()
        monkeypatch.setattr(group, "pre", None)
    without = _redacted(texts)
    assert with_filters == without
    assert sum(a != t for a, t in zip(with_filters, texts)) > len(POSITIVES)  # secrets were found


def test_secret_at_either_end_and_in_long_fields_is_redacted() -> None:
    """A filtered shape first, last, or 100 KB into a field is still found."""
    r = Redactor(env=False)
    tried = set()
    for kind, secret, _ in POSITIVES + BREADTH:
        if kind not in ("openai_key", "hf_token", "github_token", "stripe_key", "aws_access_key", "npm_token", "twilio_key"):
            continue
        for text in (secret, secret + " tail", "head " + secret, AGENT_TEXTS["agent code"] * 200 + " " + secret):
            out, counts = r.redact(text)
            assert secret not in out and sum(counts.values()) == 1, (kind, text[-120:])
        tried.add(kind)
    assert len(tried) == 7
