"""User values as STS text: ``content`` and ``arguments`` from any Python value.

A string stays as it is; anything else becomes JSON text (through the
encoder's conversions), with inline media (``data:`` URLs, base64 image blocks)
replaced by short placeholders (see ``_limits``) while the value is still
structured. Record builders (``_records``), ``@tool``/``@llm`` and the
adapters use it; the guard then applies redaction and caps to the text.
"""

from __future__ import annotations

from typing import Any

import orjson

from ._encode import _default, bytes_placeholder, dumps
from ._limits import MIN_INLINE_BASE64, scrub_encoded, scrub_media

__all__ = ["content_text", "json_text"]

# Shortest encoded value that can hold a data URL ("data:;base64," + 16).
_MIN_MEDIA_JSON = 29


def json_text(value: Any) -> str:
    """JSON text of *value* as a ``str`` (for ``content`` and ``arguments``).

    Unlike :func:`dumps`, inline media (``data:`` URLs, base64 image blocks)
    is replaced by a short placeholder: this is for user values, not records.
    """
    try:
        out = orjson.dumps(value, default=_default)
    except Exception:
        out = dumps(value)
    n = len(out)
    if n < _MIN_MEDIA_JSON or (n < MIN_INLINE_BASE64 and b";" not in out):
        # Too short to hold a data URL (or short, and no ";" for one) or an
        # inline base64 block: the common case of small tool arguments and
        # results skips the media scan.
        return out.decode("utf-8")
    try:
        out, structural = scrub_encoded(out)
        if structural:
            scrubbed = scrub_media(orjson.loads(out))
            out = dumps(scrubbed)
    except Exception:
        pass
    return out.decode("utf-8")


def content_text(value: Any) -> str:
    """STS ``content``: strings as they are, ``None`` as ``""``, others as JSON text.

    Binary values give their placeholder text directly (not a quoted JSON string).
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes_placeholder(value)
    return json_text(value)
