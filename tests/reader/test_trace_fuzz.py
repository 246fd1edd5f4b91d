"""Malformed traces, field by field: every field of every record type (header,
each role's message, tool calls, usage, cost) replaced by every JSON type, or
left out, and random JSON in random places (hypothesis). ``read``,
``iter_messages`` and ``validate`` give a trace, ``TraceFormatError`` (file and
line) or a list of problems, never another exception; every command that reads
traces prints a result or a ``FILE:LINE`` line, never "internal error".

The default run covers every (field, type) pair with the reader and the quick
commands, and a sample of them with ``view``, ``convert`` and the OTLP span
builder; ``--run-slow`` runs all of them everywhere, and a longer random search.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ststrace import TraceFormatError, iter_messages, read, validate
from ststrace._reader import Problem
from ststrace.cli import main

BASE: list[dict[str, Any]] = [
    {"type": "session", "harness": "h", "id": "s1", "name": "n", "parentSessionId": "p", "parentToolCallId": "c0"},
    {"type": "message", "message": {"role": "system", "content": "sys", "timestamp": 1767225600000}},
    {"type": "message", "message": {"role": "user", "content": "q", "timestamp": 1767225600001}},
    {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": "a",
            "reasoningContent": "r",
            "model": "m",
            "timestamp": 1767225600002,
            "toolCalls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
            "usage": {
                "input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3, "reasoning": 1,
                "cost": {"total": 0.1, "input": 0.05},
            },
        },
    },
    {"type": "message", "message": {"role": "tool", "content": "res", "toolCallId": "c1", "timestamp": 1767225600003}},
]
# Every JSON type, and values that look right but are not (a role in a list, a huge count).
VALUES: list[Any] = [None, True, False, 0, -1, 2**64, 1.5, "", "x", "user", [], ["user"], [1, {"a": None}], {}, {"x": 1}]
MISSING = object()


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


CASES = [(p, v) for p in _paths(BASE) for v in [*VALUES, MISSING]]


def _mutated(path: tuple[Any, ...], value: Any) -> list[dict[str, Any]]:
    lines = copy.deepcopy(BASE)
    target: Any = lines
    for key in path[:-1]:
        target = target[key]
    if value is MISSING:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return lines


def _write(path: Path, lines: list[Any]) -> Path:
    # json, not orjson: it writes integers of 2**64 and more, as other tools may.
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def check_reader(path: Path) -> None:
    for strict in (True, False):
        try:
            read(path, strict=strict)
        except TraceFormatError as exc:
            assert str(path) in str(exc) and exc.line >= 1  # names the file and line
    try:
        for _ in iter_messages(path):
            pass
    except TraceFormatError:
        pass
    problems = validate(path)
    assert isinstance(problems, list) and all(isinstance(p, Problem) for p in problems)


QUICK = (["validate"], ["stats"], ["stats", "--json"], ["cat", "--no-color"], ["tail", "--timeout", "0.001", "-n", "50"])


def _slow_commands(tmp: Path, n: int) -> tuple[list[str], ...]:
    return (
        ["view", "-o", str(tmp / f"v{n}.html")],
        ["convert", "-o", str(tmp / f"pi{n}"), "--to", "pi"],
        ["convert", "-o", str(tmp / f"sts{n}")],
    )


def check_commands(path: Path, commands: tuple[list[str], ...]) -> None:
    for command in commands:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*command, str(path)])
        assert code in (0, 1), (command, code, err.getvalue())
        assert "internal error" not in err.getvalue(), (command, err.getvalue())


def check_otlp_spans(path: Path) -> None:
    """The spans `ststrace otlp` would send are built for whatever the reader accepts."""
    trace_sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from ststrace.otel import trace_spans

    try:
        trace = read(path)
    except TraceFormatError:
        return
    trace_spans(trace, trace_sdk.TracerProvider(shutdown_on_exit=False).get_tracer("fuzz"))


def _ids(case: tuple[tuple[Any, ...], Any]) -> str:
    path, value = case
    return ".".join(map(str, path)) + "=" + ("missing" if value is MISSING else json.dumps(value))


def _run_cases(tmp_path: Path, every: int) -> None:
    """All (field, type) pairs through the reader; every *every*-th also through the quick
    commands, and every ``5 * every``-th through view, convert and the OTLP span builder."""
    for n, (field, value) in enumerate(CASES):
        path = _write(tmp_path / f"t{n}.jsonl", _mutated(field, value))
        try:
            check_reader(path)
            if n % every == 0:
                check_commands(path, QUICK if n % (5 * every) else QUICK + _slow_commands(tmp_path, n))
            if n % (5 * every) == 0:
                check_otlp_spans(path)
        except BaseException as exc:
            raise AssertionError(f"{_ids((field, value))}: {exc!r}") from exc


def test_every_field_with_every_json_type(tmp_path: Path) -> None:
    # 7 is prime to the 16 values tried per field: the sample walks through every type.
    _run_cases(tmp_path, every=7)


@pytest.mark.slow
def test_every_field_with_every_json_type_in_every_command(tmp_path: Path) -> None:
    _run_cases(tmp_path, every=1)


# -- random JSON in random places ----------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8) | st.sampled_from(["user", "assistant", "tool", "system", "message", "session"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)
FIELD_PATHS = sorted({p for p, _ in CASES}, key=str)


@st.composite
def broken_traces(draw: st.DrawFn) -> list[Any]:
    lines: list[Any] = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(FIELD_PATHS))
        try:
            target: Any = lines
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier change replaced a container on the way
    if draw(st.booleans()):
        lines.insert(draw(st.integers(1, len(lines))), draw(json_values))
    return lines


FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@FAST
@given(lines=broken_traces())
def test_random_json_in_random_fields(tmp_path: Path, lines: list[Any]) -> None:
    path = _write(tmp_path / "t.jsonl", lines)
    check_reader(path)
    check_commands(path, QUICK[:4])


@pytest.mark.slow
@settings(FAST, max_examples=1500)
@given(lines=broken_traces())
def test_random_json_in_random_fields_long(tmp_path: Path, lines: list[Any]) -> None:
    path = _write(tmp_path / "t.jsonl", lines)
    check_reader(path)
    check_commands(path, QUICK + _slow_commands(tmp_path, 0))
    check_otlp_spans(path)
