"""STS traces, normalised: ``convert`` on an STS file (any harness, llama.app's
message trees included) writes it again the way ststrace writes STS.

Every message goes through the :class:`~._common.Builder` again, so the output
passes :func:`ststrace.validate` even when the input did not (a result before
its call, a call answered twice, a duplicate call id); redaction is applied by
``convert`` as for every format. A llama.app tree gives its active path (root
to ``currNode``), or with ``all_branches`` one trace per leaf; its placeholder
root is no message, its ``timings`` become ``usage`` (llama.cpp counts the
prompt tokens it evaluated apart from the cached ones), its attachments
(``extra``) are counted as dropped.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from .._errors import TraceFormatError
from .._reader import read_tree
from .._tools import definitions
from .._tree import branches
from ._common import Builder, ConvertError, Converted, finish, str_or_none, to_ms, usage_counts

#: Header fields of a tree that say nothing once the trace is one path.
_TREE_HEADER = frozenset({"currNode", "lastModified"})
_SKIP_HEADER = frozenset({"type", "harness", "id", "name"}) | _TREE_HEADER


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    try:
        trace = read_tree(path, strict=False)
    except TraceFormatError as exc:
        raise ConvertError(str(exc)) from None
    header = trace.header
    found = branches(header, trace.messages)
    if not all_branches:
        found = found[:1]
    builders: list[Builder] = []
    base_id = trace.id or path.stem
    for branch in found:
        sid = base_id if branch.active else f"{base_id}-branch-{branch.leaf}"
        b = Builder(str(header.get("harness") or "sts"), sid)
        b.name = str_or_none(header.get("name"))
        b.metadata.update({k: v for k, v in header.items() if k not in _SKIP_HEADER})
        if len(found) > 1:
            b.metadata["branch"] = {"leaf": branch.leaf, "active": branch.active}
        for msg in branch.messages:
            _message(b, msg)
        builders.append(b)
    return finish(builders, file_dropped)


#: Message fields the builder writes again, and llama.app's tree bookkeeping.
_KNOWN = frozenset(
    {"role", "content", "reasoningContent", "toolCalls", "toolCallId", "model", "timestamp", "usage", "tools"}
    | {"id", "parent", "children", "convId", "type", "timings", "completionId", "extra", "thinking"}
)


def _message(b: Builder, msg: Mapping[str, Any]) -> None:
    for key in msg:
        if key not in _KNOWN:
            b.dropped[f"field:{key}"] += 1
    role = msg.get("role")
    raw_content = msg.get("content")
    content = raw_content if isinstance(raw_content, str) else ""
    ts = to_ms(msg.get("timestamp"))
    extra = msg.get("extra")
    if isinstance(extra, list) and extra:
        for item in extra:
            kind = item.get("type") if isinstance(item, dict) else None
            b.dropped[f"attachment:{kind}" if isinstance(kind, str) else "attachment"] += 1
    if role == "user":
        b.user(content, ts)
    elif role == "system":
        b.system(content, ts)
    elif role == "assistant":
        reasoning = msg.get("reasoningContent", msg.get("thinking"))
        calls = []
        raw_calls = msg.get("toolCalls")
        for tc in raw_calls if isinstance(raw_calls, list) else []:
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(fn, dict):
                b.dropped["malformed_tool_call"] += 1
                continue
            name = fn.get("name")
            calls.append((str_or_none(tc.get("id")), name if isinstance(name, str) else "", fn.get("arguments")))
        out = b.assistant(
            content,
            reasoning=reasoning if isinstance(reasoning, str) else None,
            tool_calls=calls,
            model=str_or_none(msg.get("model")),
            timestamp=ts,
        )
        usage = usage_counts(msg["usage"], b.dropped) if "usage" in msg else _timings(msg.get("timings"), b)
        if usage is not None:
            out["usage"] = usage
    elif role == "tool":
        b.tool_result(str_or_none(msg.get("toolCallId")), content, timestamp=ts)
    else:
        b.dropped[f"message:{role}" if isinstance(role, str) else "message:unknown"] += 1
        return
    # The tool schemas offered from this message on (ststrace's extension of STS).
    if "tools" in msg and b.messages:
        tools = definitions(msg["tools"])
        if tools:
            b.messages[-1]["tools"] = tools
        else:
            b.dropped["field:tools"] += 1


def _timings(raw: Any, b: Builder) -> dict[str, Any] | None:
    """llama.cpp's ``timings``: ``prompt_n`` prompt tokens evaluated, ``cache_n``
    taken from the cache, ``predicted_n`` generated."""
    if not isinstance(raw, dict):
        return None
    return usage_counts(
        {"input": raw.get("prompt_n", 0), "output": raw.get("predicted_n", 0), "cacheRead": raw.get("cache_n", 0)},
        b.dropped,
    )
