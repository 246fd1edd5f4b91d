"""Pure builders for STS records. No I/O, no session state.

Every function returns fresh dicts in the exact shape STS-Format wants:
optional fields are left out (never ``null``), ``arguments`` is JSON text.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import (  # typing.Mapping makes isinstance() several times slower
    Callable,
    Iterable,
    Mapping,
)
from typing import Any

import orjson

from ._text import content_text, json_text
from ._errors import BadArgument
from ._ids import new_tool_call_id

ROLES = frozenset({"user", "assistant", "system", "tool"})
RESERVED_HEADER_KEYS = frozenset({"type", "harness", "id", "name"})


_time_ns = time.time_ns


def now_ms() -> int:
    return _time_ns() // 1_000_000


def header(harness: str, session_id: str, name: str | None, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    rec: dict[str, Any] = {"type": "session", "harness": harness, "id": session_id}
    if name is not None:
        rec["name"] = name
    if metadata:
        rec.update(metadata)
    return rec


def check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise BadArgument(f"metadata must be a mapping, not {type(metadata).__name__}")
    clash = sorted(RESERVED_HEADER_KEYS.intersection(metadata))
    if clash:
        raise BadArgument(
            f"metadata may not set {', '.join(map(repr, clash))}: use Session(harness=, id=, name=) instead"
        )
    bad = [k for k in metadata if not isinstance(k, str)]
    if bad:
        raise BadArgument(f"metadata keys must be strings, got {bad[0]!r}")
    return {k: v for k, v in metadata.items() if v is not None}


def arguments_text(arguments: Any) -> str:
    """Tool-call arguments as JSON text: strings are kept, anything else encoded."""
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return "{}"
    return json_text(arguments)


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "function": {"name": name, "arguments": arguments_text(arguments)}}


def normalize_tool_call(call: Any) -> dict[str, Any]:
    """Accept the STS shape, the OpenAI shape (with ``type``), or ``{name, arguments, id?}``."""
    if not isinstance(call, Mapping):
        # OpenAI / pydantic objects: use their dict form.
        dump = getattr(call, "model_dump", None)
        if callable(dump):
            call = dump()
        else:
            raise BadArgument(f"a tool call must be a dict, not {type(call).__name__}")
    fn = call.get("function")
    if isinstance(fn, Mapping):
        name, args = fn.get("name"), fn.get("arguments")
    else:
        name, args = call.get("name"), call.get("arguments", call.get("input"))
    if not isinstance(name, str) or not name:
        raise BadArgument(f"tool call without a function name: {call!r}")
    call_id = call.get("id") or call.get("call_id") or new_tool_call_id()
    if not isinstance(call_id, str):
        raise BadArgument(f"tool call id must be a string, not {type(call_id).__name__}")
    return tool_call(call_id, name, args)


def normalize_tool_calls(calls: Iterable[Any] | None) -> list[dict[str, Any]]:
    if not calls:
        return []
    return [normalize_tool_call(c) for c in calls]


def message(
    role: str,
    content: Any,
    *,
    reasoning: Any = None,
    tool_calls: list[dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    model: str | None = None,
    timestamp: int | None = None,
    usage: Any = None,
) -> dict[str, Any]:
    # Every record passes here: plain-string content skips the call.
    msg: dict[str, Any] = {"role": role, "content": content if type(content) is str else content_text(content)}
    if reasoning is not None:
        text = content_text(reasoning)
        if text:
            msg["reasoningContent"] = text
    if tool_calls:
        msg["toolCalls"] = tool_calls
    if tool_call_id is not None:
        msg["toolCallId"] = tool_call_id
    if model:
        msg["model"] = model
    if usage is not None:
        msg["usage"] = check_usage(usage)
    msg["timestamp"] = _time_ns() // 1_000_000 if timestamp is None else timestamp
    return msg


def check_usage(value: Any) -> dict[str, Any]:
    """Token usage given by hand, in the STS shape (ValueError if malformed).

    An extension of STS-Format: the optional ``usage`` object of assistant
    messages in the shape Pi sessions carry, which the Hub already renders."""
    # Imported here: the adapters are loaded only when a reply needs them.
    from ._adapters.usage import check_usage as check

    return check(value)


# Shapes built on every decorated call, as dict literals: no keyword
# processing, no optional-field checks.


def simple(role: str, content: Any) -> dict[str, Any]:
    """A user or system message."""
    return {
        "role": role,
        "content": content if type(content) is str else content_text(content),
        "timestamp": _time_ns() // 1_000_000,
    }


def tool_result(tool_call_id: str, content: str) -> dict[str, Any]:
    """A tool result; *content* is already text."""
    return {"role": "tool", "content": content, "toolCallId": tool_call_id, "timestamp": _time_ns() // 1_000_000}


def single_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """An assistant message holding one tool call (*arguments* is JSON text)."""
    return {
        "role": "assistant",
        "content": "",
        "toolCalls": [{"id": call_id, "function": {"name": name, "arguments": arguments}}],
        "timestamp": _time_ns() // 1_000_000,
    }


# The same two shapes as whole encoded lines, for @tool's hot path: the bytes
# orjson gives for the dicts above inside the envelope, built with one
# %-format (about 0.4 us a line instead of 1.2). A str orjson refuses (a lone
# surrogate) raises here: the caller then takes the dict path, whose encoder
# has the fallbacks. tests/core/test_tool_lines.py checks the bytes are the same.
_dumps = orjson.dumps
_CALL_LINE = b'{"type":"message","message":{"role":"assistant","content":"","toolCalls":[{"id":%b,"function":{"name":%b,"arguments":%b}}],"timestamp":%d}}\n'
_RESULT_LINE = b'{"type":"message","message":{"role":"tool","content":%b,"toolCallId":%b,"timestamp":%d}}\n'


def single_call_line(call_id: str, name_json: bytes, arguments: str) -> bytes:
    """:func:`single_call`'s line; *name_json* is the tool's name as JSON
    (``orjson.dumps(name)``, made once per decorated tool)."""
    return _CALL_LINE % (_dumps(call_id), name_json, _dumps(arguments), _time_ns() // 1_000_000)


def tool_result_line(tool_call_id: str, content: str) -> bytes:
    """:func:`tool_result`'s line."""
    return _RESULT_LINE % (_dumps(content), _dumps(tool_call_id), _time_ns() // 1_000_000)


# @tool's lean path (see _tool_calls._lean_call): the same two lines with the
# tool's name put in at decoration and the id written as it is, for an id
# ststrace made (``call_`` and hex digits: nothing JSON would escape).
_CALL_HEAD = b'{"type":"message","message":{"role":"assistant","content":"","toolCalls":[{"id":"'
#: ``% (own id as bytes, orjson.dumps(content), ms)``
RESULT_LINE_OWN_ID = b'{"type":"message","message":{"role":"tool","content":%b,"toolCallId":"%b","timestamp":%d}}\n'


def call_line_format(name_json: bytes) -> bytes:
    """A tool's call line, its name in place: ``% (own id as bytes,
    orjson.dumps(arguments text), ms)`` gives :func:`single_call_line`'s bytes."""
    return _CALL_HEAD + b'%b","function":{"name":' + name_json.replace(b"%", b"%%") + b',"arguments":%b}}],"timestamp":%d}}\n'


def check_message(raw: Any) -> dict[str, Any]:
    """Validate a raw STS message given to ``Session.record``; returns a clean copy."""
    if not isinstance(raw, Mapping):
        raise BadArgument(f"a message must be a dict, not {type(raw).__name__}")
    role = raw.get("role")
    if role not in ROLES:
        raise BadArgument(f"message role must be one of {sorted(ROLES)}, got {role!r}")
    if "content" not in raw or raw["content"] is None:
        raise BadArgument(f"{role} message has no content (use \"\" for empty content)")
    msg = {k: v for k, v in raw.items() if v is not None}
    msg["content"] = content_text(msg["content"])
    if "reasoningContent" in msg:
        msg["reasoningContent"] = content_text(msg["reasoningContent"])
    if "toolCalls" in msg:
        if role != "assistant":
            raise BadArgument("only assistant messages may carry toolCalls")
        msg["toolCalls"] = normalize_tool_calls(msg["toolCalls"])
        if not msg["toolCalls"]:
            del msg["toolCalls"]
    for key in ("toolCallId", "model"):
        if key in msg and not isinstance(msg[key], str):
            raise BadArgument(f"{key} must be a string")
    if "usage" in msg:
        if role != "assistant":
            raise BadArgument("only assistant messages may carry usage")
        msg["usage"] = check_usage(msg["usage"])
    if role == "tool" and "toolCallId" not in msg:
        raise BadArgument("a tool message needs a toolCallId")
    ts = msg.get("timestamp")
    if ts is None:
        msg["timestamp"] = now_ms()
    elif isinstance(ts, bool) or not isinstance(ts, int):
        raise BadArgument(f"timestamp must be integer epoch milliseconds, got {ts!r}")
    return msg


def envelope_line(msg: Mapping[str, Any], dumps: Callable[[Any], bytes]) -> bytes:
    """One JSONL line for *msg*; *dumps* is the never-failing encoder."""
    return b'{"type":"message","message":' + dumps(msg) + b"}\n"


def parse_arguments(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def error_text(exc: BaseException) -> str:
    """The tool result recorded for a call that ended by *exc*."""
    name = type(exc).__name__
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, GeneratorExit)):
        return f"Error: the call was cancelled ({name})"
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable exception>"
    return f"Error: {name}: {text}" if text else f"Error: {name}"


