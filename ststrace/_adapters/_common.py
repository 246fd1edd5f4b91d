"""Small helpers shared by the provider adapters.

Every provider shape reaches us either as an object (pydantic models, Hugging
Face dataclasses, LiteLLM objects) or as its plain-dict form, so all field access
goes through :func:`get`, which reads both.
"""

from __future__ import annotations

import logging
import os
import random
import re
import sys
from collections.abc import Mapping
from types import GetSetDescriptorType
from typing import Any

from ststrace import _errors
from ststrace._text import json_text

logger = logging.getLogger("ststrace")

Message = dict[str, Any]


def internal_error(where: str) -> None:
    """Report the exception being handled as an ststrace internal error.

    Call only from inside an ``except`` block; the project's policy
    (:func:`ststrace._errors.internal_error`) logs it and, under our tests,
    fails the test.
    """
    exc = sys.exc_info()[1]
    if exc is None:
        logger.error("ststrace internal error in %s", where)
        return
    _errors.internal_error(exc, where)


def get(obj: Any, key: str) -> Any:
    """``obj[key]`` for mappings, ``obj.key`` otherwise; ``None`` when absent.

    Runs for every field of every stream chunk, so it skips what it safely can:
    the ``Mapping`` check (an ABC, slow for non-mappings) and, for plain objects
    and pydantic models, the attribute machinery (a missing pydantic field
    costs an ``AttributeError`` built and caught in Python). The answer is
    always what ``getattr(obj, key, None)`` gives.
    """
    tp = type(obj)
    if tp is dict:
        return obj.get(key)
    layout = _layouts.get(tp)
    if layout is None:
        layout = _layout_of(tp)
    kind = layout.kind
    if kind is _MAPPING:
        return obj.get(key)
    if kind is _SLOW:
        return _getattr(obj, key)
    if kind is not _NO_DICT:
        try:
            value = obj.__dict__.get(key, _ABSENT)
        except Exception:
            return _getattr(obj, key)
        if value is not _ABSENT:
            return value if key not in layout.shadowing else _getattr(obj, key)
    if key in layout.names:
        return _getattr(obj, key)
    if kind is not _PYDANTIC:
        return None
    # Neither an instance nor a class attribute: pydantic's __getattr__ reads
    # the extra fields next.
    try:
        extra = obj.__pydantic_extra__
    except AttributeError:
        return None
    return extra.get(key) if extra else None


def _getattr(obj: Any, key: str) -> Any:
    try:
        return getattr(obj, key, None)
    except Exception:
        # Some objects compute attributes lazily and may raise anything.
        return None


_ABSENT: Any = object()
_MAPPING, _PLAIN, _NO_DICT, _PYDANTIC, _SLOW = "mapping", "plain", "no dict", "pydantic", "slow"


class _Layout:
    """How :func:`get` reads the attributes of one type.

    ``_PLAIN`` (instances have a ``__dict__``) and ``_NO_DICT`` (they have
    none): ``object.__getattribute__`` and no ``__getattr__``, so an attribute
    is the instance ``__dict__`` entry unless a data descriptor of the class
    shadows it, else a class attribute, else missing. ``_PYDANTIC``: the same,
    then pydantic's ``BaseModel.__getattr__``, which, for a name that is neither
    a private nor a class attribute, reads the extra fields. ``_SLOW``: anything
    else, through ``getattr``.
    """

    __slots__ = ("kind", "names", "shadowing")

    def __init__(self, kind: str, names: frozenset[str] = frozenset(), shadowing: frozenset[str] = frozenset()) -> None:
        self.kind = kind
        self.names = names  # class attributes (and pydantic private attributes): getattr() decides
        self.shadowing = shadowing  # data descriptors, which win over the instance __dict__


# Types are few (one per chunk or message class); the cap only guards against
# classes made on the fly (pydantic ``create_model`` in a loop).
_MAX_LAYOUTS = 1024
_layouts: dict[type, _Layout] = {}


def _layout_of(tp: type) -> _Layout:
    try:
        layout = _inspect_type(tp)
    except Exception:
        layout = _Layout(_SLOW)
    if len(_layouts) >= _MAX_LAYOUTS:
        _layouts.clear()
    _layouts[tp] = layout
    return layout


def _inspect_type(tp: type) -> _Layout:
    if issubclass(tp, Mapping):
        return _Layout(_MAPPING)
    if tp.__getattribute__ is not object.__getattribute__:
        return _Layout(_SLOW)
    names: set[str] = set()
    shadowing: set[str] = set()
    for klass in reversed(tp.__mro__):
        # The most derived class decides, as in attribute lookup.
        for name, value in vars(klass).items():
            names.add(name)
            descriptor = type(value)
            if hasattr(descriptor, "__set__") or hasattr(descriptor, "__delete__"):
                shadowing.add(name)
            else:
                shadowing.discard(name)
    has_dict = tp.__dictoffset__ != 0
    if has_dict and not isinstance(_first_in_mro(tp, "__dict__"), GetSetDescriptorType):
        return _Layout(_SLOW)  # a class redefines __dict__: obj.__dict__ may not be the real one
    owner = next((k for k in tp.__mro__ if "__getattr__" in vars(k)), None)
    if owner is None:
        kind = _PLAIN if has_dict else _NO_DICT
    elif owner.__module__ == "pydantic.main" and owner.__qualname__ == "BaseModel":
        private = getattr(tp, "__private_attributes__", None)
        if not isinstance(private, Mapping) or not has_dict:
            return _Layout(_SLOW)
        names.update(private)
        kind = _PYDANTIC
    else:
        return _Layout(_SLOW)
    return _Layout(kind, frozenset(names), frozenset(shadowing))


