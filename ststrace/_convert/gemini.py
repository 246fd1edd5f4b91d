"""Gemini CLI sessions.

Two files hold a Gemini CLI conversation:

- the chat recording, ``~/.gemini/tmp/<project hash>/chats/session-<time>-<id>.json``:
  ``{sessionId, projectHash, startTime, lastUpdated, messages}``, each message
  ``{id, timestamp, type: "user" | "gemini" | "info" | "error" | "warning",
  content, thoughts?, tokens?, model?, toolCalls?}``; a tool call carries its
  own ``result`` (``functionResponse`` parts) and ``status``;
- a checkpoint (``/chat save <tag>`` -> ``checkpoint-<tag>.json``, and the
  automatic ones before a file edit): the model's history itself, a list of
  ``{role: "user" | "model", parts}`` (``text``, ``thought``, ``functionCall``,
  ``functionResponse``, ``inlineData``), bare or as ``{"history": [...]}``.

Gemini CLI 0.61 writes the chat recording as JSON Lines instead
(``session-<time>-<id>.jsonl``), appended as the session goes: a metadata line
(``sessionId``, ``projectHash``, ...), then records read as Gemini CLI reads
them back: a message (``id``) is added, or replaces the earlier state of the
same id in place; ``{"$set": {...}}`` updates the metadata (a ``messages``
list there replaces them all); ``{"$rewindTo": id}`` drops that message and
every later one.

Token counts (``tokens``) are Gemini's: ``input`` includes the ``cached``
tokens, ``thoughts`` are billed as output but counted apart, ``tool`` is the
tool-use prompt; ``total`` is their sum.
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
    blocks_text,
    finish,
    image_mime,
    placeholder,
    shorten,
    str_or_none,
    to_ms,
    usage_counts,
)

HARNESS = "gemini-cli"

#: How the context turn Gemini CLI puts first in the history starts.
_SETUP = "This is the Gemini CLI. We are setting up the context for our chat."


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    raw = path.read_bytes()
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        doc = jsonl_recording(raw, file_dropped)
        if doc is None:
            raise ConvertError(f"{path}: not a Gemini CLI session (not JSON: {exc})") from None
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        b = _recording(path, doc)
    elif is_checkpoint(doc):
        b = _checkpoint(path, doc["history"] if isinstance(doc, dict) else doc)
    else:
        raise ConvertError(f"{path}: not a Gemini CLI session (no messages, no history)")
    return finish([b], file_dropped)


def is_jsonl_head(obj: Any) -> bool:
    """The first line of a JSON Lines chat recording (0.61): its metadata."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("sessionId"), str)
        and isinstance(obj.get("projectHash"), str)
        and "type" not in obj
    )


def jsonl_recording(raw: bytes, dropped: Counter[str]) -> dict[str, Any] | None:
    """The recording a ``session-*.jsonl`` file holds, as the JSON form has it (None: not one)."""
    meta: dict[str, Any] | None = None
    messages: dict[str, dict[str, Any]] = {}
    lines = raw.split(b"\n")
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            if meta is None:
                return None
            # The line being written when the file was read: not lost, only not there yet.
            dropped["torn last line" if n == len(lines) - 1 else "unreadable line"] += 1
            continue
        if meta is None:
            if not is_jsonl_head(rec):
                return None
            meta = {k: v for k, v in rec.items() if k != "messages"}
            _add(messages, rec.get("messages"))
        elif not isinstance(rec, dict):
            dropped["line:not an object"] += 1
        elif isinstance(rec.get("$rewindTo"), str):
            ids = list(messages)
            cut = ids.index(rec["$rewindTo"]) if rec["$rewindTo"] in ids else 0
            for mid in ids[cut:]:
                del messages[mid]
        elif isinstance(rec.get("id"), str):
            messages[rec["id"]] = rec  # a later state of a message keeps its place
        elif isinstance(rec.get("$set"), dict):
            update = rec["$set"]
            if isinstance(update.get("messages"), list):
                messages.clear()
                _add(messages, update["messages"])
            meta.update((k, v) for k, v in update.items() if k != "messages")
        elif is_jsonl_head(rec):
            meta.update((k, v) for k, v in rec.items() if k != "messages")
            _add(messages, rec.get("messages"))
        else:
            dropped["line:unknown record"] += 1
    if meta is None:
        return None
    return {**meta, "messages": list(messages.values())}


def _add(messages: dict[str, dict[str, Any]], items: Any) -> None:
    for m in items if isinstance(items, list) else []:
        if isinstance(m, dict) and isinstance(m.get("id"), str):
            messages[m["id"]] = m


