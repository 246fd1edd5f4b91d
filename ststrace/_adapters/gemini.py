"""Google Gemini (``google-genai``, Gemini API and Vertex AI) -> STS.

A request is ``contents`` (a string, parts, ``Content`` objects, or a list mixing
them, as objects or dicts) plus ``config.system_instruction``; a reply is a
``GenerateContentResponse`` whose first candidate holds ``parts``: text, thought
summaries (``thought=True``), ``function_call``. Tool results go back as
``function_response`` parts of a user turn. Both come as SDK objects
(snake_case) or as dicts in either the SDK's or the wire's (camelCase) spelling.

Gemini API replies usually carry no function-call ids: a call gets a generated
one, and its result, which has no id either, is sent back with the function's
name, so the session pairs it with the oldest call of that name still waiting
(as it does for other results that lost their id).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ststrace._text import json_text

from ._common import Message, arguments_text, assistant_message, get, tool_call

_ROLES = {"user": "user", "model": "assistant", "function": "user", "tool": "user"}
_MEDIA = {"image": "[image]", "audio": "[audio]", "video": "[video]"}
#: The keys that make a dict a part (the rest with ``parts`` or ``role`` are contents).
_PART_KEYS = (
    "text",
    "function_call",
    "functionCall",
    "function_response",
    "functionResponse",
    "inline_data",
    "inlineData",
    "file_data",
    "fileData",
    "executable_code",
    "executableCode",
    "code_execution_result",
    "codeExecutionResult",
)


def field(obj: Any, snake: str, camel: str) -> Any:
    """``obj.snake``, or the wire spelling ``obj[camel]`` of a raw dict."""
    value = get(obj, snake)
    return get(obj, camel) if value is None and type(obj) is dict else value


def _is_content(item: Any) -> bool:
    if isinstance(item, str):
        return False
    if get(item, "parts") is not None:
        return True
    return isinstance(item, Mapping) and "role" in item and not any(k in item for k in _PART_KEYS)


def _contents(value: Any) -> list[Any]:
    """``contents`` as a list of contents; loose parts form a turn of their own
    (a user turn; a model turn when they are function calls), as the SDK groups them."""
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple)) else [value]
    out: list[Any] = []
    loose: list[Any] = []

    def close() -> None:
        if loose:
            calls = all(field(p, "function_call", "functionCall") is not None for p in loose)
            out.append({"role": "model" if calls else "user", "parts": list(loose)})
            loose.clear()

    for item in items:
        if _is_content(item):
            close()
            out.append(item)
        else:
            loose.append(item)
    close()
    return out


def _parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [content]
    parts = get(content, "parts")
    if isinstance(parts, (list, tuple)):
        return list(parts)
    return [] if _is_content(content) or content is None else [content]


def part_text(part: Any) -> str | None:
    """Visible text of a non-thought part, a placeholder for media, ``None`` to skip."""
    if isinstance(part, str):
        return part
    text = get(part, "text")
    if isinstance(text, str):
        return None if get(part, "thought") is True else text
    blob = field(part, "inline_data", "inlineData")
    if blob is None:
        blob = field(part, "file_data", "fileData")
    if blob is not None:
        mime = field(blob, "mime_type", "mimeType")
        kind = mime.split("/", 1)[0] if isinstance(mime, str) else ""
        return _MEDIA.get(kind, "[file]")
    if type(part) is not dict and "image" in type(part).__name__.lower():
        return "[image]"  # a PIL image, which the SDK uploads inline
    mime = field(part, "mime_type", "mimeType")
    if isinstance(mime, str) and get(part, "uri") is not None:
        return _MEDIA.get(mime.split("/", 1)[0], "[file]")  # an uploaded types.File
    code = field(part, "executable_code", "executableCode")
    if code is not None:
        source = get(code, "code")
        return source if isinstance(source, str) else None
    outcome = field(part, "code_execution_result", "codeExecutionResult")
    if outcome is not None:
        output = get(outcome, "output")
        return output if isinstance(output, str) else None
    return None


def result_text(response: Any) -> str:
    """A ``function_response.response`` as the tool result's text.

    The SDK (automatic function calling) and ADK wrap a return value as
    ``{"result": value}`` and a raised error as ``{"error": message}``; a
    failed result is written with the ``Error:`` prefix ``@tool`` uses."""
    if isinstance(response, Mapping) and len(response) == 1:
        key, value = next(iter(response.items()))
        if key in ("result", "output", "error"):
            text = value if isinstance(value, str) else json_text(value)
            return "Error: " + text if key == "error" and not text.startswith("Error:") else text
    if response is None:
        return ""
    return response if isinstance(response, str) else json_text(response)


def function_call(part: Any) -> Any:
    return field(part, "function_call", "functionCall")


def _user_turn(parts: list[Any]) -> list[Message]:
    out: list[Message] = []
    texts: list[str] = []
    for part in parts:
        result = field(part, "function_response", "functionResponse")
        if result is not None:
            message: Message = {"role": "tool", "content": result_text(get(result, "response"))}
            call_id, name = get(result, "id"), get(result, "name")
            if isinstance(call_id, str) and call_id:
                message["toolCallId"] = call_id
            elif isinstance(name, str) and name:
                message["name"] = name  # paired by name and order (see the module docstring)
            out.append(message)
            continue
        text = part_text(part)
        if text is not None:
            texts.append(text)
    if texts or not out:
        out.append({"role": "user", "content": "\n".join(texts)})
    return out


def _model_turn(parts: list[Any]) -> Message:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in parts:
        call = function_call(part)
        if call is not None:
            call_id = get(call, "id")
            # An id-less call keeps an empty id here: only its fingerprint
            # matters for a turn sent back, and a generated one would differ
            # on every request.
            calls.append(
                {
                    "id": call_id if isinstance(call_id, str) else "",
                    "function": {"name": get(call, "name") or "", "arguments": arguments_text(get(call, "args"))},
                }
            )
            continue
        text = part_text(part)
        if text is not None:
            texts.append(text)
    message: Message = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["toolCalls"] = calls
    return message


def system_text(config: Any) -> str:
    instruction = field(config, "system_instruction", "systemInstruction")
    if instruction is None:
        return ""
    items = instruction if isinstance(instruction, (list, tuple)) else [instruction]
    texts = [t for item in items for t in (part_text(p) for p in _parts(item)) if t is not None]
    return "\n".join(texts)


def input_messages(contents: Any, config: Any) -> list[Message]:
    """The conversation of one ``generate_content`` request, in order."""
    out: list[Message] = []
    system = system_text(config)
    if system:
        out.append({"role": "system", "content": system})
    for content in _contents(contents):
        parts = _parts(content)
        role = _ROLES.get(get(content, "role") or "user", "user")
        if role == "assistant":
            out.append(_model_turn(parts))
        else:
            out.extend(_user_turn(parts))
    return out


def reply_parts(response: Any) -> list[Any]:
    candidates = get(response, "candidates")
    if not isinstance(candidates, (list, tuple)) or not candidates:
        return []
    return _parts(get(candidates[0], "content"))


def message_from_parts(parts: list[Any], model: Any = None) -> Message:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in parts:
        text = get(part, "text")
        if isinstance(text, str):
            if get(part, "thought") is True:
                if text:
                    thoughts.append(text)
            elif text:
                texts.append(text)
            continue
        call = function_call(part)
        if call is not None:
            calls.append(tool_call(get(call, "id"), get(call, "name"), get(call, "args")))
            continue
        visible = part_text(part)
        if visible:
            texts.append(visible)
    return assistant_message("".join(texts), "\n\n".join(thoughts), calls, model)


def model_version(response: Any) -> Any:
    return field(response, "model_version", "modelVersion")


def resolved(response: Any) -> Any:
    """*response*, or the JSON body it carries instead of candidates when the
    call asked for the HTTP response (``config.should_return_http_response``)."""
    if get(response, "candidates") is not None:
        return response
    body = get(get(response, "sdk_http_response"), "body")
    if not isinstance(body, str):
        return response
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return response
    return parsed if isinstance(parsed, dict) else response


def message_from_response(response: Any) -> Message:
    """A ``GenerateContentResponse`` (object or JSON) -> one assistant message."""
    response = resolved(response)
    return message_from_parts(reply_parts(response), model_version(response))


def is_response(obj: Any) -> bool:
    if isinstance(get(obj, "candidates"), (list, tuple)) or field(obj, "usage_metadata", "usageMetadata") is not None:
        return True
    return get(obj, "sdk_http_response") is not None and resolved(obj) is not obj


class GeminiAccumulator:
    """The chunks of ``generate_content_stream``: each holds the next parts of
    the first candidate (text and thought deltas, whole function calls)."""

    def __init__(self) -> None:
        self.model = ""
        self.seen_anything = False
        self._parts: list[Any] = []  # text runs merged into dicts, other parts as they came

    def add(self, chunk: Any) -> None:
        self.seen_anything = True
        version = model_version(chunk)
        if isinstance(version, str) and version:
            self.model = version
        for part in reply_parts(chunk):
            text = get(part, "text")
            if isinstance(text, str) and function_call(part) is None:
                thought = get(part, "thought") is True
                last = self._parts[-1] if self._parts else None
                if type(last) is dict and last.get("_run") and last["thought"] is thought:
                    last["text"] += text
                else:
                    self._parts.append({"_run": True, "text": text, "thought": thought})
            else:
                call = function_call(part)
                if call is not None:
                    # A copy: frameworks fill in the SDK objects they were
                    # handed (ADK writes its own ids into id-less calls), and
                    # the message is built only when the stream ends.
                    part = {"function_call": {"id": get(call, "id"), "name": get(call, "name"), "args": get(call, "args")}}
                self._parts.append(part)

    def result(self) -> Message:
        return message_from_parts(self._parts, self.model or None)
