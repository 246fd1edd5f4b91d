"""Cline tasks (``<VS Code globalStorage>/saoudrizwan.claude-dev/tasks/<task id>/api_conversation_history.json``).

The file is what Cline sends the model: a JSON array of Anthropic-style
messages, each with ``ts`` (epoch ms); assistant messages also carry
``modelInfo`` (``modelId``) and ``metrics.tokens`` (``prompt``, ``completion``,
``cached``). The model calls tools with ``tool_use`` blocks; Cline answers in
the next user message with one text block per call, ``[<tool> for '<arg>']
Result:`` and the output, in the order of the calls (``tool_result`` blocks are
read too). The rest of a user message is either what the user wrote (the
``<task>``, ``<feedback>``, ``<user_message>``) or what Cline adds for the model
(``<environment_details>``, progress reminders, task-resumption notes): the
latter become system messages.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import orjson

from ._anthropic import add_assistant
from ._common import Builder, ConvertError, Converted, blocks_text, finish, shorten, str_or_none, to_ms, usage_counts

HARNESS = "cline"

_RESULT = re.compile(r"^\[([\w.:-]+)(?: for .*)?\] Result:[ \t]*\n?", re.S)
#: What Cline adds to a user turn for the model, not typed by the user.
_INJECTED = (
    "<environment_details>",
    "# task_progress",
    "# TODO LIST UPDATE REQUIRED",
    "[TASK RESUMPTION]",
    "[ERROR] You did not use a tool",
)
_USER_TAGS = re.compile(r"^\s*<(task|feedback|user_message|answer)>\s*(.*?)\s*</\1>\s*$", re.S)
_FAILED = "The tool execution failed"
#: A resumed task: "New instructions for task continuation:" around what the user typed.
_USER_MESSAGE = re.compile(r"<(user_message)>\s*(.*?)\s*</user_message>", re.S)


def is_history(doc: Any) -> bool:
    """An API conversation history: Anthropic messages with Cline's ``ts``."""
    if not isinstance(doc, list) or not doc:
        return False
    head = [m for m in doc[:20] if isinstance(m, dict)]
    return (
        len(head) == min(len(doc), 20)
        and all(m.get("role") in ("user", "assistant") and isinstance(m.get("content"), (list, str)) for m in head)
        and any("ts" in m for m in head)
    )


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ConvertError(f"{path}: not a Cline task (not JSON: {exc})") from None
    if not is_history(doc):
        raise ConvertError(f"{path}: not a Cline task history (a list of messages with ts)")
    # The task's folder is named by its id (the time it started, in ms).
    sid = path.parent.name if path.name == "api_conversation_history.json" and path.parent.name else path.stem
    b = Builder(HARNESS, sid)
    pending: list[tuple[str | None, str]] = []  # (call id, tool name) awaiting a result
    for msg in doc:
        if not isinstance(msg, dict):
            b.dropped["message:invalid"] += 1
            continue
        ts = to_ms(msg.get("ts"))
        content = msg.get("content")
        if msg.get("role") == "assistant":
            info = msg.get("modelInfo")
            model = str_or_none(info.get("modelId")) if isinstance(info, dict) else None
            out = add_assistant(b, content, ts, model)
            uses = [x for x in content if isinstance(x, dict) and x.get("type") == "tool_use"] if isinstance(content, list) else []
            pending = [(str_or_none(x.get("id")), x["name"] if isinstance(x.get("name"), str) else "") for x in uses]
            usage = _usage(msg.get("metrics"), b)
            if usage is not None:
                out["usage"] = usage
        else:
            _user(b, content, ts, pending)
            pending = []
    return finish([b], file_dropped)


def _user(b: Builder, content: Any, ts: int | None, pending: list[tuple[str | None, str]]) -> None:
    blocks = content if isinstance(content, list) else [content]
    typed: list[str] = []

    def flush() -> None:
        if typed:
            text = "\n\n".join(typed)
            b.user(text, ts)
            if b.name is None:
                b.name = shorten(text)
            typed.clear()

    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            tid = str_or_none(block.get("tool_use_id"))
            pending[:] = [p for p in pending if p[0] != tid]
            b.tool_result(tid, blocks_text(block.get("content"), b.dropped), is_error=block.get("is_error") is True, timestamp=ts)
            continue
        text = block if isinstance(block, str) else blocks_text([block], b.dropped)
        head = text.lstrip()
        m = _RESULT.match(head)
        if m and pending:
            name = m.group(1)
            i = next((k for k, (_, n) in enumerate(pending) if n == name), 0)
            call_id, _ = pending.pop(i)
            body = head[m.end() :]
            b.tool_result(call_id, body, is_error=body.lstrip().startswith(_FAILED), timestamp=ts)
        elif head.startswith(_INJECTED) or m:
            # Cline's own notes, and a result whose call is not pending (answered already).
            flush()
            b.system(text.strip(), ts)
        elif head:
            tagged = _USER_TAGS.match(head) or _USER_MESSAGE.search(head)
            typed.append(tagged.group(2) if tagged else text.strip())
    flush()


def _usage(metrics: Any, b: Builder) -> dict[str, Any] | None:
    """``metrics.tokens``: ``prompt`` (taken to include the ``cached`` tokens, as in
    the OpenAI-style providers Cline reports through) and ``completion``."""
    tokens = metrics.get("tokens") if isinstance(metrics, Mapping) else None
    if not isinstance(tokens, dict):
        return None
    return usage_counts(
        {
            "prompt_tokens": tokens.get("prompt"),
            "completion_tokens": tokens.get("completion"),
            "prompt_tokens_details": {"cached_tokens": tokens.get("cached")},
        },
        b.dropped,
    )
