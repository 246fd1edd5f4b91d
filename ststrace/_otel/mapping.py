"""GenAI spans -> STS messages: pure functions over one span's attributes and events.

No OpenTelemetry import here: a span is read as a mapping of attributes plus a
list of ``(event name, attributes)``, so these functions are tested on the
shapes themselves and reused for spans decoded from OTLP.

Read, from the conventions' documents and the emitters seen in the tests:

* OTel GenAI semantic conventions, current (Development) version:
  ``gen_ai.system_instructions``, ``gen_ai.input.messages`` and
  ``gen_ai.output.messages`` as JSON text or structured values, with parts
  ``text``, ``reasoning`` (PydanticAI: ``thinking``), ``tool_call``,
  ``tool_call_response`` (``response``, PydanticAI: ``result``), ``blob`` /
  ``file`` / ``uri`` (placeholders); the same attributes on a
  ``gen_ai.client.inference.operation.details`` span event; ``execute_tool``
  and ``invoke_agent`` spans.
* The previous, event-based version: span events ``gen_ai.system.message``,
  ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``
  and ``gen_ai.choice``, their body in the event's attributes or as JSON in
  ``gen_ai.event.content``; the same events listed as JSON in an ``events``
  attribute (PydanticAI / Logfire's ``event_mode='attributes'``).
* OpenLLMetry's indexed ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``.
* OpenInference: ``llm.input_messages.N.message.*``,
  ``llm.output_messages.N.message.*`` (with ``tool_calls.M.tool_call.*``),
  ``llm.model_name``, ``llm.token_count.*``; TOOL spans (``tool.name``,
  ``input.value``, ``output.value``, ``tool_call.id``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from .._text import content_text, json_text
from .._ids import new_tool_call_id
from .._limits import MAX_TOKEN_COUNT, token_count
from .._dedup import fingerprint as _fingerprint

__all__ = ["MARKERS", "InputCache", "Step", "parse_span", "usage_from"]

Message = dict[str, Any]
# dict first: values decoded from JSON are dicts, and an ABC check costs a microsecond.
_MAP = (dict, Mapping)
Attributes = Mapping[str, Any]
Events = Sequence[tuple[str, Attributes]]

#: A span carrying any of these keys is a GenAI span; every other span costs
#: one ``isdisjoint`` over its attribute keys.
MARKERS = frozenset(
    {
        "gen_ai.operation.name",
        "gen_ai.system",
        "gen_ai.provider.name",
        "gen_ai.conversation.id",
        "openinference.span.kind",
    }
)

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
_ROLES = {
    "user": "user",
    "human": "user",
    "system": "system",
    "developer": "system",
    "assistant": "assistant",
    "model": "assistant",
    "ai": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
}
_MEDIA = {"image": "[image]", "audio": "[audio]", "video": "[video]"}
_OLD_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"


@dataclass
class Step:
    """What one GenAI span says about the conversation."""

    kind: str  # "llm", "tool" or "agent"
    inputs: list[Message] | None = None  # the conversation the model received
    outputs: list[Message] = field(default_factory=list)  # assistant replies
    usage: dict[str, int] | None = None
    model: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_arguments: str = "{}"
    tool_result: str | None = None
    input_fingerprints: list[int] | None = None  # of inputs, when known already
    agent_name: str | None = None
    conversation_id: str | None = None


# ---- small readers -------------------------------------------------------------


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _json(value: Any) -> Any:
    """A structured attribute value, or the JSON it holds as text."""
    if isinstance(value, (str, bytes)):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


def _arguments(value: Any) -> str:
    """Tool-call arguments as STS wants them: JSON text, kept byte for byte when given as text."""
    if isinstance(value, str):
        return value
    if value is None:
        return "{}"
    return json_text(value)


def _add_call(calls: list[dict[str, Any]], call_id: Any, name: Any, arguments: Any) -> None:
    """Append one STS tool call; a call without a function name says nothing and is left out."""
    if not isinstance(name, str) or not name:
        return
    calls.append(
        {
            "id": call_id if isinstance(call_id, str) and call_id else new_tool_call_id(),
            "function": {"name": name, "arguments": _arguments(arguments)},
        }
    )


def _tool_message(call_id: Any, content: Any) -> Message:
    msg: Message = {"role": "tool", "content": content_text(content)}
    if isinstance(call_id, str) and call_id:
        msg["toolCallId"] = call_id
    return msg


def _assistant(text: str, reasoning: str, calls: list[dict[str, Any]], model: str | None = None) -> Message:
    msg: Message = {"role": "assistant", "content": text}
    if reasoning:
        msg["reasoningContent"] = reasoning
    if calls:
        msg["toolCalls"] = calls
    if model:
        msg["model"] = model
    return msg


def _role(value: Any) -> str | None:
    return _ROLES.get(value.lower()) if isinstance(value, str) else None


def _openai_calls(value: Any) -> list[dict[str, Any]]:
    """OpenAI-style ``tool_calls`` (``{id, function: {name, arguments}}`` or flat)."""
    value = _json(value)
    if not isinstance(value, (list, tuple)):
        return []
    calls: list[dict[str, Any]] = []
    for call in value:
        if not isinstance(call, _MAP):
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, _MAP) else call
        _add_call(calls, call.get("id"), fn.get("name"), fn.get("arguments"))
    return calls


def _role_message(role: str, text: str, reasoning: str, calls: list[dict[str, Any]], call_id: Any) -> Message:
    if role == "assistant":
        return _assistant(text, reasoning, calls)
    if role == "tool":
        return _tool_message(call_id, text)
    return {"role": role, "content": text}


# ---- GenAI semconv: messages of parts ---------------------------------------------


def _part_placeholder(part: Mapping[str, Any]) -> str:
    modality = part.get("modality")
    if isinstance(modality, str) and modality in _MEDIA:
        return _MEDIA[modality]
    mime = part.get("mime_type")
    if isinstance(mime, str):
        head = mime.split("/", 1)[0]
        if head in _MEDIA:
            return _MEDIA[head]
    return "[file]"


def _parts_message(item: Mapping[str, Any]) -> list[Message]:
    role = _role(item.get("role"))
    if role is None:
        return []
    parts = _json(item.get("parts"))
    if not isinstance(parts, (list, tuple)):
        # A flat {"role", "content"} (some emitters before "parts" existed).
        content = item.get("content")
        return [
            _role_message(
                role,
                content_text(content),
                "",
                _openai_calls(item.get("tool_calls")),
                item.get("id") or item.get("tool_call_id"),
            )
        ]
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[Message] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, _MAP):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(content_text(part.get("content")))
        elif kind in ("reasoning", "thinking"):
            thought = content_text(part.get("content"))
            if thought:
                thoughts.append(thought)
        elif kind == "tool_call":
            _add_call(calls, part.get("id"), part.get("name"), part.get("arguments"))
        elif kind == "tool_call_response":
            result = part["response"] if "response" in part else part.get("result")
            results.append(_tool_message(part.get("id"), result))
        elif kind in ("blob", "file", "uri", "file_data", "image", "audio", "video"):
            texts.append(_part_placeholder(part) if kind not in _MEDIA else _MEDIA[kind])
        # server_tool_call and other provider-side parts have no client result.
    if role == "assistant":
        return [_assistant("".join(texts), "\n\n".join(thoughts), calls)]
    out = results
    if texts or not results:
        text = "\n".join(texts)
        if role == "tool":
            out.append(_tool_message(item.get("id") or item.get("tool_call_id"), text))
        else:
            out.append({"role": role, "content": text})
    return out


class InputCache:
    """The last ``gen_ai.input.messages`` text of a conversation and its messages.

    Agent loops resend the whole history with every call; when the new text is
    the old array with items appended, only the appended items are parsed.
    """

    __slots__ = ("raw", "messages", "fingerprints", "hit")

    def __init__(self) -> None:
        self.raw: str | None = None
        self.messages: list[Message] = []
        self.fingerprints: list[int] = []  # of messages, for the session's de-dup
        self.hit = False  # the last lookup came from here

    def _keep(self, raw: str, messages: list[Message], fingerprints: list[int]) -> list[Message]:
        self.raw, self.messages, self.fingerprints, self.hit = raw, messages, fingerprints, True
        return list(messages)


def _cached_messages(value: str, cache: InputCache) -> list[Message] | None:
    prev = cache.raw
    if prev is not None:
        if value == prev:
            cache.hit = True
            return list(cache.messages)
        n = len(prev)
        # "[A,B]" then "[A,B,C]": the same text up to B, then a comma. B ended
        # at the same place in both, so A and B are the same items.
        if len(value) > n and prev[-1] == "]" and value[n - 1] == "," and value.startswith(prev[:-1]):
            tail = _parts_messages("[" + value[n:])
            if tail is not None:
                return cache._keep(value, cache.messages + tail, cache.fingerprints + [_fingerprint(m) for m in tail])
    out = _parts_messages(value)
    if out is not None:
        return cache._keep(value, out, [_fingerprint(m) for m in out])
    cache.hit = False
    return None


def _parts_messages(value: Any, cache: InputCache | None = None) -> list[Message] | None:
    if cache is not None and isinstance(value, str):
        return _cached_messages(value, cache)
    items = _json(value)
    if not isinstance(items, (list, tuple)):
        return None
    out: list[Message] = []
    for item in items:
        if isinstance(item, _MAP):
            out.extend(_parts_message(item))
    return out


def _system_instructions(value: Any) -> list[Message]:
    parts = _json(value)
    if isinstance(value, str) and parts is None:
        parts = [value]  # plain text, not JSON
    if isinstance(parts, _MAP):
        parts = [parts]
    if not isinstance(parts, (list, tuple)):
        return []
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, _MAP) and part.get("type", "text") == "text":
            texts.append(content_text(part.get("content")))
    text = "\n".join(t for t in texts if t)
    return [{"role": "system", "content": text}] if text else []


# ---- the previous, event-based convention -------------------------------------------


def _event_body(attrs: Attributes) -> Mapping[str, Any]:
    raw = attrs.get("gen_ai.event.content")
    body = _json(raw) if raw is not None else None
    return body if isinstance(body, _MAP) else attrs


def _event_message(name: str, body: Mapping[str, Any]) -> Message | None:
    role = _OLD_EVENTS.get(name)
    if role is None:
        return None
    content = body.get("content")
    if role == "assistant":
        return _assistant(content_text(content), "", _openai_calls(body.get("tool_calls")))
    if role == "tool":
        return _tool_message(body.get("id") or body.get("tool_call_id"), content)
    return {"role": role, "content": content_text(content)}


def _choice(body: Mapping[str, Any]) -> Message | None:
    index = _int(body.get("index"))
    if index not in (None, 0):
        return None  # STS is one line of conversation: the first choice
    message = _json(body.get("message"))
    if not isinstance(message, _MAP):
        message = body
    return _assistant(
        content_text(message.get("content")), content_text(message.get("reasoning_content")), _openai_calls(message.get("tool_calls"))
    )


def _event_list(events: Iterable[tuple[str, Mapping[str, Any]]]) -> tuple[list[Message], list[Message]]:
    inputs: list[Message] = []
    outputs: list[Message] = []
    for name, body in events:
        if name == "gen_ai.choice":
            reply = _choice(body)
            if reply is not None:
                outputs.append(reply)
            continue
        msg = _event_message(name, body)
        if msg is not None:
            inputs.append(msg)
    return inputs, outputs


# ---- indexed attributes: OpenInference and OpenLLMetry ---------------------------------


def _tree(attrs: Attributes, prefix: str) -> list[Any]:
    """``prefix.0.a.b = v`` ... as ``[{"a": {"b": v}}, ...]``, numeric levels as lists."""
    root: dict[Any, Any] = {}
    n = len(prefix)
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        node = root
        path = key[n:].split(".")
        for i, step in enumerate(path):
            k: Any = int(step) if step.isdigit() else step
            if i == len(path) - 1:
                node[k] = value
            else:
                child = node.get(k)
                if not isinstance(child, dict):
                    child = node[k] = {}
                node = child
    return _listify(root) if root else []


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(isinstance(k, int) for k in node):
        return [_listify(node[k]) for k in sorted(node)]
    return {k: _listify(v) for k, v in node.items()}


def _oi_message(node: Any) -> Message | None:
    msg = node.get("message") if isinstance(node, _MAP) else None
    if not isinstance(msg, _MAP):
        return None
    role = _role(msg.get("role"))
    if role is None:
        return None
    content = msg.get("content")
    if content is None and isinstance(msg.get("contents"), list):
        pieces = []
        for c in msg["contents"]:
            mc = c.get("message_content") if isinstance(c, _MAP) else None
            if not isinstance(mc, _MAP):
                continue
            if mc.get("type") == "text":
                pieces.append(content_text(mc.get("text")))
            elif mc.get("type") in _MEDIA:
                pieces.append(_MEDIA[mc["type"]])
        content = "\n".join(pieces)
    calls: list[dict[str, Any]] = []
    for call in msg.get("tool_calls") or ():
        tc = call.get("tool_call") if isinstance(call, _MAP) else None
        if isinstance(tc, _MAP):
            fn = tc.get("function")
            fn = fn if isinstance(fn, _MAP) else {}
            _add_call(calls, tc.get("id"), fn.get("name"), fn.get("arguments"))
    return _role_message(role, content_text(content), "", calls, msg.get("tool_call_id"))


def _legacy_message(node: Any) -> Message | None:
    if not isinstance(node, _MAP):
        return None
    role = _role(node.get("role"))
    if role is None:
        return None
    calls: list[dict[str, Any]] = []
    for call in node.get("tool_calls") or ():
        if isinstance(call, _MAP):
            _add_call(calls, call.get("id"), call.get("name"), call.get("arguments"))
    return _role_message(role, content_text(node.get("content")), "", calls, node.get("tool_call_id"))


def _indexed(attrs: Attributes, prefix: str, reader: Any) -> list[Message] | None:
    nodes = _tree(attrs, prefix)
    if not nodes:
        return None
    return [m for m in (reader(n) for n in nodes) if m is not None]


# ---- usage -------------------------------------------------------------------------


def _first_int(attrs: Attributes, *keys: str) -> int | None:
    # A negative, huge or non-integer count is dropped as if unreported: the
    # reply is still recorded (check_usage would refuse the whole message).
    for key in keys:
        value = token_count(attrs.get(key))
        if value is not None:
            return value
    return None


def usage_from(attrs: Attributes) -> dict[str, int] | None:
    """Token counts as STS ``usage`` (Pi's shape: ``input`` excludes cache reads and writes).

    The conventions count cached tokens inside the input tokens; Anthropic-style
    ``*_cache_read_input_tokens`` (OpenLLMetry) are counted beside them.
    """
    reported_in = _first_int(attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
    output = _first_int(attrs, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
    if reported_in is None and output is None:
        return None
    inside_read = _first_int(
        attrs,
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.details.cache_read_tokens",
        "llm.token_count.prompt_details.cache_read",
    )
    inside_write = _first_int(
        attrs,
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.details.cache_write_tokens",
        "llm.token_count.prompt_details.cache_write",
    )
    beside_read = _first_int(attrs, "gen_ai.usage.cache_read_input_tokens") if inside_read is None else None
    beside_write = _first_int(attrs, "gen_ai.usage.cache_creation_input_tokens") if inside_write is None else None
    cache_read = inside_read if inside_read is not None else (beside_read or 0)
    cache_write = inside_write if inside_write is not None else (beside_write or 0)
    fresh = (reported_in or 0) - (inside_read or 0) - (inside_write or 0)
    usage = {
        "input": max(0, fresh),
        "output": output or 0,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
    }
    usage["totalTokens"] = min(usage["input"] + usage["output"] + cache_read + cache_write, MAX_TOKEN_COUNT)
    reasoning = _first_int(
        attrs,
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.usage.details.reasoning_tokens",
        "llm.token_count.completion_details.reasoning",
    )
    if reasoning is not None:
        usage["reasoning"] = reasoning
    return usage


# ---- one span ---------------------------------------------------------------------------


def _model(attrs: Attributes) -> str | None:
    return _str(attrs.get("gen_ai.response.model")) or _str(attrs.get("gen_ai.request.model")) or _str(
        attrs.get("llm.model_name")
    )


def _llm(attrs: Attributes, events: Events, cache: InputCache | None) -> Step:
    step = Step("llm", model=_model(attrs), usage=usage_from(attrs))
    source: Attributes = attrs
    if "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs:
        for name, eattrs in events:
            if name == _DETAILS_EVENT:
                source = eattrs  # the same attributes, on an event
                if step.model is None:
                    step.model = _model(eattrs)
                if step.usage is None:
                    step.usage = usage_from(eattrs)
                break
    if cache is not None:
        cache.hit = False
    inputs = _parts_messages(source.get("gen_ai.input.messages"), cache)
    outputs = _parts_messages(source.get("gen_ai.output.messages"))
    if inputs is None and outputs is None:
        inputs = _indexed(attrs, "llm.input_messages.", _oi_message)
        outputs = _indexed(attrs, "llm.output_messages.", _oi_message)
    if inputs is None and outputs is None:
        inputs = _indexed(attrs, "gen_ai.prompt.", _legacy_message)
        outputs = _indexed(attrs, "gen_ai.completion.", _legacy_message)
    if inputs is None and outputs is None:
        listed = _json(attrs.get("events"))
        pairs: list[tuple[str, Mapping[str, Any]]]
        if isinstance(listed, (list, tuple)):
            pairs = [
                (e["event.name"], e) for e in listed if isinstance(e, _MAP) and isinstance(e.get("event.name"), str)
            ]
        else:
            pairs = [(name, _event_body(eattrs)) for name, eattrs in events]
        found_in, found_out = _event_list(pairs)
        if found_in or found_out:
            inputs, outputs = found_in, found_out
    fingerprints = list(cache.fingerprints) if cache is not None and cache.hit and inputs is not None else None
    system = _system_instructions(source.get("gen_ai.system_instructions"))
    if system:
        inputs = system + (inputs or [])
        if fingerprints is not None:
            fingerprints[:0] = [_fingerprint(m) for m in system]
    step.inputs = inputs
    step.input_fingerprints = fingerprints
    for msg in outputs or ():
        if msg["role"] == "assistant":
            if step.model and "model" not in msg:
                msg["model"] = step.model
            step.outputs.append(msg)
    return step


def _langchain_tool_output(value: Any) -> tuple[str | None, Any]:
    """(tool_call_id, content) of a LangChain ``ToolMessage`` that OpenInference serialised."""
    data = _json(value) if isinstance(value, str) and value.startswith("{") else None
    if isinstance(data, _MAP) and data.get("type") == "tool" and isinstance(data.get("data"), Mapping):
        inner = data["data"]
        return _str(inner.get("tool_call_id")), inner.get("content")
    return None, value


def _tool(attrs: Attributes, semconv: bool) -> Step:
    if semconv:
        result = attrs.get("gen_ai.tool.call.result")
        return Step(
            "tool",
            tool_name=_str(attrs.get("gen_ai.tool.name")),
            tool_call_id=_str(attrs.get("gen_ai.tool.call.id")),
            tool_arguments=_arguments(attrs.get("gen_ai.tool.call.arguments")),
            tool_result=None if result is None else content_text(result),
        )
    call_id, output = _langchain_tool_output(attrs.get("output.value"))
    raw_args = attrs.get("input.value")
    if isinstance(raw_args, str) and _json(raw_args) is None:
        raw_args = json_text(raw_args)  # a bare string argument: make it JSON text
    return Step(
        "tool",
        tool_name=_str(attrs.get("tool.name")),
        tool_call_id=_str(attrs.get("tool_call.id")) or call_id,
        tool_arguments=_arguments(raw_args),
        tool_result=None if output is None else content_text(output),
    )


def parse_span(attrs: Attributes, events: Events = (), cache: InputCache | None = None) -> Step | None:
    """The conversation step a GenAI span records, or ``None`` for other spans
    (embeddings, retrieval, chains, ...). *cache* remembers the last input
    messages of the same conversation, to parse only what a call added."""
    operation = attrs.get("gen_ai.operation.name")
    oi_kind = attrs.get("openinference.span.kind")
    if operation == "execute_tool" or oi_kind == "TOOL":
        step = _tool(attrs, operation == "execute_tool")
    elif operation in _AGENT_OPERATIONS or oi_kind == "AGENT":
        step = Step("agent", agent_name=_str(attrs.get("gen_ai.agent.name")) or _str(attrs.get("agent.name")))
        step.inputs = _parts_messages(attrs.get("gen_ai.input.messages"))
    elif (
        operation in _LLM_OPERATIONS
        or oi_kind == "LLM"
        or (operation is None and oi_kind is None and ("gen_ai.system" in attrs or "gen_ai.provider.name" in attrs))
    ):
        step = _llm(attrs, events, cache)
    else:
        return None
    step.conversation_id = _str(attrs.get("gen_ai.conversation.id")) or _str(attrs.get("session.id"))
    return step
