"""OpenCode sessions, as ``opencode export <session>`` writes them.

One JSON document: ``{"info": <session>, "messages": [{"info": <message>,
"parts": [...]}]}``. The session info has ``id`` (``ses_…``), ``title``,
``directory``, ``version`` and, for a sub-agent's session, ``parentID``. A
message is ``user`` or ``assistant`` (``modelID``, ``tokens``, ``error``); its
parts are ``text``, ``reasoning``, ``tool`` (``callID``, ``tool`` and a
``state`` holding the input and, once finished, the output or the error),
``file``, and ``step-start`` / ``step-finish`` around each model call
(``step-finish`` carries that call's ``tokens`` and ``cost``).

Each step becomes one STS assistant message, its tool results after it.
OpenCode's ``tokens.input`` leaves the cache out and ``reasoning`` is counted
apart from ``output``, as in Pi but for reasoning, which Pi counts in output.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import orjson

from .._text import content_text, json_text
from ._common import (
    Builder,
    ConvertError,
    Converted,
    finish,
    placeholder,
    str_or_none,
    to_ms,
    usage_counts,
)

HARNESS = "opencode"


def is_export(doc: Any) -> bool:
    """``{"info": {...}, "messages": [{"info": ..., "parts": [...]}]}``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("info"), dict) or not isinstance(doc.get("messages"), list):
        return False
    return all(isinstance(m, dict) and "info" in m and "parts" in m for m in doc["messages"][:20])


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ConvertError(f"{path}: not an OpenCode export (not JSON: {exc})") from None
    if not is_export(doc):
        raise ConvertError(f"{path}: not an OpenCode export (no info and messages)")
    info: Mapping[str, Any] = doc["info"]
    b = Builder(HARNESS, str_or_none(info.get("id")) or path.stem)
    b.name = str_or_none(info.get("title"))
    times = _dict(info.get("time"))
    b.metadata.update(
        cwd=str_or_none(info.get("directory")),
        version=str_or_none(info.get("version")),
        project_id=str_or_none(info.get("projectID")),
        timestamp=to_ms(times.get("created")),
        parentSessionId=str_or_none(info.get("parentID")),
    )
    for entry in doc["messages"]:
        m_info = entry.get("info") if isinstance(entry, dict) else None
        parts = entry.get("parts") if isinstance(entry, dict) else None
        if not isinstance(m_info, dict) or not isinstance(parts, list):
            b.dropped["message:invalid"] += 1
            continue
        parts = [p for p in parts if isinstance(p, dict)]
        role = m_info.get("role")
        created = m_info.get("time")
        ts = to_ms(created.get("created")) if isinstance(created, dict) else None
        if role == "user":
            _user(b, parts, ts)
        elif role == "assistant":
            _assistant(b, m_info, parts, ts)
        else:
            b.dropped[f"message:{role}" if isinstance(role, str) else "message:untyped"] += 1
    return finish([b], file_dropped)


def _user(b: Builder, parts: list[dict[str, Any]], ts: int | None) -> None:
    typed: list[str] = []
    for p in parts:
        kind = p.get("type")
        if kind == "text":
            text = content_text(p.get("text"))
            if p.get("synthetic"):
                # Added by OpenCode (a file's contents for an @-mention), not typed.
                b.system(text, _part_time(p) or ts)
            elif text.strip():
                typed.append(text)
        elif kind == "file":
            mime = str_or_none(p.get("mime"))
            b.dropped["image" if mime and mime.startswith("image/") else "file"] += 1
            name = str_or_none(p.get("filename"))
            typed.append(f"[file: {name}]" if name and not (mime or "").startswith("image/") else placeholder("image", mime))
        elif kind in ("step-start", "step-finish", "snapshot", "patch"):
            continue
        else:
            b.dropped[f"part:{kind}" if isinstance(kind, str) else "part:untyped"] += 1
    if typed:
        b.user("\n\n".join(typed), ts)


