"""Traces -> training rows (``ststrace export``, :func:`export`).

One row per session, streamed: a file is read, its sessions turned into rows
and written before the next file is opened, so memory stays that of the
largest session whatever the number of files.

``format="sft"`` (default) is TRL's conversational shape with tools::

    {"messages": [{"role": "system" | "user", "content"},
                  {"role": "assistant", "content", "reasoning_content"?,
                   "tool_calls"?: [{"id", "type": "function",
                                    "function": {"name", "arguments": {...}}}]},
                  {"role": "tool", "tool_call_id", "name", "content"}],
     "tools": [{"type": "function", "function": {"name", "description", "parameters"}}],
     "session_id", "harness", "name", "models", "usage", "num_tool_calls",
     "errors", "unanswered_tool_calls", "parent_session_id"}

``arguments`` is an object, as chat templates and TRL want (STS keeps JSON
text). ``format="messages"`` is the OpenAI fine-tuning shape: ``messages``
(arguments as JSON text, no reasoning) and ``tools`` only.

Inputs are what ``ststrace convert`` reads: STS traces, or any agent format it
converts. Secrets are redacted exactly as ``convert`` redacts them.
"""

from __future__ import annotations

import os
import secrets
import weakref
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ._convert import ConvertError, convert_file, input_files, is_sts
from ._encode import dumps
from ._errors import TraceFormatError
from ._guard import MessageGuard, make_guard
from ._reader import Trace, read
from ._redact import Redactor
from ._tools import merge

__all__ = ["FORMATS", "ExportResult", "export", "trace_row"]

FORMATS = ("sft", "messages", "rewards", "kto", "dpo")
_loads = orjson.loads
_E = frozenset("eE")
#: Formats whose rows need an outcome (sessions without one are left out and counted).
_NEED_OUTCOME = ("rewards", "kto", "dpo")
#: Rows per Parquet row group: bounded memory, and groups big enough to compress.
_PARQUET_BATCH = 256


@dataclass
class ExportResult:
    """What :func:`export` wrote, left out and could not read."""

    path: Path
    #: Rows written (one per session).
    rows: int = 0
    files: int = 0
    messages: int = 0
    tool_calls: int = 0
    #: Sessions left out, by reason (``errors``, ``min_tool_calls``, ``subagent``, ``empty``).
    skipped: Counter[str] = field(default_factory=Counter)
    #: What a row cannot hold, by kind (images a converter dropped, results without a call, ...).
    dropped: Counter[str] = field(default_factory=Counter)
    #: Secrets redacted, by kind (empty with ``redact=False``).
    redactions: Counter[str] = field(default_factory=Counter)
    #: One line per input that could not be read (the others were exported).
    failed: list[str] = field(default_factory=list)


# -- one trace -> one row ------------------------------------------------------------


def _arguments(raw: Any, dropped: Counter[str]) -> Any:
    """Arguments as an object (chat templates iterate them as a mapping)."""
    if isinstance(raw, str):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            dropped["arguments that are not JSON (kept as {\"input\": text})"] += 1
            return {"input": raw}
    else:
        value = raw
    if isinstance(value, dict):
        return value
    dropped["arguments that are not a JSON object (kept as {\"input\": value})"] += 1
    return {"input": value}


def trace_row(trace: Trace, fmt: str = "sft", dropped: Counter[str] | None = None) -> dict[str, Any]:
    """The training row of *trace* (see the module docstring for the shapes).

    *dropped* counts what the row cannot hold."""
    return _row(trace, fmt, dropped if dropped is not None else Counter(), None)[0]


