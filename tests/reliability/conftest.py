"""Helpers for the reliability suite: real child processes running small scripts."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest


class Child:
    """A running script; a thread collects its stdout lines as they come."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self._stderr.append(self.proc.stderr.read())

    def wait_for(self, prefix: str, timeout: float = 30) -> str:
        """Block until the child prints a line starting with *prefix*."""
        end = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                # Scripts that call faulthandler.register(SIGUSR1) dump their
                # threads' stacks here, which the failure message then shows.
                self.proc.send_signal(signal.SIGUSR1)
                time.sleep(1)
                self.stop()
                raise AssertionError(f"child did not print {prefix!r} within {timeout}s:\n{self.stderr}") from None
            if line is None:
                raise AssertionError(f"child exited ({self.wait()}) before printing {prefix!r}:\n{self.stderr}")
            if line.startswith(prefix):
                return line

    def wait(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        self._err_reader.join(timeout)
        return code

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class Scripts:
    """Writes a script to the test's temp dir and runs it with this interpreter."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self._count = 0
        self._children: list[Child] = []

    def _write(self, code: str) -> str:
        self._count += 1
        path = self.dir / f"script{self._count}.py"
        path.write_text(textwrap.dedent(code), encoding="utf-8")
        return str(path)

    def run(self, code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run to completion; stdout/stderr captured as text."""
        return subprocess.run([sys.executable, self._write(code), *args], capture_output=True, text=True, timeout=timeout)

    def start(self, code: str, *args: str) -> Child:
        child = Child([sys.executable, self._write(code), *args])
        self._children.append(child)
        return child

    def cleanup(self) -> None:
        for child in self._children:
            child.stop()


@pytest.fixture
def scripts(tmp_path: Path) -> Iterator[Scripts]:
    s = Scripts(tmp_path)
    try:
        yield s
    finally:
        s.cleanup()