def _assistant(b: Builder, info: Mapping[str, Any], parts: list[dict[str, Any]], ts: int | None) -> None:
    model = str_or_none(info.get("modelID"))
    steps: list[list[dict[str, Any]]] = [[]]
    for p in parts:
        if p.get("type") == "step-start" and steps[-1]:
            steps.append([])
        steps[-1].append(p)
    stepped = any(p.get("type") == "step-finish" for p in parts)
    for i, step in enumerate(steps):
        texts = [content_text(p.get("text")) for p in step if p.get("type") == "text"]
        reasoning = [content_text(p.get("text")) for p in step if p.get("type") == "reasoning"]
        tools = [p for p in step if p.get("type") == "tool"]
        for p in step:
            if p.get("type") not in ("text", "reasoning", "tool", "step-start", "step-finish", "snapshot", "patch"):
                kind = p.get("type")
                b.dropped[f"part:{kind}" if isinstance(kind, str) else "part:untyped"] += 1
        if not (texts or reasoning or tools) and not (i == len(steps) - 1 and info.get("error")):
            continue
        text = "\n\n".join(t for t in texts if t.strip())
        error = info.get("error")
        if not text and not tools and i == len(steps) - 1 and isinstance(error, dict):
            data = error.get("data")
            detail = data.get("message") if isinstance(data, dict) else None
            text = f"Error: {detail or error.get('name') or 'the model call failed'}"
        msg = b.assistant(
            text,
            reasoning="\n\n".join(r for r in reasoning if r.strip()) or None,
            tool_calls=[(str_or_none(p.get("callID")) or str_or_none(p.get("id")), _str(p.get("tool")), _input(p)) for p in tools],
            model=model,
            timestamp=_part_time(step[0]) or ts,
        )
        finish_part = next((p for p in step if p.get("type") == "step-finish"), None)
        usage = _usage(finish_part if stepped else info, b)
        if usage is not None:
            msg["usage"] = usage
        for p in tools:
            _result(b, p)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _input(part: Mapping[str, Any]) -> Any:
    state = part.get("state")
    return state.get("input") if isinstance(state, dict) else None


def _part_time(part: Mapping[str, Any]) -> int | None:
    t = part.get("time")
    if isinstance(t, dict):
        return to_ms(t.get("start"))
    state = part.get("state")
    if isinstance(state, dict) and isinstance(state.get("time"), dict):
        return to_ms(state["time"].get("start"))
    return None


def _result(b: Builder, part: Mapping[str, Any]) -> None:
    state = part.get("state")
    status = state.get("status") if isinstance(state, dict) else None
    if status not in ("completed", "error") or not isinstance(state, dict):
        return  # pending or running when the session was exported: no result yet
    times = _dict(state.get("time"))
    when = to_ms(times.get("end")) or to_ms(times.get("start"))
    if status == "error":
        body = content_text(state.get("error"))
    else:
        out = state.get("output")
        body = out if isinstance(out, str) else json_text(out) if out is not None else ""
    b.tool_result(str_or_none(part.get("callID")) or str_or_none(part.get("id")), body, is_error=status == "error", timestamp=when)


def _usage(source: Mapping[str, Any] | None, b: Builder) -> dict[str, Any] | None:
    """A step's (or a message's) ``tokens`` in the Pi shape, with its ``cost`` in USD."""
    tokens = source.get("tokens") if isinstance(source, Mapping) else None
    if not isinstance(tokens, dict):
        return None
    cache = _dict(tokens.get("cache"))
    n = {
        "input": tokens.get("input"),
        "output": tokens.get("output"),
        "reasoning": tokens.get("reasoning"),
        "cacheRead": cache.get("read"),
        "cacheWrite": cache.get("write"),
    }
    if any(v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0) for v in n.values()):
        b.dropped["invalid_usage"] += 1
        return None
    raw: dict[str, Any] = {
        "input": n["input"] or 0,
        "output": (n["output"] or 0) + (n["reasoning"] or 0),
        "cacheRead": n["cacheRead"] or 0,
        "cacheWrite": n["cacheWrite"] or 0,
    }
    if n["reasoning"] is not None:
        raw["reasoning"] = n["reasoning"]
    cost = source.get("cost") if isinstance(source, Mapping) else None
    if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost > 0:
        raw["cost"] = {"total": float(cost)}
    return usage_counts(raw, b.dropped)
