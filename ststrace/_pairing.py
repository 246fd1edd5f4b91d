"""Tool-call pairing: which calls the model asked for still wait for a result.

A session keeps one table, ``OrderedDict[call id, Call]``, oldest first (an
OrderedDict: evicting the oldest of a plain dict scans dead slots, O(n) a call). Assistant replies add their calls (:func:`register`), a
``@tool`` call takes the one it answers (:func:`claim`), a result recorded by
id (:func:`answer`) or one resent without its id (:func:`oldest_named`)
removes it, and the calls still open when a ``with`` block ends by an
exception are answered with the error (:func:`take_all`).

These functions take the table and do no locking: the session holds its
state lock around them (a signal handler may record on the same thread, so
the table is copied with one C call before it is scanned).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

__all__ = ["MAX_PENDING", "Call", "answer", "claim", "oldest_named", "register", "replay", "take_all"]

#: Tool calls still waiting for a result; oldest dropped past this many so a
#: run of millions of unanswered calls cannot grow memory without bound.
MAX_PENDING = 10_000

_UNSET: Any = object()


class Call:
    """One call waiting for its result: its tool's name and JSON arguments."""

    __slots__ = ("name", "arguments", "_parsed")

    def __init__(self, name: str, arguments: str) -> None:
        self.name = name
        self.arguments = arguments
        self._parsed: Any = _UNSET

    @property
    def parsed(self) -> Any:
        """The arguments as JSON values (``None`` if they do not parse), parsed once."""
        if self._parsed is _UNSET:
            try:
                self._parsed = orjson.loads(self.arguments)
            except Exception:
                self._parsed = None
        return self._parsed


def register(pending: OrderedDict[str, Call], calls: Iterable[Mapping[str, Any]]) -> None:
    """Add an assistant message's ``toolCalls``, forgetting the oldest past :data:`MAX_PENDING`."""
    for c in calls:
        fn = c.get("function") or {}
        pending[c["id"]] = Call(fn.get("name", ""), fn.get("arguments", "{}"))
    while len(pending) > MAX_PENDING:
        pending.popitem(last=False)


def claim(pending: OrderedDict[str, Call], name: str, candidates: Iterable[Any]) -> str | None:
    """The pending call a ``@tool`` invocation of *name* answers, marked answered.

    Oldest pending call of that name wins, unless a later one's arguments
    equal one of *candidates* (the call's arguments as passed, or with
    defaults filled in)."""
    ids = [cid for cid, p in list(pending.items()) if p.name == name]
    if not ids:
        return None
    chosen = ids[0]
    if len(ids) > 1:
        wanted = list(candidates)
        for cid in ids:
            p = pending.get(cid)
            if p is not None and p.parsed in wanted:
                chosen = cid
                break
    if pending.pop(chosen, None) is None:
        return None  # answered meanwhile, by a signal handler
    return chosen


def answer(pending: OrderedDict[str, Call], call_id: str) -> bool:
    """Mark *call_id* answered; False if it was not waiting for a result."""
    return pending.pop(call_id, None) is not None


def oldest_named(pending: OrderedDict[str, Call], name: str | None) -> str | None:
    """The oldest call still waiting, of tool *name* unless it is ``None``: what a
    result sent back without its call's id answers (CrewAI's streamed LiteLLM
    calls drop the id)."""
    return next((c for c, p in list(pending.items()) if name is None or p.name == name), None)


def take_all(pending: OrderedDict[str, Call]) -> list[str]:
    """Every call still waiting, oldest first; the table is left empty."""
    open_calls = list(pending)
    pending.clear()
    return open_calls


def replay(pending: OrderedDict[str, Call], msg: Mapping[str, Any]) -> None:
    """Rebuild the table from one message of a resumed session's file."""
    if msg.get("role") == "assistant" and msg.get("toolCalls"):
        register(pending, msg["toolCalls"])
    elif msg.get("role") == "tool" and isinstance(msg.get("toolCallId"), str):
        pending.pop(msg["toolCallId"], None)
