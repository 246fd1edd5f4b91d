"""Counting what is in a trace, for ``ststrace stats``."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .._limits import token_count
from .._errors import TraceFormatError
from ._common import CliError, describe, dump_json, load_other, source_format, trace_file, trace_files, warn
from ._text import fmt_duration, is_error

__all__ = ["TraceStats", "collect", "format_stats", "run", "setup", "total"]

_ROLES = ("user", "assistant", "system", "tool")


@dataclass
class TraceStats:
    path: str
    messages: int = 0
    roles: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_ROLES, 0))
    tool_calls: int = 0
    tool_results: int = 0
    unanswered_calls: int = 0
    unpaired_results: int = 0
    errors: int = 0
    models: dict[str, int] = field(default_factory=dict)
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    duration_ms: int | None = None
    bytes: int = 0
    files: int = 1
    #: Files with a session header and no messages (``validate``: ``no-messages``).
    header_only: int = 0
    # Token usage (the STS ``usage`` extension), sums over assistant messages;
    # ``cost`` in USD only where the trace carries ``usage.cost``.
    usage: dict[str, int] = field(default_factory=dict)
    cost: float | None = None
    usage_by_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Sub-agent links: this session's id and parent, and how many of the
    # sessions given are its children (for the total: how many are sub-agents).
    session_id: str | None = None
    parent_session_id: str | None = None
    sub_agents: int = 0
    #: The agent format of a file that is not STS (converted in memory), else None.
    format: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["models"] = dict(sorted(self.models.items(), key=lambda kv: (-kv[1], kv[0])))
        return d

    def add_usage(self, model: str, usage: dict[str, Any]) -> None:
        per_model = self.usage_by_model.setdefault(model, {})
        for key, value in usage.items():
            if key == "cost":
                total = value.get("total") if isinstance(value, dict) else None
                if isinstance(total, (int, float)) and not isinstance(total, bool):
                    self.cost = (self.cost or 0.0) + total
                    per_model["cost"] = per_model.get("cost", 0.0) + total
            elif isinstance(value, int) and token_count(value) is not None:
                # The counts validate accepts, as s.stats() sums them.
                self.usage[key] = self.usage.get(key, 0) + value
                per_model[key] = per_model.get(key, 0) + value


def collect(path: str | os.PathLike[str], messages: Iterable[dict[str, Any]]) -> TraceStats:
    """Count one trace from its message stream (constant memory but for open call ids)."""
    st = TraceStats(path=os.fspath(path))
    open_calls: set[str] = set()
    for msg in messages:
        st.messages += 1
        role = msg.get("role")
        if isinstance(role, str):
            st.roles[role] = st.roles.get(role, 0) + 1
        model = msg.get("model")
        if isinstance(model, str) and model:
            st.models[model] = st.models.get(model, 0) + 1
        usage = msg.get("usage")
        if isinstance(usage, dict):
            st.add_usage(model if isinstance(model, str) and model else "(no model)", usage)
        ts = msg.get("timestamp")
        if isinstance(ts, int) and not isinstance(ts, bool):
            if st.first_timestamp is None or ts < st.first_timestamp:
                st.first_timestamp = ts
            if st.last_timestamp is None or ts > st.last_timestamp:
                st.last_timestamp = ts
        calls = msg.get("toolCalls")
        if isinstance(calls, list):
            for tc in calls:
                st.tool_calls += 1
                cid = tc.get("id") if isinstance(tc, dict) else None
                if isinstance(cid, str):
                    open_calls.add(cid)
                else:
                    st.unanswered_calls += 1  # no id: nothing can ever answer it
        if role == "tool":
            st.tool_results += 1
            cid = msg.get("toolCallId")
            if isinstance(cid, str) and cid in open_calls:
                open_calls.discard(cid)
            else:
                st.unpaired_results += 1
            if is_error(str(msg.get("content", ""))):
                st.errors += 1
    st.unanswered_calls += len(open_calls)
    st.header_only = int(st.messages == 0)
    if st.first_timestamp is not None and st.last_timestamp is not None:
        st.duration_ms = st.last_timestamp - st.first_timestamp
    try:
        st.bytes = os.path.getsize(path)
    except OSError:
        pass
    return st


def total(all_stats: list[TraceStats]) -> TraceStats:
    """Sum of several traces; ``duration_ms`` is the sum of their durations."""
    t = TraceStats(path="total", files=len(all_stats))
    for st in all_stats:
        t.messages += st.messages
        for role, n in st.roles.items():
            t.roles[role] = t.roles.get(role, 0) + n
        t.tool_calls += st.tool_calls
        t.tool_results += st.tool_results
        t.unanswered_calls += st.unanswered_calls
        t.unpaired_results += st.unpaired_results
        t.errors += st.errors
        for model, n in st.models.items():
            t.models[model] = t.models.get(model, 0) + n
        if st.first_timestamp is not None:
            t.first_timestamp = st.first_timestamp if t.first_timestamp is None else min(t.first_timestamp, st.first_timestamp)
        if st.last_timestamp is not None:
            t.last_timestamp = st.last_timestamp if t.last_timestamp is None else max(t.last_timestamp, st.last_timestamp)
        if st.duration_ms is not None:
            t.duration_ms = (t.duration_ms or 0) + st.duration_ms
        t.bytes += st.bytes
        t.header_only += st.header_only
        for model, per_model in st.usage_by_model.items():
            t.add_usage(model, {k: ({"total": v} if k == "cost" else v) for k, v in per_model.items()})
        if st.parent_session_id is not None:
            t.sub_agents += 1
    return t


def link_sub_agents(all_stats: list[TraceStats]) -> None:
    """Count, for every session given, the sessions given that are its children."""
    by_id = {st.session_id: st for st in all_stats if st.session_id is not None}
    for st in all_stats:
        parent = by_id.get(st.parent_session_id) if st.parent_session_id is not None else None
        if parent is not None and parent is not st:
            parent.sub_agents += 1


def _fmt_tokens(usage: dict[str, Any]) -> str:
    parts = [f"{usage.get('totalTokens', 0):,} total", f"{usage.get('input', 0):,} in", f"{usage.get('output', 0):,} out"]
    if usage.get("cacheRead"):
        parts.append(f"{usage['cacheRead']:,} cache read")
    if usage.get("cacheWrite"):
        parts.append(f"{usage['cacheWrite']:,} cache write")
    if usage.get("reasoning"):
        parts.append(f"{usage['reasoning']:,} reasoning")
    return ", ".join(parts)


def _fmt_cost(cost: float) -> str:
    return f"${cost:,.4f}" if cost >= 0.01 else f"${cost:.6f}"


def format_stats(st: TraceStats) -> str:
    title = f"total ({st.files} files)" if st.path == "total" else st.path
    if st.format is not None:
        title += f"  ({st.format}, converted in memory)"
    roles = ", ".join(f"{role} {n:,}" for role, n in st.roles.items() if n)
    models = ", ".join(f"{m} ({n:,})" for m, n in sorted(st.models.items(), key=lambda kv: (-kv[1], kv[0])))
    rows = [
        ("messages", f"{st.messages:,}" + (f"  ({roles})" if roles else "")),
        ("tool calls", f"{st.tool_calls:,}"),
        ("tool results", f"{st.tool_results:,}"),
        ("unanswered calls", f"{st.unanswered_calls:,}"),
        ("unpaired results", f"{st.unpaired_results:,}"),
        ("errors", f"{st.errors:,}"),
        ("models", models or "-"),
        ("duration", fmt_duration(st.duration_ms) if st.duration_ms is not None else "-"),
        ("bytes", f"{st.bytes:,}"),
    ]
    if st.header_only:
        what = "header only" if st.path != "total" else f"{st.header_only:,} file(s) with a header only"
        rows.insert(1, ("warning", f"no messages ({what}: nothing was recorded)"))
    if st.usage:
        rows.append(("tokens", _fmt_tokens(st.usage)))
        if st.cost is not None:
            rows.append(("cost", _fmt_cost(st.cost)))
        if len(st.usage_by_model) > 1:
            for model, per_model in sorted(st.usage_by_model.items()):
                cost = f", {_fmt_cost(per_model['cost'])}" if "cost" in per_model else ""
                rows.append((f"  {model}", _fmt_tokens(per_model) + cost))
    if st.path == "total":
        if st.sub_agents:
            rows.append(("sub-agents", f"{st.sub_agents:,}"))
    else:
        if st.parent_session_id is not None:
            rows.append(("parent session", st.parent_session_id))
        if st.sub_agents:
            rows.append(("sub-agents", f"{st.sub_agents:,}"))
    width = max(len(k) for k, _ in rows)
    return "\n".join([title] + [f"  {k.ljust(width)}  {v}" for k, v in rows])


def _stats_of(path: Path, strict: bool) -> list[tuple[TraceStats, dict[str, Any]]]:
    """(stats, header) of each session in *path*: an STS trace streamed, another
    agent's file converted in memory (a file may hold several sessions)."""
    from .._reader import iter_messages, read_header

    fmt = source_format(trace_file(path))
    if fmt == "sts":
        st = collect(path, iter_messages(path, strict=strict))
        return [(st, read_header(path))]
    traces = load_other(path, fmt)
    out = []
    for i, trace in enumerate(traces):
        label = os.fspath(path) if len(traces) == 1 else f"{os.fspath(path)} [{trace.id}]"
        st = collect(path, trace.messages)
        st.path, st.format = label, fmt
        if i:
            st.bytes = 0  # the file's size is counted once
        out.append((st, trace.header))
    return out


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files", nargs="+", type=Path, metavar="FILE",
        help="trace files (.jsonl), any session file convert reads, or directories of them",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--strict", action="store_true", help="fail on a torn last line instead of skipping it")


