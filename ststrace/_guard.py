"""The last stop before a record is encoded: redaction, media placeholders and caps.

:class:`MessageGuard` takes an STS message dict and returns the dict to write.
It never mutates its argument: when something changes it returns a copy that
shares every unchanged part (copy-on-write); when nothing changes it returns
the very same dict, so the common path costs a few scans and no allocation.

Every string that reaches the file goes through it: ``content``,
``reasoningContent``, tool-call ``arguments``, names and ids, ``model``,
``toolCallId``, any other key and value of a message, and the header's keys
and values (``type`` aside). Names and ids repeat, so what each became is
cached per guard.

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
import hashlib
import hmac
import json
import os
import threading
import types
import weakref
from bisect import bisect_right
from typing import Any, Callable

import orjson

from . import _ids
from ._encode import dumps
from ._env import getenv
from ._envwatch import follow, unfollow, watch_environ
from ._errors import internal_error
from ._keyfile import id_key
from ._limits import fit, has_data_url, plan_cuts, scrub_data_urls, scrub_media, string_leaves, truncation_marker
from ._redact import (
    GATES,
    MAX_SECRET_CHARS,
    Redactor,
    Span,
    _merge,
    apply,
    default_redactor,
    marker,
    maybe_secret,
)

FAILED = "[ststrace: field withheld: redaction failed]"

#: Decoded JSON is walked this deep; past it, a subtree that holds a secret is
#: replaced whole (see :meth:`MessageGuard._redact_value`).
MAX_DEPTH = 200

# Roles are checked by the record builders: no need to scan them.
_ROLES = frozenset({"user", "assistant", "system", "tool"})
# Cached names and ids, per session (thousands of sessions may be open): at
# most this many names and models (a run uses a few), this many ids (an id
# is looked up again by its result, a few messages later), each at most this
# long. Ids ststrace made are never cached: they are recognised as they are.
_NAMES_CACHED = 256
_EXTRAS_CACHED = 32
_EXTRA_CACHED_BYTES = 1 << 20
_IDS_CACHED = 64
_CACHED_CHARS = 256

# "data:;base64," and the 16 base64 characters the placeholder pattern needs.
_MIN_DATA_URL = 29

# Session header fields that identify the trace and are never rewritten.
_HEADER_FIXED = frozenset({"type", "id", "harness"})


#: Message fields of numbers only (see _adapters.tokens), not scanned.
_NUMBER_LISTS = frozenset({"tokenIds", "promptTokenIds", "logprobs"})


class MessageGuard:
    """Redaction and size caps for one session; safe to call from several threads.

    *redactor* ``None`` turns redaction off; *max_field_chars* ``None`` or ``0``
    turns the caps (and media placeholders) off.
    """

    __slots__ = (
        "redactor",
        "max_field_chars",
        "counts",
        "_lock",
        "_cap",
        "_media",
        "_short",
        "_clean",
        "_clean_ids",
        "_names",
        "_ids",
        "_extras",
        "screen",
        "_follows_env",
        "__weakref__",
    )

    def __init__(
        self, redactor: Redactor | None, max_field_chars: int | None = 1_000_000, *, follows_env: bool = False
    ) -> None:
        if max_field_chars is not None and (isinstance(max_field_chars, bool) or not isinstance(max_field_chars, int)):
            raise ValueError(f"max_field_chars must be an int or None, got {max_field_chars!r}")
        if max_field_chars is not None and max_field_chars < 0:
            raise ValueError(f"max_field_chars must not be negative, got {max_field_chars}")
        self.max_field_chars = max_field_chars or None
        self._cap: int = max_field_chars or (1 << 62)
        self._media = self.max_field_chars is not None
        #: The shared default redactor, replaced when a secret-looking
        #: environment variable is set later (see _envwatch).
        self._follows_env = follows_env and redactor is not None
        self._use(redactor)
        if self._follows_env:
            follow(self)
        #: Redactions so far, by kind (read it with ``dict(guard.counts)``).
        self.counts: dict[str, int] = {}
        # Reentrant: a signal handler may record while the main thread holds
        # it. Replaced in the child of a fork (see _after_fork_in_child).
        self._lock = threading.RLock()
        _guards.add(self)
        # Model and tool names and ids seen before: they repeat, and each id
        # comes twice (the call, its result). Those with nothing to redact,
        # and what the others became (with what they counted).
        self._clean: set[str] = set()
        self._clean_ids: set[str] = set()
        self._names: dict[str, tuple[str, dict[str, int]]] = {}
        self._ids: dict[str, tuple[str, dict[str, int]]] = {}
        # Extra fields seen before, by their JSON text: a trace's tool schemas
        # repeat, read back from every message that carries them.
        self._extras: dict[bytes, tuple[Any, dict[str, int]]] = {}

    def _use(self, redactor: Redactor | None) -> None:
        # Each attribute is replaced whole: a thread in the middle of a call
        # keeps what it read (the old redactor for at most that one field).
        short = self._cap + 1
        if redactor is not None:
            short = min(short, redactor.min_len)
        if self._media:
            short = min(short, _MIN_DATA_URL)
        # screen(text) is False when the guard surely leaves a field (text or
        # tool-call arguments) as it is: it fits, and holds no ";" of a data
        # URL, none of the redactor's screen terms and no backslash (a JSON
        # escape can hide a secret). Hot paths call it first.
        self.screen = _screen(redactor, self._cap, self._media)
        self._short = max(short, 1)
        self.redactor = redactor

    def stop_following(self) -> None:
        """Its session closed: keep the redactor, no longer take later environment
        secrets (a set then costs nothing once no session is open)."""
        self._follows_env = False
        unfollow(self)

    # -- public ---------------------------------------------------------------------

    def message(self, msg: dict[str, Any]) -> dict[str, Any]:
        """*msg*, or a redacted / capped copy of it.

        Every string that reaches the file is looked at: content, reasoning,
        tool-call arguments, names and ids, ``model``, ``toolCallId``, and any
        other key and value a caller put in the message.
        """
        # Written out for the common record (role, content, timestamp; no
        # loop, no helper call on the way in): it runs for every message.
        short = self._short
        value = msg.get("content")
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
        elif type(value) is not str:
            return self._other_fields(msg, out, True)
        # The usual shapes, by size: {role, content, timestamp} (user, system)
        # and {role, content, model, timestamp} (a reply) with a model name
        # too short to hold anything. Roles and timestamps are checked by the
        # record builders and Session.record(), not scanned.
        n = len(msg)
        if n == 3:
            if "timestamp" in msg and "role" in msg:
                return out
        elif n == 4 and "timestamp" in msg and "role" in msg:
            # A reply with its model, a tool result, a call made by @tool:
            # done when each string was seen clean before (or is too short).
            clean = self._clean
            model = msg.get("model")
            if type(model) is str:
                if len(model) < short or model in clean:
                    return out
            else:
                cid = msg.get("toolCallId")
                if type(cid) is str:
                    if len(cid) < short or cid in self._clean_ids or _own_id(cid):
                        return out
                else:
                    calls = msg.get("toolCalls")
                    if type(calls) is list and len(calls) == 1 and type(calls[0]) is dict:
                        call = calls[0]
                        if self._clean_call(call, short):
                            return out
                        new_call = self._tool_call(call)
                        if new_call is not call:
                            if out is msg:
                                out = dict(msg)
                            out["toolCalls"] = [new_call]
                        return out
        return self._other_fields(msg, out, False)

    def _clean_call(self, call: Any, short: int) -> bool:
        """Whether *call* is ``{id, function: {name, arguments}}`` with nothing to look at."""
        if type(call) is not dict or len(call) != 2:
            return False
        fn = call.get("function")
        cid = call.get("id")
        if type(fn) is not dict or len(fn) != 2 or type(cid) is not str:
            return False
        name = fn.get("name")
        args = fn.get("arguments")
        return (
            type(args) is str
            and len(args) < short
            and type(name) is str
            and (len(name) < short or name in self._clean)
            and (len(cid) < short or cid in self._clean_ids or _own_id(cid))
        )

    def _other_fields(self, msg: dict[str, Any], out: dict[str, Any], with_content: bool) -> dict[str, Any]:
        """Every field of *msg* but a string ``content`` (done by :meth:`message`)."""
        extra: dict[Any, Any] | None = None
        for key, value in msg.items():
            if key == "content" and not with_content:
                continue
            if key == "timestamp" and type(value) is int:
                continue
            if key == "role" and type(value) is str and value in _ROLES:
                continue
            if key == "toolCalls" and isinstance(value, list):
                new: Any = self._tool_calls(value) if value else value
            elif key == "toolCallId" and type(value) is str:
                new = self._ident(value)
            elif key in ("model", "content", "reasoningContent") and isinstance(value, str):
                new = self._name(value) if key == "model" else self._field(value)
            elif key in _NUMBER_LISTS and type(value) is list and all(type(v) in (int, float) for v in value):
                continue  # token ids and logprobs: numbers hold no secret, and can be 100k long
            else:
                if extra is None:
                    extra = {}
                extra[key] = value
                continue
            if new is not value:
                if out is msg:
                    out = dict(msg)
                out[key] = new
        if extra is not None:
            out = self._extra_fields(out, extra)
        return out

    def _extra_fields(self, out: dict[str, Any], extra: dict[Any, Any]) -> dict[str, Any]:
        """Keys and values nobody named (``s.record({..., "usage": ...})``), judged by their JSON form."""
        if self.redactor is None:
            return out
        counts: dict[str, int] = {}
        try:
            raw = dumps(extra)
            # Token usage, tool schemas: their JSON text passes the screen in
            # most messages, and then nothing in it can need redaction.
            if not self.screen(raw.decode("utf-8", "replace")):
                return out
            hit = self._extras.get(raw)
            if hit is None:
                plain = orjson.loads(raw)
                redacted = self._redact_value(plain, 0, counts)
                hit = (None if redacted is plain else redacted, counts)
                if len(raw) <= _EXTRA_CACHED_BYTES:
                    if len(self._extras) >= _EXTRAS_CACHED:
                        self._extras.clear()  # a plain bound, as for names
                    self._extras[raw] = hit
            new, found = hit
        except Exception as exc:
            internal_error(exc, "redacting message fields")
            new = {k: FAILED for k in map(str, extra)}
        else:
            self._count(found)
            if new is None:
                return out
        # Rebuilt in the message's key order; the redacted fields take the
        # place of the originals.
        rebuilt: dict[str, Any] = {}
        for key, value in out.items():
            if key not in extra:
                rebuilt[key] = value
        rebuilt.update(new)
        return rebuilt

    def plain(self, value: Any) -> Any:
        """Plain JSON *value* (tool definitions) with secrets redacted, judged
        like a message field nobody named."""
        return self._extra_fields({}, {"value": value}).get("value", value)

    def header(self, header: dict[str, Any]) -> dict[str, Any]:
        """*header* with secrets redacted in its keys and values (``type`` is kept).

        ``id`` and ``harness`` are redacted like tool-call ids: the same text
        always gives the same, distinct result. So are a sub-agent's links
        (``parentSessionId``, ``parentToolCallId``): redacted as plain text they
        would no longer match the parent's (redacted) session id and call id.
        """
        if self.redactor is None:
            return header
        out: dict[str, Any] = {}
        changed = False
        counts: dict[str, int] = {}
        for key, value in header.items():
            try:
                if key == "type":
                    new_key, new = key, value
                elif key in _HEADER_IDS and isinstance(value, str):
                    new_key, new = key, self._ident(value)
                else:
                    new_key = self._redact_value(key, 0, counts)
                    # Judged by what will be written: an object's JSON form (or
                    # repr), nested anywhere in the value, can hold a secret too.
                    plain = value if isinstance(value, str) else orjson.loads(dumps(value))
                    new = self._redact_value(plain, 0, counts)
                    if new is plain:
                        new = value
            except Exception as exc:
                internal_error(exc, "redacting session header")
                new_key, new = (key if key in _HEADER_FIXED else FAILED), FAILED
            changed = changed or new_key is not key or new is not value
            out[_free_key(out, new_key) if new_key is not key else new_key] = new
        self._count(counts)
        return out if changed else header

    def ident(self, text: str) -> str:
        """A session or tool-call id as the file holds it (see :meth:`_ident`)."""
        if self.redactor is None:
            return text
        return self._ident(text)

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

    def _tool_calls(self, calls: list[Any]) -> list[Any]:
        out = calls
        for i, call in enumerate(calls):
            new = self._tool_call(call) if isinstance(call, dict) else call
            if new is not call:
                if out is calls:
                    out = list(calls)
                out[i] = new
        return out

    def _tool_call(self, call: dict[str, Any]) -> dict[str, Any]:
        cid = call.get("id")
        fn = call.get("function")
        if len(call) == 2 and type(cid) is str and type(fn) is dict and len(fn) == 2:
            # The shape the record builders make: {id, function: {name, arguments}}.
            name = fn.get("name")
            args = fn.get("arguments")
            if type(name) is str and type(args) is str:
                new_id = self._ident(cid)
                new_name = self._name(name)
                new_args = self.arguments(args) if len(args) >= self._short else args
                if new_id is cid and new_name is name and new_args is args:
                    return call
                out = dict(call)
                out["id"] = new_id
                out["function"] = new_fn = dict(fn)
                new_fn["name"] = new_name
                new_fn["arguments"] = new_args
                return out
        pairs: list[tuple[Any, Any]] = []
        for key, value in call.items():
            if key == "id" and type(value) is str:
                pairs.append((key, self._ident(value)))
            elif key == "function" and isinstance(value, dict):
                pairs.append((key, self._function(value)))
            else:
                pairs.append(self._plain(key, value))
        return _rebuilt(call, pairs)

    def _function(self, fn: dict[str, Any]) -> dict[str, Any]:
        pairs: list[tuple[Any, Any]] = []
        for key, value in fn.items():
            if key == "arguments" and isinstance(value, str):
                pairs.append((key, self.arguments(value) if len(value) >= self._short else value))
            elif key == "name" and type(value) is str:
                pairs.append((key, self._name(value)))
            else:
                pairs.append(self._plain(key, value))
        return _rebuilt(fn, pairs)

    def _plain(self, key: Any, value: Any) -> tuple[Any, Any]:
        """``(key, value)`` of a field nobody named, redacted through the value's JSON form."""
        if self.redactor is None:
            return key, value
        counts: dict[str, int] = {}
        try:
            plain = value if isinstance(value, str) else orjson.loads(dumps(value))
            new = self._redact_value(plain, 0, counts)
            new_key = self._redact_value(key, 0, counts) if isinstance(key, str) else key
        except Exception as exc:
            internal_error(exc, "redacting a tool call")
            return key, FAILED
        self._count(counts)
        return new_key, (value if new is plain else new)

    # -- short names and ids ------------------------------------------------------------

    def _name(self, text: str) -> str:
        """A model or tool name: the same few come again and again, so results are cached."""
        if len(text) < self._short or text in self._clean:
            return text
        hit = self._names.get(text)
        if hit is None:
            new, counts = self._scan(text)
            if new is text:
                _remember(self._clean, text, _NAMES_CACHED)
                return text
            hit = (new, counts)
            _remember(self._names, text, _NAMES_CACHED, hit)
        if hit[1]:
            self._count(hit[1])
        return hit[0]

    def _ident(self, text: str) -> str:
        """A tool-call or session id: redacted so that the same id always gives the
        same result and two ids never give the same one (a call and its result
        still pair up): a keyed digest of the original follows the markers."""
        if len(text) < self._short or text in self._clean_ids or _own_id(text):
            return text
        hit = self._ids.get(text)
        if hit is None:
            new, counts = self._scan(text)
            if new is text:
                _remember(self._clean_ids, text, _IDS_CACHED)  # its result comes next
                return text
            digest = hmac.new(id_key(), text.encode("utf-8", "surrogatepass"), hashlib.blake2s).hexdigest()
            hit = (f"{new}~{digest[:12]}", counts)
            _remember(self._ids, text, _IDS_CACHED, hit)
        if hit[1]:
            self._count(hit[1])
        return hit[0]

    def _scan(self, text: str) -> tuple[str, dict[str, int]]:
        counts: dict[str, int] = {}
        try:
            return self._text(text, self._cap, counts), counts
        except Exception as exc:
            internal_error(exc, "redacting a message field")
            return FAILED, {}

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
        """Decoded JSON *value* with secrets redacted in strings and keys (copy-on-write).

        A secret split over several strings (a key given as a list of its
        lines) is found in the strings joined by newlines, as a reader (and
        the upload scan) sees them; each string it touches loses its part.
        Past :data:`MAX_DEPTH` levels it fails closed: a subtree that holds a
        secret anywhere is replaced whole by ``[REDACTED:too_deep]``.
        """
        if depth == 0 and isinstance(value, (list, dict)):
            forced = self._split_secrets(value, counts)
            if forced:
                return self._walk(value, 0, counts, forced)
        return self._walk(value, depth, counts, None)

    def _split_secrets(self, value: Any, counts: dict[str, int]) -> dict[int, str]:
        """What each string (by identity) becomes when a secret spans several strings of *value*."""
        redactor = self.redactor
        assert redactor is not None
        strings = _strings_in_order(value, MAX_DEPTH)
        if len(strings) < 2:
            return {}
        starts: list[int] = []
        pos = 0
        for text in strings:
            starts.append(pos)
            pos += len(text) + 1
        joined = "\n".join(strings)
        spans = redactor.find(joined)
        if not spans:
            return {}
        pieces: dict[int, list[Span]] = {}
        for kind, a, b in spans:
            first = bisect_right(starts, a) - 1
            last = bisect_right(starts, b - 1) - 1
            if first == last:
                continue  # inside one string: the walk finds it there
            counts[kind] = counts.get(kind, 0) + 1
            for i in range(first, last + 1):
                lo = max(a - starts[i], 0)
                hi = min(b - starts[i], len(strings[i]))
                if hi > lo:
                    pieces.setdefault(i, []).append((kind, lo, hi))
        forced: dict[int, str] = {}
        for i, found in pieces.items():
            # The same string object may occur twice: both lose the part.
            forced[id(strings[i])] = apply(strings[i], _merge(found) if len(found) > 1 else found)[0]
        return forced

    def _walk(self, value: Any, depth: int, counts: dict[str, int], forced: dict[int, str] | None) -> Any:
        redactor = self.redactor
        assert redactor is not None
        if isinstance(value, str):
            base = forced.get(id(value), value) if forced else value
            spans = redactor.find(base)
            if not spans:
                return base
            new, found = apply(base, spans)
            _add(counts, found)
            return new
        if depth > MAX_DEPTH:
            if isinstance(value, (list, dict)) and _holds_secret(redactor, value):
                counts["too_deep"] = counts.get("too_deep", 0) + 1
                return marker("too_deep")
            return value
        if isinstance(value, list):
            out_list: list[Any] | None = None
            for i, item in enumerate(value):
                new_item = self._walk(item, depth + 1, counts, forced)
                if new_item is not item:
                    if out_list is None:
                        out_list = list(value)
                    out_list[i] = new_item
            return value if out_list is None else out_list
        if isinstance(value, dict):
            changed = False
            pairs: list[tuple[Any, Any]] = []
            for k, item in value.items():
                new_k = self._walk(k, depth + 1, counts, forced) if isinstance(k, str) else k
                new_item = self._walk(item, depth + 1, counts, forced)
                changed = changed or new_k is not k or new_item is not item
                pairs.append((new_k, new_item))
            if not changed:
                return value
            out: dict[Any, Any] = {}
            for (k, _), (new_k, new_item) in zip(value.items(), pairs):
                # Two keys redacted alike must not overwrite each other.
                out[_free_key(out, new_k) if new_k is not k else new_k] = new_item
            return out
        return value

    def _count(self, counts: dict[str, int]) -> None:
        if not counts:
            return
        with self._lock:
            for kind, n in counts.items():
                self.counts[kind] = self.counts.get(kind, 0) + n


