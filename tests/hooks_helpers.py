"""Shared by the hook tests (waiting for the detached worker, comparing with ``convert``) and the Claude Agent SDK tests (the network trap)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ststrace._hooks import hook

STATE = hook.STATE_DIR


def settle(out: Path, timeout: float = 120.0) -> None:
    """Wait until every hooked session's STS file is as new as its last event.

    The worker holds the session's lock while it converts: taking that lock
    waits for it. A worker just started may not hold it yet: then look again.
    """
    state = out / STATE
    deadline = time.monotonic() + timeout
    for path in sorted(state.glob("*.json")):
        key = path.stem
        while True:
            with hook._Flock(str(state / f"{key}.lock")):
                if not hook.needs_work(str(state), key):
                    break
            assert time.monotonic() < deadline, f"the worker never brought {key} up to date: {hook.read_json(str(path))}"
            time.sleep(0.05)  # a worker about to start: give it the lock


def convert_dir(src: Path, dest: Path) -> dict[str, bytes]:
    """What ``ststrace convert`` writes for *src* (a directory of transcripts), by file name."""
    r = subprocess.run(
        [sys.executable, "-m", "ststrace", "convert", "-o", str(dest), str(src)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    return {p.name: p.read_bytes() for p in sorted(dest.glob("*.jsonl"))}


def sessions(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))}


def lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def hook_log(out: Path) -> str:
    p = out / STATE / hook.LOG_NAME
    return p.read_text() if p.exists() else ""


class Trap:
    """A listener on 127.0.0.1 set as an agent's HTTP(S) proxy: every
    connection to it is an attempt to reach a host other than the fake server."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.attempts: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.attempts.append(conn.recv(200))
                except OSError:
                    self.attempts.append(b"?")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        self.sock.close()
