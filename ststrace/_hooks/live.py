"""Keep a Claude Code session's STS files up to date reading only what the transcript gained.

The worker used to convert the whole transcript on every event (minutes for
a 100 MB one). Here the converter's state (:class:`Conversion`, as JSON) is
kept beside the session's state, with the transcript offset it has read up
to: an event feeds it the lines added since, and only the messages that
changed are written: appended, or the file cut back to the first line that
differs (the latest reply, which a later line of the same ``message.id`` may
still extend) and written on from there. What comes out is what
``ststrace convert`` writes for the same transcript, because it is the same
converter fed the same lines; whenever that cannot be shown cheaply (no
state or a state we cannot read, a transcript that shrank or was rewritten,
a line that revises a reply already let go of, a last line without its
newline, a header whose id changed) the whole transcript is converted again.

Subagent files (``<session>/subagents/agent-*.jsonl``) are small: each is
converted whole, only when it or the main session's ``Task`` calls changed.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from .._convert import output_name, replace_file, sts_bytes, update_file
from .._convert.claude_code import Conversion, Revised
from .._convert.claude_code import convert as convert_claude
from .._encode import dumps
from .._guard import MessageGuard, make_guard

VERSION = 1
_PROBE = 4096  # bytes hashed at the head of the transcript and before the offset


class _Full(Exception):
    """The saved state cannot continue: convert the whole transcript."""


def update(transcript: Path, extra: list[Path], out: Path, memo: Path) -> list[str]:
    """Bring the STS files of *transcript* (and of its subagent files *extra*) up to date; returns their names.

    *memo* is where the converter's state is kept between calls.
    """
    guard = make_guard(True)
    assert guard is not None
    try:
        memo_state = _load(memo, transcript)
        names, state = _incremental(transcript, out, guard, memo_state)
    except _Full:
        memo_state = None
        names, state = _full(transcript, out, guard)
    names += _subagents(state, extra, out, guard, memo_state)
    if state.get("offset") is None:
        _unlink(memo)  # a last line without its newline was read: next time, from scratch
    else:
        _save(memo, state)
    return names


# -- the main transcript --------------------------------------------------------------


def _load(memo: Path, transcript: Path) -> dict[str, Any]:
    try:
        state = orjson.loads(memo.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        raise _Full from None
    if not isinstance(state, dict) or state.get("v") != VERSION or state.get("transcript") != str(transcript):
        raise _Full
    return state


def _identity(f: Any, offset: int) -> dict[str, Any]:
    """What tells the transcript read so far from another file (or a rewrite of it)."""
    st = os.fstat(f.fileno())
    f.seek(0)
    head = f.read(min(offset, _PROBE))
    f.seek(max(0, offset - _PROBE))
    before = f.read(offset - max(0, offset - _PROBE))
    return {
        "file": [st.st_dev, st.st_ino],
        "offset": offset,
        "head": hashlib.sha256(head).hexdigest(),
        "before": hashlib.sha256(before).hexdigest(),
    }


def _incremental(
    transcript: Path, out: Path, guard: MessageGuard, state: dict[str, Any]
) -> tuple[list[str], dict[str, Any]]:
    offset = int(state["offset"])
    with open(transcript, "rb") as f:
        if os.fstat(f.fileno()).st_size < offset or _identity(f, offset) != state["identity"]:
            raise _Full  # shrank, replaced or rewritten (compaction)
        try:
            conv = Conversion.restore(transcript, state["conv"])
            f.seek(offset)
            end = _feed(conv, f)
        except (Revised, KeyError, TypeError, ValueError, IndexError):
            raise _Full from None
    try:
        files = dict(state["files"])
        names = _write(conv, out, guard, files)
    except (Revised, KeyError, TypeError, ValueError, IndexError):
        raise _Full from None
    return names, _state(transcript, conv, files, None if end is None else offset + end, state)


def _full(transcript: Path, out: Path, guard: MessageGuard) -> tuple[list[str], dict[str, Any]]:
    conv = Conversion(transcript, Counter())
    with open(transcript, "rb") as f:
        end = _feed(conv, f)
    files: dict[str, Any] = {}
    # No message yet (the first lines are bookkeeping): no file, as convert writes none.
    names = _write(conv, out, guard, files, fresh=True)
    return names, _state(transcript, conv, files, end, None)


def _feed(conv: Conversion, f: Any) -> int | None:
    """Feed the lines of *f* from where it stands, split as ``convert`` splits them.

    Returns how many bytes of whole lines were consumed, or None when a last
    line without its newline was fed: ``convert`` reads such a line when it
    parses (and skips it otherwise), but the agent may still be writing it.
    """
    used = 0
    for raw in f:
        if not raw.endswith(b"\n"):
            if not raw.strip():
                break
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                break
            if isinstance(obj, dict):
                conv.feed(obj)
            return None
        _line(conv, raw)
        used += len(raw)
    return used


def _line(conv: Conversion, raw: bytes) -> None:
    if not raw.strip():
        return
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        conv.dropped["invalid_line"] += 1
        return
    if isinstance(obj, dict):
        conv.feed(obj)


def _state(
    transcript: Path, conv: Conversion, files: dict[str, Any], end: int | None, old: dict[str, Any] | None
) -> dict[str, Any]:
    state: dict[str, Any] = {"v": VERSION, "transcript": str(transcript), "offset": end, "files": files}
    if end is not None:
        with open(transcript, "rb") as f:
            state["identity"] = _identity(f, end)
        state["conv"] = conv.snapshot()
    state["subagents"] = (old or {}).get("subagents") or {}
    state["task_calls"] = conv.task_calls
    return state


# -- writing ------------------------------------------------------------------------


def _message_line(guard: MessageGuard, msg: dict[str, Any]) -> bytes:
    return b'{"type":"message","message":' + dumps(guard.message(msg)) + b"}\n"


def _write(conv: Conversion, out: Path, guard: MessageGuard, files: dict[str, Any], *, fresh: bool = False) -> list[str]:
    """Write each group's new and changed lines; *files* (group -> its file and where its latest reply is) is updated.

    A group's file is ``header | final lines | latest reply | lines after it``;
    the state holds the reply only (what a later line may change), with its
    offset and the hash of its line, so a file that is not what the state
    says (a worker killed mid-write) is caught and converted again.
    """
    names = []
    for b, key in zip(conv.builders(), list(conv.groups)):
        g = conv.groups[key]
        if not b.messages and not g.base:
            continue  # convert leaves out a trace with no message
        trace = b.build().trace
        header = dumps(guard.header(trace.header)) + b"\n"
        name = output_name(trace)
        lines = [_message_line(guard, m) for m in trace.messages]
        slot = str(key) if key is not None else ""
        known = None if fresh else files.get(slot)
        target = out / name
        if known is None:
            if g.base:
                raise _Full  # messages let go of, for a file we never wrote
            replace_file(target, header + b"".join(lines))
            start, gap = len(header), 0
        else:
            if known["name"] != name:
                raise _Full  # the session id changed: another file
            start, gap = _update_file(target, header, known, lines)
        at = conv.trim(key)
        # Where the latest reply's line starts now (past the *gap* of older
        # lines that follow the first one), and what it holds.
        reply = start + sum(len(x) for x in lines[:at]) + (gap if at else 0) if at is not None else None
        end = start + sum(len(x) for x in lines) + gap
        files[slot] = {
            "name": name,
            "reply": reply,
            "sha": hashlib.sha256(lines[at]).hexdigest() if at is not None else None,
            "len": len(lines[at]) if at is not None else None,
            "end": end,
        }
        names.append(name)
    return names


def _update_file(target: Path, header: bytes, known: dict[str, Any], lines: list[bytes]) -> tuple[int, int]:
    """Write *lines* (the kept reply, if any, then the new messages) into *target*.

    Returns where the first line starts, and how many bytes of older lines
    (those after the kept reply) lie between it and the next one."""
    try:
        fd = os.open(target, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        raise _Full from None
    try:
        size = os.fstat(fd).st_size
        end = int(known["end"])
        reply = known["reply"]
        first = os.pread(fd, min(size, 1 << 16), 0)
        cut = first.find(b"\n") + 1
        # Past "end" lies only what a killed worker wrote after its state: done again now.
        if size < end or cut == 0 or cut > end or os.pread(fd, 1, end - 1) != b"\n":
            raise _Full
        if reply is None:
            start, old_reply, after_at = end, b"", end
        else:
            start = int(reply)
            old_reply = os.pread(fd, int(known["len"]), start)
            if not old_reply.endswith(b"\n") or hashlib.sha256(old_reply).hexdigest() != known["sha"]:
                raise _Full
            after_at = start + len(old_reply)
        new_reply = lines[0] if reply is not None else b""
        rest = b"".join(lines[1:] if reply is not None else lines)
        if first[:cut] != header:
            # A new title, metadata or parent link: the header is the first line, so rewrite the file.
            body = os.pread(fd, start - cut, cut)
            after = os.pread(fd, end - after_at, after_at)
            replace_file(target, header + body + new_reply + after + rest)
            return len(header) + len(body), len(after)
        if new_reply == old_reply:
            # The common case: the new lines go after the old ones.
            if size > end:
                os.ftruncate(fd, end)
            if rest:
                os.pwrite(fd, rest, end)
        else:
            # The latest reply grew (a block, a higher usage): it and what follows it move.
            after = os.pread(fd, end - after_at, after_at)
            data = new_reply + after + rest
            os.pwrite(fd, data, start)
            os.ftruncate(fd, start + len(data))
        if rest or size != end or new_reply != old_reply:
            os.fsync(fd)
        return (start, end - after_at) if reply is not None else (end, 0)
    finally:
        os.close(fd)


# -- subagent files -------------------------------------------------------------------


def _subagents(state: dict[str, Any], extra: list[Path], out: Path, guard: MessageGuard, old: dict[str, Any] | None) -> list[str]:
    task_calls: dict[str, str] = state["task_calls"]
    main = Path(state["transcript"])
    seen: dict[str, Any] = {}
    names: list[str] = []
    before = state.get("subagents") or {}
    for src in extra:
        try:
            st = src.stat()
        except OSError:
            continue
        mine = src.parent.name == "subagents" and src.parent.parent.with_name(src.parent.parent.name + ".jsonl") == main
        calls = task_calls if mine else None
        mark = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, sorted(task_calls.items()) if mine else None]
        prev = before.get(str(src)) if old is not None else None
        if prev is not None and prev["mark"] == orjson.loads(orjson.dumps(mark)) and all((out / n).is_file() for n in prev["names"]):
            seen[str(src)] = prev
            names += prev["names"]
            continue
        got = []
        for c in convert_claude(src, dropped=Counter(), main_task_calls=calls):
            trace = c.trace
            trace.header = guard.header(trace.header)
            trace.messages = [guard.message(m) for m in trace.messages]
            name = output_name(trace)
            data = sts_bytes(trace)
            update_file(out / name, data)
            got.append(name)
        seen[str(src)] = {"mark": mark, "names": got}
        names += got
    state["subagents"] = seen
    return names


# -- the state file -------------------------------------------------------------------


def _save(memo: Path, state: dict[str, Any]) -> None:
    tmp = memo.with_name(f".{memo.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(orjson.dumps(state))
    os.replace(tmp, memo)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass

