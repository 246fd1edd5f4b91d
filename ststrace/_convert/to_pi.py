"""STS trace -> Pi v3 session (``ststrace convert --to pi``).

The Hub renders Pi sessions natively and accepts them when the header carries
a ``harness``. The session is one linear branch: every entry's ``parentId`` is
the entry before it. Mapping:

- user -> ``message`` ``{"role": "user", "content": [text]}``;
- assistant -> ``message`` with ``thinking`` / ``text`` / ``toolCall`` blocks
  (arguments as an object, as Pi writes them); a change of model is also a
  ``model_change`` entry;
- tool -> ``message`` ``{"role": "toolResult", "toolCallId", "toolName",
  "isError"}`` (an error is a result whose text starts with ``Error``, as the
  converters and :class:`~ststrace.Session` write it);
- system -> ``custom_message`` (``customType: "system"``), which Pi shows in
  the conversation and ststrace reads back as a system message;
- the trace's name -> a ``session_info`` entry; its sub-agent links stay in the
  header; each reply's ``usage`` is its Pi ``usage`` (zeros when it has none);
- the tool schemas of its messages' ``tools`` fields (merged by name) -> one
  ``custom`` entry ``{"customType": "teich-available-tools", "data": {"tools": [...]}}``,
  the line teich (the Hub's ``datasets`` loader) reads a Pi session's tools from;
  the first system message is also a ``teich-system-prompt`` entry, teich's
  only way to a Pi session's system prompt (it skips ``custom_message``).

The header also says ``convertedBy: "ststrace"``, so ``--force`` can tell its
own output from a Pi session it must not replace.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import orjson

from .._encode import dumps
from .._reader import Trace
from .._tools import merge

__all__ = ["CONVERTED_BY", "TOOLS_CUSTOM_TYPE", "pi_bytes", "pi_lines"]

CONVERTED_BY = "ststrace"
#: teich's name for the custom entry listing the tools a Pi session offered (teich/converter.py).
TOOLS_CUSTOM_TYPE = "teich-available-tools"
SYSTEM_CUSTOM_TYPE = "teich-system-prompt"

_COUNTS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
_COSTS = ("input", "output", "cacheRead", "cacheWrite", "total")

#: Header fields of an STS trace kept in the Pi header (Pi ignores what it does
#: not know; ststrace's Pi reader gives them back): the sub-agent links.
_LINKS = ("parentSessionId", "parentToolCallId")


def _usage(value: Any) -> dict[str, Any]:
    """The message's own token counts in Pi's shape (Pi requires the object on
    every assistant message: zeros when the trace has none, as Pi writes it)."""
    src = value if isinstance(value, dict) else {}
    out: dict[str, Any] = {}
    for key in _COUNTS:
        n = src.get(key)
        out[key] = n if isinstance(n, int) and not isinstance(n, bool) else 0
    if isinstance(src.get("reasoning"), int) and not isinstance(src["reasoning"], bool):
        out["reasoning"] = src["reasoning"]
    raw_cost = src.get("cost")
    cost: dict[str, Any] = raw_cost if isinstance(raw_cost, dict) else {}
    out["cost"] = {}
    for key in _COSTS:
        x = cost.get(key)
        out["cost"][key] = x if isinstance(x, (int, float)) and not isinstance(x, bool) else 0
    return out


def _iso(ms: int) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _arguments(text: Any) -> dict[str, Any]:
    """Pi keeps arguments as an object; STS as JSON text."""
    if isinstance(text, str):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return {"input": text}
    else:
        value = text
    return value if isinstance(value, dict) else {"input": value}


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "unknown"


def pi_lines(trace: Trace) -> list[dict[str, Any]]:
    """The lines of the Pi v3 session for *trace* (header first)."""
    header = trace.header
    times = [m["timestamp"] for m in trace.messages if isinstance(m.get("timestamp"), int)]
    start = header.get("timestamp")
    if not isinstance(start, int) or isinstance(start, bool) or start <= 0:
        start = times[0] if times else int(time.time() * 1000)
    head: dict[str, Any] = {
        "type": "session",
        "version": 3,
        "id": trace.id,
        "timestamp": _iso(start),
        "cwd": header["cwd"] if isinstance(header.get("cwd"), str) else "",
        "harness": str(header.get("harness") or "ststrace"),
        "convertedBy": CONVERTED_BY,
    }
    for key in _LINKS:
        if isinstance(header.get(key), str):
            head[key] = header[key]
    lines: list[dict[str, Any]] = [head]
    parent: str | None = None
    now = start

    def entry(kind: str, ms: int, **fields: Any) -> None:
        nonlocal parent
        eid = f"{len(lines):08x}"
        lines.append({"type": kind, "id": eid, "parentId": parent, "timestamp": _iso(ms), **fields})
        parent = eid

    name = header.get("name")
    if isinstance(name, str) and name:
        entry("session_info", now, name=name)
    tools = merge(m.get("tools") for m in trace.messages)
    if tools:
        entry("custom", now, customType=TOOLS_CUSTOM_TYPE, data={"tools": tools})
    system = next((m.get("content") for m in trace.messages if m.get("role") == "system"), None)
    if isinstance(system, str) and system.strip():
        entry("custom", now, customType=SYSTEM_CUSTOM_TYPE, data={"systemPrompt": system})
    call_names: dict[str, str] = {}
    model: str | None = None
    for msg in trace.messages:
        ts = msg.get("timestamp")
        if isinstance(ts, int) and not isinstance(ts, bool) and ts > 0:
            now = ts
        role = msg.get("role")
        content = msg.get("content")
        text = content if isinstance(content, str) else ""
        if role == "user":
            entry("message", now, message={"role": "user", "content": [{"type": "text", "text": text}], "timestamp": now})
        elif role == "system":
            entry("custom_message", now, customType="system", content=text, display=True)
        elif role == "assistant":
            this_model = msg.get("model") if isinstance(msg.get("model"), str) else None
            if this_model and this_model != model:
                model = this_model
                entry("model_change", now, provider=_provider(model), modelId=model)
            blocks: list[dict[str, Any]] = []
            reasoning = msg.get("reasoningContent")
            if isinstance(reasoning, str) and reasoning:
                blocks.append({"type": "thinking", "thinking": reasoning})
            if text:
                blocks.append({"type": "text", "text": text})
            calls = msg.get("toolCalls")
            for call in calls if isinstance(calls, list) else []:
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict) or not isinstance(call.get("id"), str):
                    continue
                raw_name = fn.get("name")
                fname = raw_name if isinstance(raw_name, str) and raw_name else "unknown"
                call_names[call["id"]] = fname
                blocks.append({"type": "toolCall", "id": call["id"], "name": fname, "arguments": _arguments(fn.get("arguments"))})
            has_calls = any(b["type"] == "toolCall" for b in blocks)
            entry(
                "message",
                now,
                message={
                    "role": "assistant",
                    "content": blocks,
                    "api": "unknown",
                    "provider": _provider(this_model or model or ""),
                    "model": this_model or model or "unknown",
                    "usage": _usage(msg.get("usage")),
                    "stopReason": "toolUse" if has_calls else "stop",
                    "timestamp": now,
                },
            )
        elif role == "tool":
            cid = msg.get("toolCallId")
            if not isinstance(cid, str):
                continue
            entry(
                "message",
                now,
                message={
                    "role": "toolResult",
                    "toolCallId": cid,
                    "toolName": call_names.get(cid, "unknown"),
                    "content": [{"type": "text", "text": text}],
                    "isError": text[:5].lower() == "error",
                    "timestamp": now,
                },
            )
    return lines


def pi_bytes(trace: Trace) -> bytes:
    """The Pi v3 session file for *trace*."""
    return b"".join(dumps(line) + b"\n" for line in pi_lines(trace))
