"""Size limits and placeholders for bulky values.

Traces are read by people and uploaded to the Hub, so raw binary data, inline
images and megabyte-long fields are replaced by short placeholders or cut:

- ``bytes`` / ``bytearray`` / ``memoryview`` -> ``"<bytes: N bytes, sha256 HEX>"``
- base64 ``data:`` URLs -> ``"<image/png: N bytes>"`` (media type, decoded size)
- inline base64 content blocks (Anthropic ``source.data``, MCP / Pi ``data`` +
  ``mimeType``, Gemini ``inline_data``, OpenAI ``b64_json``) -> the same
  placeholder in place of the data
- a field longer than the cap -> its first N characters and
  ``"...[truncated: M chars dropped]"``

Everything here is pure (no I/O, no session state) and cheap when there is
nothing to do: the common case is one ``in`` test.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# The encoder's own text for binary data (bytes found anywhere in a record);
# listed with the other placeholders here, where it used to live.
from ._encode import bytes_placeholder as bytes_placeholder

TRUNCATION_MARKER = "...[truncated: {n} chars dropped]"

# Inline base64 payloads shorter than this are left alone: a placeholder would
# not be much shorter, and short strings under a "data" key are often not media.
MIN_INLINE_BASE64 = 256

_MEDIA_TYPE_KEYS = ("media_type", "mimeType", "mime_type", "mediaType", "content_type", "contentType")
_DATA_KEYS = ("data", "b64_json", "base64", "image_base64", "bytes")

_DATA_URL = re.compile(
    r"data:(?P<mt>[A-Za-z0-9.+\-]+/[A-Za-z0-9.+\-]+)?"
    r"(?:;[A-Za-z0-9.+\-]+=[A-Za-z0-9.+%\-]+)*"
    r";base64,(?P<b64>[A-Za-z0-9+/_\-]{16,}={0,2})"
)
_DATA_URL_BYTES = re.compile(_DATA_URL.pattern.encode("ascii"))
_BASE64 = re.compile(r"[A-Za-z0-9+/_\-\s]+={0,2}\s*")


def truncation_marker(dropped: int) -> str:
    return TRUNCATION_MARKER.format(n=dropped)


def media_placeholder(media_type: str | None, size: int) -> str:
    return f"<{media_type or 'application/octet-stream'}: {size} bytes>"


def _b64_size(b64: str | bytes) -> int:
    """Decoded size of base64 text (padding and whitespace-free)."""
    n = len(b64)
    pad = 0
    while pad < 2 and n - pad > 0 and b64[n - pad - 1] in (61, "="):  # "=" as byte or str
        pad += 1
    return (n * 3) // 4 - pad


def has_data_url(text: str) -> bool:
    # ';' is rare in prose; a memchr scan for it first avoids the slower
    # multi-character search on most text.
    return ";" in text and ";base64," in text


def scrub_data_urls(text: str) -> str:
    """Replace base64 ``data:`` URLs in *text*; returns *text* itself when there are none."""
    if not has_data_url(text):
        return text
    return _DATA_URL.sub(_url_placeholder, text)


def _url_placeholder(m: re.Match[str]) -> str:
    return media_placeholder(m.group("mt"), _b64_size(m.group("b64")))


def _url_placeholder_bytes(m: re.Match[bytes]) -> bytes:
    mt = m.group("mt")
    return media_placeholder(mt.decode("ascii") if mt else None, _b64_size(m.group("b64"))).encode("ascii")


def scrub_encoded(out: bytes) -> tuple[bytes, bool]:
    """Scrub media out of JSON text produced by the encoder.

    Returns ``(new, needs_structural)``: data URLs are replaced right in the
    bytes (the placeholder holds no quote or backslash, so the JSON stays
    valid); ``needs_structural`` says the text may hold an inline base64
    content block, which :func:`scrub_media` must handle on the decoded value.
    """
    if b";" in out and b";base64," in out:
        out = _DATA_URL_BYTES.sub(_url_placeholder_bytes, out)
    structural = len(out) >= MIN_INLINE_BASE64 and (b'"data":"' in out or b'"b64_json":"' in out)
    return out, structural


def _inline_media(d: dict[Any, Any]) -> tuple[str, str] | None:
    """(data key, media type) when *d* looks like a block with inline base64 data."""
    for key in _DATA_KEYS:
        value = d.get(key)
        if isinstance(value, str) and len(value) >= MIN_INLINE_BASE64:
            break
    else:
        return None
    media_type: str | None = None
    for mk in _MEDIA_TYPE_KEYS:
        mv = d.get(mk)
        if isinstance(mv, str) and mv:
            media_type = mv
            break
    kind = d.get("type")
    looks_media = (
        media_type is not None
        or key == "b64_json"
        or (isinstance(kind, str) and any(w in kind for w in ("image", "audio", "base64", "file", "document")))
    )
    if not looks_media or _BASE64.fullmatch(value) is None:
        return None
    if media_type is None:
        media_type = "image/png" if key == "b64_json" else None
    return key, media_type or "application/octet-stream"


def scrub_media(value: Any, depth: int = 0) -> Any:
    """*value* (decoded JSON) with data URLs and inline base64 blocks replaced.

    Copies only the containers it changes; returns *value* itself otherwise.
    """
    if isinstance(value, str):
        return scrub_data_urls(value)
    if depth > 200:
        return value
    if isinstance(value, list):
        out_list: list[Any] | None = None
        for i, item in enumerate(value):
            new = scrub_media(item, depth + 1)
            if new is not item:
                if out_list is None:
                    out_list = list(value)
                out_list[i] = new
        return value if out_list is None else out_list
    if isinstance(value, dict):
        out: dict[Any, Any] | None = None
        found = _inline_media(value)
        if found is not None:
            key, media_type = found
            out = dict(value)
            out[key] = media_placeholder(media_type, _b64_size("".join(value[key].split())))
        for k, item in value.items():
            if found is not None and k == found[0]:
                continue
            new = scrub_media(item, depth + 1)
            if new is not item:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out
    return value


# -- cutting long JSON text ------------------------------------------------------


def json_chars(s: str) -> int:
    """Length of *s* as a JSON string body, in characters (escapes counted)."""
    encoded = orjson.dumps(s)
    if s.isascii():
        return len(encoded) - 2
    return len(encoded.decode("utf-8")) - 2


def fit(s: str, budget: int) -> int:
    """The longest prefix length of *s* whose JSON form has at most *budget* characters."""
    k = min(len(s), max(budget, 0))
    while k > 0:
        over = json_chars(s[:k]) - budget
        if over <= 0:
            return k
        k -= over  # each escape costs at least one extra character
    return 0


def string_leaves(value: Any, out: list[tuple[int, Any, Any]], depth: int = 0) -> None:
    """Collect ``(JSON length, container, key)`` for every string value inside *value*."""
    if depth > 200:
        return
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for k, v in items:
        if isinstance(v, str):
            out.append((json_chars(v), value, k))
        elif isinstance(v, (dict, list)):
            string_leaves(v, out, depth + 1)


def plan_cuts(leaves: list[tuple[int, Any, Any]], excess: int) -> list[tuple[Any, Any, int]]:
    """Which strings to cut, and to what JSON length, to remove *excess* characters.

    The longest strings go first: the usual oversized argument is one huge
    value (a file's content) next to small ones that are worth keeping whole.
    """
    plan: list[tuple[Any, Any, int]] = []
    remaining = excess
    for length, container, key in sorted(leaves, key=lambda t: t[0], reverse=True):
        if remaining <= 0:
            break
        # Room for the marker this cut adds.
        cut = min(length, remaining + len(truncation_marker(length)))
        plan.append((container, key, length - cut))
        remaining -= cut
    return plan


# -- token counts --------------------------------------------------------------------

#: The counts of a ``usage`` object (Pi's shape), ``reasoning`` optional.
TOKEN_COUNT_KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens", "reasoning")
#: The largest token count written: the largest integer every JSON reader keeps
#: exact (I-JSON, JavaScript's Number.MAX_SAFE_INTEGER). orjson cannot write an
#: int of 2**64 or more as a number at all; a count past this one is a bug upstream.
MAX_TOKEN_COUNT = 2**53 - 1


def token_count(value: Any) -> int | None:
    """*value* as a token count (a non-negative integer up to :data:`MAX_TOKEN_COUNT`;
    a float with an integer value counts), else ``None``. The one rule for usage
    counts everywhere: provider reports, ``s.assistant(usage=)``, ``validate``, ``stats``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= MAX_TOKEN_COUNT else None
    if isinstance(value, float) and value.is_integer() and 0 <= value <= MAX_TOKEN_COUNT:
        return int(value)
    return None
