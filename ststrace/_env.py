"""Reading ststrace's environment variables cheaply."""

from __future__ import annotations

import os


def getenv(name: str) -> str | None:
    """``os.environ.get(name)``, for the variables read on every ``Session()``.

    On POSIX ``os.environ`` keeps the encoded environment in a plain dict that
    ``os.environ[...] = ...`` and ``del`` keep current: one lookup there costs
    a fraction of the ``Mapping.get`` path (key encoding, ``__getitem__``, a
    ``KeyError`` when unset), which adds up when a loop opens thousands of
    sessions at once.
    """
    data = getattr(os.environ, "_data", None)
    key = _KEYS.get(name)
    if key is None or type(data) is not dict or os.name != "posix":
        return os.environ.get(name)
    raw = data.get(key)
    return None if raw is None else os.environ.decodevalue(raw)  # type: ignore[attr-defined]


_KEYS = {
    name: os.fsencode(name)
    for name in ("STSTRACE_DISABLED", "STSTRACE_HARNESS", "STSTRACE_DIR", "STSTRACE_REDACT")
}
