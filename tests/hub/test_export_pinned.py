"""The exact bytes ``export`` writes, pinned (issue 32: the export path was
rebuilt for speed and must not change a byte of its output).

The inputs under tests/hub/export_pinned/in/ cover rollouts of one task
with outcomes, reasoning, usage, token ids, a secret in a tool result and in
arguments, a sub-agent, odd shapes (malformed and unanswered calls, results
without a call, JSON escapes, a data URL, non-ASCII), a torn last line, a
llama.app tree and two converted formats (Pi, Claude Code). The expected files
were written by the export of before the change; ``STSTRACE_PIN_WRITE=1``
rewrites them (only when an output change is intended).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from ststrace._export import export

FIXTURES = Path(__file__).parent / "export_pinned"
IN = FIXTURES / "in"
EXPECTED = FIXTURES / "expected"

CASES: dict[str, dict[str, Any]] = {
    "sft": {},
    "sft-subagents": {"include_subagents": True},
    "sft-filtered": {"errors": False, "min_tool_calls": 1},
    "sft-no-redact": {"redact": False},
    "messages": {"format": "messages"},
    "messages-filtered": {"format": "messages", "errors": False, "min_tool_calls": 2},
    "rewards": {"format": "rewards"},
    "rewards-min-reward": {"format": "rewards", "min_reward": 0.5},
    "kto": {"format": "kto"},
    "kto-threshold": {"format": "kto", "threshold": 0.4},
    "dpo": {"format": "dpo"},
    "dpo-all": {"format": "dpo", "pairs": "all"},
    "dpo-no-redact": {"format": "dpo", "pairs": "all", "redact": False},
}


def _check(name: str, got: bytes) -> None:
    expected = EXPECTED / name
    if os.environ.get("STSTRACE_PIN_WRITE") == "1":
        expected.parent.mkdir(parents=True, exist_ok=True)
        expected.write_bytes(got)
    assert got == expected.read_bytes(), f"export output changed: {name}"


@pytest.mark.parametrize("case", list(CASES))
def test_exported_bytes_are_pinned(tmp_path: Path, case: str) -> None:
    """Each format and filter writes exactly the pinned bytes, with the same counts."""
    out = tmp_path / "out.jsonl"
    result = export(IN, out, **CASES[case])
    assert result.rows > 0 and not result.failed
    _check(f"{case}.jsonl", out.read_bytes())
    counts = {
        "rows": result.rows,
        "files": result.files,
        "messages": result.messages,
        "tool_calls": result.tool_calls,
        "skipped": dict(sorted(result.skipped.items())),
        "dropped": dict(sorted(result.dropped.items())),
        "redactions": dict(sorted(result.redactions.items())),
    }
    _check(f"{case}.counts.json", orjson.dumps(counts, option=orjson.OPT_INDENT_2) + b"\n")


@pytest.mark.parametrize("fmt", ["sft", "rewards", "dpo"])
def test_parquet_rows_are_pinned(tmp_path: Path, fmt: str) -> None:
    """The Parquet writer gets the same rows: its columns and values are pinned."""
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "out.parquet"
    export(IN, out, format=fmt)
    table = pq.read_table(out)
    pinned = {
        "schema": [f"{f.name}: {f.type}" for f in table.schema],
        "metadata": orjson.loads(table.schema.metadata[b"huggingface"]),
        "rows": table.to_pylist(),
    }
    _check(f"{fmt}.parquet.json", orjson.dumps(pinned, option=orjson.OPT_INDENT_2) + b"\n")
