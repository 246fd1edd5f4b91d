"""Claude Code sessions (``~/.claude/projects/<project>/<session>.jsonl``).

One API response is written as several ``assistant`` lines sharing
``message.id`` (one per content block); they become one STS message, with the
response's ``usage`` (Anthropic counts: cache reads and writes apart from input). Tool
results arrive as ``user`` lines holding ``tool_result`` blocks. Lines of a
subagent (``isSidechain``, grouped by ``agentId``) become their own trace, in
the main file (older versions) or in ``<session>/subagents/agent-<id>.jsonl``
(newer ones). A subagent trace names its parent in ``parentSessionId`` and,
when the main session shows it, the ``Task`` call that started it in
``parentToolCallId``.

The title: a ``custom-title`` line, else a ``summary`` line whose ``leafUuid``
is a message of this file (Claude Code also appends summaries of *other*
sessions to a file), else the first user prompt, shortened. A slash command's wrapper turns
(``<command-name>/clear</command-name>``, ``<local-command-stdout>``, the
"Caveat: ..." note) stay in the trace as they are but are not the prompt.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

import orjson

from ._anthropic import user_text
from ._common import Builder, Converted, block_kind, blocks_text, finish, iter_jsonl, shorten, str_or_none, to_ms, usage_counts

HARNESS = "claude-code"

# Bookkeeping lines with no conversation content: skipped, not counted.
_SKIPPED = frozenset({"summary", "custom-title", "file-history-snapshot", "queue-operation", "last-prompt"})



class _Group:
    def __init__(self, builder: Builder) -> None:
        self.b = builder
        self.by_message_id: dict[str, dict[str, Any]] = {}


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    lines = [obj for _, obj in iter_jsonl(path, file_dropped) if isinstance(obj, dict)]

    session_id: str | None = None
    meta: dict[str, Any] = {}
    uuids: set[str] = set()
    summaries: list[tuple[str, str]] = []  # (leafUuid, summary)
    custom_title: str | None = None
    for obj in lines:
        kind = obj.get("type")
        session_id = session_id or str_or_none(obj.get("sessionId"))
        uuid = obj.get("uuid")
        if isinstance(uuid, str):
            uuids.add(uuid)
        if kind == "summary" and isinstance(obj.get("summary"), str) and obj["summary"].strip():
            summaries.append((str(obj.get("leafUuid") or ""), obj["summary"]))
        elif kind == "custom-title" and isinstance(obj.get("customTitle"), str) and obj["customTitle"].strip():
            custom_title = obj["customTitle"]
        if kind in ("user", "assistant"):
            for field in ("cwd", "version", "slug"):
                if field not in meta and isinstance(obj.get(field), str):
                    meta[field] = obj[field]
            if "git" not in meta and isinstance(obj.get("gitBranch"), str) and obj["gitBranch"]:
                meta["git"] = {"branch": obj["gitBranch"]}
    sid = session_id or path.stem
    # Only a summary of a conversation in this file names it.
    own = [text for leaf, text in summaries if leaf in uuids]
    title = custom_title or (own[-1] if own else None)
    task_calls = _task_calls(lines)
    # A file in <session>/subagents/ is a subagent's even if its lines do not say so.
    file_agent = path.stem[len("agent-") :] if path.parent.name == "subagents" and path.stem.startswith("agent-") else None
    if file_agent is not None:
        # <session>/subagents/agent-<id>.jsonl: the main file tells which call spawned it.
        main = path.parent.parent.with_name(path.parent.parent.name + ".jsonl")
        agent_ids = {a for obj in lines if isinstance(a := obj.get("agentId"), str)} | {file_agent}
        for key, value in _task_calls_in(main, agent_ids).items():
            task_calls.setdefault(key, value)

    groups: dict[str | None, _Group] = {}
    first_prompt: dict[str | None, str] = {}

    def group_for(obj: Mapping[str, Any]) -> tuple[str | None, _Group]:
        key = None
        if obj.get("isSidechain") or file_agent:
            key = str_or_none(obj.get("agentId")) or file_agent or "sidechain"
        g = groups.get(key)
        if g is None:
            b = Builder(HARNESS, sid if key is None else f"{sid}-agent-{key}")
            b.metadata.update(meta)
            if key is None:
                b.name = title
            else:
                b.metadata.update(
                    parentSessionId=sid,
                    parentToolCallId=task_calls.get(key),
                    agent_id=None if key == "sidechain" else key,
                )
            g = groups[key] = _Group(b)
        return key, g

    for obj in lines:
        kind = obj.get("type") if isinstance(obj.get("type"), str) else None
        if kind in _SKIPPED:
            continue
        ts = to_ms(obj.get("timestamp"))
        msg = obj.get("message")
        if kind == "user" and isinstance(msg, dict):
            gkey, g = group_for(obj)
            prompt = _user(g.b, obj, msg, ts)
            if prompt is not None and gkey not in first_prompt and not is_command(prompt):
                first_prompt[gkey] = prompt
        elif kind == "assistant" and isinstance(msg, dict):
            _assistant(group_for(obj)[1], msg, ts)
        elif kind == "system":
            text = obj.get("content")
            if isinstance(text, str) and text.strip():
                group_for(obj)[1].b.system(text, ts)
        elif kind == "attachment":
            group_for(obj)[1].b.dropped["attachment"] += 1
        elif kind == "progress":
            # Subagent, hook and command activity streamed into the main file;
            # a subagent's own lines are in its subagents/ file.
            data = obj.get("data")
            sub = data.get("type") if isinstance(data, dict) else None
            file_dropped["agent_progress" if sub == "agent_progress" else "progress"] += 1
        else:
            file_dropped[f"line:{kind}" if kind is not None else "line:untyped"] += 1

    for gkey, g in groups.items():
        if not g.b.name and gkey in first_prompt:
            g.b.name = shorten(first_prompt[gkey])
    return finish((g.b for g in groups.values()), file_dropped)


#: What Claude Code writes as a user turn around a slash command (``/clear``,
#: ``/init``): the command itself, its arguments, its output, the caveat before it.
_COMMAND_TAGS = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
)
_CAVEAT = "Caveat: The messages below were generated"


def is_command(text: str) -> bool:
    """Whether a user turn is a slash command's wrapper rather than a prompt the user typed."""
    head = text.lstrip()
    return head.startswith(_COMMAND_TAGS) or head.startswith(_CAVEAT)