#: Header fields redacted as ids (see MessageGuard.header).
_HEADER_IDS = frozenset({"id", "harness", "parentSessionId", "parentToolCallId"})


def _holds_secret(redactor: Redactor, value: Any) -> bool:
    """Whether the strings (keys and values) of a decoded JSON *value*, at any
    depth, hold a secret, alone or joined by newlines. Iterative: no depth is too deep."""
    return bool(redactor.find("\n".join(_strings_in_order(value, None))))


def _strings_in_order(value: Any, max_depth: int | None) -> list[str]:
    """The strings of decoded JSON *value* as a reader meets them (each key before
    its value), down to *max_depth* levels below it (``None``: all). Iterative."""
    out: list[str] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif max_depth is not None and depth > max_depth:
            continue
        elif isinstance(item, dict):
            for k, v in reversed(item.items()):
                stack.append((v, depth + 1))
                if isinstance(k, str):
                    stack.append((k, depth + 1))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in reversed(item))
    return out


def _rebuilt(original: dict[Any, Any], pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """*original* if no pair changed (same objects), else a dict of *pairs* in order."""
    if all(k is ok and v is ov for (k, v), (ok, ov) in zip(pairs, original.items())):
        return original
    out: dict[Any, Any] = {}
    for (k, v), ok in zip(pairs, original):
        out[_free_key(out, k) if k is not ok else k] = v
    return out


def _free_key(taken: dict[Any, Any], key: Any) -> Any:
    """*key*, or *key* with a ``#N`` suffix when a redacted key already took its name."""
    if key not in taken:
        return key
    n = 2
    while f"{key}#{n}" in taken:
        n += 1
    return f"{key}#{n}"


def _remember(cache: Any, text: str, limit: int, hit: tuple[str, dict[str, int]] | None = None) -> None:
    """Add *text* to a set (*hit* None) or a dict of results, emptied when it reaches *limit*."""
    if len(text) > _CACHED_CHARS:
        return
    if len(cache) >= limit:
        cache.clear()  # a plain bound: the names that matter come back at once
    if hit is None:
        cache.add(text)
    else:
        cache[text] = hit


def _own_id(text: str) -> bool:
    """A tool-call id ststrace made (``call_<process prefix><counter>``): nothing to redact in it."""
    return text.startswith("call_") and text[5:17] == _ids._prefix and len(text) <= 40


@functools.lru_cache(maxsize=32)
def _screen(redactor: Redactor | None, cap: int, media: bool) -> Callable[[str], bool]:
    """A guard's screen; cached, as sessions share the default redactor."""
    if redactor is None:
        return _make_screen((), cap, media, False, False)
    literals = redactor.screen_literals()
    if literals is None:  # a user regex may match anything
        return _always
    # Redactor.find also looks behind JSON escapes (a "\\u0067hp_..." in any
    # field reads as a token once decoded), so a backslash always needs a look.
    return _make_screen(literals, cap, media, True, redactor.builtin)


@functools.lru_cache(maxsize=32)
def _make_screen(
    terms: tuple[str, ...], cap: int, media: bool, escapes: bool, shapes: bool
) -> Callable[[str], bool]:
    """``screen(text)``: whether *text* is longer than *cap*, holds one of
    *terms*, a data URL (*media*), a backslash (*escapes*) or, per
    :data:`~ststrace._redact.maybe_secret`, a built-in shape (*shapes*).

    Generated as one ``or`` chain (terms passed as default arguments, never
    as source text): each ``in`` test is a memchr-speed C scan, and the chain
    costs one Python call. The built-in shapes come last: ordinary text holds
    every single character their anchors start with, so they take a few
    scans (see maybe_secret), not an ``in`` test. Cached: sessions that share
    the default redactor share its screens (compiling one costs tens of
    microseconds, too much for every ``Session()``).
    """
    # The code depends only on how many terms there are and on the flags:
    # compiled once per shape, each new list of terms is one function object
    # (a microsecond; an environment secret set later makes a new list, see
    # _envwatch.environ_set).
    template = _screen_code(len(terms), int(cap), media, escapes, shapes)
    screen: Callable[[str], bool] = types.FunctionType(
        template.__code__, template.__globals__, "screen", (*terms, maybe_secret)
    )
    return screen


@functools.lru_cache(maxsize=64)
def _screen_code(n: int, cap: int, media: bool, escapes: bool, shapes: bool) -> Callable[..., bool]:
    names = [f"_t{i}" for i in range(n)]
    params = "".join(f", {name}=None" for name in names) + ", _maybe=None"
    tests = "".join(f" or {name} in text" for name in names)
    if media:
        tests += ' or (";" in text and ";base64," in text)'
    if escapes:
        tests += r' or "\\" in text'
    if shapes:
        # Text with none of the gate characters (most prose) holds no shape:
        # memchr tests, as before, and no call.
        gates = " or ".join(f"{g!r} in text" for g in GATES)
        tests += f" or (({gates}) and _maybe(text))"
    namespace: dict[str, Any] = {}
    exec(f"def screen(text{params}):\n    return len(text) > {cap}{tests}\n", namespace)
    template: Callable[..., bool] = namespace["screen"]
    return template


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
    follows = redact is True and redactor is not None
    if follows:
        watch_environ()
    return MessageGuard(redactor, max_field_chars, follows_env=follows)


# Every guard, so the child of a fork gets fresh locks: a thread counting a
# redaction at the moment of fork() would leave the child's copy held forever.
_guards: weakref.WeakSet[MessageGuard] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for guard in list(_guards):
        guard._lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
