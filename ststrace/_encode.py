"""JSON encoding that never raises: the last stage before the writer.

Everything ststrace writes goes through :func:`dumps` (or ``orjson.dumps``
first, where the caller has its own fallback to it). Nothing here decides what
a record holds: redaction, caps and media placeholders were applied before
(``_guard``; user values become text in ``_text``), so this module imports no
other stage. The fast path is one
``orjson.dumps`` call; only when it fails (non-string dict keys, cycles, lone
surrogates, integers beyond 64 bits, too deep nesting, ...) does a slower
sanitising pass rebuild the value from JSON-native pieces. Whatever the input,
the result is compact, valid UTF-8 JSON on one line, without a trailing newline.

How odd values come out:

- pydantic v2 / v1 models, attrs classes -> their fields (dataclasses, enums,
  ``datetime``/``date``/``time``, ``UUID`` are native to orjson)
- ``Decimal``, ``Path``, ``complex``, ``Fraction`` -> ``str()``
- ``set`` / ``frozenset`` -> a list (sorted when the items allow it)
- NumPy scalars -> Python numbers; arrays of at most :data:`NUMPY_MAX_ITEMS`
  items -> nested lists, larger ones -> ``"<ndarray shape=(..) dtype=..>"``
- ``bytes`` / ``bytearray`` / ``memoryview`` -> ``"<bytes: N bytes, sha256 HEX>"``
- integers beyond 64 bits -> their decimal digits as a string
- ``nan`` / ``inf`` -> ``null`` (JSON has no such numbers)
- lone surrogates -> U+FFFD; NUL characters are kept (JSON escapes them)
- non-string dict keys -> strings; a container inside itself -> ``"<cycle>"``
- nesting deeper than :data:`MAX_DEPTH` -> ``"<max depth>"``
- anything else -> ``repr()``, and ``"<unrepresentable T>"`` if that raises
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import enum
import math
import pathlib
import sys
import uuid
from typing import Any

import orjson

MAX_DEPTH = 64
NUMPY_MAX_ITEMS = 1000
_REPR_MAX = 10_000

_NATIVE_OPTS = orjson.OPT_NON_STR_KEYS
# Pre-encoded JSON (the guard keeps numbers of decoded arguments this way).
_FRAGMENT: Any = getattr(orjson, "Fragment", ())


def _safe_repr(obj: object) -> str:
    try:
        text = repr(obj)
        if not isinstance(text, str):
            raise TypeError("__repr__ returned a non-string")
    except Exception:
        try:
            name = type(obj).__qualname__
        except Exception:
            name = "object"
        return f"<unrepresentable {name}>"
    if len(text) > _REPR_MAX:
        text = text[:_REPR_MAX] + f"...[{len(text) - _REPR_MAX} more chars]"
    return text


def _numpy(obj: Any) -> Any:
    shape = getattr(obj, "shape", None)
    if shape is not None and hasattr(obj, "ndim") and getattr(obj, "ndim", 0) > 0:
        size = getattr(obj, "size", 0)
        if isinstance(size, int) and size <= NUMPY_MAX_ITEMS:
            return obj.tolist()
        return f"<ndarray shape={tuple(shape)!r} dtype={getattr(obj, 'dtype', '?')}>"
    item = getattr(obj, "item", None)
    if callable(item):
        return item()
    return _safe_repr(obj)


def _convert(obj: Any) -> Any:
    """One step towards JSON: a JSON-native value, or a simpler Python value."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes_placeholder(obj)
    cls = type(obj)
    module = getattr(cls, "__module__", "") or ""
    if module == "numpy" or module.startswith("numpy."):
        return _numpy(obj)
    if module.startswith("pandas"):
        # DataFrame.to_dict() of a big frame is huge; pandas' repr is already summarised.
        return _safe_repr(obj)
    if hasattr(cls, "model_dump") and hasattr(cls, "model_fields"):
        try:
            return obj.model_dump(mode="json")
        except Exception:
            return obj.model_dump()
    if hasattr(cls, "__fields__") and callable(getattr(cls, "dict", None)):
        return obj.dict()  # pydantic v1
    attrs_fields = getattr(cls, "__attrs_attrs__", None)
    if attrs_fields is not None:
        return {a.name: getattr(obj, a.name, None) for a in attrs_fields}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # orjson encodes dataclasses itself; this is for the sanitising pass.
        return {f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (datetime.date, datetime.time)):
        return obj.isoformat()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, (complex, pathlib.PurePath)) or _is_number_class(obj):
        return str(obj)
    if isinstance(obj, float):  # float subclasses orjson refuses
        return float(obj)
    if isinstance(obj, int):  # int subclasses, including huge ones
        return int(obj)
    if isinstance(obj, (set, frozenset, collections.abc.Set)):
        items = list(obj)
        try:
            items.sort()
        except Exception:
            pass
        return items
    if isinstance(obj, range):
        return _safe_repr(obj)
    if isinstance(obj, collections.abc.Mapping):
        return dict(obj.items())
    if isinstance(obj, (collections.abc.Sequence, collections.deque)) and not isinstance(obj, str):
        return list(obj)
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return _safe_repr(obj)


