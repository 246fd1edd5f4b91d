"""JSON encoding that never raises.

Everything ststrace writes goes through :func:`dumps`. orjson handles the common
types natively; anything it cannot handle goes through :func:`_default`, which
falls back to ``repr`` and, if even that fails, to a type-name placeholder. The
result is always one line of valid UTF-8 JSON.
"""

from __future__ import annotations

from typing import Any

import orjson

_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def _safe_repr(obj: object) -> str:
    try:
        return repr(obj)
    except Exception:
        return f"<unrepresentable {type(obj).__qualname__}>"


def _default(obj: Any) -> Any:
    # Pydantic v2 / v1 models and other objects that know their own JSON form.
    for attr in ("model_dump", "dict", "to_dict"):
        fn = getattr(obj, attr, None)
        if callable(fn):
            try:
                return fn()
            except Exception:
                pass
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return f"<bytes: {len(bytes(obj))} bytes>"
    return _safe_repr(obj)


def dumps(obj: Any) -> bytes:
    """Serialize *obj* to compact JSON bytes; never raises."""
    try:
        return orjson.dumps(obj, default=_default, option=_OPTS)
    except Exception:
        pass
    # Cycles, lone surrogates, >64-bit ints, etc.: a slower sanitising pass.
    try:
        return orjson.dumps(_sanitize(obj, 0, set()), option=_OPTS)
    except Exception:
        return orjson.dumps(_safe_repr(obj).encode("utf-8", "replace").decode("utf-8"))


_MAX_DEPTH = 64


def _sanitize(obj: Any, depth: int, seen: set[int]) -> Any:
    if isinstance(obj, str):
        return obj.encode("utf-8", "replace").decode("utf-8")
    if obj is None or isinstance(obj, (bool, float)):
        return obj
    if isinstance(obj, int):
        return obj if -(2**63) <= obj < 2**64 else str(obj)
    if depth >= _MAX_DEPTH:
        return "<max depth>"
    oid = id(obj)
    if oid in seen:
        return "<cycle>"
    if isinstance(obj, dict):
        seen.add(oid)
        out = {_key(k): _sanitize(v, depth + 1, seen) for k, v in obj.items()}
        seen.discard(oid)
        return out
    if isinstance(obj, (list, tuple, set, frozenset)):
        seen.add(oid)
        items = [_sanitize(v, depth + 1, seen) for v in obj]
        seen.discard(oid)
        return items
    try:
        orjson.dumps(obj, option=_OPTS)
        return obj
    except Exception:
        pass
    try:
        converted = _default(obj)
    except Exception:
        converted = _safe_repr(obj)
    if converted is obj or isinstance(converted, str):
        return _sanitize(str(converted), depth + 1, seen)
    seen.add(oid)
    try:
        return _sanitize(converted, depth + 1, seen)
    finally:
        seen.discard(oid)


def _key(k: Any) -> str:
    if isinstance(k, str):
        return k.encode("utf-8", "replace").decode("utf-8")
    return _safe_repr(k)


def json_text(value: Any) -> str:
    """JSON text of *value* as a ``str`` (for ``content`` and ``arguments``)."""
    return dumps(value).decode("utf-8")


def content_text(value: Any) -> str:
    """STS ``content``: strings as they are, ``None`` as ``""``, others as JSON text."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json_text(value)