class _Texts:
    """What the guard would look at in a trace's messages, collected by the walk
    that builds its row (see :func:`_guarded_row`): the named text fields of
    each message (content, reasoning, tool calls' ids, names and arguments,
    model, tool-call id), and the messages the guard must judge itself."""

    __slots__ = ("redactor", "strings", "marks", "suspects", "pending", "clean", "escapes", "screen")

    def __init__(self, guard: MessageGuard) -> None:
        self.redactor = redactor = guard.redactor
        self.strings: list[str] = []
        #: Index in :attr:`strings` of each message's first string.
        self.marks: list[int] = []
        #: Messages for the guard whatever the scan of the strings finds (shapes it handles its own way).
        self.suspects: set[int] = set()
        #: Messages whose extra fields the guard's screen flags, with those fields' JSON text.
        self.pending: dict[int, bytes] = {}
        #: Whether any backslash in arguments is read behind (MessageGuard._arguments).
        self.escapes = redactor is not None and redactor.escapes_matter
        #: The guard's own first look at extra fields (None: it ignores them).
        self.screen = guard.screen if redactor is not None else None
        # Extra fields the guard left alone before, by their JSON text (tool
        # schemas repeat from session to session), while its redactor is the same.
        known = _CLEAN_EXTRAS.get(guard)
        if known is None or known[0] is not redactor:
            known = _CLEAN_EXTRAS[guard] = (redactor, set())
        self.clean = known[1]

    @classmethod
    def of(cls, guard: MessageGuard) -> _Texts:
        """An empty collection for *guard*: the last one, emptied, while its redactor is the same."""
        texts = _TEXTS.get(guard)
        if texts is None or texts.redactor is not guard.redactor:
            texts = _TEXTS[guard] = cls(guard)
        else:
            texts.strings.clear()
            texts.marks.clear()
            texts.suspects.clear()
            texts.pending.clear()
        return texts

    def take(self, index: int, m: dict[str, Any]) -> None:
        """Collect the strings of message *index* (the reader checked its role and content)."""
        strings = self.strings
        self.marks.append(len(strings))
        n = len(m)
        # The shapes of a user, system or tool message, without a loop.
        if n == 3 and type(m.get("timestamp")) is int:
            strings.append(m["content"])
            return
        if n == 4 and type(m.get("timestamp")) is int and type(m.get("toolCallId")) is str:
            strings.append(m["content"])
            strings.append(m["toolCallId"])
            return
        if m.keys() <= _REPLY_KEYS:
            # A reply as the recorders write it (an absent field reads as one of its type).
            reasoning = m.get("reasoningContent", "")
            model = m.get("model", "")
            calls = m.get("toolCalls", _NO_CALLS)
            if type(reasoning) is str and type(model) is str and type(m.get("timestamp", 0)) is int and (
                type(calls) is list or calls is _NO_CALLS
            ):
                strings.append(m["content"])
                if reasoning:
                    strings.append(reasoning)
                if model:
                    strings.append(model)
                if calls:
                    self._calls(index, calls)
                if "usage" in m:
                    self._extra(index, {"usage": m["usage"]})
                return
        add = strings.append
        extra: dict[str, Any] | None = None
        for key, value in m.items():
            kind = type(value)
            if kind is str:
                if key in _TEXT_KEYS:
                    add(value)
                    continue
                if key == "role":
                    continue
            elif kind is list:
                if key == "toolCalls":
                    self._calls(index, value)
                    continue
                if key in _NUMBER_LISTS and all(type(v) in (int, float) for v in value):
                    continue  # token ids and logprobs: the guard skips them too
            elif kind is int and key == "timestamp":
                continue
            if key in _PLAIN:
                self.suspects.add(index)  # a named field of another type: the guard's own path
                continue
            if extra is None:
                extra = {}
            extra[key] = value
        if extra is not None:
            self._extra(index, extra)

    def _extra(self, index: int, extra: dict[str, Any]) -> None:
        """Fields the guard judges by their JSON text (usage, tools, anything a
        caller added): its own first look, as it takes it."""
        if self.screen is None:
            return
        try:
            raw = dumps(extra)
            if raw not in self.clean and self.screen(raw.decode("utf-8", "replace")):
                self.pending[index] = raw
        except Exception:
            self.suspects.add(index)

    def _calls(self, index: int, calls: list[Any]) -> None:
        add = self.strings.append
        for call in calls:
            fn = call.get("function") if type(call) is dict else None
            if type(fn) is dict and len(call) == 2 and len(fn) == 2:
                cid, name, args = call.get("id"), fn.get("name"), fn.get("arguments")
                if type(cid) is str and type(name) is str and type(args) is str:
                    add(cid)
                    add(name)
                    add(args)
                    # The guard reads arguments behind these escapes (MessageGuard._arguments).
                    if "\\" in args and (self.escapes or "\\u" in args or "\\/" in args):
                        self.suspects.add(index)
                    continue
            self.suspects.add(index)  # another shape: the guard judges it whole


