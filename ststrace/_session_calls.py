"""What the decorators and the integrations call on a session: a model's
reply and its usage, the tool calls waiting for results, ``@tool``'s two
lines on its general path, and the conversation a model call was given.

Moved out of ``_session`` (issue 32) as a base class of ``Session``; the
attributes below are set by ``Session.__init__``, the two methods at the end
are ``Session``'s (declared here for the type checker)."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from typing import Any, Callable, Iterable, Mapping, Sequence

from orjson import dumps as _orjson_dumps

from . import _dedup, _pairing, _records
from ._errors import logger
from ._guard import MessageGuard
from ._ids import new_tool_call_id


class _SessionCalls:
    _replies: deque[int]
    _state_lock: threading.RLock
    _keep_usage: bool
    _prices: Any
    _usage_total: dict[str, Any]
    _pending: OrderedDict[str, _pairing.Call]
    _guard: MessageGuard | None
    _append: Callable[[bytes], bool] | None
    _call_children: dict[str, list[str]]
    # What _dedup reads (its InputState).
    _conversations: deque[list[int]]
    _stateful_turns: deque[tuple[str, tuple[int, ...]]]
    _direct: deque[dict[str, Any]]
    _last_system: int | None
    _histories: deque[_dedup.Known]

    def _emit(self, msg: dict[str, Any]) -> None:
        raise NotImplementedError  # Session's

    def _write(self, msg: dict[str, Any]) -> None:
        raise NotImplementedError  # Session's

    def _record_assistant(self, msg: dict[str, Any]) -> None:
        # Before _emit (which may redact): what the model said, as the next
        # call's history will hold it (see _dedup.after_new_reply).
        self._replies.append(_dedup.fingerprint(msg))
        calls = msg.get("toolCalls")
        if calls:
            with self._state_lock:
                self._register_calls(calls)
        if "usage" in msg:
            self._record_usage(msg)
        self._emit(msg)

    def _record_usage(self, msg: dict[str, Any]) -> None:
        """Drop the reply's token usage (``usage=False``), or price it
        (``prices=``) and add it to the session's totals."""
        if not self._keep_usage:
            del msg["usage"]
            return
        usage = msg["usage"]
        if self._prices is not None and "cost" not in usage:
            from ._adapters.usage import cost_of

            try:
                cost = cost_of(usage, msg.get("model"), self._prices)
            except Exception as exc:  # the user's price callable
                logger.warning("ststrace: prices for model %r failed: %r; usage recorded without cost", msg.get("model"), exc)
                cost = None
            if cost is not None:
                usage = msg["usage"] = {**usage, "cost": cost}
        with self._state_lock:
            totals = self._usage_total
            for key, value in usage.items():
                if key == "cost":
                    totals["cost"] = totals.get("cost", 0.0) + float(value.get("total", 0.0))
                elif isinstance(value, int):
                    totals[key] = totals.get(key, 0) + value

    def _register_calls(self, calls: Iterable[Mapping[str, Any]]) -> None:
        _pairing.register(self._pending, calls)

    def _claim_tool_call(self, name: str, candidates: Iterable[Any]) -> str | None:
        """Pick the pending call a @tool invocation answers, and mark it answered
        (see ``_pairing.claim``)."""
        if not self._pending:
            return None  # the common case (no model call asked for it): no lock, no copy
        with self._state_lock:
            return _pairing.claim(self._pending, name, candidates)

    def _answer(self, tool_call_id: str) -> bool:
        """Mark *tool_call_id* answered; False if it was not waiting for a result."""
        with self._state_lock:
            return _pairing.answer(self._pending, tool_call_id)

    def _tool_call_then_result(
        self, name: str, arguments: str, call_id: str | None = None, name_json: bytes | None = None
    ) -> str:
        """Record an assistant message with one tool call nobody asked for; return its id.

        *call_id* keeps an id the caller already has (one bound with
        ``tool_call_id`` for a model call this session never saw); *name_json*
        is *name* encoded, when the caller keeps it (``@tool`` does)."""
        call_id = call_id or new_tool_call_id()
        # The guard's message() inlined for the one field that can need it.
        guard = self._guard
        if guard is not None and len(arguments) >= guard._short and guard.screen(arguments):
            arguments = guard.arguments(arguments)
        append = self._append
        if append is not None:
            # The line encoded in one step (see _records.single_call_line), as
            # s.user() does; with no file yet, tools waiting to ride on the next
            # record, or a string orjson refuses, the dict path below.
            try:
                line = _records.single_call_line(call_id, name_json or _orjson_dumps(name), arguments)
            except Exception:
                pass
            else:
                append(line)
                return call_id
        self._write(_records.single_call(call_id, name, arguments))
        return call_id

    def _tool_result(self, call_id: str, content: str) -> None:
        """Record the result of a @tool call (*content* is text already)."""
        guard = self._guard
        if guard is not None and len(content) >= guard._short and guard.screen(content):
            content = guard.text(content)
        append = self._append
        if append is not None:
            try:  # see _tool_call_then_result
                line = _records.tool_result_line(call_id, content)
            except Exception:
                pass
            else:
                append(line)
                return
        self._write(_records.tool_result(call_id, content))

    def _record_inputs(
        self,
        messages: list[dict[str, Any]],
        stateful: str | None = None,
        timestamp: int | None = None,
        fingerprints: list[int] | None = None,
    ) -> None:
        """Record the user/system/tool messages of a model call's conversation
        that this session has not recorded yet (see ``_dedup``).

        *stateful* names a server-side conversation the call continues
        (``previous_response_id=...``): *messages* are then the new turn
        only, all new unless the very same turn was sent on the same
        conversation before (a retry). *timestamp* (epoch ms) dates the new
        messages when they were sent earlier than now (spans read after the fact);
        *fingerprints*, when given, are those of *messages*, kept by a caller
        that sees the same history resent."""
        fps = fingerprints if fingerprints is not None else [_dedup.fingerprint(m) for m in messages]
        with self._state_lock:
            to_emit = _dedup.new_inputs(self, messages, fps, stateful)
        for msg in to_emit:
            if timestamp is not None:
                msg["timestamp"] = timestamp
            self._emit(msg)

    def _record_history(
        self,
        lead: list[dict[str, Any]],
        raw: Sequence[Any],
        convert: _dedup.Convert,
        whole: Callable[[], tuple[list[dict[str, Any]] | None, bool]],
    ) -> None:
        """:meth:`_record_inputs` for a conversation given as a list of
        messages *raw* after the system messages *lead*: when it only grew
        since the last call, only its new items are converted (*convert*);
        else *whole* converts all of it (and says whether that is *lead* then
        *raw* item by item, to be remembered for the next call)."""
        with self._state_lock:
            to_emit = _dedup.appended(self, lead, raw, convert)
        if to_emit is None:
            messages, exact = whole()
            if not messages:
                return
            fps = [_dedup.fingerprint(m) for m in messages]
            self._record_inputs(messages, fingerprints=fps)
            if exact:
                with self._state_lock:
                    _dedup.remember(self, lead, raw, fps, convert)
            return
        for msg in to_emit:
            self._emit(msg)