def _is_number_class(obj: Any) -> bool:
    """A ``Decimal`` or ``Fraction``. Looked up in ``sys.modules`` rather than
    imported: an instance can only exist once its module is, and importing
    both would add milliseconds to ``import ststrace``."""
    for module, name in (("decimal", "Decimal"), ("fractions", "Fraction")):
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(obj, cls):
            return True
    return False


def _default(obj: Any) -> Any:
    # orjson calls this for every value it cannot encode itself.
    try:
        return _convert(obj)
    except Exception:
        return _safe_repr(obj)


def dumps(obj: Any) -> bytes:
    """Serialize *obj* to compact JSON bytes (no trailing newline); never raises."""
    try:
        return orjson.dumps(obj, default=_default)
    except Exception:
        pass
    try:
        # Non-string dict keys are the common reason for the first failure;
        # orjson handles them itself, at a cost we only pay here.
        return orjson.dumps(obj, default=_default, option=_NATIVE_OPTS)
    except Exception:
        pass
    try:
        return orjson.dumps(_sanitize(obj, 0, set()))
    except Exception:
        pass
    try:
        return orjson.dumps(_clean_str(_safe_repr(obj)))
    except Exception:
        return b'"<unencodable>"'


def _clean_str(s: str) -> str:
    """*s* as valid Unicode: surrogate pairs joined, lone surrogates -> U+FFFD."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _int(obj: int) -> int | str:
    if -(2**63) <= obj < 2**64:
        return int(obj)
    try:
        return str(int(obj))
    except ValueError:  # beyond sys.get_int_max_str_digits()
        return f"<int: {obj.bit_length()} bits>"


def _float(obj: float) -> float | None:
    f = float(obj)
    return f if math.isfinite(f) else None


def _key(k: Any) -> str:
    if isinstance(k, str):
        return _clean_str(str.__str__(k))
    if k is None:
        return "null"
    if isinstance(k, bool):
        return "true" if k else "false"
    if isinstance(k, int):
        v = _int(k)
        return v if isinstance(v, str) else str(v)
    if isinstance(k, float):
        return repr(float(k))
    try:
        converted = _convert(k)
    except Exception:
        converted = None
    if isinstance(converted, str):
        return _clean_str(converted)
    return _clean_str(_safe_repr(k))


def _sanitize(obj: Any, depth: int, seen: set[int]) -> Any:
    """A JSON-native copy of *obj* that plain ``orjson.dumps`` accepts."""
    if obj is None or obj is True or obj is False:
        return obj
    if isinstance(obj, str):
        return _clean_str(str.__str__(obj))
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, int):
        return _int(obj)
    if isinstance(obj, float):
        return _float(obj)
    if isinstance(obj, _FRAGMENT):
        return obj
    if depth >= MAX_DEPTH:
        return "<max depth>"
    oid = id(obj)
    if oid in seen:
        return "<cycle>"
    if isinstance(obj, dict):
        seen.add(oid)
        try:
            return {_key(k): _sanitize(v, depth + 1, seen) for k, v in dict.items(obj)}
        finally:
            seen.discard(oid)
    if isinstance(obj, (list, tuple)):
        seen.add(oid)
        try:
            return [_sanitize(v, depth + 1, seen) for v in obj]
        finally:
            seen.discard(oid)
    if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
        return obj.isoformat()
    try:
        converted = _convert(obj)
    except Exception:
        converted = _safe_repr(obj)
    if converted is obj:
        return _clean_str(_safe_repr(obj))
    if isinstance(converted, str):
        return _clean_str(converted)
    # The converted value may itself need work (a model's dict holding a set).
    seen.add(oid)
    try:
        return _sanitize(converted, depth + 1, seen)
    finally:
        seen.discard(oid)


def bytes_placeholder(data: bytes | bytearray | memoryview) -> str:
    """``"<bytes: N bytes, sha256 HEX>"``: the size and a fingerprint, never the data."""
    import hashlib  # here: rarely needed, and ~3 ms to import

    try:
        view = memoryview(data)
        size = view.nbytes
        try:
            digest = hashlib.sha256(view).hexdigest()
        except (TypeError, ValueError, BufferError):
            # Non-contiguous or released buffers cannot be hashed in place.
            digest = hashlib.sha256(view.tobytes()).hexdigest()
        return f"<bytes: {size} bytes, sha256 {digest}>"
    except Exception:
        return "<bytes: unreadable buffer>"
