"""The examples in examples/ run as a user would run them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ststrace

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_writes_validates_and_renders_a_trace(tmp_path: Path) -> None:
    """`make demo` runs examples/quickstart.py: a valid trace in ./traces and its HTML page."""
    env = {k: v for k, v in os.environ.items() if k != "STSTRACE_DIR"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    traces = list((tmp_path / "traces").glob("*.jsonl"))
    assert len(traces) == 1
    assert f"trace written and valid: traces/{traces[0].name}" in proc.stdout
    html = traces[0].with_suffix(".html")
    assert html.exists() and str(html.relative_to(tmp_path)) in proc.stdout
    assert proc.stdout.count(html.name) == 1, proc.stdout  # the page's path is printed once
    assert not [p for p in ststrace.validate(traces[0]) if p.severity == "error"]
    trace = ststrace.read(traces[0])
    roles = [m["role"] for m in trace.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant"]
    call_ids = [c["id"] for c in trace.messages[2]["toolCalls"]]
    assert [m["toolCallId"] for m in trace.messages[3:5]] == call_ids
    assert trace.messages[2]["reasoningContent"]
    assert "ststrace internal error" not in proc.stderr