def run(args: argparse.Namespace) -> int:
    results = []
    failed = False
    for given in args.files:
        try:
            paths = trace_files([given])
        except CliError as exc:
            warn("ststrace stats", str(exc))
            failed = True
            continue
        for path in paths:
            try:
                found = _stats_of(path, args.strict)
            except (CliError, OSError, TraceFormatError) as exc:
                warn("ststrace stats", str(exc) if isinstance(exc, CliError) else describe(exc))
                failed = True
                continue
            for st, header in found:
                session_usage = header.get("usage")
                if not st.usage and isinstance(session_usage, dict):
                    # Agents that count per session only (Droid, Hermes): the header's totals.
                    model = header.get("model")
                    st.add_usage(model if isinstance(model, str) and model else "(session total)", session_usage)
                if isinstance(header.get("id"), str):
                    st.session_id = header["id"]
                if isinstance(header.get("parentSessionId"), str):
                    st.parent_session_id = header["parentSessionId"]
                results.append(st)
    link_sub_agents(results)
    tot = total(results)
    if args.json:
        dump_json({"files": [st.as_dict() for st in results], "total": tot.as_dict()})
    else:
        blocks = [format_stats(st) for st in results]
        if len(results) > 1:
            blocks.append(format_stats(tot))
        if blocks:
            print("\n\n".join(blocks))
    return 1 if failed else 0
