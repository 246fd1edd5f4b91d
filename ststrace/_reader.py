"""Reading and validating STS trace files."""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PosixPath, WindowsPath
from typing import Any, Generator, Iterator, Literal, NamedTuple

import orjson

from ._errors import TraceFormatError, logger
from ._limits import TOKEN_COUNT_KEYS, token_count
from ._records import OUTCOME_TYPE, ROLES, empty_outcome, merge_outcome
from ._tree import is_placeholder, is_tree, resolve


@dataclass
class Trace:
    """A whole trace in memory: the header line and the message dicts."""

    header: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None
    #: How the session went: ``reward`` (float), ``rewards`` (name -> float),
    #: ``labels`` (name -> str), ``success`` (bool); None / empty where never
    #: set. The outcome lines of the file merged in order (``Session.outcome``,
    #: ``ststrace outcome``).
    outcome: dict[str, Any] = field(default_factory=empty_outcome)

    @property
    def id(self) -> str:
        return str(self.header.get("id", ""))

    def __repr__(self) -> str:
        return f"<ststrace.Trace {summary(self.header, self.messages)}>"

    def _repr_html_(self) -> str:
        """Jupyter: the viewer's page in a sandboxed iframe (see ``_view.notebook``)."""
        # On first use: Jupyter only. The page builder never reads files, so
        # the arrow stays one way (the viewer's file loading in _view imports us).
        from ._view.notebook import iframe

        return iframe(self)


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def summary(header: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    """``id='…' name='…' 6 messages (1 system, 1 user, 2 assistant, 2 tool), 2 tool calls, first prompt '…'``."""
    roles = Counter(str(m.get("role")) for m in messages)
    calls = sum(len(m.get("toolCalls") or ()) for m in messages)
    counts = ", ".join(f"{roles[r]} {r}" for r in ("system", "user", "assistant", "tool") if roles[r])
    head = f"id={header.get('id')!r}"
    if header.get("name"):
        head += f" name={header['name']!r}"
    parts = [head]
    parts.append(f"{len(messages)} messages" + (f" ({counts})" if counts else ""))
    if calls:
        parts.append(f"{calls} tool calls")
    first = next((m.get("content") for m in messages if m.get("role") == "user"), None)
    if isinstance(first, str):
        parts.append(f"first prompt {_short(first)!r}")
    return parts[0] + " " + ", ".join(parts[1:]) if len(parts) > 1 else parts[0]


class Problem(NamedTuple):
    """One finding of :func:`validate`."""

    line: int
    code: str
    message: str
    severity: Literal["error", "warning"]

    def __str__(self) -> str:
        return f"{self.line}: {self.severity}: {self.code}: {self.message}"


def _open(path: str | os.PathLike[str]) -> Any:
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(f"{p} is a directory, not a trace file")
    return open(p, "rb")


def _lines(f: Any) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without newline, whether the line was terminated)."""
    for n, raw in enumerate(f, 1):
        if raw.endswith(b"\n"):
            yield n, raw[:-1].rstrip(b"\r"), True
        else:
            yield n, raw, False


def _check_header(path: Path, obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict) or obj.get("type") != "session":
        raise TraceFormatError(path, 1, 'first line is not an STS session header ({"type": "session", ...})')
    for key in ("harness", "id"):
        if not isinstance(obj.get(key), str):
            raise TraceFormatError(path, 1, f"session header has no string {key!r}")
    return obj


def _iter(
    path: str | os.PathLike[str], strict: bool, outcome: dict[str, Any] | None = None
) -> Generator[tuple[int, Any], None, None]:
    """Yields (0, header) first, then (line, message dict). Outcome lines are
    not messages: merged into *outcome* when given, else skipped."""
    p = Path(path)
    with _open(p) as f:
        seen_header = False
        for n, raw, terminated in _lines(f):
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                if not terminated and seen_header:
                    if strict:
                        raise TraceFormatError(
                            p, n, "last line is incomplete (the writer stopped mid-line); read with strict=False to skip it"
                        ) from None
                    logger.warning("ststrace: %s:%d: skipping a torn last line", p, n)
                    return
                raise TraceFormatError(p, n, f"not valid JSON ({exc})") from None
            if not seen_header:
                yield 0, _check_header(p, obj)
                seen_header = True
                continue
            if isinstance(obj, dict) and obj.get("type") == OUTCOME_TYPE:
                if outcome is not None and isinstance(obj.get("outcome"), dict):
                    merge_outcome(outcome, obj["outcome"])
                continue
            yield n, message_of(p, n, obj)
        if not seen_header:
            raise TraceFormatError(p, 1, "empty file: no session header")


def message_of(path: Path, line: int, obj: Any) -> dict[str, Any]:
    """The message of a parsed message line, or :class:`TraceFormatError` naming *path*
    and *line* (also for ``ststrace tail``, which reads lines as they are appended)."""
    if not isinstance(obj, dict) or obj.get("type") != "message" or not isinstance(obj.get("message"), dict):
        raise TraceFormatError(path, line, 'not a message line ({"type": "message", "message": {...}})')
    msg: dict[str, Any] = obj["message"]
    role = msg.get("role")
    if not isinstance(role, str) or role not in ROLES:  # a list or object is unhashable
        raise TraceFormatError(path, line, f"unknown role {_short_repr(role)}")
    if not isinstance(msg.get("content"), str):
        raise TraceFormatError(path, line, "message content is missing or not a string")
    return msg


def iter_messages(path: str | os.PathLike[str], *, strict: bool = True) -> Iterator[dict[str, Any]]:
    """Stream the message dicts of a trace in constant memory.

    A llama.app message tree (see :mod:`ststrace._tree`) is read whole and
    yields its active path, as :func:`read` returns it."""
    it = _iter(path, strict)
    header = next(it)[1]
    for _, msg in it:
        if is_placeholder(msg) or is_tree(header, [msg]):
            yield from resolve(header, [msg, *(m for _, m in it)])
            return
        yield msg


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    it = _iter(path, True)
    try:
        return next(it)[1]  # type: ignore[no-any-return]
    finally:
        it.close()


def read(path: str | os.PathLike[str], *, strict: bool = True) -> Trace:
    """Read a whole trace; :class:`TraceFormatError` names the file and line of a problem.

    Of a llama.app message tree, the messages are its active path (root to
    ``currNode``, without the root placeholder); :func:`read_tree` keeps them all."""
    # A concrete Path as it is: Path(p) would parse it again (export reads thousands).
    p = path if type(path) is PosixPath or type(path) is WindowsPath else Path(path)
    whole = _read_whole(p)
    if whole is not None:
        trace, flat = whole
        if flat and not is_tree(trace.header, trace.messages):
            return trace  # what resolve() returns for it, without a call per message
    else:
        trace = _read_lines(p, strict)
    trace.messages = resolve(trace.header, trace.messages)
    return trace


def read_tree(path: str | os.PathLike[str], *, strict: bool = True) -> Trace:
    """Like :func:`read`, every message of the file in file order (every branch of a tree)."""
    p = path if type(path) is PosixPath or type(path) is WindowsPath else Path(path)
    whole = _read_whole(p)
    return whole[0] if whole is not None else _read_lines(p, strict)


def _read_lines(p: Path, strict: bool) -> Trace:
    outcome = empty_outcome()
    it = _iter(p, strict, outcome)
    header = next(it)[1]
    return Trace(header=header, messages=[m for _, m in it], path=p, outcome=outcome)


#: Files up to this size are parsed in one orjson call (:func:`_read_whole`);
#: larger ones line by line, so a huge trace is not held twice as bytes.
WHOLE_FILE_BYTES = 16 << 20


def _read_whole(p: Path) -> tuple[Trace, bool] | None:
    """(:func:`read_tree`'s trace, whether no message has a ``type``: no tree
    placeholder) of a well-formed file, its lines parsed in one
    ``orjson.loads`` of the lines joined into one JSON array (one call, not
    one per line); ``None`` for any other file, read line by line (which
    reports what is wrong with it, or skips a torn last line).

    The array has one item per line exactly when each line is a JSON value by
    itself (a comma inside a value would merge two lines into fewer items):
    then the items are what line-by-line parsing gives. A blank line, a torn
    one, no final newline or invalid JSON fail the parse or the count."""
    # os-level calls: a file object costs more than the read of a small file.
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except OSError:
        if p.is_dir():
            _open(p)  # its message (Windows says PermissionError)
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            _open(p)  # its message
        size = st.st_size
        if size > WHOLE_FILE_BYTES:
            return None
        data = os.read(fd, size + 1)
        if len(data) > size:  # grown since (or a size the system does not know): to the end
            chunks = [data]
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
                size += len(chunk)
                if size > WHOLE_FILE_BYTES:
                    return None
            data = b"".join(chunks)
    finally:
        os.close(fd)
    if not data.endswith(b"\n"):
        return None
    # "[" + the lines joined by "," + "]", in two copies of the data.
    joined = bytearray(b"[")
    joined += data.replace(b"\n", b",")
    joined[-1] = 0x5D  # the last newline's comma becomes the "]"
    try:
        objs = orjson.loads(joined)
    except orjson.JSONDecodeError:
        return None
    if not objs or len(objs) != data.count(b"\n"):
        return None
    header = _check_header(p, objs[0])
    outcome = empty_outcome()
    messages: list[dict[str, Any]] = []
    append = messages.append
    flat = True
    for n, obj in enumerate(objs):
        if not n:
            continue
        # message_of's checks, inline for the common line; it reports the others.
        if type(obj) is dict:
            kind = obj.get("type")
            if kind == "message":
                msg = obj.get("message")
                if type(msg) is dict:
                    role = msg.get("role")
                    if type(role) is str and role in ROLES and type(msg.get("content")) is str:
                        append(msg)
                        if flat and "type" in msg:
                            flat = False
                        continue
            elif kind == OUTCOME_TYPE:
                if isinstance(obj.get("outcome"), dict):
                    merge_outcome(outcome, obj["outcome"])
                continue
        append(message_of(p, n + 1, obj))
        flat = False
    return Trace(header=header, messages=messages, path=p, outcome=outcome), flat


_OPTIONAL_STR = ("reasoningContent", "model", "toolCallId")


def validate(path: str | os.PathLike[str]) -> list[Problem]:
    """Check a trace file against STS-Format; returns every problem found."""
    p = Path(path)
    problems: list[Problem] = []

    def err(line: int, code: str, message: str) -> None:
        problems.append(Problem(line, code, message, "error"))

    def warn(line: int, code: str, message: str) -> None:
        problems.append(Problem(line, code, message, "warning"))

    calls: dict[str, int] = {}  # id -> line of the call
    answered: set[str] = set()
    key_sets: set[frozenset[str]] = set()
    n_messages = 0
    header_ok = False
    with _open(p) as f:
        first = True
        for n, raw, terminated in _lines(f):
            if not raw.strip():
                if first:
                    err(n, "header-missing", "first line is empty; expected the session header")
                    first = False
                else:
                    warn(n, "blank-line", "blank line")
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                if first and terminated:
                    # Not a trace at all (a README, a CSV): one problem, not one per line.
                    err(n, "not-sts", f"not an STS trace (line {n}: not valid JSON: {exc})")
                    return problems
                if not terminated:
                    err(n, "torn-line", "last line is incomplete (crash mid-write?); Session(..., resume=True) cuts it off")
                else:
                    err(n, "invalid-json", f"not valid JSON: {exc}")
                first = False
                continue
            if not terminated:
                warn(n, "no-final-newline", "last line does not end with a newline")
            if not isinstance(obj, dict):
                if first:
                    err(n, "not-sts", f"not an STS trace (line {n}: a JSON {type(obj).__name__}, not a session header)")
                    return problems
                err(n, "not-object", f"line is a JSON {type(obj).__name__}, not an object")
                continue
            if first:
                first = False
                if obj.get("type") != "session":
                    if obj.get("type") != "message":
                        err(n, "not-sts", f'not an STS trace (line {n}: a JSON object without "type": "session")')
                        return problems
                    err(n, "header-missing", 'first line is not a session header ({"type": "session", ...})')
                else:
                    header_ok = True
                    for key in ("harness", "id"):
                        if key not in obj:
                            err(n, "header-invalid", f"session header has no {key!r}")
                        elif not isinstance(obj[key], str) or not obj[key]:
                            err(n, "header-invalid", f"session header {key!r} must be a non-empty string")
                    if "name" in obj and not isinstance(obj["name"], str):
                        err(n, "header-invalid", "session header 'name' must be a string")
                    continue
            if obj.get("type") == "session":
                err(n, "duplicate-header", "a second session header; one file holds one session")
                continue
            if obj.get("type") == OUTCOME_TYPE:
                _check_outcome(n, obj.get("outcome"), err)
                continue
            if obj.get("type") != "message" or "message" not in obj:
                err(n, "envelope", 'line is not {"type": "message", "message": {...}}')
                continue
            msg = obj["message"]
            if not isinstance(msg, dict):
                err(n, "envelope", "'message' is not an object")
                continue
            n_messages += 1
            key_sets.add(frozenset(msg))
            role = msg.get("role")
            if not isinstance(role, str) or role not in ROLES:
                err(n, "unknown-role", f"unknown role {_short_repr(role)} (expected user, assistant, system or tool)")
                role = None  # unhashable values must not reach the checks below
            if "content" not in msg or msg["content"] is None:
                err(n, "missing-content", "message has no content (use \"\" for empty content)")
            elif not isinstance(msg["content"], str):
                err(n, "content-not-string", f"content is a JSON {type(msg['content']).__name__}, not a string")
            for key in _OPTIONAL_STR:
                if key in msg and msg[key] is None:
                    warn(n, "null-field", f"{key} is null; leave optional fields out instead")
                elif key in msg and not isinstance(msg[key], str):
                    err(n, "field-type", f"{key} must be a string")
            if "timestamp" in msg:
                ts = msg["timestamp"]
                if isinstance(ts, bool) or not isinstance(ts, int):
                    err(n, "bad-timestamp", f"timestamp must be integer epoch milliseconds, got {ts!r}")
            if "usage" in msg:
                _check_usage(n, msg["usage"], err)
            if "toolCalls" in msg:
                _check_tool_calls(n, msg, role, calls, err, warn)
            if "tools" in msg and not _tool_definitions(msg["tools"]):
                err(n, "field-type", 'tools must be a list of {"type": "function", "function": {"name", ...}} definitions')
            if role == "tool":
                cid = msg.get("toolCallId")
                if not isinstance(cid, str):
                    if cid is None:
                        err(n, "missing-tool-call-id", "tool message has no toolCallId")
                elif cid not in calls:
                    err(n, "orphan-tool-result", f"toolCallId {cid!r} answers no earlier tool call")
                elif cid in answered:
                    err(n, "duplicate-tool-result", f"tool call {cid!r} (line {calls[cid]}) is answered twice")
                else:
                    answered.add(cid)
    if first:
        err(1, "header-missing", "empty file: no session header")
    for cid, line in calls.items():
        if cid not in answered:
            warn(line, "unanswered-tool-call", f"tool call {cid!r} has no result")
    if header_ok and n_messages == 0:
        warn(
            1,
            "no-messages",
            "the session has a header and no messages: nothing was recorded (model calls made outside the "
            "session, through a client ststrace does not instrument, or the run failed before its first call?)",
        )
    if header_ok and n_messages > 1 and len(key_sets) == 1:
        keys = ", ".join(sorted(next(iter(key_sets))))
        warn(
            1,
            "uniform-keys",
            f"every message has the same keys ({keys}); the Hub's Data Studio may not detect this file "
            "as a trace (add model to assistant messages, or any message with other fields)",
        )
    problems.sort(key=lambda pr: pr.line)
    return problems


def _check_outcome(n: int, value: Any, err: Any) -> None:
    """An outcome line (ststrace's extension; readers of messages skip it)."""
    if not isinstance(value, dict):
        err(n, "outcome-invalid", 'an outcome line is {"type": "outcome", "outcome": {...}}')
        return

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if "reward" in value and not number(value["reward"]):
        err(n, "outcome-invalid", f"outcome.reward must be a number, got {_short_repr(value['reward'])}")
    for key, ok, what in (("rewards", number, "numbers"), ("labels", lambda v: isinstance(v, str), "strings")):
        if key in value and not (isinstance(value[key], dict) and all(ok(v) for v in value[key].values())):
            err(n, "outcome-invalid", f"outcome.{key} must be an object of {what}")
    if "success" in value and not isinstance(value["success"], bool):
        err(n, "outcome-invalid", f"outcome.success must be true or false, got {_short_repr(value['success'])}")


def _tool_definitions(value: Any) -> bool:
    """Whether *value* is a ``tools`` field: the tool definitions offered from that message on."""
    return isinstance(value, list) and all(
        isinstance(d, dict) and isinstance(d.get("function"), dict) and isinstance(d["function"].get("name"), str)
        for d in value
    )


def _check_tool_calls(n: int, msg: dict[str, Any], role: Any, calls: dict[str, int], err: Any, warn: Any) -> None:
    tcs = msg["toolCalls"]
    if role != "assistant":
        err(n, "tool-calls-malformed", f"toolCalls on a {role!r} message; only assistant messages carry them")
    if not isinstance(tcs, list):
        err(n, "tool-calls-malformed", "toolCalls must be a list")
        return
    for i, tc in enumerate(tcs):
        where = f"toolCalls[{i}]"
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(tc, dict) or not isinstance(tc.get("id"), str) or not tc.get("id") or not isinstance(fn, dict):
            err(n, "tool-calls-malformed", f"{where} must be {{\"id\": str, \"function\": {{\"name\", \"arguments\"}}}}")
            continue
        if not isinstance(fn.get("name"), str) or not fn.get("name"):
            err(n, "tool-calls-malformed", f"{where}.function.name must be a non-empty string")
        args = fn.get("arguments")
        if not isinstance(args, str):
            err(n, "arguments-not-string", f"{where}.function.arguments must be JSON text (a string), not a JSON {type(args).__name__}")
        else:
            try:
                orjson.loads(args)
            except orjson.JSONDecodeError:
                warn(n, "arguments-not-json", f"{where}.function.arguments is not valid JSON text")
        cid = tc["id"]
        if cid in calls:
            err(n, "duplicate-tool-call-id", f"tool-call id {cid!r} already used on line {calls[cid]}")
        else:
            calls[cid] = n


_COST_KEYS = (*TOKEN_COUNT_KEYS[:4], "total")


def _check_usage(n: int, usage: Any, err: Any) -> None:
    """The ``usage`` extension (Pi's shape): counts are JSON integers that every
    reader keeps exact, ``cost`` an object of non-negative numbers."""
    if not isinstance(usage, dict):
        err(n, "usage-invalid", f"usage must be an object, not a JSON {_json_type(usage)}")
        return
    for key in TOKEN_COUNT_KEYS:
        if key in usage:
            value = usage[key]
            if not isinstance(value, int) or token_count(value) is None:
                err(n, "usage-invalid", f"usage.{key} must be an integer from 0 to 2**53 - 1, got {_short_repr(value)}")
    cost = usage.get("cost")
    if cost is not None:
        if not isinstance(cost, dict):
            err(n, "usage-invalid", f"usage.cost must be an object, not a JSON {_json_type(cost)}")
        else:
            for key, amount in cost.items():
                if key in _COST_KEYS and (isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0):
                    err(n, "usage-invalid", f"usage.cost.{key} must be a non-negative number, got {_short_repr(amount)}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
