"""Secret detection and redaction.

Two detectors, both cheap on text without secrets:

1. **Literal secrets**: values of environment variables whose names look
   secret (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``,
   ``*_ACCESS_KEY*``, ...; at least 8 characters), read once when the
   :class:`Redactor` is created, plus literals the user passes.
2. **Token shapes**: OpenAI, Anthropic, Hugging Face, GitHub, AWS access key
   ids, Google API keys, Slack, Stripe, JWTs, PEM private-key blocks, the token
   of ``Authorization: Bearer``, plus user regexes.

Speed: a shape is only tried where its *anchor* occurs. Anchors are grouped by
a character the group needs: ``-`` (``sk-``, ``xox?-``, ``-----BEGIN``), ``_``
(``hf_``, ``gh?_``, ``github_pat_``, ``sk_live_``), ``K``/``S``/``z``
(``AKIA``, ``ASIA``, ``AIza``), ``J`` (``eyJ``), ``B`` (``Bearer``). A
memchr-speed ``in`` test skips a group whose characters are absent; otherwise
one regex whose first item is a single literal character (the fastest loop
``re`` has) lists candidate positions, and the full patterns and validators run
only there. One combined alternation of all patterns was ~10x slower: ``re``
tries every branch at every position. Each pattern has a maximum length, and a
failed candidate lets later ones in the same run be skipped, so even
adversarial text ("sk-sk-sk-...") is scanned in linear time.

False positives matter as much as misses: validators reject kebab-case words
(``sk-this-is-a-slug``), lowercase-only bodies and tokens glued to a preceding
word, so ordinary words, hashes, UUIDs, paths and code pass through untouched.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

Span = tuple[str, int, int]
PatternSpec = Union[str, "re.Pattern[str]", tuple[str, Union[str, "re.Pattern[str]"]]]

#: Literal secrets shorter than this are ignored (too many false hits).
MIN_LITERAL = 8

# A secret longer than this may be cut where a field is truncated; the guard
# scans this much past the cut so no fragment of a secret is kept.
MAX_SECRET_CHARS = 65536

_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_WORD_SPLIT = re.compile(r"[-_.~+/]+")


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# -- validators: (text, start, end) -> is it really a secret? -------------------


def _glued(text: str, start: int) -> bool:
    """True when the match continues a word (``task-...``).

    Not after an escape: URL-encoding (``%3Dsk-``) or a JSON escape in raw JSON
    text (``\\nAKIA...``, a newline before the key).
    """
    if start == 0 or text[start - 1] not in _ALNUM:
        return False
    if start >= 2 and text[start - 2] == "\\":
        return False
    return not (start >= 3 and text[start - 3] == "%")


def _wordy(body: str) -> bool:
    """Kebab/snake-case words (``this-is-a-slug``) rather than random characters."""
    parts = [p for p in _WORD_SPLIT.split(body) if p]
    return len(parts) >= 2 and all(p.isalpha() and len(p) <= 12 for p in parts)


def _classes(body: str) -> int:
    upper = lower = digit = False
    for c in body:
        if "a" <= c <= "z":
            lower = True
        elif "A" <= c <= "Z":
            upper = True
        elif "0" <= c <= "9":
            digit = True
    return upper + lower + digit


def _random(body: str) -> bool:
    return _classes(body) >= 2 and not _wordy(body)


def _v_openai(text: str, start: int, end: int) -> bool:
    body = text[start + 3 : end]
    if body.startswith(("proj-", "svcacct-", "admin-")):
        return not _wordy(body.split("-", 1)[1])
    # Bare "sk-" is a common word ending ("task-", "risk-"): stricter checks.
    if _glued(text, start):
        return False
    return any(c.isupper() for c in body) and any(c.islower() for c in body) and not _wordy(body)


def _v_anthropic(text: str, start: int, end: int) -> bool:
    return not _wordy(text[start + 7 : end])


def _v_mixed(skip: int) -> Callable[[str, int, int], bool]:
    def check(text: str, start: int, end: int) -> bool:
        return _random(text[start + skip : end])

    return check


def _v_hf(text: str, start: int, end: int) -> bool:
    body = text[start + 3 : end]
    return any(c.isupper() for c in body) and any(c.islower() for c in body)


def _v_boundary(text: str, start: int, end: int) -> bool:
    return not _glued(text, start)


def _v_slack(text: str, start: int, end: int) -> bool:
    return any(c.isdigit() for c in text[start:end])


def _v_bearer(text: str, start: int, end: int) -> bool:
    token = text[start:end]
    if _wordy(token):
        return False
    return any(c.isdigit() for c in token) or (
        any(c.isupper() for c in token) and any(c.islower() for c in token)
    )


@dataclass(frozen=True)
class _Rule:
    kind: str
    rx: re.Pattern[str]  # matched at a candidate start with rx.match(text, pos)
    validate: Callable[[str, int, int], bool] | None = None
    group: str | None = None  # only this group is the secret (the token after "Bearer")
    # When the pattern does not match at a candidate, later candidates in the
    # same run of token characters cannot either, unless they start within
    # the last N characters of the run (the longest match): those before are
    # skipped. This keeps adversarial text ("sk-sk-sk-...") linear.
    skip: tuple[re.Pattern[str], int] | None = None


def _r(
    kind: str,
    pattern: str,
    validate: Callable[[str, int, int], bool] | None = None,
    group: str | None = None,
    skip: tuple[str, int] | None = None,
) -> _Rule:
    return _Rule(kind, re.compile(pattern), validate, group, (re.compile(skip[0]), skip[1]) if skip else None)


_TOK = r"[A-Za-z0-9_\-]"
_PEM_HEAD = r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_BODY = r"[\sA-Za-z0-9+/=:,.\\\-]"
_PEM_END = r"-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"

# Token bodies have an upper length and must end there: a long run of token
# characters (a base64url blob) is not a key, and each candidate costs at most
# that many characters of matching.
_ANTHROPIC = _r("anthropic_key", rf"sk-ant-{_TOK}{{20,500}}(?!{_TOK})", _v_anthropic, skip=(rf"{_TOK}*", 507))
_OPENAI = _r("openai_key", rf"sk-{_TOK}{{20,500}}(?!{_TOK})", _v_openai, skip=(rf"{_TOK}*", 503))
_SLACK = _r(
    "slack_token", r"xox[abposr]-[A-Za-z0-9\-]{10,300}(?![A-Za-z0-9\-])", _v_slack, skip=(r"[A-Za-z0-9\-]*", 305)
)
# A key block without its END line (cut, or pasted in part) is redacted to
# the end of its base64 body rather than left half-visible.
_PEM = _r("private_key", rf"{_PEM_HEAD}{_PEM_BODY}*?(?:{_PEM_END}|(?!{_PEM_BODY}))")
_HF = _r("hf_token", r"hf_[A-Za-z0-9]{30,100}(?![A-Za-z0-9])", _v_hf)
_GITHUB = _r("github_token", r"gh[pousr]_[A-Za-z0-9]{36,255}(?![A-Za-z0-9])", _v_mixed(4))
_GITHUB_PAT = _r(
    "github_token", r"github_pat_[A-Za-z0-9_]{22,255}(?![A-Za-z0-9_])", _v_mixed(11), skip=(r"[A-Za-z0-9_]*", 266)
)
_STRIPE = _r("stripe_key", r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,255}(?![A-Za-z0-9])", _v_mixed(8))
_AWS = _r("aws_access_key", r"A(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])", _v_boundary)
_GOOGLE = _r("google_api_key", r"AIza[A-Za-z0-9_\-]{35}(?![A-Za-z0-9_\-])")
# If a JWT does not start at one "eyJ", it cannot start at a later one in the
# same run of token characters (same run end, same requirements after it), so
# the rest of the run is skipped: base64 of JSON holds many "eyJ".
_JWT = _r("jwt", rf"eyJ{_TOK}{{8,}}\.ey{_TOK}{{8,}}\.{_TOK}*", _v_boundary, skip=(rf"{_TOK}*", 0))
# "Bearer" as RFC 6750 writes it (or all caps): a lowercase "bearer" has no
# rare character to gate on, and would cost a full scan of every text.
_BEARER = _r("bearer_token", r"(?:Bearer|BEARER)[ \t]+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)", _v_bearer, "secret")


@dataclass(frozen=True)
class _Group:
    gate: tuple[str, ...]  # the group is skipped unless one of these is in the text
    anchor: re.Pattern[str]
    # anchor group name -> (offset from anchor position back to the match start, rules)
    branches: Mapping[str, tuple[int, tuple[_Rule, ...]]]


_GROUPS: tuple[_Group, ...] = (
    _Group(
        ("-",),
        re.compile(r"-(?:(?<=sk-)(?P<sk>)|(?<=xox[abposr]-)(?P<xox>)|(?=----BEGIN)(?P<pem>))"),
        {"sk": (2, (_ANTHROPIC, _OPENAI)), "xox": (4, (_SLACK,)), "pem": (0, (_PEM,))},
    ),
    _Group(
        ("_",),
        re.compile(
            r"_(?:(?<=hf_)(?P<hf>)|(?<=gh[pousr]_)(?P<gh>)|(?<=github_)(?=pat_)(?P<pat>)"
            r"|(?<=[sr]k_)(?=live_|test_)(?P<stripe>))"
        ),
        {"hf": (2, (_HF,)), "gh": (3, (_GITHUB,)), "pat": (6, (_GITHUB_PAT,)), "stripe": (2, (_STRIPE,))},
    ),
    _Group(
        ("K", "S", "z"),
        re.compile(r"A(?:(?=[KS]IA)(?P<aws>)|(?=Iza)(?P<google>))"),
        {"aws": (0, (_AWS,)), "google": (0, (_GOOGLE,))},
    ),
    _Group(("J",), re.compile(r"J(?<=eyJ)(?P<jwt>)"), {"jwt": (2, (_JWT,))}),
    _Group(("B",), re.compile(r"B(?:earer|EARER)[ \t](?P<bearer>)"), {"bearer": (0, (_BEARER,))}),
)



def _any_gate(text: str) -> bool:
    """Whether any group's gate character occurs: one memchr per character,
    several times faster than a regex character class (and than a per-group
    loop), and most text has none of them."""
    return (
        "-" in text or "_" in text or "B" in text or "J" in text or "K" in text or "S" in text or "z" in text
    )


# _any_gate spells the gates out for speed; keep it in step with _GROUPS.
assert {g for grp in _GROUPS for g in grp.gate} == set("-_BJKSz")

def _leading_literal(rx: re.Pattern[str]) -> str | None:
    """The character every match of *rx* starts with, if its pattern says so
    plainly: a letter, digit, ``-`` or ``_`` first, no quantifier on it, no
    case folding, and no ``|`` outside parentheses (``a|b`` need not start with a)."""
    p = rx.pattern
    if not p or rx.flags & (re.IGNORECASE | re.VERBOSE) or not (p[0].isalnum() or p[0] in "-_"):
        return None
    if p[1:2] in ("?", "*", "+", "{"):
        return None
    depth = 0
    i = 0
    while i < len(p):
        c = p[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # a class: skip to its closing bracket ("[]" or "[^]" start it literally)
            i += 2 if p[i + 1 : i + 2] in ("]", "^") else 1
            if p[i - 1] == "^" and p[i : i + 1] == "]":
                i += 1
            while i < len(p) and p[i] != "]":
                i += 2 if p[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            return None
        i += 1
    return p[0]


#: Characters of which one occurs in any text the built-in shapes find
#: something in: per group, the first character of its anchor (every
#: candidate is an anchor match) when there is one, else the group's gates.
#: One term per group keeps the screens of hot paths short.
def _screen_gates() -> tuple[str, ...]:
    terms: list[str] = []
    for grp in _GROUPS:
        lead = _leading_literal(grp.anchor)
        terms.extend((lead,) if lead is not None else grp.gate)
    return tuple(dict.fromkeys(terms))


GATES: tuple[str, ...] = _screen_gates()

#: Every built-in kind, for documentation and tests.
KINDS: tuple[str, ...] = tuple(
    dict.fromkeys(rule.kind for g in _GROUPS for _, rules in g.branches.values() for rule in rules)
)

# Shortest text any built-in shape can match ("xoxb-" + 10).
_MIN_SHAPE = 15

# -- environment literals -----------------------------------------------------------

_SECRET_WORDS = frozenset({"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "PASSPHRASE"})
_KEY_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"), ("AUTH", "TOKEN")})
# Names that end like these hold where a secret is, not the secret itself.
_NOT_SECRET_SUFFIXES = frozenset({"PATH", "FILE", "DIR", "URL", "HOST", "PORT", "NAME", "USER", "TYPE"})


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable's *name* says its value is a secret."""
    parts = [p for p in re.split(r"[^A-Z0-9]+", name.upper()) if p]
    if not parts or parts[-1] in _NOT_SECRET_SUFFIXES:
        return False
    if any(p in _SECRET_WORDS for p in parts):
        return True
    return any(pair in _KEY_PAIRS for pair in zip(parts, parts[1:]))


