"""Tool definitions: JSON schemas of the tools a model is offered.

Pure functions, no session state. Every definition is normalised to the
OpenAI / TRL / chat-template shape ``{"type": "function", "function": {"name",
"description", "parameters"}}``: what ``transformers.utils.get_json_schema``
returns, what TRL's ``tools`` column and Hugging Face chat templates take, and
what teich reads from a Pi session's ``teich-available-tools`` line.

:func:`function_schema` builds one from a Python function (``@tool`` does it
once, at decoration time); :func:`definitions` reads the ``tools=`` argument
of the providers ststrace instruments (OpenAI Chat and Responses, Anthropic,
LiteLLM and Hugging Face use one of those shapes).
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Literal, Union, get_args, get_origin

import orjson

from ._encode import dumps

__all__ = ["ToolDef", "definition", "definitions", "fingerprint", "function_schema", "merge"]

#: ``{"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}``
ToolDef = dict[str, Any]

_SIMPLE: dict[Any, dict[str, Any]] = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    bytes: {"type": "string"},
    list: {"type": "array"},
    tuple: {"type": "array"},
    set: {"type": "array"},
    frozenset: {"type": "array"},
    dict: {"type": "object"},
}


# -- from a Python function ---------------------------------------------------------


def function_schema(func: Callable[..., Any], name: str | None = None) -> ToolDef:
    """The tool definition of *func*, from its signature, type hints and docstring.

    Like ``transformers.utils.get_json_schema``: Google-style ``Args:`` (or
    ``:param x:``) lines describe the parameters, a ``(choices: [...])`` at the
    end of one becomes its ``enum``; parameters without a default are
    ``required``; ``Optional[X]`` is ``X`` with ``"nullable": true``; ``Literal``
    and ``Enum`` types give an ``enum``; ``list[X]`` an array of ``X``; a
    pydantic model its own JSON schema. Unlike it, nothing is refused: a
    parameter with no hint, or a hint it cannot express, accepts any value.
    ``self`` / ``cls``, ``*args`` and ``**kwargs`` are left out.
    """
    target = getattr(func, "__func__", func)
    fname = name or getattr(target, "__name__", None) or "tool"
    doc = inspect.getdoc(target) or ""
    description, arg_docs = _parse_docstring(doc)
    try:
        hints = typing.get_type_hints(target)
    except Exception:
        # A hint naming something not importable here: the raw annotations.
        hints = dict(getattr(target, "__annotations__", {}) or {})
    properties: dict[str, Any] = {}
    required: list[str] = []
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        params = []
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        schema = _hint_schema(hints[p.name]) if p.name in hints else {}
        text = arg_docs.get(p.name)
        if text:
            choices = _CHOICES.search(text)
            if choices:
                try:
                    schema["enum"] = orjson.loads(choices.group(1))
                    text = text[: choices.start()].rstrip()
                except orjson.JSONDecodeError:
                    pass
            if text:
                schema["description"] = text
        properties[p.name] = schema
        if p.default is p.empty:
            required.append(p.name)
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    fn: dict[str, Any] = {"name": fname}
    if description:
        fn["description"] = description
    fn["parameters"] = parameters
    return {"type": "function", "function": fn}


_CHOICES = re.compile(r"\(choices:\s*(.*?)\)\s*$", re.DOTALL)
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:\s*$", re.IGNORECASE)
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) of a Google- or reST-style docstring."""
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent = 0
    for line in doc.splitlines():
        head = _SECTION.match(line)
        if head:
            section = head.group(1).lower()
            current = None
            continue
        rest = _REST_PARAM.match(line)
        if rest:
            section, current = "rest", rest.group(1)
            args[current] = rest.group(2).strip()
            continue
        if line.strip().startswith(":") and section == "rest":
            current = None  # :returns:, :raises: ...
            continue
        if section is None:
            description.append(line)
        elif section in ("args", "arguments", "parameters"):
            m = _ARG_LINE.match(line)
            this_indent = len(line) - len(line.lstrip())
            if m and (current is None or this_indent <= indent):
                current, indent = m.group(1), this_indent
                args[current] = m.group(2).strip()
            elif current is not None and line.strip():
                args[current] = (args[current] + " " + line.strip()).strip()
        elif section == "rest" and current is not None and line.strip():
            args[current] = (args[current] + " " + line.strip()).strip()
    return "\n".join(description).strip(), args