#: Message fields the guard reads by name, with the type it expects.
_PLAIN: dict[str, type] = {
    "role": str, "content": str, "timestamp": int, "reasoningContent": str, "toolCalls": list, "model": str, "toolCallId": str,
}
_NUMBER_LISTS = frozenset({"tokenIds", "promptTokenIds", "logprobs"})
#: The fields of a reply as the recorders write it.
_REPLY_KEYS = frozenset({"role", "content", "reasoningContent", "toolCalls", "model", "usage", "timestamp"})
_NO_CALLS: tuple[()] = ()
#: Per guard: (its redactor, the JSON texts of extra fields it left alone). Bounded.
_CLEAN_EXTRAS: weakref.WeakKeyDictionary[MessageGuard, tuple[Any, set[bytes]]] = weakref.WeakKeyDictionary()
_CLEAN_EXTRAS_MAX = 256
#: Per guard, the collection of its last session (sessions are done one at a time).
_TEXTS: weakref.WeakKeyDictionary[MessageGuard, _Texts] = weakref.WeakKeyDictionary()
#: Text fields the guard reads by name (a role is not scanned).
_TEXT_KEYS = frozenset({"content", "reasoningContent", "model", "toolCallId"})


def _row(
    trace: Trace, fmt: str, lost: Counter[str], texts: _Texts | None
) -> tuple[dict[str, Any], int, int, int]:
    """(row, tool calls, failed results, unanswered calls) of *trace*, in one walk
    of its messages; *texts*, when given, collects what the guard looks at."""
    sft = fmt == "sft"
    out: list[dict[str, Any]] = []
    append = out.append
    names: dict[str, str] = {}
    offered: list[Any] = []
    answered: set[str] = set()
    models: list[str] = []
    usage: dict[str, Any] = {}
    errors = 0
    n_calls = 0
    if texts is not None:
        strings = texts.strings
        marks = texts.marks
    for index, m in enumerate(trace.messages):
        if texts is not None:
            # A user, system or tool message as recorded, inline; the rest in take().
            n = len(m)
            if n == 3 and type(m.get("timestamp")) is int:
                marks.append(len(strings))
                strings.append(m["content"])
            elif n == 4 and type(m.get("timestamp")) is int and type(m.get("toolCallId")) is str:
                marks.append(len(strings))
                strings.append(m["content"])
                strings.append(m["toolCallId"])
            else:
                texts.take(index, m)
        if "tools" in m:
            offered.append(m["tools"])
        role = m.get("role")
        content = m.get("content")
        text = content if type(content) is str else (content if isinstance(content, str) else "")
        if role == "system" or role == "user":
            append({"role": role, "content": text})
        elif role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": text}
            reasoning = m.get("reasoningContent")
            if reasoning and isinstance(reasoning, str):
                if sft:
                    msg["reasoning_content"] = reasoning
                else:
                    lost["reasoning (no field for it in the messages format)"] += 1
            tool_calls = m.get("toolCalls")
            if tool_calls:
                calls = []
                for call in tool_calls:
                    fn = call.get("function") if isinstance(call, dict) else None
                    cid = call.get("id") if isinstance(call, dict) else None
                    if not isinstance(fn, dict) or not isinstance(cid, str):
                        lost["malformed tool calls"] += 1
                        continue
                    raw_name = fn.get("name")
                    name = raw_name if isinstance(raw_name, str) else "unknown"
                    names[cid] = name
                    raw = fn.get("arguments", "{}")
                    if sft:
                        # The common case without a call; _arguments counts the others.
                        try:
                            args: Any = _loads(raw) if type(raw) is str else None
                        except orjson.JSONDecodeError:
                            args = None
                        if type(args) is not dict:
                            args = _arguments(raw, lost)
                    else:
                        args = raw if isinstance(raw, str) else dumps(raw).decode()
                    calls.append({"id": cid, "type": "function", "function": {"name": name, "arguments": args}})
                if calls:
                    msg["tool_calls"] = calls
                    n_calls += len(calls)
            model = m.get("model")
            if model and isinstance(model, str) and model not in models:
                models.append(model)
            used = m.get("usage")
            if used is not None:
                _add_usage(usage, used)
            append(msg)
        elif role == "tool":
            cid = m.get("toolCallId")
            if not isinstance(cid, str) or cid not in names or cid in answered:
                lost["tool results without their call"] += 1
                continue
            answered.add(cid)
            # The rule of convert --to pi and the viewer: a failed result starts with "Error".
            if text[:1] in _E and text[:5].lower() == "error":
                errors += 1
            if sft:
                append({"role": "tool", "tool_call_id": cid, "name": names[cid], "content": text})
            else:
                append({"role": "tool", "tool_call_id": cid, "content": text})
    tools = merge(offered) if offered else []
    unanswered = len(names) - len(answered)
    row: dict[str, Any] = {"messages": out, "tools": tools}
    if not sft:
        if not tools:
            del row["tools"]
        return row, n_calls, errors, unanswered
    header = trace.header
    title = header.get("name")
    parent = header.get("parentSessionId")
    row.update(
        session_id=trace.id,
        harness=str(header.get("harness") or ""),
        name=title if isinstance(title, str) else None,
        models=models,
        usage=usage,
        num_tool_calls=n_calls,
        errors=errors,
        unanswered_tool_calls=unanswered,
        parent_session_id=parent if isinstance(parent, str) else None,
    )
    return row, n_calls, errors, unanswered