# -- task, group and outcome (training on traces) ---------------------------------


def check_task_fields(task_id: Any, group_id: Any, sample: Any) -> dict[str, Any]:
    """The header fields ``taskId``, ``groupId``, ``sample``: only those given."""
    out: dict[str, Any] = {}
    for key, name, value in (("taskId", "task_id", task_id), ("groupId", "group_id", group_id)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise BadArgument(f"{name} must be a string or an int, not {type(value).__name__}")
        if isinstance(value, str) and not value:
            raise BadArgument(f"{name} must not be empty")
        out[key] = value
    if sample is not None:
        if isinstance(sample, bool) or not isinstance(sample, int):
            raise BadArgument(f"sample must be an int, not {type(sample).__name__}")
        out["sample"] = sample
    return out


#: The line type of an outcome: readers of messages skip it (the Hub's loader
#: does, as it skips any type it does not know); ststrace's reader merges them.
OUTCOME_TYPE = "outcome"


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadArgument(f"{name} must be a number, not {type(value).__name__}")
    out = float(value)
    if out != out or out in (float("inf"), float("-inf")):
        raise BadArgument(f"{name} must be a finite number, got {value!r}")
    return out


def outcome(
    reward: Any = None, rewards: Any = None, labels: Any = None, success: Any = None
) -> dict[str, Any]:
    """An outcome line's object: only what was given (BadArgument naming the bad value).

    ``rewards`` and ``labels`` merge key by key over earlier outcome lines;
    ``reward`` and ``success`` replace (see :func:`merge_outcome`)."""
    out: dict[str, Any] = {}
    if reward is not None:
        out["reward"] = _number("reward", reward)
    if rewards is not None:
        if not isinstance(rewards, Mapping):
            raise BadArgument(f"rewards must be a mapping of names to numbers, not {type(rewards).__name__}")
        checked: dict[str, float] = {}
        for key, value in rewards.items():
            if not isinstance(key, str) or not key:
                raise BadArgument(f"rewards keys must be non-empty strings, got {key!r}")
            checked[key] = _number(f"rewards[{key!r}]", value)
        if checked:
            out["rewards"] = checked
    if labels is not None:
        if not isinstance(labels, Mapping):
            raise BadArgument(f"labels must be a mapping of names to strings, not {type(labels).__name__}")
        texts: dict[str, str] = {}
        for key, value in labels.items():
            if not isinstance(key, str) or not key:
                raise BadArgument(f"labels keys must be non-empty strings, got {key!r}")
            if not isinstance(value, str):
                raise BadArgument(f"labels[{key!r}] must be a string, not {type(value).__name__}")
            texts[key] = value
        if texts:
            out["labels"] = texts
    if success is not None:
        if not isinstance(success, bool):
            raise BadArgument(f"success must be True or False, not {success!r}")
        out["success"] = success
    if not out:
        raise BadArgument("an outcome needs at least one of reward, rewards, labels, success")
    return out


def empty_outcome() -> dict[str, Any]:
    return {"reward": None, "rewards": {}, "labels": {}, "success": None}


def merge_outcome(acc: dict[str, Any], line: Mapping[str, Any]) -> None:
    """Fold one outcome line's object into *acc* (from :func:`empty_outcome`):
    each key's last value stands; what a line leaves out keeps its earlier value.
    Values of the wrong type (a hand-edited file) are ignored, not raised."""
    reward = line.get("reward")
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        acc["reward"] = float(reward)
    for key in ("rewards", "labels"):
        value = line.get(key)
        if isinstance(value, Mapping):
            for k, v in value.items():
                if isinstance(k, str) and (
                    isinstance(v, str) if key == "labels" else isinstance(v, (int, float)) and not isinstance(v, bool)
                ):
                    acc[key][k] = v if key == "labels" else float(v)
    success = line.get("success")
    if isinstance(success, bool):
        acc["success"] = success


def outcome_line(obj: Mapping[str, Any], dumps: Callable[[Any], bytes]) -> bytes:
    return b'{"type":"outcome","outcome":' + dumps(obj) + b"}\n"
