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


def test_bedrock_agent_runs_offline_and_records_the_loop(tmp_path: Path) -> None:
    """examples/bedrock_agent.py without AWS credentials: boto3 against the fake
    Bedrock Runtime, the undecorated tools' results paired by ``toolUseId``."""
    import pytest

    pytest.importorskip("boto3")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["STSTRACE_DIR"] = str(tmp_path / "traces")
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "none")
    env["PYTHONPATH"] = str(ROOT)  # this checkout's ststrace, whatever the venv has installed
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "bedrock_agent.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Here is what I found: Sunny, 21 C; 15:00" in proc.stdout
    [path] = (tmp_path / "traces").glob("*.jsonl")
    trace = ststrace.read(path)
    assert [m["role"] for m in trace.messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in trace.messages[2]["toolCalls"]] == ["tooluse_weather01", "tooluse_time02"]
    assert [m["toolCallId"] for m in trace.messages[3:5]] == ["tooluse_weather01", "tooluse_time02"]
    assert [m["content"] for m in trace.messages[3:5]] == ["Sunny, 21 C", "15:00"]
    assert "ststrace internal error" not in proc.stderr and "WARNING" not in proc.stderr
