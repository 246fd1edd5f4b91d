"""The npm coding agents the hook tests run, installed once into ``.agents/``
of the checkout (``make agents`` does the same), pinned here."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIX = ROOT / ".agents"
PINS = {"gemini": "@google/gemini-cli@0.61.0", "codex": "@openai/codex@0.171.0"}


def agent_bin(name: str) -> Path | str:
    """The agent's executable, installing it first if needed; a str is the reason it cannot be had."""
    exe = PREFIX / "node_modules" / ".bin" / name
    if exe.exists():
        return exe
    if shutil.which("npm") is None or shutil.which("node") is None:
        return "npm is not installed: the tests that run npm coding agents need node and npm"
    PREFIX.mkdir(exist_ok=True)
    with open(PREFIX / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest processes: one install
        if not exe.exists():
            r = subprocess.run(
                ["npm", "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", "--save-exact", PINS[name]],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if r.returncode != 0:
                raise RuntimeError(f"npm install {PINS[name]} failed: {r.stderr[-2000:]}")
    return exe