def _hint_schema(hint: Any) -> dict[str, Any]:
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is typing.Annotated:
        return _hint_schema(args[0])
    if origin is Union or origin is types.UnionType:
        subs = [_hint_schema(a) for a in args if a is not type(None)]
        if len(subs) == 1:
            out = subs[0]
        elif subs and all(len(s) == 1 and isinstance(s.get("type"), str) for s in subs):
            out = {"type": sorted({s["type"] for s in subs})}
        else:
            out = {"anyOf": subs}
        if type(None) in args:
            out["nullable"] = True
        return out
    if origin is Literal:
        kinds: list[str] = []
        for value in args:
            kind = _SIMPLE.get(type(value), {}).get("type")
            if kind is not None and kind not in kinds:
                kinds.append(kind)
        out = {"enum": list(args)}
        if kinds:
            out = {"type": kinds[0] if len(kinds) == 1 else kinds, **out}
        return out
    if origin in (list, set, frozenset) or origin in (typing.Sequence, typing.Iterable):
        return {"type": "array", "items": _hint_schema(args[0])} if args else {"type": "array"}
    if origin is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array", "items": _hint_schema(args[0])} if args else {"type": "array"}
        return {"type": "array", "prefixItems": [_hint_schema(a) for a in args]}
    if origin is dict or origin is typing.Mapping:
        out = {"type": "object"}
        if len(args) == 2:
            out["additionalProperties"] = _hint_schema(args[1])
        return out
    if origin is not None:
        return _hint_schema(origin)
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            values = [m.value for m in hint]
            kinds = sorted({_SIMPLE.get(type(v), {}).get("type", "string") for v in values})
            return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": values}
        json_schema = getattr(hint, "model_json_schema", None)  # pydantic v2 models
        if callable(json_schema):
            try:
                value = json_schema()
                if isinstance(value, dict):
                    return value
            except Exception:
                return {"type": "object"}
        for base in hint.__mro__:
            if base in _SIMPLE:
                return dict(_SIMPLE[base])
    return {}


# -- from a provider's tools= argument -------------------------------------------------

_built: weakref.WeakKeyDictionary[Any, ToolDef] = weakref.WeakKeyDictionary()


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def definition(item: Any) -> ToolDef | None:
    """One tool in the normalised shape, or ``None`` for what has no function schema.

    Accepts the OpenAI Chat shape (``{"type": "function", "function": {...}}``),
    the Responses shape (``{"type": "function", "name", "parameters"}``),
    Anthropic's (``{"name", "description", "input_schema"}``), a bare
    ``{"name", "description", "parameters"}``, pydantic / SDK objects of those
    shapes, an ``@tool`` function and any other Python function. A provider's
    built-in tool (web search, code execution) has no schema and gives ``None``.
    """
    if callable(item) and not isinstance(item, Mapping) and not hasattr(item, "model_dump"):
        schema = getattr(item, "_self_ststrace_schema", None)  # an @tool function
        if isinstance(schema, dict):
            return schema
        # A plain function given as a tool on every model call: its schema is built once.
        try:
            cached = _built.get(item)
        except TypeError:  # not weak-referenceable
            return function_schema(item)
        if cached is None:
            cached = _built[item] = function_schema(item)
        return cached
    if not isinstance(item, Mapping):
        dump = getattr(item, "model_dump", None)
        if callable(dump):
            item = dump(exclude_none=True)
        if not isinstance(item, Mapping):
            return None
    fn = item.get("function")
    if isinstance(fn, Mapping):
        src: Mapping[str, Any] = fn
    elif item.get("type") in (None, "function", "custom"):
        src = item
    else:
        return None  # a built-in tool ({"type": "web_search"}, "bash_20250124", ...)
    name = src.get("name")
    if not isinstance(name, str) or not name:
        return None
    out: dict[str, Any] = {"name": name}
    text = src.get("description")
    if isinstance(text, str) and text:
        out["description"] = text
    params = src.get("parameters", src.get("input_schema"))
    if isinstance(params, Mapping):
        out["parameters"] = _plain(params)
    elif item.get("type") != "custom":
        out["parameters"] = {"type": "object", "properties": {}}
    if src.get("strict") is True:
        out["strict"] = True
    return {"type": "function", "function": out}