def _add_usage(totals: dict[str, Any], usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    for key, value in usage.items():
        if type(value) is int:
            totals[key] = totals.get(key, 0) + value
        elif key == "cost" and isinstance(value, dict):
            total = value.get("total")
            if isinstance(total, (int, float)) and not isinstance(total, bool):
                totals["cost"] = totals.get("cost", 0.0) + float(total)
        elif isinstance(value, int) and not isinstance(value, bool):
            totals[key] = totals.get(key, 0) + value


# -- inputs -----------------------------------------------------------------------------


def _load(
    path: Path, from_: str | None, redact: bool | Redactor, guard: MessageGuard | None
) -> tuple[list[Trace], Counter[str], dict[str, int], bool]:
    """(traces, dropped, redactions, to screen) of one input, read as ``convert`` reads it.

    *guard* redacts STS traces: one for the whole export, so what repeats from
    session to session (tool schemas, model names) is judged once. Their
    headers are redacted here, their messages as their rows are built
    (*to screen*, see :func:`_guarded_row`; counted there too)."""
    trace: Trace | None = None
    if from_ is None:
        # Read as STS first: one open for the common case; a file that is not
        # STS (another agent's format) is converted, one that is and is damaged reported.
        try:
            # A torn last line (a session killed mid-write) is skipped with a
            # warning, as convert, stats and cat read it: the session is kept.
            trace = read(path, strict=False)
        except TraceFormatError:
            if is_sts(path, whole=False):
                raise
    if trace is not None:
        if guard is None:
            return [trace], Counter(), {}, False
        trace.header = guard.header(trace.header)
        return [trace], Counter(), {}, True
    result = convert_file(path, from_, redact=redact)
    return result.traces, result.dropped, result.redactions, False


def _guarded_row(
    guard: MessageGuard | None, trace: Trace, fmt: str, lost: Counter[str], screen: bool
) -> tuple[dict[str, Any], int, int, int]:
    """:func:`_row` of *trace* (*lost*: empty, gets what the row cannot hold) with
    its messages redacted and capped as ``convert``
    redacts them (``guard_trace``), with the same result, in one walk when nothing
    needs the guard (the common case).

    The walk that builds the row also collects every string the guard would
    look at; one :meth:`~ststrace.Redactor.find` over them all, joined by
    newlines, says which messages hold something (a secret, a data URL, a field
    over the cap). Only those go through the guard; the row is built again
    if it changed one.
    tests/hub/test_export_screen.py checks that a message the scan lets through
    is one the guard leaves as it is, on every detector sample in every field."""
    if guard is None or not screen:
        return _row(trace, fmt, lost, None)
    texts = _Texts.of(guard)
    built = _row(trace, fmt, lost, texts)
    hits = _screen(guard, texts)
    messages = trace.messages
    changed = False
    if hits is None:
        flagged: Iterable[int] = range(len(messages))
    else:
        flagged = sorted(hits | texts.suspects | texts.pending.keys())
    for i in flagged:
        m = messages[i]
        new = guard.message(m)
        if new is not m:
            messages[i] = new
            changed = True
        elif hits is not None and i in texts.pending and i not in hits and i not in texts.suspects:
            # Flagged for its extra fields alone, and the guard left it: they are clean.
            clean = texts.clean
            if len(clean) >= _CLEAN_EXTRAS_MAX:
                clean.clear()
            clean.add(texts.pending[i])
    if changed:
        lost.clear()
        built = _row(trace, fmt, lost, None)
    return built


def _screen(guard: MessageGuard, texts: _Texts) -> set[int] | None:
    """Indexes of the messages whose strings hold something the guard changes
    (a secret, a data URL, a field over the cap); ``None``: it cannot be told."""
    strings = texts.strings
    hits: set[int] = set()
    if not strings:
        return hits
    try:
        joined = "\n".join(strings)
        spans: list[tuple[int, int]] = []  # (start, end) in joined
        cap = guard.max_field_chars
        if cap is not None:
            # Caps and media placeholders are on together.
            at = joined.find(";base64,")
            while at >= 0:
                spans.append((at, at + 8))
                at = joined.find(";base64,", at + 1)
            if len(joined) > cap:
                long = [i for i, s in enumerate(strings) if len(s) > cap]
                hits.update(bisect_right(texts.marks, i) - 1 for i in long)
        if guard.redactor is not None:
            spans.extend((a, b) for _, a, b in guard.redactor.find(joined))
        if spans:
            starts: list[int] = []
            pos = 0
            for s in strings:
                starts.append(pos)
                pos += len(s) + 1
            marks = texts.marks
            for a, b in spans:
                for i in range(bisect_right(starts, a) - 1, bisect_right(starts, max(b - 1, a))):
                    hits.add(bisect_right(marks, i) - 1)
    except Exception:  # the guard itself fails closed and reports it
        return None
    return hits


def _reason(path: Path, exc: Exception) -> str:
    if isinstance(exc, ConvertError):
        text = exc.cli_message()
    elif isinstance(exc, TraceFormatError):
        text = str(exc)
    else:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = " ".join(text.split())
    return text if str(path) in text else f"{path}: {text}"


class _Filters:
    """Which sessions become rows: export()'s filter arguments."""

    def __init__(
        self,
        *,
        errors: bool,
        min_tool_calls: int,
        include_subagents: bool,
        min_reward: float | None,
        threshold: float,
    ) -> None:
        self.errors = errors
        self.min_tool_calls = min_tool_calls
        self.include_subagents = include_subagents
        self.min_reward = min_reward
        self.threshold = threshold


def _rows(
    files: Iterable[Path],
    result: ExportResult,
    fmt: str,
    *,
    filters: _Filters,
    from_: str | None,
    redact: bool | Redactor,
) -> Iterator[dict[str, Any]]:
    from ._training import kto_row, rewards_row

    for _, _, trace, row in _sessions(files, result, fmt, filters=filters, from_=from_, redact=redact):
        if fmt == "rewards":
            row = rewards_row(trace, row)
        elif fmt == "kto":
            kto = kto_row(trace, row, filters.threshold)
            if kto is None:
                result.skipped["sessions without an assistant message"] += 1
                continue
            row = kto
        result.rows += 1
        result.messages += len(row["messages"]) if "messages" in row else len(row["prompt"]) + len(row["completion"])
        yield row


def _sessions(
    files: Iterable[Path],
    result: ExportResult,
    fmt: str,
    *,
    filters: _Filters,
    from_: str | None,
    redact: bool | Redactor,
    guard: MessageGuard | None = None,
) -> Iterator[tuple[int, int, Trace, dict[str, Any]]]:
    """(file index, trace index in the file, trace, row in *fmt*, ``sft`` for the
    outcome formats) of every session that passes *filters*; skipped ones counted."""
    guard = guard if guard is not None else make_guard(redact)
    outcome_fmt = fmt in _NEED_OUTCOME
    row_fmt = "sft" if outcome_fmt else fmt
    for file_index, path in enumerate(files):
        before = dict(guard.counts) if guard is not None else {}
        try:
            traces, dropped, redactions, screen = _load(path, from_, redact, guard)
        except (OSError, ValueError) as exc:  # ConvertError and TraceFormatError are ValueErrors
            result.failed.append(_reason(path, exc))
            continue
        result.files += 1
        if dropped:
            result.dropped.update(dropped)
        if redactions:
            result.redactions.update(redactions)
        try:
            for trace_index, trace in enumerate(traces):
                if not filters.include_subagents and isinstance(trace.header.get("parentSessionId"), str):
                    if screen:  # redacted all the same: its secrets are counted
                        _guarded_row(guard, trace, row_fmt, Counter(), screen)
                    result.skipped["sub-agent sessions (--include-subagents keeps them)"] += 1
                    continue
                lost: Counter[str] = Counter()
                # The filters read the sft row's counts, whatever the format written (the same walk).
                row, n_calls, errors, unanswered = _guarded_row(guard, trace, row_fmt, lost, screen)
                if not row["messages"]:
                    result.skipped["sessions without messages"] += 1
                    continue
                if not filters.errors and (errors or unanswered):
                    result.skipped["sessions with errors or unanswered calls"] += 1
                    continue
                if n_calls < filters.min_tool_calls:
                    result.skipped[f"sessions with fewer than {filters.min_tool_calls} tool calls"] += 1
                    continue
                if not _outcome_ok(trace, fmt, filters, result):
                    continue
                if lost:
                    result.dropped.update(lost)
                result.tool_calls += n_calls
                yield file_index, trace_index, trace, row
        finally:
            if screen and guard is not None:
                result.redactions.update({k: n - before.get(k, 0) for k, n in guard.counts.items() if n != before.get(k, 0)})


def _outcome_ok(trace: Trace, fmt: str, filters: _Filters, result: ExportResult) -> bool:
    """Whether *trace* has the outcome *fmt* and ``min_reward`` need (counts the others)."""
    outcome = trace.outcome
    reward = outcome["reward"]
    if filters.min_reward is not None or fmt == "dpo":
        if reward is None:
            result.skipped["sessions without a reward"] += 1
            return False
        if filters.min_reward is not None and reward < filters.min_reward:
            result.skipped[f"sessions with a reward below {filters.min_reward:g}"] += 1
            return False
    elif fmt == "kto" and reward is None and outcome["success"] is None:
        result.skipped["sessions without a reward or success"] += 1
        return False
    elif fmt == "rewards" and reward is None and outcome["success"] is None and not outcome["rewards"] and not outcome["labels"]:
        result.skipped["sessions without an outcome"] += 1
        return False
    if fmt == "dpo" and _task(trace) is None:
        result.skipped["sessions without a taskId"] += 1
        return False
    return True


def _task(trace: Trace) -> str | None:
    from ._training import task_key

    return task_key(trace.header)


def _dpo_rows(
    files: list[Path],
    result: ExportResult,
    *,
    filters: _Filters,
    pairs: str,
    from_: str | None,
    redact: bool | Redactor,
) -> Iterator[dict[str, Any]]:
    """Two passes: every session's small summary grouped by task, then the
    sessions of one task at a time read back and paired (memory: the summaries,
    and one task's sessions)."""
    from ._training import Summary, dpo_pairs, dpo_row

    guard = make_guard(redact)
    tasks: dict[str, list[Summary]] = {}
    for file_index, trace_index, trace, _ in _sessions(files, result, "dpo", filters=filters, from_=from_, redact=redact, guard=guard):
        task = _task(trace)
        assert task is not None and trace.outcome["reward"] is not None  # _outcome_ok checked both
        tasks.setdefault(task, []).append(Summary(file_index, trace_index, trace.outcome["reward"], trace.id))
    for task, sessions in tasks.items():
        chosen_pairs = list(dpo_pairs(sessions, pairs))
        if not chosen_pairs:
            result.skipped["tasks whose sessions' rewards are all equal (or a single session)"] += 1
            continue
        wanted = {(s.file, s.position) for pair in chosen_pairs for s in pair}
        loaded: dict[tuple[int, int], tuple[Trace, dict[str, Any]]] = {}
        for file_index in sorted({f for f, _ in wanted}):
            try:
                # The same guard as the first pass: redacted the same way; what it
                # counts now is not added to the result (counted in the first pass).
                traces, _, _, screen = _load(files[file_index], from_, redact, guard)
            except (OSError, ValueError) as exc:  # changed since the first pass
                result.failed.append(_reason(files[file_index], exc))
                continue
            for trace_index, trace in enumerate(traces):
                if (file_index, trace_index) in wanted:
                    loaded[(file_index, trace_index)] = (trace, _guarded_row(guard, trace, "sft", Counter(), screen)[0])
        for a, b in chosen_pairs:
            if (a.file, a.position) not in loaded or (b.file, b.position) not in loaded:
                result.skipped["pairs whose sessions could not be read again"] += 1
                continue
            row = dpo_row(task, (a, *loaded[(a.file, a.position)]), (b, *loaded[(b.file, b.position)]), result.skipped)
            if row is None:
                continue
            result.rows += 1
            result.messages += len(row["prompt"]) + len(row["chosen"]) + len(row["rejected"])
            yield row



# -- writers ----------------------------------------------------------------------------


def _parquet_module() -> Any:
    try:
        import pyarrow  # type: ignore[import-untyped]
        import pyarrow.parquet  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(
            "writing Parquet needs pyarrow, which is not installed: pip install 'ststrace[datasets]' "
            "(or write JSON Lines: -o OUT.jsonl)"
        ) from None
    return pyarrow


#: Parquet columns in the ``datasets`` feature types they load as (free-form
#: JSON where rows differ in shape: each tool call has its own arguments).
_SFT_FEATURES: dict[str, Any] = {
    "messages": {"feature": {"_type": "Json"}, "_type": "List"},
    "tools": {"feature": {"_type": "Json"}, "_type": "List"},
    "session_id": {"dtype": "string", "_type": "Value"},
    "harness": {"dtype": "string", "_type": "Value"},
    "name": {"dtype": "string", "_type": "Value"},
    "models": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "List"},
    "usage": {"_type": "Json"},
    "num_tool_calls": {"dtype": "int64", "_type": "Value"},
    "errors": {"dtype": "int64", "_type": "Value"},
    "unanswered_tool_calls": {"dtype": "int64", "_type": "Value"},
    "parent_session_id": {"dtype": "string", "_type": "Value"},
}


