"""Replay a recorded trace as the model: a :class:`FakeAPI` that answers from an STS file.

``replay(trace)`` starts a server on 127.0.0.1 that answers each model request
with the recorded assistant reply of the conversation the request continues,
in the wire shape of the API the client speaks (the fake server's renderers,
given the recorded content, reasoning, tool calls with their ids and argument
text, usage and model). A request is matched by its conversation, normalised
as the recorder normalises it (:func:`ststrace._adapters.inputs.collect`), not
by its HTTP bytes: headers, key order, SDK versions and timestamps do not
matter.

Matching is by the reply a request continues: its last assistant message (the
*anchor*, a reply this server sent) and what follows it (tool results, a new
user turn). A recorded reply answers the request when the reply just before it
in its session equals the anchor and the messages recorded between the two
equal the request's tail. Messages before the anchor were checked when the
earlier request was answered, so an agent that trims old history still
replays. System messages are compared by presence, not position: the recorder
writes each one once, where it starts to apply.

Built in: Chat Completions (with Groq's and Mistral's dialects), Responses,
Anthropic Messages, Gemini (API and Vertex), Ollama, Cohere v2 and Bedrock
(Converse, converse-stream, invoke_model with an Anthropic body). Protocols
without call ids (Ollama; Gemini without them) send calls with empty ids: the
recorded ids were made by ststrace, so those calls match by name and arguments
and their results by text.

Protocols plug in through :class:`ReplayProtocol` and :func:`register_protocol`:
the fake server's endpoint name, a function from a request body to the
normalised conversation, and optionally one giving the server-side
conversation a request continues. Rendering is the fake server's own for that
endpoint, which must honour a recorded ``_Reply`` (``recorded``, ``usage``,
``model``, and ``ScriptedToolCall.id`` / ``arguments_text`` for the recorded
tool-call ids and argument text).
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import orjson

from .. import _context
from .._adapters._common import is_generated_call_id
from .._adapters.bedrock import converse_request
from .._adapters.inputs import collect
from .._reader import Trace, read, read_header
from .fakeapi import Endpoint, FakeAPI, RecordedRequest, ScriptedToolCall, _Failure, _Reply

__all__ = [
    "PROTOCOLS",
    "Miss",
    "RecordedTools",
    "ReplayAPI",
    "ReplayMismatch",
    "ReplayProtocol",
    "load_sessions",
    "register_protocol",
    "replay",
]

Message = dict[str, Any]
ToolsMode = Literal["live", "recorded"]


class ReplayMismatch(AssertionError):
    """The replayed run asked the model something the recording does not answer,
    or left recorded replies unasked. The message names the first request
    message that differs, recorded against sent, and the closest recorded turn."""


@dataclass(frozen=True)
class ReplayProtocol:
    """How the replay server reads one wire protocol's requests.

    ``endpoint``: the fake server's name for it (what ``fakeapi._endpoint``
    gives the request path). ``conversation``: the request body -> its
    conversation as STS-like messages (``role``, ``content`` text,
    ``toolCalls`` / ``toolCallId``), or ``None`` when it carries none.
    ``continues``: the id of a server-side conversation the request continues
    (Responses ``previous_response_id``), or ``None``. The reply is rendered by
    the fake server's renderer for the endpoint.
    """

    endpoint: str
    conversation: Callable[[dict[str, Any]], list[Message] | None]
    continues: Callable[[dict[str, Any]], str | None] = lambda body: None


def _kwargs_conversation(body: dict[str, Any]) -> list[Message] | None:
    # A request body holds the SDK call's own keyword arguments (messages,
    # system, input, instructions): the recorder's normalisation reads them as is.
    return collect((), body)


def _previous_response(body: dict[str, Any]) -> str | None:
    value = body.get("previous_response_id")
    return value if isinstance(value, str) else None


def _gemini_conversation(body: dict[str, Any]) -> list[Message] | None:
    contents = body.get("contents")
    if contents is None:
        return None
    # The wire's systemInstruction is the SDK's config.system_instruction.
    return collect((), {"contents": contents, "config": {"systemInstruction": body.get("systemInstruction")}})


def _ollama_conversation(body: dict[str, Any]) -> list[Message] | None:
    messages = collect((), body)
    for msg in messages or ():
        for call in msg.get("toolCalls") or ():
            # The protocol has no call ids: the reader made some up. Matched by
            # name and arguments instead (see same_message).
            call["id"] = ""
    return messages


def _bedrock_conversation(body: dict[str, Any]) -> list[Message] | None:
    if isinstance(body.get("messages"), list) and "anthropic_version" in body:
        return collect((), body)  # invoke_model with an Anthropic Messages body
    return collect((), converse_request(body))


#: Protocols the replay server understands, by fake-server endpoint name. The
#: Groq and Mistral dialects are Chat Completions ("chat").
PROTOCOLS: dict[str, ReplayProtocol] = {
    "chat": ReplayProtocol("chat", _kwargs_conversation),
    "responses": ReplayProtocol("responses", _kwargs_conversation, _previous_response),
    "messages": ReplayProtocol("messages", _kwargs_conversation),
    "gemini": ReplayProtocol("gemini", _gemini_conversation),
    "ollama": ReplayProtocol("ollama", _ollama_conversation),
    "cohere": ReplayProtocol("cohere", _kwargs_conversation),
    "bedrock": ReplayProtocol("bedrock", _bedrock_conversation),
}


def register_protocol(protocol: ReplayProtocol) -> None:
    """Teach the replay server a protocol the fake server renders (a new provider)."""
    PROTOCOLS[protocol.endpoint] = protocol


# ---------------------------------------------------------------------------
# Loading


def _is_sts(path: Path) -> bool:
    from .._convert import is_sts

    return is_sts(path)


#: directory -> (its .jsonl file names, the sub-agent headers among them): a
#: suite replaying one trace per test from one directory reads each header once.
_CHILD_HEADERS: dict[Path, tuple[list[str], list[tuple[Path, dict[str, Any]]]]] = {}
_CHILD_HEADERS_LOCK = threading.Lock()


def _child_headers(directory: Path) -> list[tuple[Path, dict[str, Any]]]:
    names = sorted(n for n in os.listdir(directory) if n.endswith(".jsonl"))
    with _CHILD_HEADERS_LOCK:
        cached = _CHILD_HEADERS.get(directory)
    if cached is not None and cached[0] == names:
        return cached[1]
    headers: list[tuple[Path, dict[str, Any]]] = []
    for name in names:
        p = directory / name
        try:
            header = read_header(p)
        except (OSError, ValueError):
            continue
        if isinstance(header.get("parentSessionId"), str):
            headers.append((p, header))
    with _CHILD_HEADERS_LOCK:
        if len(_CHILD_HEADERS) > 64:
            _CHILD_HEADERS.clear()
        _CHILD_HEADERS[directory] = (names, headers)
    return headers


def _children(parents: list[Trace], directory: Path) -> list[Trace]:
    """Sub-agent sessions beside the parents' files (``parentSessionId`` chains)."""
    wanted = {t.id for t in parents}
    own = {t.path.resolve() for t in parents if t.path is not None}
    headers = [(p, h) for p, h in _child_headers(directory.resolve()) if p.resolve() not in own]
    found: list[Trace] = []
    changed = True
    while changed:
        changed = False
        for p, header in list(headers):
            if header["parentSessionId"] in wanted:
                child = read(p)
                found.append(child)
                wanted.add(child.id)
                headers.remove((p, header))
                changed = True
    return found