def _plain(value: Any) -> Any:
    """*value* as plain JSON (SDK TypedDicts are dicts already; anything odd goes through the encoder)."""
    try:
        return orjson.loads(dumps(value))
    except Exception:
        return {}


def definitions(tools: Any) -> list[ToolDef]:
    """The tool definitions in a provider's ``tools=`` value (a list, tuple or other iterable).

    Besides the shapes :func:`definition` takes, a Gemini ``Tool`` holding
    ``function_declarations`` gives each declaration, and a Bedrock
    ``toolConfig`` (``{"tools": [{"toolSpec": {"name", "inputSchema": {"json"}}}]}``)
    each ``toolSpec``."""
    if isinstance(tools, Mapping) and "tools" in tools:
        tools = tools["tools"]  # Bedrock's toolConfig
    if tools is None or isinstance(tools, (str, bytes, Mapping)):
        return []
    out: list[ToolDef] = []
    try:
        items: Iterable[Any] = list(tools)
    except TypeError:
        return []
    for item in items:
        declared = _get(item, "function_declarations") or _get(item, "functionDeclarations")
        if declared and not isinstance(declared, (str, bytes)):
            for decl in declared:
                d = _gemini(decl)
                if d is not None:
                    out.append(d)
            continue
        spec = _get(item, "toolSpec")
        if spec is not None:
            d = _bedrock(spec)
        else:
            d = definition(item)
        if d is not None:
            out.append(d)
    return out


def _gemini(decl: Any) -> ToolDef | None:
    if not isinstance(decl, Mapping):
        dump = getattr(decl, "model_dump", None)
        decl = dump(exclude_none=True) if callable(dump) else None
        if not isinstance(decl, Mapping):
            return None
    params = decl.get("parameters_json_schema", decl.get("parametersJsonSchema"))
    if params is None and isinstance(decl.get("parameters"), Mapping):
        params = _lower_types(_plain(decl["parameters"]))
    return definition({"name": decl.get("name"), "description": decl.get("description"), "parameters": params})


def _bedrock(spec: Any) -> ToolDef | None:
    if not isinstance(spec, Mapping):
        return None
    schema = spec.get("inputSchema")
    params = schema.get("json") if isinstance(schema, Mapping) else None
    return definition({"name": spec.get("name"), "description": spec.get("description"), "parameters": params})


def _lower_types(value: Any) -> Any:
    """Gemini's ``Schema`` spells types in capitals (``"OBJECT"``); JSON Schema does not."""
    if isinstance(value, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _lower_types(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_lower_types(v) for v in value]
    return value


def fingerprint(defs: list[ToolDef]) -> int:
    """Equal for the same set of definitions, in whatever order they come."""
    try:
        return hash(tuple(sorted(orjson.dumps(d, option=orjson.OPT_SORT_KEYS) for d in defs)))
    except TypeError:
        return hash(tuple(sorted(dumps(d) for d in defs)))


def merge(sets: Iterable[Any]) -> list[ToolDef]:
    """The tools of a session: the union by name of every ``tools`` field, in
    the order first seen; the first definition of a name is kept (the one the
    model was offered before an ``@tool`` schema of the same name came)."""
    seen: dict[str, ToolDef] = {}
    for tools in sets:
        if not isinstance(tools, list):
            continue
        for d in tools:
            fn = d.get("function") if isinstance(d, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if isinstance(name, str) and name not in seen:
                seen[name] = d
    return list(seen.values())
