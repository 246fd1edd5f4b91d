"""The last stop before a record is encoded: redaction, media placeholders and caps.

:class:`MessageGuard` takes an STS message dict and returns the dict to write.
It never mutates its argument: when something changes it returns a copy that
shares every unchanged part (copy-on-write); when nothing changes it returns
the very same dict, so the common path costs a few scans and no allocation.

Per text field (``content``, ``reasoningContent``) the order is: base64 media
-> placeholders, secrets -> ``[REDACTED:<kind>]``, then the cap. Tool-call
``arguments`` are JSON text and stay valid JSON: secrets are redacted inside
the decoded string values (and keys), and an oversized document is cut inside
its longest string values, or, if that is not enough, replaced by
``{"_truncated": "<its first characters>...[truncated: N chars dropped]"}``.

A cut field never ends in a fragment of a secret: the text is scanned a little
past the cut (:data:`~ststrace._redact.MAX_SECRET_CHARS`), and a secret that
starts before the cut is replaced whole.

If the guard itself fails, the field is replaced by a placeholder rather than
written unredacted (fail closed), and the error is logged.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any, Callable

import orjson

from ._encode import dumps
from ._env import getenv
from ._errors import internal_error
from ._limits import fit, has_data_url, plan_cuts, scrub_data_urls, scrub_media, string_leaves, truncation_marker
from ._redact import MAX_SECRET_CHARS, Redactor, apply, default_redactor, marker

FAILED = "[ststrace: field withheld: redaction failed]"

# "data:;base64," and the 16 base64 characters the placeholder pattern needs.
_MIN_DATA_URL = 29

# Session header fields that identify the trace and are never rewritten.
_HEADER_FIXED = frozenset({"type", "id", "harness"})


class MessageGuard:
    """Redaction and size caps for one session; safe to call from several threads.

    *redactor* ``None`` turns redaction off; *max_field_chars* ``None`` or ``0``
    turns the caps (and media placeholders) off.
    """

    __slots__ = ("redactor", "max_field_chars", "counts", "_lock", "_cap", "_media", "_short", "screen", "screen_args")

    def __init__(self, redactor: Redactor | None, max_field_chars: int | None = 1_000_000) -> None:
        if max_field_chars is not None and (isinstance(max_field_chars, bool) or not isinstance(max_field_chars, int)):
            raise ValueError(f"max_field_chars must be an int or None, got {max_field_chars!r}")
        if max_field_chars is not None and max_field_chars < 0:
            raise ValueError(f"max_field_chars must not be negative, got {max_field_chars}")
        self.redactor = redactor
        self.max_field_chars = max_field_chars or None
        self._cap: int = max_field_chars or (1 << 62)
        self._media = self.max_field_chars is not None
        # Fields shorter than this cannot hold a secret, a data URL or too many
        # characters: most tool arguments and results skip the guard entirely.
        short = self._cap + 1
        if redactor is not None:
            short = min(short, redactor.min_len)
        if self._media:
            short = min(short, _MIN_DATA_URL)
        self._short = max(short, 1)
        # screen(text) is False when the guard surely leaves a text field as it
        # is (it fits, holds no ";" of a data URL and none of the redactor's
        # screen terms); screen_args the same for tool-call arguments, where a
        # JSON escape could also hide a secret. Hot paths call them first.
        self.screen, self.screen_args = _screens(redactor, self._cap, self._media)
        #: Redactions so far, by kind (read it with ``dict(guard.counts)``).
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    # -- public ---------------------------------------------------------------------

    def message(self, msg: dict[str, Any]) -> dict[str, Any]:
        """*msg*, or a redacted / capped copy of it."""
        # Written out per field (no loop, no helper call on the way in): this
        # runs for every message and most have nothing to change.
        short = self._short
        value = msg.get("content")
        if type(value) is str and len(value) < short and "reasoningContent" not in msg:
            # The common record: short content, no reasoning, short or no
            # tool-call arguments. Nothing to scan.
            calls = msg.get("toolCalls")
            if not calls:
                return msg
            if type(calls) is list and len(calls) == 1:
                try:
                    args = calls[0]["function"]["arguments"]
                    if type(args) is str and len(args) < short:
                        return msg
                except (KeyError, TypeError):
                    pass
        out = msg
        if isinstance(value, str) and len(value) >= short:
            try:
                work = self.screen(value)
            except Exception:
                work = True  # _field fails closed and reports it
            if work:
                new = self._field(value)
                if new is not value:
                    out = dict(msg)
                    out["content"] = new
        if "reasoningContent" not in msg and "toolCalls" not in msg:
            return out
        value = msg.get("reasoningContent")
        if isinstance(value, str) and len(value) >= short:
            new = self._field(value)
            if new is not value:
                if out is msg:
                    out = dict(msg)
                out["reasoningContent"] = new
        calls = msg.get("toolCalls")
        if calls and isinstance(calls, list) and not self._all_short(calls, short):
            new_calls = self._tool_calls(calls)
            if new_calls is not calls:
                if out is msg:
                    out = dict(msg)
                out["toolCalls"] = new_calls
        return out

    def header(self, header: dict[str, Any]) -> dict[str, Any]:
        """*header* with secrets redacted in its metadata values (not ``type``/``id``/``harness``)."""
        if self.redactor is None:
            return header
        out = header
        for key, value in header.items():
            if key in _HEADER_FIXED:
                continue
            try:
                # Judged by what will be written: an object's JSON form (or
                # repr), nested anywhere in the value, can hold a secret too.
                plain = value if isinstance(value, str) else orjson.loads(dumps(value))
                counts: dict[str, int] = {}
                new = self._redact_value(plain, 0, counts)
                changed = new is not plain
                self._count(counts)
            except Exception as exc:
                internal_error(exc, "redacting session header")
                new, changed = FAILED, True
            if changed:
                if out is header:
                    out = dict(header)
                out[key] = new
        return out

    def text(self, text: str) -> str:
        """One free-text field through media placeholders, redaction and the cap."""
        return self._field(text)

    def arguments(self, raw: str) -> str:
        """Tool-call ``arguments`` JSON text through redaction and the cap; stays valid JSON."""
        counts: dict[str, int] = {}
        try:
            out = self._arguments(raw, counts)
        except Exception as exc:
            internal_error(exc, "redacting tool-call arguments")
            return '{"_truncated": "' + FAILED + '"}'
        self._count(counts)
        return out

    # -- fields ---------------------------------------------------------------------

    # Helpers below add what they redact to a *counts* dict; the public entry
    # points add it to :attr:`counts` once, when the field is done.

    def _field(self, value: str) -> str:
        # Fast lane for a field that fits, holds no data URL and no secret:
        # one scan, no allocation. Anything found takes the full path below.
        try:
            if len(value) <= self._cap and not (self._media and ";" in value and ";base64," in value):
                redactor = self.redactor
                if redactor is None or not redactor.find(value):
                    return value
        except Exception:
            pass
        counts: dict[str, int] = {}
        try:
            out = self._text(value, self._cap, counts)
        except Exception as exc:
            internal_error(exc, "redacting a message field")
            return FAILED
        self._count(counts)
        return out

    def _text(self, text: str, cap: int, counts: dict[str, int]) -> str:
        if self._media and ";" in text and ";base64," in text:
            text = scrub_data_urls(text)
        if len(text) > cap:
            return self._cut(text, cap, counts)
        redactor = self.redactor
        if redactor is None:
            return text
        spans = redactor.find(text)
        if not spans:
            return text
        new, found = apply(text, spans)
        _add(counts, found)
        return new

    def _cut(self, text: str, keep: int, counts: dict[str, int]) -> str:
        """*text* cut to *keep* characters plus a marker, with no secret (or part of one) kept."""
        keep = max(keep, 0)
        if self.redactor is None:
            return text if len(text) <= keep else text[:keep] + truncation_marker(len(text) - keep)
        window = text[: keep + MAX_SECRET_CHARS]
        pieces: list[str] = []
        pos = 0
        for kind, start, end in self.redactor.find(window):
            if start >= keep:
                break
            pieces.append(window[pos:start])
            pieces.append(marker(kind))
            counts[kind] = counts.get(kind, 0) + 1
            pos = end
        if pos < keep:
            pieces.append(window[pos:keep])
            pos = keep
        if pos < len(text):
            pieces.append(truncation_marker(len(text) - pos))
        return "".join(pieces)

    @staticmethod
    def _all_short(calls: list[Any], short: int) -> bool:
        """Whether every call's arguments are too short to need the guard."""
        try:
            for call in calls:
                args = call["function"]["arguments"]
                if type(args) is not str or len(args) >= short:
                    return False
        except (KeyError, TypeError):
            return False
        return True

    def _tool_calls(self, calls: list[Any]) -> list[Any]:
        out = calls
        for i, call in enumerate(calls):
            if not isinstance(call, dict):
                continue
            fn = call.get("function")
            if not isinstance(fn, dict):
                continue
            args = fn.get("arguments")
            if not isinstance(args, str) or len(args) < self._short:
                continue
            new = self.arguments(args)
            if new is args:
                continue
            if out is calls:
                out = list(calls)
            out[i] = {**call, "function": {**fn, "arguments": new}}
        return out

    # -- arguments ------------------------------------------------------------------

    def _arguments(self, raw: str, counts: dict[str, int]) -> str:
        too_long = len(raw) > self._cap
        redactor = self.redactor
        media = self._media and has_data_url(raw)
        if not too_long and not media:
            if redactor is None:
                return raw
            if not redactor.find(raw):
                # The raw scan sees everything unless an escape (\u0073k-...,
                # a\/b in a base64 token, "\"" in a literal) splits a secret.
                if "\\" not in raw:
                    return raw
                if not (redactor.escapes_matter or "\\u" in raw or "\\/" in raw):
                    return raw
        try:
            value = _loads_exact(raw)
        except (ValueError, RecursionError):
            return self._bad_json(raw, counts)
        original = value
        if media:
            value = scrub_media(value)
        allowed = self._cap
        if too_long:
            leaves: list[tuple[int, Any, Any]] = []
            holder = [value]
            string_leaves(holder, leaves)
            for container, key, budget in plan_cuts(leaves, len(raw) - self._cap):
                cut = self._cut(container[key], fit(container[key], budget), counts)
                container[key] = cut
                allowed += len(cut) - budget  # the marker, and any redaction marker
            value = holder[0]
        if redactor is not None:
            value = self._redact_value(value, 0, counts)
        if value is original and not too_long:
            # Nothing to change: keep the caller's text (and its formatting).
            return raw
        text = dumps(value).decode("utf-8")
        if too_long and len(text) > allowed + 16:
            # Cutting strings was not enough (long keys, a huge array of
            # numbers); the text is redacted already.
            return self._wrap(text, {})
        return text

    def _bad_json(self, raw: str, counts: dict[str, int]) -> str:
        """Arguments that are not JSON: treated as text; wrapped when cut so the result is JSON."""
        if len(raw) > self._cap:
            return self._wrap(raw, counts)
        return self._text(raw, self._cap, counts)

    def _wrap(self, text: str, counts: dict[str, int]) -> str:
        keep = self._cap
        while True:
            found: dict[str, int] = {}
            out = dumps({"_truncated": self._cut(text, keep, found)}).decode("utf-8")
            over = len(out) - self._cap - len(truncation_marker(len(text))) - 20
            # Escaping can make the JSON longer than the text: trim and retry.
            if over <= 0 or keep == 0:
                _add(counts, found)
                return out
            keep = max(0, keep - over)

    def _redact_value(self, value: Any, depth: int, counts: dict[str, int]) -> Any:
        """Decoded JSON *value* with secrets redacted in strings and keys (copy-on-write)."""
        redactor = self.redactor
        assert redactor is not None
        if isinstance(value, str):
            spans = redactor.find(value)
            if not spans:
                return value
            new, found = apply(value, spans)
            _add(counts, found)
            return new
        if depth > 500:
            return value
        if isinstance(value, list):
            out_list: list[Any] | None = None
            for i, item in enumerate(value):
                new_item = self._redact_value(item, depth + 1, counts)
                if new_item is not item:
                    if out_list is None:
                        out_list = list(value)
                    out_list[i] = new_item
            return value if out_list is None else out_list
        if isinstance(value, dict):
            changed = False
            pairs: list[tuple[Any, Any]] = []
            for k, item in value.items():
                new_k = self._redact_value(k, depth + 1, counts) if isinstance(k, str) else k
                new_item = self._redact_value(item, depth + 1, counts)
                changed = changed or new_k is not k or new_item is not item
                pairs.append((new_k, new_item))
            return dict(pairs) if changed else value
        return value

    def _count(self, counts: dict[str, int]) -> None:
        if not counts:
            return
        with self._lock:
            for kind, n in counts.items():
                self.counts[kind] = self.counts.get(kind, 0) + n


