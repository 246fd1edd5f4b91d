"""Fuzzing the converters with mutated copies of real sessions.

Every sample session (the TeichAI/teich examples and the hand-made fixtures) is
mutated with a fixed seed: values replaced by type-confused ones (a block
``type`` that is a list, ``"tool_calls": 5``, timestamps of ``1e30``, deep
nesting, ...), keys deleted, lines dropped, duplicated, swapped, torn or
garbled, the whole file rewritten as one JSON array. Each mutant is either
converted into traces that ``validate`` accepts with no error, or refused with
a :class:`ConvertError` naming the file; nothing else may escape. Through the
CLI, a batch of mutants reports each failure with its file name and still
converts the good file after them.

The default run is small and fast; ``--run-slow`` runs many more mutants.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from ststrace import validate
from ststrace._cli.convert import run as run_convert
from ststrace._convert import (
    ConvertError,
    convert_file,
    detect,
    output_name,
    write_trace,
)
from ststrace.cli import build_parser

HERE = Path(__file__).resolve().parents[1]
SAMPLES = HERE / "fixtures" / "agent-traces"
FIXTURES = HERE / "fixtures" / "convert"
WILD = HERE / "fixtures" / "convert-wild"
HEAD_LINES = 60  # the big samples are cut to their first lines: fast, and still every shape

BASES: list[tuple[Path, str]] = [
    (SAMPLES / "example_claude_code.jsonl", "claude-code"),
    (SAMPLES / "example_codex_session.jsonl", "codex"),
    (SAMPLES / "example_pi_session.jsonl", "pi"),
    (SAMPLES / "example_openclaw_session.jsonl", "pi"),
    (SAMPLES / "example_droid_session.jsonl", "droid"),
    (SAMPLES / "example_hermes_session.jsonl", "hermes"),
    (SAMPLES / "example_cursor_session.jsonl", "cursor"),
    (FIXTURES / "pi_v2_branches.jsonl", "pi"),
    (FIXTURES / "claude_sidechain.jsonl", "claude-code"),
    (FIXTURES / "openai_chats.jsonl", "openai"),
    (FIXTURES / "openai_messages.json", "openai"),
    (WILD / "cc-main-1.jsonl", "claude-code"),
    (WILD / "cc-main-1" / "subagents" / "agent-a7f3c2d.jsonl", "claude-code"),
    (WILD / "20260418_192600_a1b2c3d4.jsonl", "hermes"),
    (WILD / "hermes_export.json", "hermes"),
    (WILD / "codex_image_prompt.jsonl", "codex"),
    (WILD / "codex_early.jsonl", "codex"),
    (WILD / "droid_models.jsonl", "droid"),
    (WILD / "cc_clear.jsonl", "claude-code"),
    (WILD / "cc_init.jsonl", "claude-code"),
    (WILD / "llama_regenerated.jsonl", "sts"),
    (WILD / "llama_tools.jsonl", "sts"),
    (HERE / "fixtures" / "gemini" / "session-2025-12-01T21-45-5b959dae.json", "gemini"),
    (HERE / "fixtures" / "gemini" / "checkpoint-auth-fix.json", "gemini"),
    (WILD / "opencode_export.json", "opencode"),
    (WILD / "cline" / "1745512345678" / "api_conversation_history.json", "cline"),
]


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"type": "text", "text": value}
    return value


EVIL: list[Any] = [
    None, True, False, 0, -1, 5, 1.5, 1e30, -1e30, 1e300, 2**70, "", "x", "1e30", "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00", "not a date", [], {}, [[]], ["text"], {"type": ["text"]}, {"type": 5, "text": 3},
    {"type": "text", "text": ["a"]}, {"type": "tool_use", "id": [], "name": {}, "input": "{"},
    [1, "a", None, {"type": None}], "\x00\ud800", "sk-" + "A1b2C3d4" * 5, _deep(40), _deep(300),
]


def _lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return [text]
    return [ln for ln in text.splitlines() if ln.strip()][:HEAD_LINES]


def _nodes(value: Any, out: list[tuple[Any, Any]]) -> None:
    """Every (container, key) in *value*, depth first."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                out.append((node, k))
                stack.append(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                out.append((node, i))
                stack.append(v)


def _mutate_json(rng: random.Random, objs: list[Any]) -> None:
    obj = rng.choice(objs)
    nodes: list[tuple[Any, Any]] = []
    _nodes(obj, nodes)
    if not nodes:
        return
    kind = rng.random()
    if kind < 0.25:
        typed = [(c, k) for c, k in nodes if k == "type" or k in ("role", "tool_calls", "content", "timestamp", "id")]
        if typed:
            container, key = rng.choice(typed)
            container[key] = copy.deepcopy(rng.choice(EVIL))
            return
    container, key = rng.choice(nodes)
    if kind < 0.35 and isinstance(container, dict):
        del container[key]
    else:
        container[key] = copy.deepcopy(rng.choice(EVIL))


def mutant(base: Path, rng: random.Random) -> bytes:
    """One mutated copy of *base* (JSON-level and line-level damage)."""
    objs = []
    for ln in _lines(base):
        try:
            objs.append(json.loads(ln))
        except json.JSONDecodeError:
            pass  # a base's own torn line
    for _ in range(rng.randint(1, 3)):
        _mutate_json(rng, objs)
    lines = [json.dumps(o, ensure_ascii=rng.random() < 0.5) for o in objs]
    roll = rng.random()
    if roll < 0.1 and len(lines) > 1:
        del lines[rng.randrange(len(lines))]
    elif roll < 0.2:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif roll < 0.3 and len(lines) > 2:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
    elif roll < 0.4:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(['{"torn": ', "\x00\x01 not json", "[1, 2", "null", "42", '"text"']))
    elif roll < 0.45 and base.suffix != ".json":
        # What json.dump writes: the whole session as one JSON array on one line.
        return json.dumps(objs).encode()
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    if rng.random() < 0.15:
        data = data[: rng.randrange(1, len(data))]  # a crash mid-write
    return data