def _is_existing_path(value: str) -> bool:
    if not value.startswith(("/", "~", ".")) and os.sep not in value:
        return False
    try:
        return os.path.exists(os.path.expanduser(value))
    except (OSError, ValueError):
        return False


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking environment variables, at least :data:`MIN_LITERAL` long."""
    env = os.environ if environ is None else environ
    out: list[str] = []
    for name, value in env.items():
        if len(value) < MIN_LITERAL or value.strip() != value or not is_secret_env_name(name):
            continue
        if _is_existing_path(value):
            continue  # e.g. SOME_TOKEN=/run/secrets/token: the path is not the secret
        out.append(value)
    return out


# -- the redactor ------------------------------------------------------------------


class Redactor:
    """Finds secrets in text and replaces each with ``[REDACTED:<kind>]``.

    ``literals`` are exact strings (kind ``"literal"``); ``patterns`` are regexes,
    bare (kind ``"custom"``) or ``(kind, regex)`` pairs; ``env`` adds the values
    of secret-looking environment variables as they are *now* (kind ``"env"``);
    ``builtin`` enables the known token shapes. Instances are immutable and
    safe to share between threads.
    """

    __slots__ = ("_literals", "_custom", "_builtin", "_min_len", "escapes_matter")

    def __init__(
        self,
        *,
        literals: Iterable[str] = (),
        patterns: Iterable[PatternSpec] = (),
        env: bool = True,
        builtin: bool = True,
    ) -> None:
        self._builtin = builtin
        custom: list[tuple[str, re.Pattern[str]]] = []
        for spec in patterns:
            if isinstance(spec, tuple):
                kind, rx = spec
            else:
                kind, rx = "custom", spec
            if not isinstance(kind, str) or not kind:
                raise ValueError(f"pattern kind must be a non-empty string, got {kind!r}")
            compiled = rx if isinstance(rx, re.Pattern) else re.compile(rx)
            if compiled.search("") is not None:
                raise ValueError(f"pattern {compiled.pattern!r} matches the empty string")
            custom.append((kind, compiled))
        self._custom: tuple[tuple[str, re.Pattern[str]], ...] = tuple(custom)

        lits: dict[str, str] = {}
        for lit in literals:
            if not isinstance(lit, str):
                raise ValueError(f"literals must be strings, got {type(lit).__name__}")
            if lit:
                lits[lit] = "literal"
        if env:
            for value in env_secrets():
                # A value a shape already catches, even glued to other text,
                # costs a scan and gains nothing.
                if value not in lits and not self._shape_covers(value):
                    lits[value] = "env"
        # Longest first: when one literal contains another, the longer one wins.
        self._literals: tuple[tuple[str, str], ...] = tuple(sorted(lits.items(), key=lambda kv: -len(kv[0])))
        min_len = min((len(v) for v in lits), default=1 << 30)
        if custom:
            min_len = 1
        elif builtin:
            min_len = min(min_len, _MIN_SHAPE)
        self._min_len = min_len
        #: Whether JSON escapes other than ``\\u`` and ``\\/`` can hide a secret
        #: from a scan of raw JSON text: a literal with a character JSON escapes,
        #: or any user regex (which may match anything).
        self.escapes_matter: bool = bool(custom) or any(_json_escapes(lit) for lit in lits)

    def _shape_covers(self, value: str) -> bool:
        if not self._builtin:
            return False
        glued = f"x{value}x"
        return any(a <= 1 and b >= len(value) + 1 for _, a, b in _builtin_spans(glued))

    @property
    def min_len(self) -> int:
        """Text shorter than this cannot contain anything :meth:`find` finds."""
        return self._min_len

    @property
    def literal_count(self) -> int:
        return len(self._literals)

    def screen_terms(self) -> tuple[str, ...] | None:
        """Strings of which at least one occurs in every text :meth:`find`
        finds something in; ``None`` when there is no such list (a user regex
        may match anything). Hot paths test ``term in text`` for each (memchr
        speed) and skip :meth:`find` when none occurs: keep this in step with
        :meth:`find` (tests/test_guard_screen.py checks it on every positive
        sample of tests/test_redact.py)."""
        if self._custom:
            return None
        terms = [lit for lit, _ in self._literals]
        if self._builtin:
            terms.extend(GATES)
        return tuple(dict.fromkeys(terms))

    def find(self, text: str) -> list[Span]:
        """Secrets in *text* as ``(kind, start, end)``, sorted and non-overlapping."""
        if len(text) < self._min_len:
            return []
        spans: list[Span] = (
            _builtin_spans(text)
            if self._builtin and len(text) >= _MIN_SHAPE and _any_gate(text)
            else []
        )
        if not self._literals and not self._custom:
            return _merge(spans) if len(spans) > 1 else spans
        for lit, kind in self._literals:
            i = text.find(lit)
            while i >= 0:
                spans.append((kind, i, i + len(lit)))
                i = text.find(lit, i + len(lit))
        for kind, rx in self._custom:
            for m in rx.finditer(text):
                if m.end() > m.start():
                    spans.append((kind, m.start(), m.end()))
        if len(spans) > 1:
            spans = _merge(spans)
        return spans

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        """``(redacted text, {kind: count})``.

        When nothing is found the text returned *is* the argument (test with
        ``is``) and the dict is empty.
        """
        spans = self.find(text)
        if not spans:
            return text, {}
        return apply(text, spans)

    def __repr__(self) -> str:
        return (
            f"Redactor(builtin={self._builtin}, literals={len(self._literals)}, "
            f"patterns={len(self._custom)})"
        )


# -- the shared default redactor ------------------------------------------------------

# (the environment it was built from, the redactor). Replaced whole, never
# mutated, so readers need no lock; two threads that miss at once both build
# one, and either result is right.
_default: tuple[Mapping[Any, Any], Redactor] | None = None


def _environ_now() -> Mapping[Any, Any]:
    # os.environ keeps the encoded environment in a plain dict: comparing that
    # with a copy is one C loop over shared, identical objects (about a
    # microsecond for 100 variables) and decodes nothing.
    data = getattr(os.environ, "_data", None)
    return data if type(data) is dict else os.environ


def default_redactor() -> Redactor:
    """The ``Redactor()`` that sessions with ``redact=True`` share.

    Building one scans the environment (tens to hundreds of microseconds), too
    much for every ``Session()`` when an event loop opens hundreds at once. It
    is rebuilt only when ``os.environ`` differs from the environment it was
    built from, so a key exported later is still picked up by the next session.
    (Whether a path-like value names an existing file, see :func:`env_secrets`,
    is judged when it is built.)
    """
    global _default
    env = _environ_now()
    cached = _default
    try:
        if cached is not None and cached[0] == env:
            return cached[1]
        # The copy is taken before the values are read: a change made while
        # the redactor is built makes the next call build again.
        snapshot: Mapping[Any, Any] = dict(env)
    except Exception:  # an environment mutated under us: build without caching
        return Redactor()
    redactor = Redactor()
    _default = (snapshot, redactor)
    return redactor


def _json_escapes(s: str) -> bool:
    return not s.isascii() or any(c in s for c in '"\\/') or any(ord(c) < 0x20 or c == "\x7f" for c in s)


def apply(text: str, spans: Sequence[Span]) -> tuple[str, dict[str, int]]:
    """Replace sorted, non-overlapping *spans* of *text* by their markers."""
    counts: dict[str, int] = {}
    pieces: list[str] = []
    pos = 0
    for kind, start, end in spans:
        pieces.append(text[pos:start])
        pieces.append(marker(kind))
        counts[kind] = counts.get(kind, 0) + 1
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces), counts


def _merge(spans: list[Span]) -> list[Span]:
    # Earliest start first; at equal starts the longest span wins.
    spans.sort(key=lambda s: (s[1], -s[2]))
    out: list[Span] = [spans[0]]
    for kind, start, end in spans[1:]:
        last_kind, last_start, last_end = out[-1]
        if start < last_end:
            if end > last_end:
                out[-1] = (last_kind, last_start, end)
        else:
            out.append((kind, start, end))
    return out


def _builtin_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    if len(text) < _MIN_SHAPE or not _any_gate(text):
        # One C-level scan rejects most text: no group's gate character occurs.
        return spans
    for group in _GROUPS:
        for g in group.gate:
            if g in text:
                break
        else:
            continue
        done = 0  # candidates inside a span already found are skipped
        skip_until: dict[str, int] = {}  # per branch, after a failed candidate
        for m in group.anchor.finditer(text):
            branch = m.lastgroup
            if branch is None:
                continue
            back, rules = group.branches[branch]
            start = m.start() - back
            if start < done or start < skip_until.get(branch, 0):
                continue
            skip_to = start
            for i, rule in enumerate(rules):
                found = rule.rx.match(text, start)
                if found is not None:
                    a, b = found.span(rule.group) if rule.group else found.span()
                    if rule.validate is None or rule.validate(text, a, b):
                        spans.append((rule.kind, a, b))
                        done = b
                        break
                    end = start  # rejected by its validator: no conclusion about later candidates
                elif rule.skip is not None:
                    run = rule.skip[0].match(text, start)
                    end = (run.end() if run is not None else start) - rule.skip[1]
                else:
                    end = start
                skip_to = end if i == 0 else min(skip_to, end)
            else:
                if skip_to > start:
                    skip_until[branch] = skip_to
    return spans