def _features(fmt: str) -> dict[str, Any]:
    """The Parquet columns of *fmt* and their ``datasets`` feature types."""
    if fmt == "sft":
        return _SFT_FEATURES
    if fmt == "messages":
        return {c: _SFT_FEATURES[c] for c in ("messages", "tools")}
    from ._training import FEATURES

    return {**_SFT_FEATURES, **FEATURES[fmt]} if fmt == "rewards" else FEATURES[fmt]


class _ParquetSink:
    """Row groups of :data:`_PARQUET_BATCH` rows; JSON columns as Arrow's ``arrow.json``
    extension with the feature metadata ``datasets`` reads them back by."""

    def __init__(self, path: Path, fmt: str) -> None:
        pa = self.pa = _parquet_module()
        self.features = _features(fmt)
        self.columns = list(self.features)
        json_type = pa.json_(pa.string())
        kinds = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
        fields = []
        for col in self.columns:
            feature = self.features[col]
            if feature["_type"] == "Json":
                kind = json_type
            elif feature["_type"] == "List":
                inner = feature["feature"]
                kind = pa.list_(json_type if inner["_type"] == "Json" else kinds[inner["dtype"]])
            else:
                kind = kinds[feature["dtype"]]
            fields.append(pa.field(col, kind))
        features = self.features
        meta = {b"huggingface": orjson.dumps({"info": {"features": features}})}
        self.schema = pa.schema(fields, metadata=meta)
        # An open file, not a path: pyarrow would follow a link planted at the name.
        self.f = _create(path)
        try:
            self.writer = pa.parquet.ParquetWriter(self.f, self.schema)
        except BaseException:
            self.f.close()
            raise
        self.batch: list[dict[str, Any]] = []

    def write(self, row: dict[str, Any]) -> None:
        self.batch.append(row)
        if len(self.batch) >= _PARQUET_BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.batch:
            return
        pa = self.pa
        json_type = pa.json_(pa.string())

        def json_array(texts: list[str | None]) -> Any:
            # pa.array() cannot build an extension array: build its storage and wrap it.
            return pa.ExtensionArray.from_storage(json_type, pa.array(texts, type=pa.string()))

        arrays = []
        for col, f in zip(self.columns, self.schema):
            values = [r.get(col) for r in self.batch]
            feature = self.features[col]
            if feature["_type"] == "Json":
                arrays.append(json_array([None if v is None else dumps(v).decode() for v in values]))
            elif feature["_type"] == "List" and feature["feature"]["_type"] == "Json":
                offsets = [0]
                flat: list[str | None] = []
                for v in values:
                    flat.extend(dumps(x).decode() for x in v or ())
                    offsets.append(len(flat))
                arrays.append(pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), json_array(flat)))
            else:
                arrays.append(pa.array(values, type=f.type))
        self.writer.write_table(self.pa.Table.from_arrays(arrays, schema=self.schema))
        self.batch.clear()

    def close(self) -> None:
        try:
            self.flush()
            self.writer.close()
            self.f.flush()
            os.fsync(self.f.fileno())
        finally:
            self.f.close()