def _check(path: Path, from_: str | None, out: Path) -> str:
    """Convert *path*: 'ok' with every output valid, or 'refused' with the file named."""
    try:
        result = convert_file(path, from_)
    except ConvertError as exc:
        assert str(path) in str(exc) or path.name in str(exc), f"error does not name the file: {exc}"
        return "refused"
    assert result.traces
    for trace in result.traces:
        target = out / f"{len(list(out.iterdir()))}-{output_name(trace)}"
        write_trace(trace, target)
        errors = [str(p) for p in validate(target) if p.severity == "error"]
        assert errors == [], f"{path} ({from_ or 'detected'}): {errors}"
    return "ok"


def _run_mutants(tmp_path: Path, seeds: range) -> dict[str, int]:
    outcomes = {"ok": 0, "refused": 0}
    out = tmp_path / "out"
    out.mkdir()
    for base, fmt in BASES:
        for seed in seeds:
            rng = random.Random(f"{base.name}:{seed}")
            path = tmp_path / f"{base.stem}-{seed}{base.suffix}"
            path.write_bytes(mutant(base, rng))
            for from_ in (None, fmt):
                outcomes[_check(path, from_, out)] += 1
            path.unlink()
    return outcomes


def test_bases_convert_unmutated(tmp_path: Path) -> None:
    """Sanity for the fuzz bases: each (cut) sample converts as its own format, with valid output."""
    for base, fmt in BASES:
        path = tmp_path / base.name
        path.write_text("\n".join(_lines(base)) + "\n")
        assert detect(path) == fmt, base.name
        assert _check(path, None, tmp_path) == "ok"


def test_mutants_convert_or_are_refused_by_name(tmp_path: Path) -> None:
    """Every mutant of every sample converts to valid STS or is refused with a ConvertError naming it."""
    outcomes = _run_mutants(tmp_path, range(8))
    # Both outcomes happen: the mutations reach the converters, not just the detector.
    assert outcomes["ok"] > 100 and outcomes["refused"] > 5, outcomes


@pytest.mark.slow
def test_mutants_many(tmp_path: Path) -> None:
    """The long run: 150 mutants per sample."""
    outcomes = _run_mutants(tmp_path, range(8, 158))
    assert outcomes["ok"] > 1000, outcomes


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def test_cli_batch_of_mutants_reports_each_and_continues(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the CLI: one stderr line per failed file, naming it; the good file at the end still converts."""
    src = tmp_path / "src"
    src.mkdir()
    names = []
    for i, (base, _) in enumerate(BASES):
        rng = random.Random(f"cli:{i}")
        name = f"{i:02d}-{base.stem}.jsonl"
        (src / name).write_bytes(mutant(base, rng))
        names.append(name)
    # Type-confused beyond repair, and the json.dump one-liner of a chat.
    (src / "50-confused.jsonl").write_text(json.dumps({"messages": 5, "model": ["m"]}) + "\n")
    (src / "51-array.jsonl").write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "tool_calls": 5}]))
    good = src / "99-good.jsonl"
    good.write_bytes((FIXTURES / "pi_v1.jsonl").read_bytes())
    out = tmp_path / "out"
    code = run_convert(_parse(["convert", str(src), "-o", str(out)]))
    stdout, stderr = capsys.readouterr()
    errors = stderr.strip().splitlines()
    summary = stdout.strip().splitlines()[-1]
    assert code == (1 if errors else 0)
    inputs = names + ["50-confused.jsonl", "51-array.jsonl", "99-good.jsonl"]
    for line in errors:
        assert line.startswith("ststrace convert: ")
        assert sum(f"{src}/{name}" in line for name in inputs) == 1, line  # names its file, once
    assert not any("internal error" in line for line in errors), errors
    failed = len(errors)
    assert summary.startswith(f"converted {len(names) + 3 - failed} of {len(names) + 3} files"), summary
    if failed:
        assert summary.endswith(f"; {failed} failed")
    assert (out / "pi-v1-session.jsonl").is_file()
    assert (out / "51-array.jsonl").is_file()  # the array is an OpenAI chat; tool_calls 5 is counted, not fatal
    assert "50-confused.jsonl" in stderr
    for p in out.iterdir():
        assert [str(pr) for pr in validate(p) if pr.severity == "error"] == [], p


def test_timestamp_1e30_still_validates(tmp_path: Path) -> None:
    """Absurd source times (1e30, -5, NaN-like text, year 1) are left out; the output validates."""
    for value in (1e30, -5, 2**80, "1e30", "0001-01-01T00:00:00Z", "+275760-09-13T00:00:00Z"):
        rows = [
            {"role": "user", "content": "hi", "timestamp": value},
            {"role": "assistant", "content": "hello", "model": "m", "timestamp": value},
        ]
        src = tmp_path / "t.json"
        src.write_text(json.dumps(rows))
        (trace,) = convert_file(src).traces
        assert all("timestamp" not in m for m in trace.messages), value
        out = write_trace(trace, tmp_path / f"t-{len(list(tmp_path.iterdir()))}.jsonl")
        assert [p for p in validate(out) if p.severity == "error"] == []
