"""A command whose optional extra is missing says which to install (issue 31, item 10)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ststrace import Session


def test_otlp_without_the_exporter_prints_the_install_hint(tmp_path: Path) -> None:
    """``opentelemetry`` present (many libraries bring it), its OTLP/HTTP exporter
    not: a real interpreter in which only a bare ``opentelemetry`` package exists."""
    shadow = tmp_path / "site"
    (shadow / "opentelemetry").mkdir(parents=True)
    (shadow / "opentelemetry" / "__init__.py").write_text("")
    with Session(tmp_path / "traces", id="s-1") as s:
        s.user("hi")
    assert s.path is not None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "ststrace", "otlp", "--endpoint", "http://127.0.0.1:9/v1/traces", str(s.path)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )
    assert proc.returncode != 0
    assert "internal error" not in proc.stderr
    assert 'pip install "ststrace[otel]"' in proc.stderr, proc.stderr
