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
from collections import Counter, deque
from pathlib import Path
from typing import Any, Iterable, Mapping

import orjson

from ._anthropic import user_text
from ._common import Builder, Converted, block_kind, blocks_text, finish, iter_jsonl, shorten, str_or_none, to_ms, usage_counts

HARNESS = "claude-code"

# Bookkeeping lines with no conversation content: skipped, not counted.
_SKIPPED = frozenset({"summary", "custom-title", "file-history-snapshot", "queue-operation", "last-prompt"})



class Revised(Exception):
    """A line revises a reply that :meth:`Conversion.trim` let go of: convert the file again."""


class _Group:
    def __init__(self, builder: Builder) -> None:
        self.b = builder
        self.by_message_id: dict[str, dict[str, Any]] = {}
        # Replies already written and dropped from b.messages (see Conversion.trim).
        self.frozen: set[str] = set()
        self.base = 0  # how many messages were dropped


def convert(
    path: Path,
    *,
    all_branches: bool = False,
    dropped: Counter[str] | None = None,
    main_task_calls: Mapping[str, str] | None = None,
) -> list[Converted]:
    """*main_task_calls*: for a subagent file, the main session's ``agentId -> call id``
    when the caller already has it (else the main file is scanned for it)."""
    file_dropped = dropped if dropped is not None else Counter()
    conv = Conversion(path, file_dropped)
    for _, obj in iter_jsonl(path, file_dropped):
        if isinstance(obj, dict):
            conv.feed(obj)
    return finish(conv.builders(main_task_calls), file_dropped)


