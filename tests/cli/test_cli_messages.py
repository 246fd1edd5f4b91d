"""The command line's answers to what a newcomer gets wrong first (issue 34, item 7):
each is one line that says what is wrong with which path or host, never a raw
``[Errno N]`` text or a traceback."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from ststrace.cli import main

ROOT = Path(__file__).resolve().parents[2]
FAKE_TOKEN = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm98765432"  # shaped like a Hugging Face token, made up

# The seed's own STS example (STS-FORMAT.md) with `harness` left out of the header.
STS_WITHOUT_HARNESS = """\
{"type":"session","id":"abc123","name":"what time is it"}
{"type":"message","message":{"role":"user","content":"what time is it?"}}
{"type":"message","message":{"role":"assistant","content":"","toolCalls":[{"id":"t1","function":{"name":"get_time","arguments":"{}"}}]}}
{"type":"message","message":{"role":"tool","toolCallId":"t1","content":"2026-07-01T15:00:00Z"}}
{"type":"message","message":{"role":"assistant","content":"it is 15:00 UTC"}}
"""


def _cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("STSTRACE_", "HF_"))}
    base["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "ststrace", *args], cwd=cwd, env={**base, **env},
        capture_output=True, text=True, timeout=120,
    )


# --- upload: the host and whether a token was found --------------------------


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 bound but not listening: a connection there is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text(STS_WITHOUT_HARNESS.replace('"type":"session",', '"type":"session","harness":"t",', 1))
    return path


@pytest.mark.parametrize("token", [None, FAKE_TOKEN], ids=["no-token", "token"])
def test_upload_with_the_hub_unreachable_names_the_host_and_the_token(
    tmp_path: Path, closed_port: int, trace: Path, token: str | None
) -> None:
    pytest.importorskip("huggingface_hub")
    host = f"http://127.0.0.1:{closed_port}"
    env = {"HF_ENDPOINT": host, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    if token is not None:
        env["HF_TOKEN"] = token
    done = _cli(["upload", str(trace), "--repo", "alice/traces"], tmp_path, **env)
    assert done.returncode == 1
    assert done.stdout == ""
    found = "a Hugging Face token was found" if token else "no Hugging Face token was found (HF_TOKEN, or hf auth login)"
    assert done.stderr.splitlines() == [f"ststrace upload: cannot reach {host}: Connection refused; {found}"]
    assert FAKE_TOKEN not in done.stderr


# --- convert: what is wrong with which path ----------------------------------


def test_convert_names_a_missing_input_in_words(tmp_path: Path, trace: Path) -> None:
    done = _cli(["convert", "nope.jsonl", str(trace), "-o", "out"], tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["ststrace convert: nope.jsonl: no such file or directory"]
    assert done.stdout.startswith("converted 1 of 2 files into 1 trace in out")


@pytest.mark.parametrize(
    "outdir, message",
    [
        ("taken", "cannot create the output directory taken: a file of that name already exists, not a directory"),
        ("taken/sub", "cannot create the output directory taken/sub: taken is a file, not a directory"),
    ],
    ids=["a-file", "below-a-file"],
)
def test_convert_says_why_the_output_directory_cannot_be_made(tmp_path: Path, trace: Path, outdir: str, message: str) -> None:
    (tmp_path / "taken").write_text("not a directory\n")
    done = _cli(["convert", str(trace), "-o", outdir], tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"ststrace convert: {message}"]
    assert "Errno" not in done.stderr
    assert (tmp_path / "taken").read_text() == "not a directory\n"  # nothing clobbered


# --- validate: an STS file without `harness` is STS that lacks it, not "a Pi session" ---


def test_validate_says_an_sts_header_lacks_harness(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "example.jsonl"
    path.write_text(STS_WITHOUT_HARNESS)
    assert main(["validate", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [f"{path}:1: error: header-invalid: session header has no 'harness'"]


def test_validate_still_calls_a_pi_session_a_pi_session(capsys: pytest.CaptureFixture[str]) -> None:
    pi = ROOT / "tests" / "fixtures" / "agent-traces" / "example_pi_session.jsonl"
    assert main(["validate", str(pi)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{pi}: this is a Pi session, not STS; `ststrace convert` turns it into STS"
    ]


# --- the environment variables are all documented -----------------------------


def test_every_ststrace_environment_variable_is_in_the_docs_table() -> None:
    """STSTRACE_DEBUG, which the internal-error line mentions, included."""
    used = set()
    for path in (ROOT / "ststrace").rglob("*.py"):
        used |= set(re.findall(r"[\"'](STSTRACE_[A-Z_]+)[\"']", path.read_text(encoding="utf-8")))
    assert "STSTRACE_DEBUG" in used
    table = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(STSTRACE_[A-Z_]+)", table, re.M))
    assert used - documented == set()

