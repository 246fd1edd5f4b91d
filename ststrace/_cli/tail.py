"""Following a trace while an agent writes it, for ``ststrace tail``."""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable

import orjson

from .._errors import TraceFormatError
from .._reader import message_of
from ._common import non_negative_int, positive_float, trace_file, warn

__all__ = ["Follower", "follow", "run", "setup"]


class Follower:
    """Reads the complete lines appended to a trace since the last :meth:`poll`.

    Only bytes up to the last newline are consumed: a line the writer has not
    finished yet is read again on every poll until its newline arrives. Never
    trusting those bytes is what makes ``Session(resume=True)`` safe to follow:
    it cuts a torn last line off and appends after it. Shrinking below what was
    already consumed means the file was replaced, which is an error.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a directory, not a trace file")
        self._f: BinaryIO = open(path, "rb")
        self._pos = 0  # bytes of complete lines consumed
        self._line = 0
        self.header: dict[str, Any] | None = None

    def close(self) -> None:
        self._f.close()

    def poll(self) -> list[dict[str, Any]]:
        size = os.fstat(self._f.fileno()).st_size
        if size < self._pos:
            raise TraceFormatError(self.path, self._line, "the file was truncated or replaced while following it")
        if size == self._pos:
            return []
        self._f.seek(self._pos)
        data = self._f.read(size - self._pos)
        end = data.rfind(b"\n")
        out: list[dict[str, Any]] = []
        if end == -1:
            return out
        start = 0
        while start <= end:
            nl = data.index(b"\n", start)
            try:
                msg = self._parse(data[start:nl].rstrip(b"\r"), self._line + 1)
            except TraceFormatError:
                if out:
                    return out  # show what came before; the next poll raises again
                raise
            self._line += 1
            self._pos += nl + 1 - start
            start = nl + 1
            if msg is not None:
                out.append(msg)
        return out

    def _parse(self, raw: bytes, line: int) -> dict[str, Any] | None:
        if not raw.strip():
            return None
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise TraceFormatError(self.path, line, f"not valid JSON ({exc})") from None
        if self.header is None:
            if not isinstance(obj, dict) or obj.get("type") != "session":
                raise TraceFormatError(self.path, line, 'first line is not an STS session header ({"type": "session", ...})')
            self.header = obj
            return None
        if isinstance(obj, dict) and obj.get("type") == "outcome":
            return None  # not a message (Session.outcome / ststrace outcome)
        return message_of(self.path, line, obj)


#: Seconds without growth before ``tail`` asks whether anything still writes the
#: file (a live session flushes every second by default).
IDLE_SECONDS = 3.0


def follow(
    path: Path,
    *,
    backlog: int,
    interval: float,
    on_header: Callable[[dict[str, Any]], None],
    on_message: Callable[[dict[str, Any], bool], None],
    max_messages: int | None = None,
    timeout: float | None = None,
    on_idle: Callable[[], bool] | None = None,
) -> int:
    """Follow *path*; returns the number of messages shown.

    ``on_message(msg, shown)`` is called for every message, with ``shown=False``
    for the older ones beyond the last *backlog* (so pairing state stays right).
    Stops after *max_messages* shown messages or *timeout* seconds, or when
    ``on_idle()``, asked each time the file has not grown for
    :data:`IDLE_SECONDS`, says so (the session is finished); else never.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    idle_since = time.monotonic()
    shown = 0
    f = Follower(path)
    try:
        first = f.poll()
        header_done = False
        if f.header is not None:
            on_header(f.header)
            header_done = True
        recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=backlog or None)
        if backlog:
            for msg in first:
                if len(recent) == recent.maxlen:
                    on_message(recent[0], False)
                recent.append(msg)
        else:
            for msg in first:
                on_message(msg, False)
        for msg in recent:
            if max_messages is not None and shown >= max_messages:
                return shown
            on_message(msg, True)
            shown += 1
        while max_messages is None or shown < max_messages:
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic())))
            new = f.poll()
            now = time.monotonic()
            if new:
                idle_since = now
            elif on_idle is not None and now - idle_since >= IDLE_SECONDS:
                if on_idle():
                    break
                idle_since = now
            if not header_done and f.header is not None:
                on_header(f.header)
                header_done = True
            for msg in new:
                on_message(msg, True)
                shown += 1
                if max_messages is not None and shown >= max_messages:
                    break
        return shown
    finally:
        f.close()


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="trace file (.jsonl) an agent is writing")
    p.add_argument("-n", "--lines", type=non_negative_int, default=10, metavar="N", help="show the last N messages first (default 10)")
    p.add_argument("--interval", type=positive_float, default=0.5, metavar="S", help="seconds between checks (default 0.5)")
    p.add_argument("--max-messages", type=non_negative_int, default=None, metavar="N", help="exit after showing N messages")
    p.add_argument("--timeout", type=positive_float, default=None, metavar="S", help="exit after S seconds")
    p.add_argument("--no-color", action="store_true", help="never colour the output (also: NO_COLOR=1)")


def run(args: argparse.Namespace) -> int:
    from ._text import Transcript, use_color

    path = trace_file(args.file)
    t = Transcript(sys.stdout, color=use_color(sys.stdout, args.no_color))

    def on_header(header: dict[str, Any]) -> None:
        t.header(header)
        sys.stdout.flush()

    def on_message(msg: dict[str, Any], shown: bool) -> None:
        if shown:
            t.message(msg)
            sys.stdout.flush()
        else:
            t.remember(msg)

    waiting_said = False

    def on_idle() -> bool:
        """True when the session is finished: nothing writes the file any more."""
        nonlocal waiting_said
        from .._hub import can_see_open_files, is_open

        if can_see_open_files() and not is_open(path, ignore_self=True):
            warn("ststrace tail", f"{path}: the session is closed (no process is writing it); stopping")
            return True
        if not waiting_said:
            waiting_said = True
            how = "a process still has it open" if can_see_open_files() else "this system cannot tell whether it is finished"
            warn("ststrace tail", f"waiting for {path} to grow ({how}); Ctrl-C to stop")
        return False

    follow(
        path,
        backlog=args.lines,
        interval=args.interval,
        on_header=on_header,
        on_message=on_message,
        max_messages=args.max_messages,
        timeout=args.timeout,
        on_idle=on_idle,
    )
    return 0