def _create(path: Path) -> BinaryIO:
    """A new file at *path*, 0600: never through a link planted at the name, never
    over an existing file. Private like traces and ``convert`` output: an export
    with ``--no-redact`` holds raw secrets."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0), 0o600)
    # Rows are a few KB each: a larger buffer than the default 8 KiB, fewer writes.
    return os.fdopen(fd, "wb", buffering=1 << 20)


class _JsonlSink:
    def __init__(self, path: Path, fmt: str) -> None:
        self.f = _create(path)

    def write(self, row: dict[str, Any]) -> None:
        try:
            # Rows are plain JSON: orjson in one call, newline included (dumps
            # gives the same bytes and never raises, for anything odd).
            line = orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
        except orjson.JSONEncodeError:
            line = dumps(row) + b"\n"
        self.f.write(line)

    def close(self) -> None:
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()


def _move_new(tmp: Path, target: Path) -> None:
    """Move *tmp* to *target*, which must not exist (a link fails if it appeared meanwhile)."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise FileExistsError(f"{target} already exists; not overwritten (force=True / --force replaces it)") from None
    except OSError:
        # No hard links on this file system: the existence check and the move are two steps.
        if os.path.lexists(target):
            raise FileExistsError(f"{target} already exists; not overwritten") from None
        os.replace(tmp, target)
        return
    os.unlink(tmp)


