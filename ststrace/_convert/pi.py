"""Pi coding-agent sessions (versions 1 to 3; OpenClaw writes the same format).

A v2/v3 file is a tree: every entry has ``id`` and ``parentId``. The session
the user last saw is the path from the last entry back to the root; with
``all_branches`` every leaf gives its own trace. A v1 file has no ids and is
one linear conversation.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from .._records import check_usage
from .._tools import definitions, merge
from .to_pi import TOOLS_CUSTOM_TYPE
from ._common import Builder, ConvertError, Converted, blocks_text, finish, iter_jsonl, str_or_none, to_ms, usage_counts

HARNESS = "pi"


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    lines = list(iter_jsonl(path, file_dropped))
    if not lines or not isinstance(lines[0][1], dict) or lines[0][1].get("type") != "session":
        raise ConvertError(f"{path}: not a Pi session (first line is not a session header)")
    header: dict[str, Any] = lines[0][1]
    entries = [obj for _, obj in lines[1:] if isinstance(obj, dict) and obj.get("type") != "session"]
    raw_version = header.get("version")
    version = raw_version if isinstance(raw_version, int) and not isinstance(raw_version, bool) else 1
    session_id = str_or_none(header.get("id")) or path.stem

    tree = version >= 2 and bool(entries) and all(isinstance(e.get("id"), str) for e in entries)
    if not tree:
        return finish([_build(header, session_id, entries, entries)], file_dropped)

    by_id = {e["id"]: e for e in entries}
    active_leaf = entries[-1]["id"]
    if not all_branches:
        return finish([_build(header, session_id, _path_to(active_leaf, by_id), entries)], file_dropped)

    has_child = {p for e in entries if isinstance(p := e.get("parentId"), str)}
    leaves = [e["id"] for e in entries if e["id"] not in has_child]
    builders: list[Builder] = []
    for leaf in leaves:
        branch = _path_to(leaf, by_id)
        if not any(e.get("type") in _MESSAGE_ENTRIES for e in branch if isinstance(e.get("type"), str)):
            continue
        sid = session_id if leaf == active_leaf else f"{session_id}-branch-{leaf}"
        b = _build(header, sid, branch, entries)
        b.metadata["branch"] = {"leaf": leaf, "active": leaf == active_leaf}
        builders.append(b)
    out = finish(builders, file_dropped)
    # The active branch first: it is the session as the user last saw it.
    out.sort(key=lambda c: not c.trace.header["branch"]["active"])
    return out


_MESSAGE_ENTRIES = frozenset({"message", "custom_message", "compaction", "branch_summary"})


def _path_to(leaf: str, by_id: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    current = by_id.get(leaf)
    while current is not None and current["id"] not in seen:
        seen.add(current["id"])
        path.append(current)
        parent = current.get("parentId")
        current = by_id.get(parent) if isinstance(parent, str) else None
    path.reverse()
    return path


def _build(
    header: Mapping[str, Any],
    session_id: str,
    branch: list[dict[str, Any]],
    all_entries: list[dict[str, Any]],
) -> Builder:
    b = Builder(HARNESS, session_id)
    b.metadata.update(
        cwd=str_or_none(header.get("cwd")),
        version=header.get("version", 1),
        timestamp=to_ms(header.get("timestamp")),
        parent_session=str_or_none(header.get("parentSession")),
        source_harness=str_or_none(header.get("harness")),
        # Sub-agent links, as ``convert --to pi`` keeps them.
        parentSessionId=str_or_none(header.get("parentSessionId")),
        parentToolCallId=str_or_none(header.get("parentToolCallId")),
    )
    # The title: the last name given on this branch, else anywhere in the file.
    names = [e.get("name") for e in branch if e.get("type") == "session_info" and isinstance(e.get("name"), str)]
    if not names:
        names = [e.get("name") for e in all_entries if e.get("type") == "session_info" and isinstance(e.get("name"), str)]
    b.name = names[-1] if names else None

    model: str | None = None
    tools: list[Any] | None = None  # from a teich-available-tools entry, for the next message
    for entry in branch:
        kind = entry.get("type")
        ts = to_ms(entry.get("timestamp"))
        before = len(b.messages)
        if kind == "custom" and entry.get("customType") == TOOLS_CUSTOM_TYPE:
            data = entry.get("data")
            listed = definitions(data.get("tools")) if isinstance(data, dict) else []
            tools = merge([tools, listed]) if tools else listed
        elif kind == "model_change":
            model = str_or_none(entry.get("modelId")) or model
        elif kind == "message" and isinstance(entry.get("message"), dict):
            _message(b, entry["message"], ts, model)
        elif kind == "custom_message":
            text = blocks_text(entry.get("content"), b.dropped)
            b.system(text, ts)
        elif kind == "compaction" and isinstance(entry.get("summary"), str):
            b.system(f"[compaction summary]\n{entry['summary']}", ts)
        elif kind == "branch_summary" and isinstance(entry.get("summary"), str):
            b.system(f"[branch summary]\n{entry['summary']}", ts)
        # thinking_level_change, session_info, label and custom entries carry
        # no conversation content.
        if tools and len(b.messages) > before:
            b.messages[before]["tools"] = tools
            tools = None
    if tools and b.messages:
        b.messages[-1]["tools"] = merge([b.messages[-1].get("tools"), tools])
    return b


def _message(b: Builder, msg: Mapping[str, Any], entry_ts: int | None, model: str | None) -> None:
    role = msg.get("role")
    ts = to_ms(msg.get("timestamp")) or entry_ts
    content = msg.get("content")
    if role == "user":
        b.user(blocks_text(content, b.dropped), ts)
    elif role == "assistant":
        text_parts: list[str] = []
        reasoning: list[str] = []
        calls: list[tuple[str | None, str, Any]] = []
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, str):
                text_parts.append(block)
            elif not isinstance(block, dict):
                continue
            elif block.get("type") == "thinking":
                if isinstance(block.get("thinking"), str) and block["thinking"].strip():
                    reasoning.append(block["thinking"])
                elif block.get("redacted"):
                    b.dropped["redacted_thinking"] += 1
            elif block.get("type") == "toolCall":
                calls.append((str_or_none(block.get("id")), str(block.get("name") or ""), block.get("arguments")))
            else:
                text_parts.append(blocks_text([block], b.dropped))
        text = "\n\n".join(t for t in text_parts if t.strip())
        error = msg.get("errorMessage")
        if isinstance(error, str) and error and not text:
            # A failed or aborted model call: say so rather than show nothing.
            text = f"Error: {error}"
        own = str_or_none(msg.get("model"))
        out = b.assistant(
            text,
            reasoning="\n\n".join(reasoning) or None,
            tool_calls=calls,
            model=(own if own != "unknown" else None) or model,
            timestamp=ts,
        )
        _usage(b, out, msg.get("usage"))
    elif role == "toolResult":
        b.tool_result(
            str_or_none(msg.get("toolCallId")),
            blocks_text(content, b.dropped),
            is_error=bool(msg.get("isError")),
            timestamp=ts,
        )
    elif role == "bashExecution":
        # A command the user ran with "!": shown to the model as a user turn.
        b.user(_bash_text(msg), ts)
    elif role in ("custom", "hookMessage"):
        b.system(blocks_text(content, b.dropped), ts)
    elif role == "branchSummary" and isinstance(msg.get("summary"), str):
        b.system(f"[branch summary]\n{msg['summary']}", ts)
    elif role == "compactionSummary" and isinstance(msg.get("summary"), str):
        b.system(f"[compaction summary]\n{msg['summary']}", ts)
    else:
        b.dropped[f"message:{role}"] += 1


def _bash_text(msg: Mapping[str, Any]) -> str:
    text = f"Ran `{msg.get('command', '')}`\n"
    output = msg.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    if msg.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif isinstance(msg.get("exitCode"), int) and msg["exitCode"] != 0:
        text += f"\n\nCommand exited with code {msg['exitCode']}"
    return text


def _usage(b: Builder, out: dict[str, Any], raw: Any) -> None:
    """Pi's ``usage`` is the STS usage extension's shape: keep it. All zeros is
    what Pi (and ``convert --to pi``) writes for a reply without counts: none."""
    usage = usage_counts(raw, b.dropped)
    if usage is not None:
        out["usage"] = usage