@functools.lru_cache(maxsize=32)
def _screens(redactor: Redactor | None, cap: int, media: bool) -> tuple[Callable[[str], bool], Callable[[str], bool]]:
    """(screen, screen_args) for a guard; cached, as sessions share the default redactor."""
    base: tuple[str, ...] = (";",) if media else ()
    found = redactor.screen_terms() if redactor is not None else ()
    terms = None if found is None else base + found
    args_terms = terms if terms is None or redactor is None else terms + ("\\",)
    return _make_screen(terms, cap), _make_screen(args_terms, cap)


@functools.lru_cache(maxsize=32)
def _make_screen(terms: tuple[str, ...] | None, cap: int) -> Callable[[str], bool]:
    """``screen(text)``: whether *text* is longer than *cap* or holds one of *terms*.

    Generated as one ``or`` chain of ``in`` tests (terms passed as default
    arguments, never as source text): each is a memchr-speed C scan, and the
    chain costs one Python call, several times less than a regex character
    class on text longer than a few dozen characters. Cached: sessions that
    share the default redactor share its screens (compiling one costs
    tens of microseconds, too much for every ``Session()``).
    """
    if terms is None:
        return _always
    names = [f"_t{i}" for i in range(len(terms))]
    params = "".join(f", {n}={n}" for n in names)
    tests = "".join(f" or {n} in text" for n in names)
    namespace: dict[str, Any] = dict(zip(names, terms))
    exec(f"def screen(text{params}):\n    return len(text) > {int(cap)}{tests}\n", namespace)
    screen: Callable[[str], bool] = namespace["screen"]
    return screen