def export(
    inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    format: str = "sft",
    errors: bool = True,
    min_tool_calls: int = 0,
    include_subagents: bool = False,
    from_: str | None = None,
    redact: bool | Redactor = True,
    force: bool = False,
    min_reward: float | None = None,
    threshold: float = 0.5,
    pairs: str = "best-worst",
) -> ExportResult:
    """Write one training row per session of *inputs* (trace files, directories
    of them, or any format ``convert`` reads) to *out*: JSON Lines, or Parquet
    when *out* ends in ``.parquet`` (needs ``ststrace[datasets]``).

    ``errors=False`` leaves out sessions with a failed tool result or an
    unanswered call; *min_tool_calls* those with fewer calls; sub-agent
    sessions are left out unless *include_subagents*. An existing *out* is
    never replaced unless *force* (:class:`FileExistsError`). Inputs that
    cannot be read are listed in :attr:`ExportResult.failed`, one line each;
    the others are exported.

    Formats ``rewards``, ``kto`` and ``dpo`` read the sessions' outcomes (see
    :mod:`ststrace._training`): *min_reward* keeps sessions whose reward is at
    least that (rejection sampling; any format); *threshold* is the reward from
    which a ``kto`` row without ``success`` is labelled good; *pairs*
    (``best-worst`` or ``all``) is how ``dpo`` pairs the sessions of a task.
    """
    from ._training import PAIRINGS

    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; choose one of: {', '.join(FORMATS)}")
    for name, value in (("min_reward", min_reward), ("threshold", threshold)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value != value):
            raise ValueError(f"{name} must be a number, got {value!r}")
    if pairs not in PAIRINGS:
        raise ValueError(f"unknown pairing {pairs!r}; choose one of: {', '.join(PAIRINGS)}")
    filters = _Filters(
        errors=errors, min_tool_calls=min_tool_calls, include_subagents=include_subagents,
        min_reward=None if min_reward is None else float(min_reward), threshold=float(threshold),
    )
    if isinstance(min_tool_calls, bool) or not isinstance(min_tool_calls, int) or min_tool_calls < 0:
        raise ValueError(f"min_tool_calls must be a non-negative integer, got {min_tool_calls!r}")
    if from_ is not None:
        from ._convert import format_name

        from_ = format_name(from_)
    target = Path(out)
    parquet = target.suffix == ".parquet"
    if parquet:
        _parquet_module()  # the missing extra is said before any work
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a directory; give the output file (OUT.jsonl or OUT.parquet)")
    if os.path.lexists(target) and not force:
        raise FileExistsError(f"{target} already exists; not overwritten (force=True / --force replaces it)")
    names = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files, _ = input_files([os.fspath(n) for n in names])
    # The output is never an input (a re-run over the same directory); paths are
    # resolved only for files of its name.
    files = [f for f in files if f.name != target.name or f.resolve() != target.resolve()]
    if not files:
        raise ValueError("no input files (the directories hold no *.jsonl)")
    result = ExportResult(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target and moved into place at the end: a failed or
    # interrupted export leaves the old output (or none), never half a file.
    # A name no one can guess ahead (a link planted there would be refused anyway).
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    sink = _ParquetSink(tmp, format) if parquet else _JsonlSink(tmp, format)
    try:
        try:
            rows = (
                _dpo_rows(files, result, filters=filters, pairs=pairs, from_=from_, redact=redact)
                if format == "dpo"
                else _rows(files, result, format, filters=filters, from_=from_, redact=redact)
            )
            for row in rows:
                sink.write(row)
        finally:
            sink.close()
        if force:
            os.replace(tmp, target)
        else:
            _move_new(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return result