class Conversion:
    """One file's conversion, fed a line at a time (``hooks`` keeps it between events).

    What depends on the whole file (the session id, the title, the metadata,
    the ``Task`` calls that started subagents) is applied to the headers by
    :meth:`builders`, so feeding the lines in one go or in several gives the
    same traces.
    """

    def __init__(self, path: Path, dropped: Counter[str]) -> None:
        self.path = path
        self.dropped = dropped
        self.session_id: str | None = None
        self.meta: dict[str, Any] = {}
        self.uuids: set[str] = set()
        # The title a summary gives: the last summary whose leafUuid is a line
        # of this file, wherever that line is. The latest such summary so far,
        # and the later ones whose leaf has not been seen (yet).
        self.summary: str | None = None
        self.pending: deque[tuple[int, str, str]] = deque()  # (number, leafUuid, summary), in order
        self._last: dict[str, int] = {}  # leafUuid -> number of its last pending summary
        self._n = 0
        self.custom_title: str | None = None
        self.task_calls: dict[str, str] = {}
        self.agent_ids: set[str] = set()
        # A file in <session>/subagents/ is a subagent's even if its lines do not say so.
        self.file_agent = (
            path.stem[len("agent-") :] if path.parent.name == "subagents" and path.stem.startswith("agent-") else None
        )
        self.groups: dict[str | None, _Group] = {}
        self.first_prompt: dict[str | None, str] = {}

    def _group(self, obj: Mapping[str, Any]) -> tuple[str | None, _Group]:
        key = None
        if obj.get("isSidechain") or self.file_agent:
            key = str_or_none(obj.get("agentId")) or self.file_agent or "sidechain"
        g = self.groups.get(key)
        if g is None:
            # The id and header are set by builders(), from the whole file.
            g = self.groups[key] = _Group(Builder(HARNESS, ""))
        return key, g

    def feed(self, obj: Mapping[str, Any]) -> None:
        """Take one line of the file (a JSON object)."""
        kind = obj.get("type") if isinstance(obj.get("type"), str) else None
        self.session_id = self.session_id or str_or_none(obj.get("sessionId"))
        uuid = obj.get("uuid")
        if isinstance(uuid, str):
            self.uuids.add(uuid)
            last = self._last.get(uuid)
            if last is not None:
                # Those before it are outdone by it: let go of them.
                while self.pending and self.pending[0][0] <= last:
                    n, leaf, self.summary = self.pending.popleft()
                    if self._last.get(leaf) == n:
                        del self._last[leaf]
        if isinstance(agent := obj.get("agentId"), str):
            self.agent_ids.add(agent)
        _task_call(obj, self.task_calls)
        if kind == "summary" and isinstance(obj.get("summary"), str) and obj["summary"].strip():
            self._summary(str(obj.get("leafUuid") or ""), obj["summary"])
        elif kind == "custom-title" and isinstance(obj.get("customTitle"), str) and obj["customTitle"].strip():
            self.custom_title = obj["customTitle"]
        if kind in ("user", "assistant"):
            meta = self.meta
            for field in ("cwd", "version", "slug"):
                if field not in meta and isinstance(obj.get(field), str):
                    meta[field] = obj[field]
            if "git" not in meta and isinstance(obj.get("gitBranch"), str) and obj["gitBranch"]:
                meta["git"] = {"branch": obj["gitBranch"]}
        if kind in _SKIPPED:
            return
        ts = to_ms(obj.get("timestamp"))
        msg = obj.get("message")
        if kind == "user" and isinstance(msg, dict):
            gkey, g = self._group(obj)
            prompt = _user(g.b, obj, msg, ts)
            if prompt is not None and gkey not in self.first_prompt and not is_command(prompt):
                self.first_prompt[gkey] = prompt
        elif kind == "assistant" and isinstance(msg, dict):
            _assistant(self._group(obj)[1], msg, ts)
        elif kind == "system":
            text = obj.get("content")
            if isinstance(text, str) and text.strip():
                self._group(obj)[1].b.system(text, ts)
        elif kind == "attachment":
            self._group(obj)[1].b.dropped["attachment"] += 1
        elif kind == "progress":
            # Subagent, hook and command activity streamed into the main file;
            # a subagent's own lines are in its subagents/ file.
            data = obj.get("data")
            sub = data.get("type") if isinstance(data, dict) else None
            self.dropped["agent_progress" if sub == "agent_progress" else "progress"] += 1
        else:
            self.dropped[f"line:{kind}" if kind is not None else "line:untyped"] += 1

    def _summary(self, leaf: str, text: str) -> None:
        if leaf in self.uuids:
            self.summary = text
            self.pending.clear()
            self._last.clear()
        else:
            self._n += 1
            self.pending.append((self._n, leaf, text))
            self._last[leaf] = self._n

    def builders(self, main_task_calls: Mapping[str, str] | None = None) -> list[Builder]:
        """The groups' builders, their headers set from everything fed so far."""
        sid = self.session_id or self.path.stem
        # Only a summary of a conversation in this file names it.
        title = self.custom_title or self.summary
        task_calls = dict(self.task_calls)
        if self.file_agent is not None:
            # <session>/subagents/agent-<id>.jsonl: the main file tells which call spawned it.
            if main_task_calls is None:
                main = self.path.parent.parent.with_name(self.path.parent.parent.name + ".jsonl")
                main_task_calls = _task_calls_in(main, self.agent_ids | {self.file_agent})
            for agent, call in main_task_calls.items():
                task_calls.setdefault(agent, call)
        out = []
        for key, g in self.groups.items():
            b = g.b
            b.session_id = sid if key is None else f"{sid}-agent-{key}"
            b.metadata = dict(self.meta)
            if key is None:
                b.name = title
            else:
                b.metadata.update(
                    parentSessionId=sid,
                    parentToolCallId=task_calls.get(key),
                    agent_id=None if key == "sidechain" else key,
                )
                b.name = None
            if not b.name and key in self.first_prompt:
                b.name = shorten(self.first_prompt[key])
            out.append(b)
        return out


    # -- kept between runs (``hooks``) ---------------------------------------

    def trim(self, key: str | None) -> int | None:
        """Let go of group *key*'s messages but its latest reply; returns that reply's index (None: no reply).

        Only a reply can change once added (a later line with its
        ``message.id`` adds a block or a higher usage), and only the latest
        one is kept revisable: a line for an earlier reply raises
        :class:`Revised` from then on.
        """
        g = self.groups[key]
        live = {id(m) for m in g.by_message_id.values()}
        msgs = g.b.messages
        at = next((i for i in range(len(msgs) - 1, -1, -1) if id(msgs[i]) in live), None)
        kept = {mid: m for mid, m in g.by_message_id.items() if at is not None and m is msgs[at]}
        g.frozen.update(mid for mid in g.by_message_id if mid not in kept)
        g.by_message_id = kept
        g.base += len(msgs) - (at is not None)
        g.b.messages = [msgs[at]] if at is not None else []
        return at

    def snapshot(self) -> dict[str, Any]:
        """Everything feeding more lines needs, as JSON values."""
        groups = []
        for key, g in self.groups.items():
            index = {id(m): i for i, m in enumerate(g.b.messages)}
            groups.append(
                {
                    "key": key,
                    "b": g.b.snapshot(),
                    "replies": {mid: index[id(m)] for mid, m in g.by_message_id.items()},
                    "frozen": list(g.frozen),
                    "base": g.base,
                }
            )
        return {
            "session_id": self.session_id,
            "meta": self.meta,
            "uuids": list(self.uuids),
            "summary": self.summary,
            "pending": [[leaf, text] for _, leaf, text in self.pending],
            "custom_title": self.custom_title,
            "task_calls": self.task_calls,
            "agent_ids": list(self.agent_ids),
            "first_prompt": [[k, v] for k, v in self.first_prompt.items()],
            "dropped": dict(self.dropped),
            "groups": groups,
        }

    @classmethod
    def restore(cls, path: Path, snap: Mapping[str, Any]) -> Conversion:
        conv = cls(path, Counter(snap["dropped"]))
        conv.session_id = snap["session_id"]
        conv.meta = dict(snap["meta"])
        conv.uuids = set(snap["uuids"])
        conv.summary = snap["summary"]
        for leaf, text in snap["pending"]:
            conv._summary(str(leaf), str(text))
        conv.custom_title = snap["custom_title"]
        conv.task_calls = dict(snap["task_calls"])
        conv.agent_ids = set(snap["agent_ids"])
        conv.first_prompt = {k: v for k, v in snap["first_prompt"]}
        for gs in snap["groups"]:
            g = _Group(Builder.restore(HARNESS, gs["b"]))
            g.by_message_id = {mid: g.b.messages[i] for mid, i in gs["replies"].items()}
            g.frozen = set(gs["frozen"])
            g.base = int(gs["base"])
            conv.groups[gs["key"]] = g
        return conv


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
        _task_call(obj, out)
    return out


def _task_call(obj: Mapping[str, Any], out: dict[str, str]) -> None:
    """Add to *out* the subagent start this line shows, if any (the first one seen wins)."""
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
            return
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                out.setdefault(agent, block["tool_use_id"])
                break


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
    if target is None and mid in g.frozen:
        raise Revised(mid)
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
