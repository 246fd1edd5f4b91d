"""Comparing two traces as conversations: ``assert_same_conversation(a, b)``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import orjson

from .._adapters._common import is_generated_call_id
from .._reader import Trace

__all__ = ["assert_same_conversation", "conversation_differences"]

#: Usage counts compared; ``cost`` depends on the price table, not the run.
_USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens", "reasoning")


def _sessions(value: Any) -> list[Trace]:
    from .._session import Session
    from ._replay import load_sessions

    if isinstance(value, Session):
        if value.path is None:
            raise ValueError("the session wrote no file (Session(enabled=False)?): nothing to compare")
        value = value.path
    if isinstance(value, (str, os.PathLike, Trace)) or isinstance(value, (list, tuple)):
        return load_sessions(value)
    raise TypeError(f"expected a trace path, a Trace or a Session, not {type(value).__name__}")


def _arguments(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _generated_ids(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Ids ststrace made for a protocol without call ids, in order of first use,
    -> a placeholder: each run makes new ones, so only their pairing is compared."""
    names: dict[str, str] = {}
    for msg in messages:
        ids = [c.get("id") for c in msg.get("toolCalls") or ()] + [msg.get("toolCallId")]
        for cid in ids:
            if is_generated_call_id(cid) and cid not in names:
                names[cid] = f"<generated id {len(names) + 1}>"
    return names


def _calls(msg: Mapping[str, Any], generated: Mapping[str, str]) -> list[tuple[Any, Any, Any]]:
    out = []
    for c in msg.get("toolCalls") or ():
        fn = c.get("function") or {}
        cid = c.get("id")
        # Arguments as JSON values: one SDK re-encodes with other spacing.
        out.append((generated.get(cid, cid), fn.get("name"), _arguments(fn.get("arguments"))))
    return out


def _usage(msg: Mapping[str, Any]) -> dict[str, Any] | None:
    usage = msg.get("usage")
    if not isinstance(usage, Mapping):
        return None
    # A provider that does not report reasoning tokens: none, as 0.
    return {k: usage.get(k, 0) for k in _USAGE_KEYS}


def _fields(msg: Mapping[str, Any], generated: Mapping[str, str]) -> dict[str, Any]:
    cid = msg.get("toolCallId")
    return {
        "role": msg.get("role"),
        "content": msg.get("content"),
        "reasoningContent": msg.get("reasoningContent"),
        "toolCalls": _calls(msg, generated),
        "toolCallId": generated.get(cid, cid) if isinstance(cid, str) else cid,
        "usage": _usage(msg),
        "model": msg.get("model"),
    }


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _session_differences(label: str, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    ga, gb = _generated_ids(a), _generated_ids(b)
    for i, (x, y) in enumerate(zip(a, b), 1):
        fx, fy = _fields(x, ga), _fields(y, gb)
        for key in fx:
            if fx[key] != fy[key]:
                out.append(f"{label}message {i} ({fx['role']}): {key} differs: {_short(fx[key])} != {_short(fy[key])}")
    if len(a) != len(b):
        longer, which = (a, "first") if len(a) > len(b) else (b, "second")
        extra = longer[min(len(a), len(b))]
        out.append(
            f"{label}{len(a)} messages != {len(b)}; the {which} goes on with message {min(len(a), len(b)) + 1} "
            f"({extra.get('role')}: {_short(extra.get('content'))})"
        )
    return out


def _pair_key(trace: Trace) -> tuple[str, str]:
    # Sub-agent session ids differ between runs: pair them by the tool call
    # that started them and their first prompt.
    first = next((m.get("content", "") for m in trace.messages if m.get("role") == "user"), "")
    return (str(trace.header.get("parentToolCallId", "")), str(first))


def conversation_differences(a: Any, b: Any) -> list[str]:
    """Where traces *a* and *b* differ as conversations (empty when they are the same).

    Compared per message: role, content, reasoning, tool calls (ids, names,
    arguments as JSON values), tool-call id, usage counts and model. Call ids
    ststrace generated (for Ollama, or Gemini without ids) differ in every run:
    they are compared by which call each result answers, not by value. Timestamps,
    session ids and the headers are not compared. Sub-agent sessions are paired
    by the tool call that opened them and their first prompt."""
    sa, sb = _sessions(a), _sessions(b)
    out = _session_differences("", sa[0].messages, sb[0].messages)
    ca = sorted(sa[1:], key=_pair_key)
    cb = sorted(sb[1:], key=_pair_key)
    if len(ca) != len(cb):
        out.append(f"{len(ca)} sub-agent sessions != {len(cb)}")
    for x, y in zip(ca, cb):
        out.extend(_session_differences(f"sub-agent session {x.id!r} / {y.id!r}: ", x.messages, y.messages))
    return out


def assert_same_conversation(a: Any, b: Any, *, limit: int = 10) -> None:
    """Fail (``AssertionError``) unless traces *a* and *b* hold the same conversation.

    *a* and *b*: trace paths, :class:`~ststrace.Trace` objects or closed
    :class:`~ststrace.Session` objects. The message lists the first *limit*
    differences (see :func:`conversation_differences`)."""
    diffs = conversation_differences(a, b)
    if diffs:
        more = [f"... and {len(diffs) - limit} more"] if len(diffs) > limit else []
        raise AssertionError("the conversations differ:\n" + "\n".join(diffs[:limit] + more))