def _always(text: str) -> bool:
    return True


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for kind, n in counts.items():
        into[kind] = into.get(kind, 0) + n


_Fragment = getattr(orjson, "Fragment", None)


def _loads_exact(raw: str) -> Any:
    """Decode JSON keeping numbers exactly as written (re-encoding must not change them)."""
    if _Fragment is None:  # orjson < 3.9
        return json.loads(raw, parse_constant=_no_constant)
    return json.loads(raw, parse_int=_number, parse_float=_number, parse_constant=_no_constant)


def _number(text: str) -> Any:
    assert _Fragment is not None
    return _Fragment(text.encode("ascii"))


def _no_constant(name: str) -> None:
    # NaN / Infinity are not JSON; they are written as null.
    return None


def _env_off() -> bool:
    return (getenv("STSTRACE_REDACT") or "").strip().lower() in ("0", "false", "no", "off")


def make_guard(redact: bool | Redactor, max_field_chars: int | None = 1_000_000) -> MessageGuard | None:
    """The guard for a session's ``redact=`` and ``max_field_chars=`` arguments.

    ``redact=True`` (default) uses a default :class:`Redactor`; ``False`` turns
    redaction off; a :class:`Redactor` is used as given. ``STSTRACE_REDACT=0``
    in the environment turns redaction off unless a :class:`Redactor` instance
    is passed (code that builds one clearly wants it). Returns ``None`` only
    when redaction is off and there is no cap.
    """
    redactor: Redactor | None
    if isinstance(redact, Redactor):
        redactor = redact
    elif redact is True:
        # Shared, and rebuilt only when the environment changed: see default_redactor.
        redactor = None if _env_off() else default_redactor()
    elif redact is False or redact is None:
        redactor = None
    else:
        raise ValueError(f"redact must be True, False or a Redactor, got {redact!r}")
    if redactor is None and not max_field_chars:
        return None
    return MessageGuard(redactor, max_field_chars)
