"""Property tests (hypothesis).

1. Random sequences of recording calls, tool calls and results, with arbitrary
   text and arbitrary Python values, from several threads and asyncio tasks at
   once, always give a file that ``validate`` accepts with no error, whose
   messages round-trip through ``read``, and that holds no planted secret.
2. ``read`` / ``iter_messages`` / ``validate`` on arbitrary bytes never fail
   with anything but ``TraceFormatError`` (or a list of problems).
3. ``dumps`` never raises and always gives one line of valid UTF-8 JSON.

The default budget keeps the suite fast; ``--run-slow`` runs the long version.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ststrace
from ststrace import Session, TraceFormatError, tool
from ststrace._encode import dumps
from ststrace._reader import Problem
from ststrace._redact import Redactor
from test_decorators_helpers import assert_paired
from test_encode import ODD
from test_redact import POSITIVES

LITERAL = "Nightingale-7Q-internal"  # a user literal, redacted like the built-in shapes
SECRETS = sorted({s for _, s, _ in POSITIVES} | {LITERAL})
# Planted with their context: a bearer token is only a secret after "Bearer".
PLANTS = sorted({t.format(s) for _, s, t in POSITIVES} | {LITERAL})
# What must never be written: each secret, and a bearer token only with its "Bearer ".
MUST_NOT_APPEAR = sorted({f"Bearer {s}" if k == "bearer_token" else s for k, s, _ in POSITIVES} | {LITERAL})

FAST = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
SLOW = settings(FAST, max_examples=400)

# -- strategies --------------------------------------------------------------------

_chars = st.one_of(
    st.characters(codec=None),
    st.characters(categories=["Cs"]),  # lone surrogates
    st.sampled_from(["\x00", "\n", '"', "\\", "-", "_", ";"]),
)
plain_text = st.text(_chars, max_size=60)
secret_text = st.tuples(plain_text, st.sampled_from(PLANTS), plain_text).map(lambda t: f"{t[0]} {t[1]} {t[2]}")
data_url = plain_text.map(lambda t: f"{t} data:image/png;base64,{'iVBORw0KGgoAAAANSUhEUg' * 4} {t}")
text = st.one_of(plain_text, secret_text, data_url)
# By index: hypothesis reprs strategies and examples, and some odd values
# refuse repr (huge-int is left out: its repr itself raises).
_ODD = [v for name, v, _ in ODD if name != "huge-int"]
odd = st.integers(0, len(_ODD) - 1).map(lambda i: _ODD[i])
leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text, odd)
value: st.SearchStrategy[Any] = st.recursive(
    leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(st.one_of(text, st.integers()), kids, max_size=4),
        st.tuples(kids, kids),
        st.frozensets(st.integers(), max_size=3),
    ),
    max_leaves=8,
)

# One operation of a worker: what to record.
op = st.one_of(
    st.tuples(st.just("user"), text),
    st.tuples(st.just("system"), value),
    st.tuples(st.just("assistant"), value, st.one_of(st.none(), text), st.lists(value, max_size=3), st.lists(value, max_size=3)),
    st.tuples(st.just("tool"), value),
)
plan = st.lists(st.lists(op, min_size=1, max_size=6), min_size=1, max_size=4)


# -- property 1: recording ----------------------------------------------------------


@tool
def echo(x: Any) -> Any:
    return x


@tool
async def aecho(x: Any) -> Any:
    await asyncio.sleep(0)
    return x


def _run_op(s: Session, item: tuple[Any, ...], expected: Counter[tuple[str, str]], cap: int) -> None:
    kind = item[0]
    if kind == "user":
        s.user(item[1])
        _expect(expected, "user", item[1], cap)
    elif kind == "system":
        s.system(item[1])
    elif kind == "assistant":
        _, content, reasoning, args, results = item
        calls = [{"name": f"t{i}", "arguments": a} for i, a in enumerate(args)]
        ids = s.assistant(content, reasoning=reasoning, tool_calls=calls, model="m")
        for call_id, result in zip(ids, results):
            s.tool(call_id, result)
    else:
        echo(item[1])


async def _run_op_async(s: Session, item: tuple[Any, ...], expected: Counter[tuple[str, str]], cap: int) -> None:
    await asyncio.sleep(0)
    if item[0] == "tool":
        await aecho(item[1])
    else:
        _run_op(s, item, expected, cap)


_expect_lock = threading.Lock()
_DETECT = Redactor(literals=[LITERAL], env=False)


def _expect(expected: Counter[tuple[str, str]], role: str, content: Any, cap: int) -> None:
    # Plain text with nothing to redact, repair or cut must come back exactly.
    if (
        isinstance(content, str)
        and len(content) <= cap
        and content.isprintable()
        and not _DETECT.find(content)
        and ";base64," not in content
        and len(content) <= 40
    ):
        with _expect_lock:
            expected[(role, content)] += 1


def _cores(secret: str) -> list[str]:
    """Pieces of a secret that must not appear anywhere (a PEM block, line by line)."""
    return [line for line in secret.splitlines() if len(line) >= 16 and not line.startswith("-----")] or [secret]


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in _strings(k) + _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _record(workers: list[list[tuple[Any, ...]]], cap: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.jsonl"
        expected: Counter[tuple[str, str]] = Counter()
        redactor = _DETECT
        half = max(1, len(workers) // 2)
        with Session(path, redact=redactor, max_field_chars=cap, metadata={"note": f"planted {SECRETS[0]}"}) as s:
            with ststrace.ThreadPoolExecutor(max_workers=4) as pool:
                futures = [
                    pool.submit(lambda ops=ops: [_run_op(s, item, expected, cap) for item in ops]) for ops in workers[:half]
                ]

                async def tasks() -> None:
                    async def one(ops: list[tuple[Any, ...]]) -> None:
                        for item in ops:
                            await _run_op_async(s, item, expected, cap)

                    await asyncio.gather(*(one(ops) for ops in workers[half:]))

                asyncio.run(tasks())
                for f in futures:
                    f.result()

        errors = [p for p in ststrace.validate(path) if p.severity == "error"]
        assert not errors, errors
        trace = ststrace.read(path)
        lines = path.read_bytes().splitlines()
        assert trace.messages == [orjson.loads(line)["message"] for line in lines[1:]]
        assert [orjson.loads(dumps(m)) for m in trace.messages] == trace.messages
        assert_paired(trace.messages)
        got = Counter((m["role"], m["content"]) for m in trace.messages)
        assert not expected - got, expected - got

        raw = path.read_text("utf-8")
        decoded = "\n".join(_strings(trace.header) + [s for m in trace.messages for s in _strings(m)])
        for secret in MUST_NOT_APPEAR:
            for core in _cores(secret):
                assert core not in raw and core not in decoded, f"planted secret leaked: {core[:12]}..."


@FAST
@given(workers=plan, cap=st.sampled_from([1_000_000, 40]))
def test_random_recording_gives_valid_secret_free_traces(workers: list[list[tuple[Any, ...]]], cap: int) -> None:
    """Threads and tasks recording random values: valid file, messages round-trip, no planted secret."""
    _record(workers, cap)


@pytest.mark.slow
@SLOW
@given(workers=plan, cap=st.sampled_from([1_000_000, 40, 7]))
def test_random_recording_long(workers: list[list[tuple[Any, ...]]], cap: int) -> None:
    """The same property with a much larger budget (opt in with --run-slow)."""
    _record(workers, cap)


# -- property 2: reading arbitrary bytes --------------------------------------------------

_int64 = st.integers(-(2**63), 2**63 - 1)
_json_line = st.recursive(
    st.one_of(st.none(), st.booleans(), _int64, st.floats(allow_nan=False), st.text(max_size=10)),
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=8), kids, max_size=3)),
    max_leaves=6,
).map(orjson.dumps)
_message_line = st.fixed_dictionaries(
    {"type": st.sampled_from(["message", "session", "other"])},
    optional={
        "message": st.fixed_dictionaries(
            {},
            optional={
                "role": st.sampled_from(["user", "assistant", "tool", "system", "bot", 1]),
                "content": st.one_of(st.text(max_size=10), st.none(), _int64),
                "toolCalls": st.lists(st.dictionaries(st.sampled_from(["id", "function", "x"]), st.text(max_size=4)), max_size=2),
                "toolCallId": st.one_of(st.text(max_size=4), _int64),
                "timestamp": st.one_of(_int64, st.text(max_size=3)),
            },
        ),
        "harness": st.text(max_size=5),
        "id": st.one_of(st.text(max_size=5), _int64),
    },
).map(orjson.dumps)
_any_line = st.one_of(_json_line, _message_line, st.binary(max_size=40))
_file = st.one_of(
    st.binary(max_size=300),
    st.lists(_any_line, max_size=8).map(b"\n".join),
    st.tuples(st.lists(_any_line, max_size=8), st.booleans()).map(
        lambda t: b'{"type":"session","harness":"h","id":"x"}\n' + b"\n".join(t[0]) + (b"\n" if t[1] else b"")
    ),
)


def _read_everything(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.jsonl"
        path.write_bytes(data)
        for strict in (True, False):
            try:
                trace = ststrace.read(path, strict=strict)
                assert isinstance(trace.header, dict) and all(isinstance(m, dict) for m in trace.messages)
            except TraceFormatError:
                pass
            try:
                for m in ststrace.iter_messages(path, strict=strict):
                    assert isinstance(m, dict)
            except TraceFormatError:
                pass
        problems = ststrace.validate(path)
        assert isinstance(problems, list) and all(isinstance(p, Problem) for p in problems)


@FAST
@given(data=_file)
def test_reader_survives_arbitrary_bytes(data: bytes) -> None:
    """read / iter_messages / validate: TraceFormatError or problems, nothing else."""
    _read_everything(data)


@pytest.mark.slow
@settings(SLOW, max_examples=3000)
@given(data=_file)
def test_reader_survives_arbitrary_bytes_long(data: bytes) -> None:
    """The same with a much larger budget (opt in with --run-slow)."""
    _read_everything(data)


# -- property 3: the encoder ---------------------------------------------------------------


def _check_dumps(v: Any) -> None:
    out = dumps(v)
    out.decode("utf-8")
    assert b"\n" not in out
    orjson.loads(out)


@settings(FAST, max_examples=200)
@given(v=value)
def test_dumps_never_fails(v: Any) -> None:
    """Any mix of odd values, nested any way: one line of valid UTF-8 JSON."""
    _check_dumps(v)


@pytest.mark.slow
@settings(SLOW, max_examples=5000)
@given(v=value)
def test_dumps_never_fails_long(v: Any) -> None:
    """The same with a much larger budget (opt in with --run-slow)."""
    _check_dumps(v)


# -- property 4: the guard alone (cheap, so more examples) -------------------------------

from ststrace._text import json_text  # noqa: E402
from ststrace._guard import MessageGuard  # noqa: E402


def _check_guard(v: Any, t: str, cap: int | None) -> None:
    guard = MessageGuard(_DETECT, max_field_chars=cap)
    args = guard.arguments(json_text(v))
    orjson.loads(args)  # still valid JSON, whatever was redacted or cut
    out = guard.text(t)
    for written in (args, out, json_text(orjson.loads(args))):
        for secret in MUST_NOT_APPEAR:
            for core in _cores(secret):
                assert core not in written, f"planted secret leaked: {core[:12]}..."
    if cap is not None:
        assert len(out) <= cap + 64
        assert len(args) <= cap + 64 * max(1, args.count("chars dropped]"))


@settings(FAST, max_examples=300)
@given(v=value, t=text, cap=st.sampled_from([None, 5, 30, 100, 1_000_000]))
def test_guard_output_is_valid_and_secret_free(v: Any, t: str, cap: int | None) -> None:
    """Any value's arguments stay valid JSON; no cap or redaction leaves a piece of a secret."""
    _check_guard(v, t, cap)


@pytest.mark.slow
@settings(SLOW, max_examples=10_000)
@given(v=value, t=text, cap=st.sampled_from([None, 5, 30, 100, 1_000_000]))
def test_guard_output_is_valid_and_secret_free_long(v: Any, t: str, cap: int | None) -> None:
    """The same with a much larger budget (opt in with --run-slow)."""
    _check_guard(v, t, cap)