def _first_in_mro(tp: type, name: str) -> Any:
    for klass in tp.__mro__:
        attributes = vars(klass)
        if name in attributes:
            return attributes[name]
    return None


def first_str(obj: Any, *keys: str) -> str:
    """The first non-empty string value among ``keys`` of ``obj``, or ``""``."""
    for key in keys:
        value = get(obj, key)
        if isinstance(value, str) and value:
            return value
    return ""


#: Our own generator: drawing from the global one would change the numbers a
#: program that seeds ``random`` gets. Reseeded in a forked child, so parent
#: and child never hand out the same ids.
_ids = random.Random()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ids.seed)


def new_call_id() -> str:
    # 96 random bits, as uuid4().hex[:24] gave, without its os.urandom system
    # call: Gemini replies need one per function call. The ids need not be secret.
    return f"call_{_ids.getrandbits(96):024x}"


_GENERATED_CALL_ID = re.compile(r"call_[0-9a-f]{24}")


def is_generated_call_id(value: Any) -> bool:
    """Whether *value* looks like a :func:`new_call_id` id (one ststrace made for a
    protocol without call ids, Ollama or Gemini, rather than one the provider sent)."""
    return isinstance(value, str) and _GENERATED_CALL_ID.fullmatch(value) is not None


def arguments_text(value: Any) -> str:
    """Tool-call arguments as the JSON text STS expects.

    Strings are kept as the provider sent them, even when they are not valid
    JSON; an empty or missing value means "no arguments", i.e. ``"{}"``.
    """
    if isinstance(value, str):
        return value if value.strip() else "{}"
    if value is None:
        return "{}"
    return json_text(value)


def tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id if isinstance(call_id, str) and call_id else new_call_id(),
        "function": {
            "name": name if isinstance(name, str) else "",
            "arguments": arguments_text(arguments),
        },
    }


def assistant_message(
    content: str,
    reasoning: str = "",
    tool_calls: list[dict[str, Any]] | None = None,
    model: Any = None,
) -> Message:
    """An STS assistant message with the optional fields left out when empty."""
    message: Message = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoningContent"] = reasoning
    if tool_calls:
        message["toolCalls"] = tool_calls
    if isinstance(model, str) and model:
        message["model"] = model
    return message


_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_PLACEHOLDERS = {
    "image_url": "[image]",
    "image": "[image]",
    "input_image": "[image]",
    "input_audio": "[audio]",
    "audio": "[audio]",
    "file": "[file]",
    "input_file": "[file]",
    "document": "[document]",
}
# Blocks that carry no user-visible text of their own; callers handle the ones
# that matter (tool calls, tool results, reasoning) separately.
_SKIPPED_PARTS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "reasoning", "function_call"}
)


def part_text(part: Any) -> str | None:
    """Visible text of one content part, a placeholder for media, ``None`` to skip."""
    if isinstance(part, str):
        return part
    kind = get(part, "type")
    if kind in _TEXT_PARTS or kind is None:
        text = get(part, "text")
        return text if isinstance(text, str) else None
    if kind == "refusal":
        refusal = get(part, "refusal")
        return refusal if isinstance(refusal, str) else None
    if kind in _SKIPPED_PARTS:
        return None
    if kind == "document":
        # Cohere sends tool results as documents: {"document": {"data": "..."}}.
        data = get(get(part, "document"), "data")
        if isinstance(data, str):
            return data
    placeholder = _PLACEHOLDERS.get(kind) if isinstance(kind, str) else None
    if placeholder is not None:
        return placeholder
    return f"[{kind}]" if isinstance(kind, str) else None


def parts_text(content: Any, sep: str) -> str:
    """Text of a ``content`` value: a string, a part, or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping) or not isinstance(content, (list, tuple)):
        content = [content]
    pieces = [text for text in (part_text(p) for p in content) if text is not None]
    return sep.join(pieces)


def reasoning_text(value: Any) -> str:
    """Reasoning given as a string, a list of parts, or a small dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        pieces = [reasoning_text(v) for v in value]
        return "\n\n".join(p for p in pieces if p)
    if value is None or isinstance(value, (int, float, bool)):
        return ""
    for key in ("thinking", "text", "content", "reasoning"):
        inner = get(value, key)
        if inner is not None and inner is not value:
            text = reasoning_text(inner)
            if text:
                return text
    return ""