def load_sessions(trace: str | os.PathLike[str] | Trace | Sequence[Any]) -> list[Trace]:
    """*trace* and its sub-agent sessions: a path to an STS file (children are the
    ``.jsonl`` files beside it whose ``parentSessionId`` leads back to it), a file
    any converter reads, a :class:`~ststrace.Trace`, or a list of those."""
    if isinstance(trace, Trace):
        out = [trace]
        if trace.path is not None and trace.path.is_file():
            out.extend(_children(out, trace.path.parent))
        return out
    if isinstance(trace, (list, tuple)):
        return [t for item in trace for t in load_sessions(item)]
    if not isinstance(trace, (str, os.PathLike)):
        raise TypeError(f"replay() takes a trace path, a Trace or a list of them, not {type(trace).__name__}")
    path = Path(trace)
    if not path.exists():
        raise FileNotFoundError(f"no trace at {path}")
    if _is_sts(path):
        main = [read(path)]
        return main + _children(main, path.parent)
    from .._convert import convert

    # Kept as recorded: the replayed agent sends the unredacted text.
    return convert(path, redact=False)


# ---------------------------------------------------------------------------
# Comparing messages


def _loose_json(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _same_text(recorded: str, sent: str, tool: bool) -> bool:
    if recorded == sent:
        return True
    if not tool:
        return recorded.strip() == sent.strip()
    # A tool result recorded by @tool is its return value's JSON; the agent may
    # send it as str() of the value, or re-encoded with other spacing.
    a, b = recorded.strip(), sent.strip()
    if a == b:
        return True
    ja, jb = _loose_json(a), _loose_json(b)
    return ja is not None and ja == jb


def _call_ids(msg: Mapping[str, Any]) -> tuple[Any, ...]:
    calls = msg.get("toolCalls") or ()
    return tuple(c.get("id") for c in calls if isinstance(c, Mapping))


def _call_names(msg: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    out = []
    for c in msg.get("toolCalls") or ():
        fn = c.get("function") or {} if isinstance(c, Mapping) else {}
        args = fn.get("arguments", "{}")
        out.append((fn.get("name"), _loose_json(args) if isinstance(args, str) else args))
    return out


def same_message(recorded: Mapping[str, Any], sent: Mapping[str, Any]) -> bool:
    """Whether *sent* (from a request) is the recorded message, the way the
    recorder's de-dup tells messages apart (role, text, tool-call ids).

    A protocol without call ids (Ollama, Gemini) sends calls with empty ids and
    results with none: those calls are compared by name and arguments, those
    results by their text (the recorded ids were made by ststrace)."""
    role = recorded.get("role")
    if role != sent.get("role"):
        return False
    if role == "assistant":
        ids, sent_ids = _call_ids(recorded), _call_ids(sent)
        if sent_ids and not any(sent_ids):
            return _call_names(recorded) == _call_names(sent)
        if ids or sent_ids:
            return ids == sent_ids
        return _same_text(str(recorded.get("content", "")), str(sent.get("content", "")), False)
    if role == "tool" and sent.get("toolCallId") is not None and recorded.get("toolCallId") != sent.get("toolCallId"):
        return False
    return _same_text(str(recorded.get("content", "")), str(sent.get("content", "")), role == "tool")


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(msg: Mapping[str, Any]) -> str:
    """``tool call_1: 'Sunny'``: a message in one line, for error messages."""
    role = str(msg.get("role"))
    head = role
    if msg.get("toolCallId"):
        head += f" {msg['toolCallId']}"
    ids = _call_ids(msg)
    if ids:
        head += " calling " + ", ".join(str(i) for i in ids)
    return f"{head}: {_short(str(msg.get('content', '')))!r}"


def _text_diff(recorded: str, sent: str) -> list[str]:
    if "\n" not in recorded and "\n" not in sent:
        return [f"  - recorded: {_short(recorded, 300)!r}", f"  + sent:     {_short(sent, 300)!r}"]
    lines = difflib.unified_diff(recorded.splitlines(), sent.splitlines(), "recorded", "sent", lineterm="", n=1)
    return ["  " + _short(line, 300) for line in list(lines)[:20]]


# ---------------------------------------------------------------------------
# The recording, indexed


@dataclass(frozen=True)
class _Turn:
    """One recorded reply and what led to it in its session."""

    session: int
    index: int  # of the reply in the session's messages
    anchor: int  # index of the session's previous reply, -1 for none
    reply: Message


@dataclass
class Miss:
    """A request the recording does not answer (see :attr:`ReplayAPI.misses`)."""

    request: int  # the request's number at the server, from 1
    path: str
    message: str


class _Recording:
    """The recorded turns, indexed so that matching a request and explaining a
    miss cost about the request's length, not the recording's times it (a
    10,000-turn recording is asked 10,000 times, each request the whole history)."""

    def __init__(self, sessions: list[Trace]) -> None:
        self.sessions = sessions
        self.turns: list[_Turn] = []
        #: Per session: how many non-system messages come before each index.
        self._before: list[list[int]] = []
        #: Per session: (index, message) of its system messages.
        self._systems: list[list[tuple[int, Message]]] = []
        #: Per session: its non-system messages.
        self._plain: list[list[Message]] = []
        # Turns by what their anchor (the previous reply) is told apart by in
        # same_message: its tool-call ids, its tool-call names (a protocol
        # without ids), or its text; turns by the non-system messages that
        # lead to them from their anchor (how many, and the first one's role
        # and text: for a request without a reply in it); turns by anchor position.
        self._by_tail: dict[tuple[int, Any, str], list[_Turn]] = {}
        self._by_ids: dict[str, list[_Turn]] = {}
        self._by_names: dict[str, list[_Turn]] = {}
        self._by_text: dict[str, list[_Turn]] = {}
        self._by_anchor: dict[tuple[int, int], list[_Turn]] = {}
        for si, trace in enumerate(sessions):
            before = [0]
            systems: list[tuple[int, Message]] = []
            plain: list[Message] = []
            for i, msg in enumerate(trace.messages):
                if msg.get("role") == "system":
                    systems.append((i, msg))
                else:
                    plain.append(msg)
                before.append(len(plain))
            self._before.append(before)
            self._systems.append(systems)
            self._plain.append(plain)
            anchor = -1
            for i, msg in enumerate(trace.messages):
                if msg.get("role") == "assistant":
                    turn = _Turn(si, i, anchor, msg)
                    self.turns.append(turn)
                    self._by_anchor.setdefault((si, anchor), []).append(turn)
                    segment = [m for m in trace.messages[anchor + 1 : i] if m.get("role") != "system"]
                    self._by_tail.setdefault(_tail_key(segment), []).append(turn)
                    if anchor >= 0:
                        prev = trace.messages[anchor]
                        ids = _call_ids(prev)
                        if ids:
                            self._by_ids.setdefault(repr(ids), []).append(turn)
                            self._by_names.setdefault(_names_key(prev), []).append(turn)
                        else:
                            self._by_text.setdefault(str(prev.get("content", "")).strip(), []).append(turn)
                    anchor = i

    def where(self, turn: _Turn) -> str:
        trace = self.sessions[turn.session]
        n = sum(1 for t in self.turns if t.session == turn.session and t.index <= turn.index)
        place = f" ({trace.path.name}, line {turn.index + 2})" if trace.path is not None else ""
        return f"reply {n} of session {trace.id!r}{place}: {describe(turn.reply)}"

    def candidates(self, sent: list[Message], after: _Turn | None) -> tuple[list[_Turn], int]:
        """The turns that may match *sent* (in recording order; each still to be
        checked with :meth:`matches`), and the position of its last reply."""
        if after is not None:
            return self._by_anchor.get((after.session, after.index), []), -1
        p = _last_assistant(sent)
        if p < 0:
            return self._by_tail.get(_tail_key([m for m in sent if m.get("role") != "system"]), []), p
        last = sent[p]
        sent_ids = _call_ids(last)
        if sent_ids and not any(sent_ids):
            # Calls without ids (Ollama, Gemini): by their names, then in full.
            return self._by_names.get(_names_key(last), []), p
        if sent_ids:
            return self._by_ids.get(repr(sent_ids), []), p
        return self._by_text.get(str(last.get("content", "")).strip(), []), p

    def matches(self, turn: _Turn, sent: list[Message], after: _Turn | None, p: int | None = None) -> bool:
        recorded = self.sessions[turn.session].messages
        if after is not None:
            # The request continues a reply this server sent (previous_response_id):
            # what it sends is the new turn only.
            if (after.session, after.index) != (turn.session, turn.anchor):
                return False
            tail = sent
        else:
            if p is None:
                p = _last_assistant(sent)
            if p >= 0:
                if turn.anchor < 0 or not same_message(recorded[turn.anchor], sent[p]):
                    return False
            tail = sent[p + 1 :]
        segment = recorded[turn.anchor + 1 : turn.index]
        systems = [m for i, m in self._systems[turn.session] if i < turn.index]
        return _same_segment(segment, tail, systems, sent)

    def diagnose(self, sent: list[Message]) -> tuple[_Turn | None, list[str]]:
        """The recorded turn *sent* comes closest to, and where they part.

        A turn's score is how many non-system messages its history and the
        request agree on from the start: per session, the common prefix of the
        session's non-system messages and the request's, measured once; per
        turn, that capped at its history's length. Only the best turn's
        difference is described."""
        got = [m for m in sent if m.get("role") != "system"]
        common = []
        for plain in self._plain:
            k = 0
            for a, b in zip(plain, got):
                if not same_message(a, b):
                    break
                k += 1
            common.append(k)
        best_key: tuple[int, int] = (-1, 0)
        best: _Turn | None = None
        for turn in self.turns:
            key = (min(common[turn.session], self._before[turn.session][turn.index]), -abs(turn.index - len(sent)))
            if key > best_key:
                best_key, best = key, turn
        lines: list[str] = []
        if best is not None:
            _, lines = _first_difference(self.sessions[best.session].messages[: best.index], sent)
        where = [i for i, m in enumerate(sent) if m.get("role") != "system"]
        for si, trace in enumerate(self.sessions):
            # Past the end: the run asked once more than the recording did.
            score = common[si]
            if score == len(self._plain[si]) and len(where) > score and (score, 0) > best_key:
                extra = sent[where[score]]
                best_key, best = (score, 0), None
                lines = [
                    f"message {where[score] + 1} of the request ({describe(extra)}) continues past the end of "
                    f"session {trace.id!r}: the run made a model call the recording does not have"
                ]
        return best, lines


def _tail_key(plain: list[Message]) -> tuple[int, Any, str]:
    """How many messages, and the first one's role and text (not of a tool
    result, compared loosely): a necessary condition of two lists of
    non-system messages matching one by one."""
    if not plain:
        return (0, None, "")
    first = plain[0]
    role = first.get("role")
    text = "" if role == "tool" or role == "assistant" else str(first.get("content", "")).strip()
    return (len(plain), repr(role), text)


def _names_key(msg: Mapping[str, Any]) -> str:
    """The tool-call names of *msg* as an index key (a necessary condition of
    :func:`same_message` for calls without ids)."""
    return repr([name for name, _ in _call_names(msg)])


def _last_assistant(messages: list[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return i
    return -1


def _same_segment(segment: list[Message], tail: list[Message], systems: list[Message], sent: list[Message]) -> bool:
    """*systems*: the session's system messages before the turn."""
    # System messages by presence: the recorder writes each once, where it
    # starts to apply; requests repeat them at the top.
    if any(m.get("role") == "system" and not any(same_message(m, s) for s in sent) for m in segment):
        return False
    if any(s.get("role") == "system" and not any(same_message(m, s) for m in systems) for s in tail):
        return False
    rec = [m for m in segment if m.get("role") != "system"]
    got = [m for m in tail if m.get("role") != "system"]
    return len(rec) == len(got) and all(same_message(a, b) for a, b in zip(rec, got))


def _first_difference(recorded: list[Message], sent: list[Message]) -> tuple[int, list[str]]:
    """(how many messages agree from the start, the lines describing the first difference)."""
    rec = [m for m in recorded if m.get("role") != "system"]
    got = [m for m in sent if m.get("role") != "system"]
    systems_ok = all(any(same_message(m, s) for s in sent) for m in recorded if m.get("role") == "system")
    # Positions in *sent* of its non-system messages, to name them as sent.
    where = [i for i, m in enumerate(sent) if m.get("role") != "system"]
    for k, (a, b) in enumerate(zip(rec, got)):
        if not same_message(a, b):
            lines = [f"first difference: message {where[k] + 1} of the request ({b.get('role')})"]
            if a.get("role") != b.get("role") or a.get("toolCallId") != b.get("toolCallId"):
                lines += [f"  - recorded: {describe(a)}", f"  + sent:     {describe(b)}"]
            elif a.get("role") == "assistant" and _call_ids(a) != _call_ids(b):
                lines += [f"  - recorded: {describe(a)}", f"  + sent:     {describe(b)}"]
            else:
                lines += _text_diff(str(a.get("content", "")), str(b.get("content", "")))
            return k, lines
    k = min(len(rec), len(got))
    if len(got) < len(rec):
        return k, [f"the request ends after message {len(sent)}; recorded next: {describe(rec[k])}"]
    if not systems_ok:
        missing = next(m for m in recorded if m.get("role") == "system" and not any(same_message(m, s) for s in sent))
        return k, ["the request lacks the recorded system message", f"  - recorded: {describe(missing)}"]
    if len(got) > len(rec):
        return k, [f"message {where[k] + 1} of the request is not in the recording: {describe(got[k])}"]
    return k, []


# ---------------------------------------------------------------------------
# The reply, in the fake server's terms


def _recorded_reply(msg: Message) -> _Reply:
    calls: list[ScriptedToolCall] = []
    for c in msg.get("toolCalls") or ():
        fn = c.get("function") or {}
        args = fn.get("arguments", "{}")
        args = args if isinstance(args, str) else orjson.dumps(args).decode()
        parsed = _loose_json(args) if args else {}
        cid = str(c.get("id") or "")
        calls.append(
            ScriptedToolCall(
                str(fn.get("name", "")),
                parsed if isinstance(parsed, dict) else {},
                cid.removeprefix("call_") or cid,
                id=cid or None,
                arguments_text=args,
                generated_id=is_generated_call_id(cid),
            )
        )
    content = str(msg.get("content", ""))
    usage = msg.get("usage")
    return _Reply(
        "tools" if calls else "text",
        msg.get("reasoningContent") or None,
        None if calls and not content else content,
        tuple(calls),
        recorded=True,
        usage={k: v for k, v in usage.items() if isinstance(v, int)} if isinstance(usage, dict) else None,
        model=msg.get("model") or None,
    )


class RecordedTools:
    """The recorded results of tool calls, handed to ``@tool`` calls instead of
    running them (``replay(..., tools="recorded")``).

    A call is found by its tool-call id (the ``@tool`` call answers a reply the
    replay server sent, so it has the recorded id), else by tool name and
    arguments. A result recorded as a JSON object or array is returned decoded
    (``@tool`` wrote the function's dict or list as JSON), any other as its text.
    """

    def __init__(self, sessions: list[Trace]) -> None:
        results: dict[str, str] = {}
        calls: list[tuple[str, str, Any]] = []  # (id, name, arguments)
        for trace in sessions:
            for msg in trace.messages:
                cid = msg.get("toolCallId")
                if msg.get("role") == "tool" and isinstance(cid, str):
                    results.setdefault(cid, str(msg.get("content", "")))
                for c in msg.get("toolCalls") or ():
                    fn = c.get("function") or {}
                    args = fn.get("arguments")
                    calls.append((str(c.get("id")), str(fn.get("name")), _loose_json(args) if isinstance(args, str) else args))
        self._results = results
        self._calls = [c for c in calls if c[0] in results]
        self._used: set[str] = set()
        self._lock = threading.Lock()
        #: Tool calls answered from the recording, as ``(name, call id)``.
        self.answered: list[tuple[str, str]] = []

    def take(self, name: str, call_id: str | None, arguments: Any) -> tuple[bool, Any]:
        with self._lock:
            cid = call_id if call_id in self._results else None
            if cid is None:
                same = [c for c, n, a in self._calls if n == name and a == arguments]
                fresh = [c for c in same if c not in self._used]
                if not same:
                    return False, None
                cid = (fresh or same)[0]
            self._used.add(cid)
            self.answered.append((name, cid))
            text = self._results[cid]
        value = _loose_json(text) if text[:1] in ("{", "[") else None
        return True, value if isinstance(value, (dict, list)) else text


_RESPONSE_ID = re.compile(r"^resp_fake(\d+)$")


class ReplayAPI(FakeAPI):
    """The replay server: a :class:`FakeAPI` whose replies come from a recording.

    ``strict=True``: a request no recorded turn answers gets HTTP 409 in the API's
    error shape (and ``x-should-retry: false``), and :meth:`check` (called when
    the ``with`` block ends) raises :class:`ReplayMismatch`. ``strict=False``:
    the fake server's scripted reply instead, the miss listed in :attr:`misses`.
    """

    def __init__(self, sessions: list[Trace], *, strict: bool = True, tools: ToolsMode = "live") -> None:
        super().__init__()
        if tools not in ("live", "recorded"):
            raise ValueError(f"tools must be 'live' or 'recorded', not {tools!r}")
        self.strict = strict
        self.tools = tools
        self.recording = _Recording(sessions)
        #: The recorded tool results ``@tool`` calls get (``tools="recorded"``).
        self.recorded_tools = RecordedTools(sessions)
        self._previous_tools: Any = None
        #: Requests the recording did not answer, in arrival order.
        self.misses: list[Miss] = []
        self._served: dict[tuple[int, int], int] = {}
        self._by_request: dict[int, _Turn] = {}
        self._replay_lock = threading.Lock()

    @property
    def sessions(self) -> list[Trace]:
        return self.recording.sessions

    @property
    def unused(self) -> list[Message]:
        """Recorded replies no request has asked for (yet)."""
        with self._replay_lock:
            return [t.reply for t in self.recording.turns if (t.session, t.index) not in self._served]

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> ReplayAPI:
        if self.tools == "recorded" and _context.replayed_tools is not self.recorded_tools:
            self._previous_tools = _context.replayed_tools
            _context.replayed_tools = self.recorded_tools
        super().start()
        return self

    def stop(self) -> None:
        super().stop()
        if _context.replayed_tools is self.recorded_tools:
            _context.replayed_tools = self._previous_tools

    def __enter__(self) -> ReplayAPI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if exc is None:
            self.check()
        elif self.strict and self.misses:
            # The run failed on the 409 of a miss: the mismatch is the news.
            raise ReplayMismatch(self._miss_report()) from exc

    def check(self) -> None:
        """Raise :class:`ReplayMismatch` for the first miss, or, when every request
        was answered, for recorded replies no request asked for (``strict`` only)."""
        if not self.strict:
            return
        if self.misses:
            raise ReplayMismatch(self._miss_report())
        with self._replay_lock:
            left = [t for t in self.recording.turns if (t.session, t.index) not in self._served]
        if left:
            more = f" (and {len(left) - 1} more)" if len(left) > 1 else ""
            raise ReplayMismatch(
                f"the run made fewer model calls than the recording: {self.recording.where(left[0])}{more} "
                "was never requested"
            )

    def _miss_report(self) -> str:
        first = self.misses[0]
        more = f"\n({len(self.misses) - 1} more request(s) missed too)" if len(self.misses) > 1 else ""
        return first.message + more

    # -- answering ---------------------------------------------------------

    def _reply_for(
        self, endpoint: Endpoint, body: dict[str, Any], n: int, request: RecordedRequest
    ) -> _Reply | _Failure:
        protocol = PROTOCOLS.get(endpoint)
        sent = protocol.conversation(body) if protocol is not None else None
        if sent is not None:
            previous = protocol.continues(body) if protocol is not None else None
            turn = self._match(sent, previous)
            if turn is not None:
                with self._replay_lock:
                    self._by_request[n] = turn
                return _recorded_reply(turn.reply)
        miss = Miss(n, request.path, self._explain(n, request.path, sent))
        with self._replay_lock:
            self.misses.append(miss)
        if self.strict:
            return _Failure(409, miss.message, "invalid_request_error", retry=False)
        return super()._reply_for(endpoint, body, n, request)

    def _match(self, sent: list[Message], previous: str | None) -> _Turn | None:
        after: _Turn | None = None
        if previous is not None:
            m = _RESPONSE_ID.match(previous)
            with self._replay_lock:
                after = self._by_request.get(int(m.group(1))) if m else None
        # Only the turns whose previous reply is the request's (an index
        # lookup), each checked in full: a request costs about its own length.
        candidates, p = self.recording.candidates(sent, after)
        found = [t for t in candidates if self.recording.matches(t, sent, after, p)]
        if not found:
            return None
        with self._replay_lock:
            # The same conversation recorded more than once (a run repeated in
            # one session): each reply in turn, then the last again.
            turn = min(found, key=lambda t: self._served.get((t.session, t.index), 0))
            key = (turn.session, turn.index)
            self._served[key] = self._served.get(key, 0) + 1
        return turn

    def _explain(self, n: int, path: str, sent: list[Message] | None) -> str:
        head = f"replay: request {n} (POST {path}) continues no recorded conversation"
        if sent is None:
            return head + ": it carries no conversation this replay server reads"
        turn, lines = self.recording.diagnose(sent)
        out = [head] + lines
        if turn is not None:
            out.append(f"closest recorded turn: {self.recording.where(turn)}")
        return "\n".join(out)


def replay(
    trace: str | os.PathLike[str] | Trace | Sequence[Any],
    *,
    strict: bool = True,
    tools: ToolsMode = "live",
) -> ReplayAPI:
    """A started replay server for *trace* (see :class:`ReplayAPI`); use it in a ``with`` block.

    *trace*: an STS file (its sub-agent sessions beside it are replayed too), a
    :class:`~ststrace.Trace`, a file any ``ststrace convert`` format reads, or a
    list of those. ``tools="recorded"``: ``@tool`` functions return their
    recorded results instead of running (for tests of the agent loop alone).
    """
    return ReplayAPI(load_sessions(trace), strict=strict, tools=tools).start()