def is_recording(doc: Any) -> bool:
    """A chat recording: ``sessionId`` and messages typed ``user`` / ``gemini``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list) or "sessionId" not in doc:
        return False
    return any(isinstance(m, dict) and m.get("type") in ("user", "gemini") for m in doc["messages"])


def is_checkpoint(doc: Any) -> bool:
    """A checkpoint: Gemini ``Content`` objects (``role`` user / model, ``parts``)."""
    history = doc.get("history") if isinstance(doc, dict) else doc
    if not isinstance(history, list) or not history:
        return False
    return all(isinstance(c, dict) and isinstance(c.get("parts"), list) for c in history[:20]) and any(
        c.get("role") == "model" for c in history if isinstance(c, dict)
    )


# -- chat recordings -----------------------------------------------------------------


def _recording(path: Path, doc: Mapping[str, Any]) -> Builder:
    b = Builder(HARNESS, str_or_none(doc.get("sessionId")) or path.stem)
    b.metadata.update(project_hash=str_or_none(doc.get("projectHash")), timestamp=to_ms(doc.get("startTime")))
    answered: set[str] = set()
    for msg in doc["messages"]:
        if not isinstance(msg, dict):
            b.dropped["message:invalid"] += 1
            continue
        kind = msg.get("type")
        ts = to_ms(msg.get("timestamp"))
        if kind == "user" and _answered(msg.get("content"), answered):
            # 0.61 also records the results it sends back as a user turn:
            # they are the calls' results, already paired.
            continue
        text = _content(msg.get("content"), b)
        if kind == "user" and text.lstrip().startswith(("<session_context>", _SETUP)):
            b.system(text, ts)  # the CLI's own context turn (0.61 records it), not a prompt
        elif kind == "user":
            b.user(text, ts)
            if b.name is None:
                b.name = shorten(text)
        elif kind == "gemini":
            _reply(b, msg, text, ts)
            calls = msg.get("toolCalls")
            if isinstance(calls, list):
                answered.update(str(c.get("id")) for c in calls if isinstance(c, dict))
        elif kind in ("info", "warning", "error"):
            # What the CLI showed the user (an API error, a notice), not model output.
            b.system(f"[{kind}] {text}" if text else f"[{kind}]", ts)
        else:
            b.dropped[f"message:{kind}" if isinstance(kind, str) else "message:untyped"] += 1
    return b


def _answered(content: Any, answered: set[str]) -> bool:
    """Whether *content* is only ``functionResponse`` parts for calls whose results were recorded."""
    if not isinstance(content, list) or not content:
        return False
    ids = [p["functionResponse"].get("id") for p in content if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
    return len(ids) == len(content) and all(isinstance(i, str) and i in answered for i in ids)


def _content(value: Any, b: Builder) -> str:
    """``content``: a string, or Gemini parts (newer versions)."""
    if isinstance(value, list):
        return _parts_text([p for p in value if not (isinstance(p, dict) and p.get("thought"))], b)
    if isinstance(value, dict):
        return _parts_text([value], b)
    return blocks_text(value, b.dropped)


def _reply(b: Builder, msg: Mapping[str, Any], text: str, ts: int | None) -> None:
    thoughts = msg.get("thoughts")
    reasoning = []
    for t in thoughts if isinstance(thoughts, list) else []:
        if not isinstance(t, dict):
            continue
        subject, description = str_or_none(t.get("subject")), str_or_none(t.get("description"))
        reasoning.append("\n\n".join(x for x in (f"**{subject}**" if subject else None, description) if x))
    calls = msg.get("toolCalls")
    calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    out = b.assistant(
        text,
        reasoning="\n\n".join(r for r in reasoning if r.strip()) or None,
        tool_calls=[(str_or_none(c.get("id")), _name(c.get("name")), c.get("args")) for c in calls],
        model=str_or_none(msg.get("model")),
        timestamp=ts,
    )
    usage = _tokens(msg.get("tokens"), b)
    if usage is not None:
        out["usage"] = usage
    for c in calls:
        status = c.get("status")
        result = c.get("result")
        if result is None and status is None:
            continue  # a call still waiting when the file was written: no result yet
        body, failed = _response(result, b)
        if not body:
            body = _display(c.get("resultDisplay")) or (str(status) if isinstance(status, str) else "")
        b.tool_result(
            str_or_none(c.get("id")),
            body,
            is_error=failed or status in ("error", "cancelled"),
            timestamp=to_ms(c.get("timestamp")) or ts,
        )


def _name(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _display(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json_text(value) if value is not None else ""


def _tokens(raw: Any, b: Builder) -> dict[str, Any] | None:
    """Gemini's counts in the Pi shape: cached tokens out of ``input``, the tool-use
    prompt into it, thoughts into ``output`` (and ``reasoning``)."""
    if not isinstance(raw, dict):
        return None
    n = {k: raw.get(k) for k in ("input", "output", "cached", "thoughts", "tool")}
    if any(v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0) for v in n.values()):
        b.dropped["invalid_usage"] += 1
        return None
    inputs, output, cached, thoughts, tool = (v or 0 for v in n.values())
    usage = usage_counts(
        {"input": max(0, inputs - cached) + tool, "output": output + thoughts, "cacheRead": min(cached, inputs)}, b.dropped
    )
    if usage is not None and n["thoughts"] is not None:
        usage["reasoning"] = thoughts
    return usage


# -- checkpoints ---------------------------------------------------------------------


def _checkpoint(path: Path, history: list[Any]) -> Builder:
    # A checkpoint holds no session id: the file name (checkpoint-<tag>) is the id.
    b = Builder(HARNESS, path.stem)
    pending: list[tuple[str | None, str]] = []  # (id, name) of calls not answered yet
    for content in history:
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            b.dropped["content:invalid"] += 1
            continue
        parts = [p for p in content["parts"] if isinstance(p, dict)]
        if content.get("role") == "model":
            texts = [p for p in parts if "text" in p and not p.get("thought")]
            thoughts = [content_text(p.get("text")) for p in parts if p.get("thought")]
            calls = [p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict)]
            msg = b.assistant(_parts_text(texts, b), reasoning="\n\n".join(thoughts) or None)
            for call in calls:
                name = _name(call.get("name"))
                # Older versions give calls no id: a result is matched by the tool's name.
                source_id = str_or_none(call.get("id")) or f"{name or 'call'}-{len(b.messages)}-{len(pending)}"
                b.add_tool_call(msg, source_id, name, call.get("args"))
                pending.append((source_id, name))
        else:
            responses = [p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), dict)]
            for r in responses:
                rid = str_or_none(r.get("id"))
                match = next(
                    (i for i, (cid, name) in enumerate(pending) if (rid and cid == rid) or (not rid and name == r.get("name"))),
                    None,
                )
                answered = pending.pop(match)[0] if match is not None else rid
                body, failed = _response([{"functionResponse": r}], b)
                b.tool_result(answered, body, is_error=failed)
            rest = [p for p in parts if "functionResponse" not in p]
            if rest:
                text = _parts_text(rest, b)
                if text.startswith(_SETUP):
                    b.system(text)  # the environment the CLI sends first, not a prompt
                elif text or not responses:
                    b.user(text)
                    if b.name is None:
                        b.name = shorten(text)
    return b


# -- parts -----------------------------------------------------------------------------


def _parts_text(parts: list[Any], b: Builder) -> str:
    out: list[str] = []
    for p in parts:
        if isinstance(p, str):
            out.append(p)
        elif not isinstance(p, dict):
            continue
        elif "text" in p:
            out.append(content_text(p.get("text")))
        elif isinstance(data := p.get("inlineData") or p.get("fileData"), dict):
            mime = image_mime(data)
            kind = "image" if isinstance(mime, str) and mime.startswith("image/") else "file"
            b.dropped[kind] += 1
            out.append(placeholder(kind, mime))
        else:
            b.dropped["part:" + (next(iter(p), "empty"))] += 1
            out.append(json_text(p))
    kept = [x for x in out if x.strip()]
    return "\n".join(kept or out[:1])


def _response(result: Any, b: Builder) -> tuple[str, bool]:
    """The text of a call's ``functionResponse`` parts, and whether it reports an error."""
    if isinstance(result, str):
        return result, False
    if not isinstance(result, list):
        return ("" if result is None else json_text(result)), False
    texts: list[str] = []
    failed = False
    for part in result:
        fr = part.get("functionResponse") if isinstance(part, dict) else None
        if not isinstance(fr, dict):
            texts.append(_parts_text([part], b))
            continue
        resp = fr.get("response")
        if isinstance(resp, dict) and "error" in resp:
            failed = True
            texts.append(content_text(resp["error"]))
        elif isinstance(resp, dict) and "output" in resp:
            texts.append(content_text(resp["output"]))
        elif resp is not None:
            texts.append(json_text(resp))
        parts = fr.get("parts")
        if isinstance(parts, list):
            texts.append(_parts_text(parts, b))
    return "\n".join(t for t in texts if t), failed