def _task_calls(lines: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """agentId -> id of the ``Task`` tool call that started that subagent."""
    out: dict[str, str] = {}
    for obj in lines:
        kind = obj.get("type")
        if kind == "progress":
            data = obj.get("data")
            agent = data.get("agentId") if isinstance(data, dict) else None
            parent = obj.get("parentToolUseID")
            if isinstance(agent, str) and isinstance(parent, str) and parent:
                out.setdefault(agent, parent)
        elif kind == "user":
            result = obj.get("toolUseResult")
            agent = result.get("agentId") if isinstance(result, dict) else None
            msg = obj.get("message")
            content = msg.get("content") if isinstance(msg, dict) else None
            if not isinstance(agent, str) or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                    out.setdefault(agent, block["tool_use_id"])
                    break
    return out


_AGENT_ID = re.compile(rb'"agentId"\s*:\s*"([^"]+)"')


def _task_calls_in(main: Path, agent_ids: set[str]) -> dict[str, str]:
    """:func:`_task_calls` for the lines of the main session file that mention *agent_ids*."""
    if not agent_ids:
        return {}
    wanted = {a.encode() for a in agent_ids}
    lines: list[Mapping[str, Any]] = []
    try:
        with open(main, "rb") as f:
            for raw in f:
                if b'"agentId"' not in raw or not any(m.group(1) in wanted for m in _AGENT_ID.finditer(raw)):
                    continue
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(obj, dict):
                    lines.append(obj)
    except OSError:
        return {}
    return _task_calls(lines)


def _user(b: Builder, obj: Mapping[str, Any], msg: Mapping[str, Any], ts: int | None) -> str | None:
    """Add a user line; returns the prompt text when it was typed by the user."""
    text = user_text(b, msg.get("content"), ts)
    if text is None:
        return None
    if obj.get("isCompactSummary"):
        b.system(f"[compaction summary]\n{text}", ts)
    elif obj.get("isMeta") or text.lstrip().startswith(_CAVEAT):
        # Injected by Claude Code itself (caveats, hook output), not typed by the user.
        b.system(text, ts)
    else:
        b.user(text, ts)
        return text
    return None


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
        kind = block_kind(block)
        if kind == "text":
            b.extend_assistant(target, text=_str(block.get("text")))
        elif kind == "thinking":
            b.extend_assistant(target, reasoning=_str(block.get("thinking")))
        elif kind == "redacted_thinking":
            b.dropped["redacted_thinking"] += 1
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            b.add_tool_call(target, str_or_none(block.get("id")), _str(block.get("name")), block.get("input"))
        elif kind is not None and kind.endswith("_tool_result") and str_or_none(block.get("tool_use_id")):
            # Server-side tools (web search, code execution) answer inside the response.
            b.tool_result(
                str_or_none(block.get("tool_use_id")),
                blocks_text(block.get("content"), b.dropped),
                is_error=block.get("is_error") is True,
                timestamp=ts,
            )
        else:
            b.extend_assistant(target, text=blocks_text([block], b.dropped))
    b.extend_assistant(target, model=model)
    # Every line of a split response repeats the response's usage, the last
    # one with the final output count: the last report wins.
    usage = usage_counts(msg.get("usage"), b.dropped)
    if usage is not None:
        target["usage"] = usage


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
