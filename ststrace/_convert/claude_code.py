"""Claude Code sessions (``~/.claude/projects/<project>/<session>.jsonl``).

One API response is written as several ``assistant`` lines sharing
``message.id`` (one per content block); they become one STS message. Tool
results arrive as ``user`` lines holding ``tool_result`` blocks. Lines of a
subagent (``isSidechain``, grouped by ``agentId``) become their own trace.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from ._anthropic import user_text
from ._common import Builder, Converted, blocks_text, iter_jsonl, str_or_none, to_ms

HARNESS = "claude-code"

_SKIPPED = frozenset(
    {"summary", "custom-title", "file-history-snapshot", "queue-operation", "last-prompt", "progress"}
)


class _Group:
    def __init__(self, builder: Builder) -> None:
        self.b = builder
        self.by_message_id: dict[str, dict[str, Any]] = {}


def convert(path: Path, *, all_branches: bool = False) -> list[Converted]:
    dropped: Counter[str] = Counter()
    lines = [obj for _, obj in iter_jsonl(path, dropped) if isinstance(obj, dict)]

    session_id: str | None = None
    meta: dict[str, Any] = {}
    title: str | None = None
    custom_title: str | None = None
    for obj in lines:
        session_id = session_id or str_or_none(obj.get("sessionId"))
        if obj.get("type") == "summary" and isinstance(obj.get("summary"), str):
            title = obj["summary"]
        elif obj.get("type") == "custom-title" and isinstance(obj.get("customTitle"), str):
            custom_title = obj["customTitle"]
        if obj.get("type") in ("user", "assistant"):
            for src, dst in (("cwd", "cwd"), ("version", "version"), ("slug", "slug")):
                if dst not in meta and isinstance(obj.get(src), str):
                    meta[dst] = obj[src]
            if "git" not in meta and isinstance(obj.get("gitBranch"), str) and obj["gitBranch"]:
                meta["git"] = {"branch": obj["gitBranch"]}
    sid = session_id or path.stem

    groups: dict[str | None, _Group] = {}

    def group_for(obj: Mapping[str, Any]) -> _Group:
        key = None
        if obj.get("isSidechain"):
            key = str_or_none(obj.get("agentId")) or "sidechain"
        g = groups.get(key)
        if g is None:
            b = Builder(HARNESS, sid if key is None else f"{sid}-agent-{key}", dropped if key is None else Counter())
            b.metadata.update(meta)
            if key is None:
                b.name = custom_title or title
            else:
                b.metadata.update(parent_session=sid, agent_id=None if key == "sidechain" else key)
            g = groups[key] = _Group(b)
        return g

    for obj in lines:
        kind = obj.get("type")
        if kind in _SKIPPED:
            continue
        ts = to_ms(obj.get("timestamp"))
        msg = obj.get("message")
        if kind == "user" and isinstance(msg, dict):
            _user(group_for(obj).b, obj, msg, ts)
        elif kind == "assistant" and isinstance(msg, dict):
            _assistant(group_for(obj), msg, ts)
        elif kind == "system":
            text = obj.get("content")
            if isinstance(text, str) and text.strip():
                group_for(obj).b.system(text, ts)
        elif kind == "attachment":
            group_for(obj).b.dropped["attachment"] += 1
        else:
            dropped[f"line:{kind}"] += 1

    out = [g.b.build() for g in groups.values() if g.b.messages]
    return out


def _user(b: Builder, obj: Mapping[str, Any], msg: Mapping[str, Any], ts: int | None) -> None:
    text = user_text(b, msg.get("content"), ts)
    if text is None:
        return
    if obj.get("isCompactSummary"):
        b.system(f"[compaction summary]\n{text}", ts)
    elif obj.get("isMeta"):
        # Injected by Claude Code itself (caveats, hook output), not typed by the user.
        b.system(text, ts)
    else:
        b.user(text, ts)


def _assistant(g: _Group, msg: Mapping[str, Any], ts: int | None) -> None:
    b = g.b
    model = str_or_none(msg.get("model"))
    if model == "<synthetic>":
        model = None
    mid = str_or_none(msg.get("id"))
    target = g.by_message_id.get(mid) if mid else None
    if target is None:
        target = b.assistant("", model=model, timestamp=ts)
        if mid:
            g.by_message_id[mid] = target
    content = msg.get("content")
    blocks = content if isinstance(content, list) else [content]
    for block in blocks:
        if isinstance(block, str):
            b.extend_assistant(target, text=block)
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            b.extend_assistant(target, text=str(block.get("text") or ""))
        elif kind == "thinking":
            b.extend_assistant(target, reasoning=str(block.get("thinking") or ""))
        elif kind == "redacted_thinking":
            b.dropped["redacted_thinking"] += 1
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            b.add_tool_call(target, str_or_none(block.get("id")), str(block.get("name") or ""), block.get("input"))
        elif isinstance(kind, str) and kind.endswith("_tool_result") and block.get("tool_use_id"):
            # Server-side tools (web search, code execution) answer inside the response.
            b.tool_result(
                str_or_none(block.get("tool_use_id")),
                blocks_text(block.get("content"), b.dropped),
                is_error=bool(block.get("is_error")),
                timestamp=ts,
            )
        else:
            b.extend_assistant(target, text=blocks_text([block], b.dropped))
    b.extend_assistant(target, model=model)
