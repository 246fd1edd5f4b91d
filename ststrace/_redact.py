"""Secret detection and redaction.

Two detectors, both cheap on text without secrets:

1. **Literal secrets**: values of environment variables whose names look
   secret (``*_API_KEY``, ``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``,
   ``PGPASSWORD``, ``DATABASE_URL``, ...; at least 8 characters once
   stripped), read once when the :class:`Redactor` is created, plus literals
   the user passes.
2. **Token shapes**: OpenAI, Anthropic, Hugging Face, GitHub, AWS access key
   ids and secret access keys (next to their name), Google API keys, Slack,
   Stripe, JWTs, PEM private-key blocks (BEGIN to END across any separators),
   the token of ``Authorization: Bearer``, the password of a URL, plus user
   regexes.

Both are also looked for behind JSON escapes, at any depth (``\\u0067hp_...``
in arguments that were ``json.dumps``-ed twice): the text is unescaped round
by round and what is found is mapped back onto the escaped text.

Speed: a shape is only tried where its *anchor* occurs. Anchors are grouped by
a character the group needs: ``-`` (``sk-``, ``xox?-``, ``xapp-``,
``-----BEGIN``), ``_`` (``hf_``, ``gh?_``, ``github_pat_``, ``sk_live_``,
``secret_access_key``), ``K``/``S``/``z`` (``AKIA``, ``ASIA``, ``AIza``,
``SecretAccessKey``), ``J`` (``eyJ``), ``B`` (``Bearer``), ``@`` (``://``). A
memchr-speed ``in`` test skips a group whose characters are absent (a test for
a longer string is no memchr: about 1 ns a character, as slow as a regex scan);
otherwise one regex whose first item is a single literal character (the
fastest loop ``re`` has) lists candidate positions, and the full patterns and
validators run only there. One combined alternation of all patterns was ~10x
slower: ``re`` tries every branch at every position. Each pattern has a
maximum length, and a failed candidate lets later ones in the same run be
skipped, so even adversarial text ("sk-sk-sk-...") is scanned in linear time.

False positives matter as much as misses: validators reject kebab-case words
(``sk-this-is-a-slug``), lowercase-only bodies, tokens glued to a preceding
word and placeholders (``user:password@``, ``${DB_PASSWORD}``), so ordinary
words, hashes, UUIDs, paths and code pass through untouched.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_left
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


# Compiling every pattern at import cost more than the rest of ``import
# ststrace``: a group's anchor and rules are compiled when a text first holds
# one of its gate characters (see _Group.compile).
_NOT_YET: re.Pattern[str] = re.compile("(?!)")


@dataclass
class _Rule:
    kind: str
    pattern: str
    validate: Callable[[str, int, int], bool] | None = None
    group: str | None = None  # only this group is the secret (the token after "Bearer")
    # When the pattern does not match at a candidate, later candidates in the
    # same run of token characters cannot either, unless they start within
    # the last N characters of the run (the longest match): those before are
    # skipped. This keeps adversarial text ("sk-sk-sk-...") linear.
    skip_pattern: tuple[str, int] | None = None
    rx: re.Pattern[str] = _NOT_YET  # matched at a candidate start with rx.match(text, pos)
    skip: tuple[re.Pattern[str], int] | None = None

    def compile(self) -> None:
        if self.rx is _NOT_YET:
            if self.skip_pattern is not None:
                self.skip = (re.compile(self.skip_pattern[0]), self.skip_pattern[1])
            self.rx = re.compile(self.pattern)


def _r(
    kind: str,
    pattern: str,
    validate: Callable[[str, int, int], bool] | None = None,
    group: str | None = None,
    skip: tuple[str, int] | None = None,
) -> _Rule:
    return _Rule(kind, pattern, validate, group, skip)


_TOK = r"[A-Za-z0-9_\-]"
_PEM_HEAD = re.compile(r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----")
# A key's END line is looked for this far after its BEGIN line (a 16384-bit
# RSA key is about 12 KB of PEM; its lines may be quoted, escaped or listed).
_PEM_WINDOW = 65536
# Without an END line (a key cut, or pasted in part): the body is redacted to
# its end, lines joined by any short run of other characters (a newline, a
# "\\n" escape, "', '" of a list repr, "> " of a quoted block; never "-", so
# the next "-----BEGIN" is left alone). Body lines are long; the last one may
# be short. Legacy encrypted keys have header lines.
_PEM_SEP = r"(?:\\+[nrt]|[^A-Za-z0-9+/=\-]){1,12}"  # "\\n" is one separator, not a "n" line
_PEM_OPEN_BODY = re.compile(
    rf"(?:{_PEM_SEP}(?:[A-Za-z0-9+/]{{40,}}={{0,2}}|[A-Z][A-Za-z\-]{{2,30}}:[ \t]*[A-Za-z0-9,\-]{{1,200}}))*"
)
# The short last line, told from the word after a cut key by its padding or its mix of characters.
_PEM_LAST = re.compile(rf"{_PEM_SEP}(?P<last>[A-Za-z0-9+/]{{1,39}}={{0,2}})(?![A-Za-z0-9+/=])")


def _match_pem(text: str, start: int, ends: list[int]) -> tuple[int, int] | None:
    """The key block at *start*: to its END line when one follows within
    :data:`_PEM_WINDOW`, whatever separates its lines; else to the end of its body.

    *ends* caches the next ``-----END`` position at or after ``ends[0]``'s
    query point across the candidates of one text (``[-2]``: not looked yet),
    so a text of many BEGIN lines and no END is still scanned in linear time.
    """
    head = _PEM_HEAD.match(text, start)
    if head is None:
        return None
    pos = head.end()
    limit = pos + _PEM_WINDOW
    while True:
        nxt = ends[0]
        if nxt == -2 or (nxt != -1 and nxt < pos):
            nxt = ends[0] = text.find("-----END", pos)
        if nxt == -1 or nxt > limit:
            break
        end_line = _PEM_END.match(text, nxt)
        if end_line is not None:
            return start, end_line.end()
        pos = nxt + 1  # "-----END CERTIFICATE-----" and the like: look further
    body = _PEM_OPEN_BODY.match(text, head.end())
    stop = body.end() if body is not None else head.end()
    last = _PEM_LAST.match(text, stop)
    if last is not None:
        line = last.group("last")
        if line.endswith("=") or _classes(line) >= 2:
            stop = last.end()
    return start, stop


# A secret access key is 40 characters of base64 with nothing of its own to
# recognise it by: it is only found right after its name.
_AWS_SEP = r"""(?:[\s"'\\]{0,8}[:=][\s"'\\]{0,8}|[\s"'\\]{1,8})"""
_AWS_VALUE = r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"

# The word documents and code comments put where a password goes
# ("redis://:password@host"). Any other word is redacted, "pass" included:
# it may well be the password.
_URL_PLACEHOLDERS = frozenset({"password", "passwd", "mypassword", "yourpassword", "your_password", "your-password"})


def _v_url_password(text: str, start: int, end: int) -> bool:
    pw = text[start:end]
    # A reference or a template, not a password: ${DB_PASSWORD}, $PW, {pw},
    # %(password)s, a marker already written.
    if pw.startswith(("[REDACTED", "{", "%(", "$")) or pw.lower() in _URL_PLACEHOLDERS:
        return False
    # "****", "xxxx", "...": placeholders a document writes for a password.
    return pw.strip("*xX.") != ""

# Token bodies have an upper length and must end there: a long run of token
# characters (a base64url blob) is not a key, and each candidate costs at most
# that many characters of matching.
_ANTHROPIC = _r("anthropic_key", rf"sk-ant-{_TOK}{{20,500}}(?!{_TOK})", _v_anthropic, skip=(rf"{_TOK}*", 507))
_OPENAI = _r("openai_key", rf"sk-{_TOK}{{20,500}}(?!{_TOK})", _v_openai, skip=(rf"{_TOK}*", 503))
# xoxb/xoxp/... tokens, refresh tokens ("xoxe-1-...") and app-level tokens
# ("xapp-1-..."); a rotating token ("xoxe.xoxp-1-...") is caught at its "xoxp-".
# Browser-session tokens ("xoxc-...") and the "d" cookie ("xoxd-...", URL-encoded: "%2F").
_SLACK = _r(
    "slack_token",
    r"x(?:ox[abposrecd]|app)-[A-Za-z0-9\-%]{10,300}(?![A-Za-z0-9\-%])",
    _v_slack,
    skip=(r"[A-Za-z0-9\-%]*", 305),
)
# Matched by _match_pem (BEGIN to END across any separators), not by a regex.
_PEM = _r("private_key", r"-----BEGIN")
_HF = _r("hf_token", r"hf_[A-Za-z0-9]{30,100}(?![A-Za-z0-9])", _v_hf)
_GITHUB = _r("github_token", r"gh[pousr]_[A-Za-z0-9]{36,255}(?![A-Za-z0-9])", _v_mixed(4))
_GITHUB_PAT = _r(
    "github_token", r"github_pat_[A-Za-z0-9_]{22,255}(?![A-Za-z0-9_])", _v_mixed(11), skip=(r"[A-Za-z0-9_]*", 266)
)
_STRIPE = _r("stripe_key", r"[sr]k_(?:live|test|prod)_[A-Za-z0-9]{16,255}(?![A-Za-z0-9])", _v_mixed(8))
_AWS = _r("aws_access_key", r"A(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])", _v_boundary)
_GOOGLE = _r("google_api_key", r"AIza[A-Za-z0-9_\-]{35}(?![A-Za-z0-9_\-])")
# If a JWT does not start at one "eyJ", it cannot start at a later one in the
# same run of token characters (same run end, same requirements after it), so
# the rest of the run is skipped: base64 of JSON holds many "eyJ".
_JWT = _r("jwt", rf"eyJ{_TOK}{{8,}}\.ey{_TOK}{{8,}}\.{_TOK}*", _v_boundary, skip=(rf"{_TOK}*", 0))
# "Bearer" as RFC 6750 writes it (or all caps): a lowercase "bearer" has no
# rare character to gate on, and would cost a full scan of every text.
# The space may be a tab, a "\\t" escape (JSON text of tool arguments, at any
# depth) or "%20" (a URL-encoded header).
_BEARER_SEP = r"(?:[ \t]|\\+t|%20)"
_BEARER = _r(
    "bearer_token", rf"(?:Bearer|BEARER){_BEARER_SEP}+(?P<secret>[A-Za-z0-9\-._~+/%]{{16,}}=*)", _v_bearer, "secret"
)
_AWS_SECRET = _r(
    "aws_secret_key",
    rf"(?:[Ss]ecret_(?:[Aa]ccess)_(?:[Kk]ey)|SECRET_ACCESS_KEY){_AWS_SEP}{_AWS_VALUE}",
    _v_mixed(0),
    "secret",
)
_AWS_SECRET_CAMEL = _r("aws_secret_key", rf"[Ss]ecretAccessKey{_AWS_SEP}{_AWS_VALUE}", _v_mixed(0), "secret")
# scheme://user:password@host: only the password goes. It may hold "@" and
# ":" (people do not always encode them): up to the last "@" before the host.
_URL_PASSWORD = _r(
    "url_password",
    r"://[^\s:/?#@\[\]\"'<>\\]{0,256}:(?P<secret>[^\s/?#\"'<>\\]{1,256})@(?=[A-Za-z0-9\[])",
    _v_url_password,
    "secret",
)



# -- the prefix table: tokens that start with a literal their vendor chose ----------
#
# One row per token shape: (kind, the literal prefixes, the regex from the
# start of the token, a validator). Most come from gitleaks' default rules
# (config/gitleaks.toml; the rule ids are in _GITLEAKS). Each prefix holds a
# "-" or a "_": a row joins the anchor of that character's group (one
# lookbehind on the prefix, tried only where that character is), so the rows
# cost no scan of their own. The body after the prefix must be random
# (two character classes, not a kebab/snake-case phrase) and must not
# continue a word: "my-npm_helper_for_tests" is not a token.


def _v_token(skip: int, classes: int = 2) -> Callable[[str, int, int], bool]:
    def check(text: str, start: int, end: int) -> bool:
        body = text[start + skip : end]
        return not _glued(text, start) and _classes(body) >= classes and not _wordy(body)

    return check


def _v_hex(skip: int) -> Callable[[str, int, int], bool]:
    """A hex body: digits and letters both (a run of one digit or a word is no key)."""

    def check(text: str, start: int, end: int) -> bool:
        body = text[start + skip : end]
        return not _glued(text, start) and any(c.isdigit() for c in body) and any(c.isalpha() for c in body)

    return check


_A = "A-Za-z0-9"
_END = r"(?![A-Za-z0-9_\-])"
# (kind, prefixes, regex, validator, gitleaks rule ids)
_PREFIX_ROWS: tuple[tuple[str, tuple[str, ...], str, Callable[[str, int, int], bool] | None, str], ...] = (
    # "-" prefixes
    ("gitlab_token", ("glpat-", "gldt-", "glft-", "glrt-", "glptt-", "glimt-", "glsoat-", "gloas-", "glagent-", "glffct-", "glcbt-"),
     rf"gl(?:pat|dt|ft|rt|ptt|imt|soat|oas|agent|ffct|cbt)-[{_A}_\-.]{{20,300}}{_END}", _v_token(5),
     "gitlab-pat, gitlab-pat-routable, gitlab-deploy-token, gitlab-feed-token, gitlab-runner-authentication-token, "
     "gitlab-ptt, gitlab-incoming-mail-token, gitlab-scim-token, gitlab-oauth-app-secret, "
     "gitlab-kubernetes-agent-token, gitlab-feature-flag-client-token, gitlab-cicd-job-token"),
    ("pypi_token", ("pypi-",), r"pypi-AgEIcHlwaS5vcmc[\w\-]{50,1000}(?![\w\-])", None, "pypi-upload-token"),
    ("xai_key", ("xai-",), rf"xai-[{_A}]{{70,100}}(?![{_A}])", _v_token(4), "xAI (not in gitleaks)"),
    ("perplexity_key", ("pplx-",), rf"pplx-[{_A}]{{48}}(?![{_A}])", _v_token(5), "perplexity-api-key"),
    ("onepassword_key", ("A3-",), r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}(?![A-Za-z0-9])",
     _v_hex(3), "1password-secret-key"),
    ("adobe_secret", ("p8e-",), rf"p8e-[{_A}]{{32}}(?![{_A}])", _v_token(4), "adobe-client-secret"),
    ("age_secret_key", ("AGE-",), r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", None, "age-secret-key"),
    ("aws_bedrock_key", ("bedrock-",), r"bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=]{0,2000}", None,
     "aws-amazon-bedrock-api-key-short-lived"),
    ("cloudflare_origin_ca_key", ("v1.0-",), r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}(?![a-f0-9])", None, "cloudflare-origin-ca-key"),
    ("frameio_token", ("fio-u-",), rf"fio-u-[{_A}\-_=]{{64}}(?![{_A}\-_=])", _v_token(6), "frameio-api-token"),
    ("flutterwave_key", ("FLWSECK_TEST-", "FLWPUBK_TEST-"), r"FLW(?:SEC|PUB)K(?:_TEST)?-[a-hA-H0-9]{12,32}(?:-X)?(?![A-Za-z0-9])",
     _v_hex(8), "flutterwave-secret-key, flutterwave-public-key, flutterwave-encryption-key"),
    ("heroku_key", ("HRKU-",), rf"HRKU-AA[{_A}_\-]{{58}}(?![{_A}_\-])", _v_token(7), "heroku-api-key-v2"),
    ("infracost_token", ("ico-",), rf"ico-[{_A}]{{32}}(?![{_A}])", _v_token(4), "infracost-api-token"),
    ("postman_token", ("PMAK-",), r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}(?![A-Za-z0-9])", _v_hex(5), "postman-api-token"),
    ("pulumi_token", ("pul-",), r"pul-[a-f0-9]{40}(?![A-Za-z0-9])", _v_hex(4), "pulumi-api-token"),
    ("scalingo_token", ("tk-us-",), r"tk-us-[\w\-]{48}(?![\w\-])", _v_token(6), "scalingo-api-token"),
    ("sendinblue_key", ("xkeysib-",), r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}(?![A-Za-z0-9])", _v_hex(8), "sendinblue-api-token"),
    ("octopus_key", ("API-",), r"API-[A-Z0-9]{26}(?![A-Za-z0-9])", _v_hex(4), "octopus-deploy-api-key"),
    ("square_token", ("sq0atp-", "sq0csp-"), r"sq0(?:atp|csp)-[\w\-]{22,60}(?![\w\-])", _v_token(7), "square-access-token, square-secret"),
    # "_" prefixes
    ("npm_token", ("npm_",), rf"npm_[{_A}]{{36}}(?![{_A}])", _v_token(4), "npm-access-token"),
    ("stripe_webhook_secret", ("whsec_",), r"whsec_[A-Za-z0-9+/=]{24,100}(?![A-Za-z0-9+/=])", _v_token(6), "Stripe / Svix (not in gitleaks)"),
    ("groq_key", ("gsk_",), rf"gsk_[{_A}]{{48,60}}(?![{_A}])", _v_token(4), "Groq (not in gitleaks)"),
    ("replicate_token", ("r8_",), rf"r8_[{_A}]{{37}}(?![{_A}])", _v_token(3), "Replicate (not in gitleaks)"),
    ("linear_key", ("lin_api_",), rf"lin_api_[{_A}]{{40}}(?![{_A}])", _v_token(8), "linear-api-key"),
    ("hf_token", ("api_org_",), r"api_org_[A-Za-z]{34}(?![A-Za-z0-9])", _v_hf, "huggingface-organization-api-token"),
    ("shopify_token", ("shpat_", "shpca_", "shppa_", "shpss_"), r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}(?![A-Za-z0-9])", _v_hex(6),
     "shopify-access-token, shopify-custom-access-token, shopify-private-app-access-token, shopify-shared-secret"),
    ("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), r"do[por]_v1_[a-f0-9]{64}(?![A-Za-z0-9])", _v_hex(7),
     "digitalocean-pat, digitalocean-access-token, digitalocean-refresh-token"),
    ("prefect_token", ("pnu_",), rf"pnu_[{_A}]{{36}}(?![{_A}])", _v_token(4), "prefect-api-token"),
    ("onepassword_token", ("ops_",), r"ops_eyJ[a-zA-Z0-9+/]{250,5000}={0,3}", None, "1password-service-account-token"),
    ("clojars_token", ("CLOJARS_",), r"CLOJARS_[a-zA-Z0-9]{60}(?![A-Za-z0-9])", _v_token(8), "clojars-api-token"),
    ("duffel_token", ("duffel_test_", "duffel_live_"), r"duffel_(?:test|live)_[\w\-=]{43}(?![\w\-=])", _v_token(12), "duffel-api-token"),
    ("grafana_token", ("glc_", "glsa_"), r"gl(?:c_[A-Za-z0-9+/]{32,400}={0,3}|sa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})(?![A-Za-z0-9+/=])", _v_token(4),
     "grafana-cloud-api-token, grafana-service-account-token"),
    ("notion_token", ("ntn_",), r"ntn_[0-9]{11}[A-Za-z0-9]{35}(?![A-Za-z0-9])", _v_token(4), "notion-api-token"),
    ("planetscale_token", ("pscale_tkn_", "pscale_oauth_", "pscale_pw_"), r"pscale_(?:tkn|oauth|pw)_[\w=.\-]{32,64}(?![\w=.\-])", _v_token(10),
     "planetscale-api-token, planetscale-oauth-token, planetscale-password"),
    ("readme_token", ("rdme_",), r"rdme_[a-z0-9]{70}(?![A-Za-z0-9])", _v_hex(5), "readme-api-token"),
    ("rubygems_token", ("rubygems_",), r"rubygems_[a-f0-9]{48}(?![A-Za-z0-9])", _v_hex(9), "rubygems-api-token"),
    ("sentry_token", ("sntryu_", "sntrys_"), r"sntry(?:u_[a-f0-9]{64}|s_eyJ[a-zA-Z0-9+/=_]{30,1000})(?![A-Za-z0-9+/=_])", _v_token(7),
     "sentry-user-token, sentry-org-token"),
    ("settlemint_token", ("sm_aat_", "sm_pat_", "sm_sat_"), rf"sm_[aps]at_[{_A}]{{16}}(?![{_A}])", _v_token(7),
     "settlemint-application-access-token, settlemint-personal-access-token, settlemint-service-access-token"),
    ("shippo_token", ("shippo_live_", "shippo_test_"), r"shippo_(?:live|test)_[a-fA-F0-9]{40}(?![A-Za-z0-9])", _v_hex(12), "shippo-api-token"),
    ("sourcegraph_token", ("sgp_",), r"sgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}(?![A-Za-z0-9])", _v_hex(4), "sourcegraph-access-token"),
    ("flyio_token", ("fo1_", "fm2_", "fm1a_", "fm1r_"), r"f(?:o1_[\w\-]{43}|m1[ar]_[a-zA-Z0-9+/]{100,}={0,3}|m2_[a-zA-Z0-9+/]{100,}={0,3})(?![\w+/=\-])",
     _v_token(4), "flyio-access-token"),
    # Agent credentials (issue 31): TruffleHog detects each.
    ("langsmith_key", ("lsv2_pt_", "lsv2_sk_"), r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}(?![A-Za-z0-9])", _v_hex(8),
     "LangSmith (TruffleHog)"),
    ("tavily_key", ("tvly-",), rf"tvly-(?:dev-|prod-)?[{_A}]{{32}}(?![{_A}\-])", _v_token(5), "Tavily (TruffleHog)"),
    ("pinecone_key", ("pcsk_",), r"pcsk_[A-Za-z0-9_]{50,120}(?![A-Za-z0-9_\-])", _v_token(5), "Pinecone (TruffleHog)"),
    ("supabase_token", ("sbp_",), r"sbp_(?:v0_)?[a-f0-9]{40}(?![A-Za-z0-9])", _v_hex(4), "Supabase (TruffleHog)"),
    ("google_oauth_secret", ("GOCSPX-",), r"GOCSPX-[A-Za-z0-9_\-]{28}(?![A-Za-z0-9_\-])", _v_token(7),
     "gcp-oauth-client-secret (TruffleHog)"),
    ("url_token", ("access_token=", "api_key=", "auth_token=", "refresh_token=", "client_secret="),
     # In a query string only ("?" or "&" before it): "api_key=api_key" is a keyword argument.
     r"(?<=[?&;#])(?:access_token|api_key|auth_token|refresh_token|client_secret)=(?P<secret>[^\s&#\"'`<>\\]{8,2048})",
     lambda text, a, b: _v_url_password(text, a, b) and _random(text[a:b]) and "..." not in text[a:b], "(query parameters)"),
)

_TITLES: dict[str, str] = {
    "anthropic_key": "Anthropic API keys (`sk-ant-`)",
    "openai_key": "OpenAI API keys (`sk-`, `sk-proj-`, `sk-svcacct-`, `sk-admin-`)",
    "slack_token": "Slack tokens (`xoxb-`, `xoxp-`, `xoxa-`, `xoxo-`, `xoxs-`, `xoxr-`, `xoxe-`, `xoxc-`, `xoxd-`, `xapp-`)",
    "private_key": "PEM private-key blocks (`-----BEGIN ... PRIVATE KEY-----`), whole or cut",
    "hf_token": "Hugging Face tokens (`hf_`, `api_org_`)",
    "github_token": "GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`)",
    "stripe_key": "Stripe keys (`sk_live_`, `sk_test_`, `sk_prod_`, `rk_...`)",
    "aws_access_key": "AWS access key ids (`AKIA`, `ASIA`)",
    "google_api_key": "Google API keys (`AIza`)",
    "jwt": "JSON Web Tokens (`eyJ...eyJ...`)",
    "bearer_token": "the token of `Bearer` / `Basic` / `Token` authorization (any case after `Authorization:`)",
    "aws_secret_key": "AWS secret access keys next to their name",
    "url_password": "the password of a URL (`scheme://user:password@host`)",
    "gitlab_token": "GitLab tokens (`glpat-`, `gldt-`, `glrt-`, `glptt-`, ... every `gl*-` kind)",
    "pypi_token": "PyPI upload tokens (`pypi-AgEIcHlwaS5vcmc`)",
    "xai_key": "xAI API keys (`xai-`)",
    "perplexity_key": "Perplexity API keys (`pplx-`)",
    "onepassword_key": "1Password secret keys (`A3-`)",
    "onepassword_token": "1Password service-account tokens (`ops_eyJ`)",
    "adobe_secret": "Adobe client secrets (`p8e-`)",
    "age_secret_key": "age secret keys (`AGE-SECRET-KEY-1`)",
    "aws_bedrock_key": "Amazon Bedrock API keys (`bedrock-api-key-`, `ABSK`)",
    "cloudflare_origin_ca_key": "Cloudflare Origin CA keys (`v1.0-`)",
    "frameio_token": "Frame.io tokens (`fio-u-`)",
    "flutterwave_key": "Flutterwave test keys (`FLWSECK_TEST-`, `FLWPUBK_TEST-`)",
    "heroku_key": "Heroku API keys (`HRKU-AA`)",
    "infracost_token": "Infracost tokens (`ico-`)",
    "postman_token": "Postman API keys (`PMAK-`)",
    "pulumi_token": "Pulumi tokens (`pul-`)",
    "scalingo_token": "Scalingo tokens (`tk-us-`)",
    "sendinblue_key": "Brevo (Sendinblue) keys (`xkeysib-`)",
    "octopus_key": "Octopus Deploy keys (`API-`)",
    "square_token": "Square tokens (`sq0atp-`, `sq0csp-`)",
    "npm_token": "npm tokens (`npm_`)",
    "stripe_webhook_secret": "Stripe / Svix webhook secrets (`whsec_`)",
    "groq_key": "Groq API keys (`gsk_`)",
    "replicate_token": "Replicate tokens (`r8_`)",
    "linear_key": "Linear API keys (`lin_api_`)",
    "shopify_token": "Shopify tokens (`shpat_`, `shpca_`, `shppa_`, `shpss_`)",
    "digitalocean_token": "DigitalOcean tokens (`dop_v1_`, `doo_v1_`, `dor_v1_`)",
    "prefect_token": "Prefect API keys (`pnu_`)",
    "clojars_token": "Clojars tokens (`CLOJARS_`)",
    "duffel_token": "Duffel tokens (`duffel_live_`, `duffel_test_`)",
    "grafana_token": "Grafana tokens (`glc_`, `glsa_`)",
    "notion_token": "Notion tokens (`ntn_`)",
    "planetscale_token": "PlanetScale tokens and passwords (`pscale_tkn_`, `pscale_oauth_`, `pscale_pw_`)",
    "readme_token": "ReadMe API keys (`rdme_`)",
    "rubygems_token": "RubyGems API keys (`rubygems_`)",
    "sentry_token": "Sentry tokens (`sntryu_`, `sntrys_`)",
    "settlemint_token": "SettleMint tokens (`sm_aat_`, `sm_pat_`, `sm_sat_`)",
    "shippo_token": "Shippo tokens (`shippo_live_`, `shippo_test_`)",
    "sourcegraph_token": "Sourcegraph tokens (`sgp_`)",
    "flyio_token": "Fly.io tokens (`fo1_`, `fm1a_`, `fm1r_`, `fm2_`)",
    "gitlab_session": "GitLab session cookies (`_gitlab_session=`)",
    "url_token": "credentials in URL query strings (`?access_token=`, `api_key=`, `auth_token=`, `refresh_token=`, `client_secret=`; an `id_token` is a JWT)",
    "sendgrid_key": "SendGrid API keys (`SG.`)",
    "twilio_key": "Twilio API keys (`SK` + 32 hex)",
    "azure_storage_key": "Azure storage account keys (`AccountKey=`)",
    "artifactory_key": "JFrog Artifactory API keys (`AKCp`)",
    "slack_webhook": "Slack incoming-webhook URLs (`hooks.slack.com/services/...`)",
    "google_oauth_token": "Google OAuth access tokens (`ya29.`)",
    "openrouter_key": "OpenRouter API keys (`sk-or-v1-`)",
    "langsmith_key": "LangSmith API keys (`lsv2_pt_`, `lsv2_sk_`)",
    "tavily_key": "Tavily API keys (`tvly-`)",
    "pinecone_key": "Pinecone API keys (`pcsk_`)",
    "supabase_token": "Supabase access tokens (`sbp_`)",
    "google_oauth_secret": "Google OAuth client secrets (`GOCSPX-`)",
    "azure_ad_secret": "Azure AD client secrets (`...8Q~...`)",
    "teams_webhook": "Microsoft Teams webhook URLs (`*.webhook.office.com/webhookb2/...`)",
    "curl_credential": "credentials on a `curl` command line (`-u user:password`, `-H 'X-API-Key: ...'`)",
    "aws_session_token": "AWS session tokens (`IQoJb3JpZ2luX2Vj`)",
    "openshift_token": "OpenShift user tokens (`sha256~`)",
    "discord_webhook": "Discord webhook URLs (`discord.com/api/webhooks/...`, `discordapp.com`)",
    "jdbc_password": "the password of a JDBC URL (`jdbc:...?password=`, `;password=`)",
    "connection_string_password": "the password of an ADO.NET connection string (`Server=...;Password=...`)",
}

#: Token shapes not detected, with why: the README's list of uncovered shapes
#: (between its ``uncovered`` markers) is generated from this table.
UNCOVERED: tuple[tuple[str, str], ...] = (
    ("Alibaba", "`LTAI`"),
    ("Databricks", "`dapi`"),
    ("HashiCorp Vault", "`hvs.`"),
    ("Doppler", "`dp.pt.`"),
    ("Dynatrace", "`dt0c01.`"),
    ("Facebook", "`EAA`"),
    ("42 Intra", "`s-s4t2ud-`"),
    ("AWS", "`ABIA`/`ACCA`/`A3T` key ids"),
    ("Square", "`EAAA`"),
    ("Terraform Cloud", "`<14>.atlasv1.<67>`"),
    ("Harness", "`pat.<22>.<24>.<20>`"),
    ("Discord", "webhook URLs without their `https://`"),
)


def readme_uncovered() -> str:
    """The README's list of shapes not detected (between its ``uncovered`` markers)."""
    return ", ".join(f"{vendor} {shape}" for vendor, shape in UNCOVERED) + "\n"


def _first_anchor(prefix: str) -> tuple[str, int]:
    """The first "-" or "_" of *prefix* and its position."""
    hits = [(prefix.find(c), c) for c in "-_" if c in prefix]
    if not hits:
        raise AssertionError(f"prefix {prefix!r} holds no '-' or '_'")
    i, c = min(hits)
    return c, i


# A prefix row found at an anchor: (text before and at the anchor, text
# after it, offset of the anchor in the prefix, branch name, rule).
_Row = tuple[str, str, int, str, "_Rule"]


def describe() -> list[tuple[str, str]]:
    """``(kind, what it finds)`` for every built-in kind, sorted by what it
    finds: the list of detected secrets in docs/secrets.md is this table."""
    return sorted(((kind, _TITLES[kind]) for kind in KINDS), key=lambda kt: kt[1].lower())


def readme_list() -> str:
    """The list of detected secrets in docs/secrets.md (between its ``detectors`` markers)."""
    return "".join(f"- {title}\n" for _, title in describe())


def _prefix_rules(anchor: str) -> tuple[str, tuple[_Row, ...]]:
    """The anchor-regex alternatives of the prefixes whose first "-" or "_" is
    *anchor* (a lookbehind on the prefix up to it, a lookahead on the rest)
    and the rows they stand for. The alternatives hold no group: the row
    that matched is looked up in Python (only where one did). Each group in
    a pattern costs ``re`` at every candidate, found or not."""
    buckets: dict[str, list[str]] = {}
    rows: list[_Row] = []
    for n, (kind, prefixes, pattern, validate, _src) in enumerate(_PREFIX_ROWS):
        rule = _r(kind, pattern, validate, "secret" if "(?P<secret>" in pattern else None)
        for k, prefix in enumerate(prefixes):
            c, back = _first_anchor(prefix)
            if c != anchor:
                continue
            behind, ahead = prefix[: back + 1], prefix[back + 1 :]
            alt = f"(?<={re.escape(behind)})" + (f"(?={re.escape(ahead)})" if ahead else "")
            if back < 2:
                # The anchor's first tests look at the two characters before it.
                raise AssertionError(f"{prefix!r}: fewer than two characters before its {anchor!r}")
            buckets.setdefault(behind[-2], []).append(alt)
            rows.append((behind, ahead, back, f"p{n}_{k}", rule))
    # Grouped by the character before the anchor: a candidate that passes
    # the group's first tests meets one single-character test per bucket,
    # not every prefix's lookbehind (about 10 ns each).
    out: list[str] = []
    for before, alts in buckets.items():
        joined = "|".join(alts)
        out.append(f"(?<={re.escape(before)}{re.escape(anchor)})(?:{joined})" if len(alts) > 1 else alts[0])
    return "|".join(out), tuple(rows)


def _which_row(rows: tuple[_Row, ...], text: str, pos: int) -> _Row | None:
    """The row whose prefix has its anchor at *pos* of *text*."""
    for row in rows:
        behind, ahead, back = row[0], row[1], row[2]
        # (a negative start would count from the end of the text)
        if pos >= back and text.startswith(behind, pos - back) and text.startswith(ahead, pos + 1):
            return row
    return None


def _before(anchor: str, back: int, extra: str) -> str:
    """The characters found *back* places before *anchor* in the prefix rows
    (plus *extra*, those of the hand-written branches): a cheap first test."""
    chars = {p[i - back] for _, prefixes, *_ in _PREFIX_ROWS for p in prefixes for c, i in [_first_anchor(p)] if c == anchor and i >= back}
    return "".join(re.escape(c) for c in sorted(chars | set(extra)))


# The characters one and two places before the anchor in every prefix: two
# class tests that most "-" and "_" of text and code fail ("top-level",
# "utf-8", "safe_load", "KNOWN_KEYS"), before any prefix is tried.
_LETTERS_BEFORE = {"-": _before("-", 1, "kpbosrecd"), "_": _before("_", 1, "fpousrbktT")}
_LETTERS_BEFORE_2 = {"-": _before("-", 2, "sxp"), "_": _before("_", 2, "hguserEsrt")}
_DASH_ALTS, _DASH_ROWS = _prefix_rules("-")
_SCORE_ALTS, _SCORE_ROWS = _prefix_rules("_")
# What the "-" and "_" groups' anchors look for, as (text up to and with
# the anchor, a class of the character after it or ""), for their filters
# (see _prefix_filter): the rows', and those of the hand-written branches.
# Keep in step with the anchors: tests/redact/test_screen_filters.py checks
# that a filter matches wherever its anchor does, on every sample and on
# the fixtures.
_DASH_PREFIXES: tuple[tuple[str, str], ...] = (
    *((row[0], row[1][:1]) for row in _DASH_ROWS),
    ("sk-", ""),
    ("xapp-", ""),
    *((f"xox{c}-", "") for c in "abposrecd"),
)
_SCORE_PREFIXES: tuple[tuple[str, str], ...] = (
    *((row[0], row[1][:1]) for row in _SCORE_ROWS),
    ("hf_", ""),
    *((f"gh{c}_", "") for c in "pousr"),
    ("github_", "p"),
    *((f"{c}k_", n) for c in "sr" for n in "ltp"),
    ("secret_", "Aa"),
    ("Secret_", "Aa"),
    ("SECRET_", "A"),
)

# Token shapes of other anchors (see _GROUPS).
_GITLAB_SESSION = _r("gitlab_session", r"_gitlab_session=(?P<secret>[0-9a-z]{32})(?![A-Za-z0-9])", None, "secret")
_SENDGRID = _r("sendgrid_key", r"SG\.[\w\-]{22}\.[\w\-]{43}(?![\w\-])", _v_token(3))
_TWILIO = _r("twilio_key", r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])", _v_hex(2))
_AZURE = _r("azure_storage_key", r"AccountKey=(?P<secret>[A-Za-z0-9+/]{86}==)", None, "secret")
_ARTIFACTORY = _r("artifactory_key", r"AKCp[A-Za-z0-9]{69}(?![A-Za-z0-9])", _v_mixed(4))
_BEDROCK = _r("aws_bedrock_key", r"ABSK[A-Za-z0-9+/]{109,269}={0,2}(?![A-Za-z0-9+/=])", _v_mixed(4))
_GOOGLE_OAUTH = _r("google_oauth_token", r"ya29\.[\w\-]{20,2048}(?![\w\-])", _v_token(5))
_BASIC = _r(
    "bearer_token",
    rf"Basic{_BEARER_SEP}+(?P<secret>[A-Za-z0-9+/]{{8,}}={{0,2}})(?![A-Za-z0-9+/=])",
    lambda text, a, b: _basic_pair(text[a:b]),
    "secret",
)
# "authorization: bearer ..." in any case (an HTTP/2 header, a requests dict
# printed), and the other schemes people put there.
_AUTH_HEADER = _r(
    "bearer_token",
    r"""[Aa]uthorization["']?[ \t]*[:=][ \t]*["']?(?:[Bb]earer|BEARER|[Tt]oken|TOKEN|[Bb]asic|BASIC)(?:[ \t]|\\+t|%20)+(?P<secret>[A-Za-z0-9\-._~+/%]{16,}=*)""",
    lambda text, a, b: _v_auth_value(text, a, b),
    "secret",
)


def _v_auth_value(text: str, start: int, end: int) -> bool:
    """A Basic value is base64 of ``user:password``; any other is a random token
    (not ``ya29.google-oauth...``, ``base64_encoded_creds``)."""
    token = text[start:end]
    if "..." in token:
        return False
    if text[max(0, start - 12) : start].lower().rstrip(" \t%20\\").endswith("basic"):
        return _basic_pair(token)
    return _v_bearer(text, start, end)


def _basic_pair(token: str) -> bool:
    """Whether *token* is base64 of ``user:password`` (a word after "Basic" is not)."""
    import base64
    import binascii

    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in raw and all(32 <= c < 127 for c in raw)


def _v_hook(text: str, start: int, end: int) -> bool:
    return "hooks.slack.com/" in text[max(0, start - 80) : start] and _random(text[start:end])


_SLACK_HOOK = _r("slack_webhook", r"B[A-Z0-9]{8,12}/(?P<secret>[A-Za-z0-9]{20,40})(?![A-Za-z0-9])", _v_hook, "secret")


# Its lowercase hex body fails the OpenAI check (mixed case): tried first.
_OPENROUTER = _r("openrouter_key", rf"sk-or-v1-[a-f0-9]{{64}}(?!{_TOK})", _v_hex(9), skip=(rf"{_TOK}*", 73))


def _curl_before(text: str, start: int) -> bool:
    """Whether a ``curl`` command is on the line of *start* (or on a line
    continued with a backslash just before it)."""
    window = text[max(0, start - 400) : start]
    line_start = 0
    for sep in ("\n", "\\n"):
        i = window.rfind(sep)
        while i >= 0 and window[max(0, i - 2) : i].rstrip(" ").endswith("\\"):
            i = window.rfind(sep, 0, max(0, i - 1))
        line_start = max(line_start, i + len(sep) if i >= 0 else 0)
    line = window[line_start:]
    i = line.find("curl")
    return i >= 0 and (i == 0 or not line[i - 1].isalnum()) and line[i + 4 : i + 5] in (" ", "\t", "")


def _v_curl_user(text: str, start: int, end: int) -> bool:
    return _curl_before(text, start) and _v_url_password(text, start, end) and not text[start:end].startswith("<")


def _v_curl_header(text: str, start: int, end: int) -> bool:
    token = text[start:end]
    return _curl_before(text, start) and "..." not in token and not token.startswith("$") and _v_bearer(text, start, end)


def _v_azure_ad(text: str, start: int, end: int) -> bool:
    if start > 0 and (text[start - 1] in _ALNUM or text[start - 1] in "_~."):
        return False
    return _random(text[start + 6 : end])


_CURL_USER = _r(
    "curl_credential",
    r"""-(?:u|-user)(?:=|[ \t]{1,5})["']?[^\s:"'$]{0,128}:(?P<secret>[^\s"']{3,256})""",
    _v_curl_user,
    "secret",
)
_CURL_HEADER = _r(
    "curl_credential",
    r"""-(?:H|-header)(?:=|[ \t]{1,5})["']?(?:[Xx]-(?:[A-Za-z]+-)?)?(?:[Aa][Pp][Ii]-?)?(?:[Kk][Ee][Yy]|[Tt][Oo][Kk][Ee][Nn]):[ \t]{0,5}(?P<secret>[\w=~@.+/\-]{8,512})(?![\w=~@.+/\-])""",
    _v_curl_header,
    "secret",
)
_OPENSHIFT = _r("openshift_token", r"sha256~[\w\-]{43}(?![\w\-])", _v_token(7))
_AWS_SESSION = _r(
    "aws_session_token", r"IQoJb3JpZ2luX2Vj[A-Za-z0-9+/]{100,4000}={0,2}(?![A-Za-z0-9+/=])", _v_boundary,
    skip=(r"[A-Za-z0-9+/=]*", 4018),
)
_AZURE_AD = _r("azure_ad_secret", r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])", _v_azure_ad)
# The whole path after "webhookb2/" is the credential.
_TEAMS_HOOK = _r(
    "teams_webhook",
    r"://[a-z0-9\-]+\.webhook\.office\.com/webhookb2/(?P<secret>[a-z0-9\-]{36}@[a-z0-9\-]{36}/IncomingWebhook/[a-z0-9]{32}/[a-z0-9\-]{36}(?:/[A-Za-z0-9_\-]{10,100})?)",
    lambda text, a, b: _classes(text[a:b]) >= 2,
    "secret",
)


# Discord webhook URLs ("discord.com/api/webhooks/<id>/<token>"): only the
# token is the credential. Anchored on the "/" before the id: "/" is a memchr
# and needs no scan of its own for the host name.
_DISCORD_BEFORE = re.compile(r"://(?:www\.|ptb\.|canary\.)?discord(?:app)?\.com/api/(?:v[0-9]{1,2}/)?webhooks/[0-9]{17,20}/\Z")


def _v_discord(text: str, start: int, end: int) -> bool:
    return _DISCORD_BEFORE.search(text, max(0, start - 80), start) is not None and _random(text[start:end])


_DISCORD_HOOK = _r(
    "discord_webhook", r"/[0-9]{17,20}/(?P<secret>[A-Za-z0-9_\-]{60,80})(?![A-Za-z0-9_\-])", _v_discord, "secret"
)

# "password=" in a JDBC URL and "Password=" in an ADO.NET connection string:
# only the value goes, as of a URL. Both are found at the "=" (a memchr) after
# "assword", and told from a keyword argument ("password=password") by what
# surrounds them: "jdbc:" in the same URL, or the ";"-separated pairs of a
# connection string.
_JDBC_GAP = re.compile(r"[\s\"'`<>]")
# Keys of a connection string, as the lowercased text holds them.
# ("user" stands for "user id=", "user=", "username=".)
_CONN_KEYS = ("user", "server=", "host=", "uid=", "database=", "source=", "catalog=")
_CONN_WINDOW = 100
_JDBC_WINDOW = 512


def _v_password_value(text: str, start: int, end: int) -> bool:
    pw = text[start:end].strip()
    return pw != "" and not pw.startswith("<") and _v_url_password(pw, 0, len(pw))


def _v_jdbc(text: str, start: int, end: int) -> bool:
    # "?password=", "&password=", ";password=" (SQL Server): a parameter of the URL.
    if start < 10 or text[start - 10] not in "?&;":
        return False
    j = text.rfind("jdbc:", max(0, start - _JDBC_WINDOW), start)
    return j >= 0 and _JDBC_GAP.search(text, j, start) is None and _v_password_value(text, start, end)


def _v_adonet(text: str, start: int, end: int) -> bool:
    key = start - 9  # where "Password" starts
    j = key - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    # A pair of a connection string: a ";" before it or, when it comes first, after it.
    if j >= 0 and text[j] == ";":
        pass
    elif not ((j < 0 or text[j] in "\n\"'\\") and text.startswith(";", end)):
        return False
    return _conn_keys_near(text, key, end) and _v_password_value(text, start, end)


def _conn_keys_near(text: str, key: int, end: int) -> bool:
    """Whether a connection string's key (``Server=``, ``Data Source=``, ...)
    is near the password: a bounded look (one lowercasing and a few memchr-speed
    ``in`` tests; a regex alternation here costs ten times more), so text of
    many candidates costs linear time."""
    window = text[max(0, key - _CONN_WINDOW) : end + _CONN_WINDOW].lower()
    for word in _CONN_KEYS:
        if word in window:
            return True
    return False


_JDBC_PASSWORD = _r("jdbc_password", r"=(?P<secret>[^\s&;\"'`<>\\]{1,256})", _v_jdbc, "secret")
_ADONET_PASSWORD = _r("connection_string_password", r"=(?P<secret>[^;\r\n\"'\\]{1,256})", _v_adonet, "secret")


@dataclass
class _Group:
    gate: tuple[str, ...]  # the group is skipped unless one of these is in the text
    source: str  # the anchor's pattern
    # anchor group name -> (offset from anchor position back to the match start, rules)
    branches: Mapping[str, tuple[int, tuple[_Rule, ...]]]
    # The prefix rows behind the anchor group "row" (see _prefix_rules).
    rows: tuple[_Row, ...] = ()
    # When set, the group is also skipped unless one of these words is in the
    # text: its anchor regex (about 1.5 ns a character where its gate is
    # common, "/" in paths, "=" in code) runs only where a word is found,
    # while screens test the gate character alone (a memchr).
    words: tuple[str, ...] = ()
    # What screens test for this group, when not its anchor's first character
    # or its gate (the "=" group's gate is the ";", "?" or "&" a match needs
    # besides: Python code, full of "=", seldom holds any of them).
    screen: tuple[str, ...] = ()
    # A character a match needs besides (a memchr), tested before the gate.
    need: str = ""
    # A cheaper pattern that matches wherever the anchor does (and a little
    # more), searched first: the anchor's alternatives cost every candidate
    # that passes its first test tens of nanoseconds each (see _prefix_filter).
    pre_source: str = ""
    anchor: re.Pattern[str] = _NOT_YET
    pre: re.Pattern[str] | None = None

    def compile(self) -> re.Pattern[str]:
        """The anchor, with the group's rules compiled first (two threads may
        both compile; either result is the same)."""
        if self.anchor is _NOT_YET:
            for _, rules in self.branches.values():
                for rule in rules:
                    rule.compile()
            for row in self.rows:
                row[4].compile()
            if self.pre_source:
                self.pre = re.compile(self.pre_source)
            self.anchor = re.compile(self.source)
        return self.anchor


def _prefix_filter(anchor: str, prefixes: Iterable[tuple[str, str]], first: str = "") -> str:
    """A pattern matching *anchor* wherever a group's anchor can match: where
    one of *prefixes* ends at it (``(text up to and with the anchor, a class
    the next character is in, or "")``), or where *first* (alternatives that
    each start with a literal or a class) matches after it.

    Per candidate: two class tests (the two characters before); for the few
    that pass, one alternation on those two characters whose branches each
    start with a literal (``re`` skips a branch in one comparison), and only
    then the prefixes that end in them. The anchor's own alternatives (one
    lookbehind per prefix) cost about 250 ns for each candidate that passes
    its class tests, and most ``_`` of code (``get_``, ``client_``) do.
    """
    a = re.escape(anchor)
    ends: dict[str, dict[str, dict[str, set[str]]]] = {}  # c2 -> c1 -> behind -> next classes
    for behind, ahead in prefixes:
        if len(behind) < 3 or behind[-1] != anchor:
            raise AssertionError(f"{behind!r}: not two characters and {anchor!r}")
        ends.setdefault(behind[-3], {}).setdefault(behind[-2], {}).setdefault(behind, set()).add(ahead)

    def cls(chars: Iterable[str]) -> str:
        chars = sorted(chars)
        body = "".join(re.escape(c) for c in chars)
        return body if len(chars) == 1 else f"[{body}]"

    def tail(behinds: dict[str, set[str]]) -> str:
        alts = []
        for behind, aheads in sorted(behinds.items()):
            look = "" if len(behind) == 3 else f"(?<={re.escape(behind)})"
            if "" not in aheads:
                look += f"(?={cls(set(''.join(aheads)))})"
            alts.append(look)
        return "" if "" in alts else alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})"

    pairs = "|".join(
        re.escape(c2) + "(?:" + "|".join(re.escape(c1) + a + tail(b) for c1, b in sorted(by.items())) + ")"
        for c2, by in sorted(ends.items())
    )
    c2s = cls(ends)
    c1s = cls({c1 for by in ends.values() for c1 in by})
    pair = f"(?<={c2s}{c1s}{a})(?<=(?:{pairs}))"
    return f"{a}(?:{first}|{pair})" if first else f"{a}{pair}"


# The order breaks ties between shapes found at the same place: a JWT after
# "Authorization: Bearer" is reported as a JWT.
_GROUPS: tuple[_Group, ...] = (
    _Group(
        ("J",),
        r"J(?:(?<=eyJ)(?P<jwt>)|(?<=IQoJ)(?=b3JpZ2luX2Vj)(?P<awssess>))",
        {"jwt": (2, (_JWT,)), "awssess": (3, (_AWS_SESSION,))},
    ),
    # "~" is rare in text and code: Azure AD client secrets ("...8Q~...").
    _Group(
        ("~",),
        r"~(?:(?<=[A-Za-z0-9_~.]{3}[0-9]Q~)(?P<azad>)|(?<=sha256~)(?P<ocp>))",
        {"azad": (5, (_AZURE_AD,)), "ocp": (6, (_OPENSHIFT,))},
    ),
    _Group(
        ("-",),
        # One lookbehind for both Slack prefixes: each alternative costs at every "-".
        (
            # One test of the character before the "-" first: most "-" of
            # text and code (" - ", "->", "--", "2024-") fail it.
            r"-(?:(?=----BEGIN)(?P<pem>)|(?<=[ \t]-)(?=[uH][ \t=]|-user[ \t=]|-header[ \t=])(?P<curl>)"
            r"|(?<=[" + _LETTERS_BEFORE_2["-"] + "][" + _LETTERS_BEFORE["-"] + r"]-)"
            rf"(?:(?<=sk-)(?P<sk>)|(?<=x(?:ox[abposrecd]|app)-)(?P<xox>)|(?:{_DASH_ALTS})(?P<row>)))"
        ),
        {"sk": (2, (_ANTHROPIC, _OPENROUTER, _OPENAI)), "xox": (4, (_SLACK,)), "pem": (0, (_PEM,)), "curl": (0, (_CURL_USER, _CURL_HEADER))},
        _DASH_ROWS,
        pre_source=_prefix_filter("-", _DASH_PREFIXES, r"-(?=---BEGIN)|[uH](?<=[ \t]-[uH])|-(?<=[ \t]--)(?=user|header)"),
    ),
    _Group(
        ("_",),
        (
            # Every anchor's "_" follows one of these characters: most "_" of
            # code (load_config, KNOWN_KEYS) fail this one test.
            rf"_(?<=[{_LETTERS_BEFORE_2['_']}][{_LETTERS_BEFORE['_']}]_)"
            r"(?:(?<=hf_)(?P<hf>)|(?<=gh[pousr]_)(?P<gh>)|(?<=github_)(?=pat_)(?P<pat>)"
            r"|(?<=[sr]k_)(?=live_|test_|prod_)(?P<stripe>)"
            # The lookahead first: it fails at once on almost every "_".
            r"|(?=[Aa](?:ccess_[Kk]ey|CCESS_KEY))(?<=[Ss]ecret_|SECRET_)(?P<awss>)"
            rf"|(?:{_SCORE_ALTS})(?P<row>))"
            # A prefix that starts with "_" has no character before it to test.
            r"|_(?=gitlab_session=)(?P<glsession>)"
        ),
        {
            "hf": (2, (_HF,)),
            "gh": (3, (_GITHUB,)),
            "pat": (6, (_GITHUB_PAT,)),
            "stripe": (2, (_STRIPE,)),
            "awss": (6, (_AWS_SECRET,)),
            "glsession": (0, (_GITLAB_SESSION,)),
        },
        _SCORE_ROWS,
        pre_source=_prefix_filter("_", _SCORE_PREFIXES, "g(?=itlab_session=)"),
    ),
    _Group(
        ("K", "S", "z"),
        (
            r"A(?:(?=[KS]IA)(?P<aws>)|(?=Iza)(?P<google>)|(?<=ecretA)(?=ccessKey)(?P<awscamel>)"
            r"|(?=ccountKey=)(?P<azure>)|(?=KCp)(?P<jfrog>)|(?=BSK)(?P<bedrock>)|(?=uthorization)(?P<auth>))"
        ),
        {
            "aws": (0, (_AWS,)),
            "google": (0, (_GOOGLE,)),
            "awscamel": (6, (_AWS_SECRET_CAMEL,)),
            "azure": (0, (_AZURE,)),
            "jfrog": (0, (_ARTIFACTORY,)),
            "bedrock": (0, (_BEDROCK,)),
            "auth": (0, (_AUTH_HEADER,)),
        },
        # The anchor's seven lookaheads cost every "A" of prose ("API", "An",
        # "AssertionError"); these branches each start with a literal.
        pre_source=r"A(?:K|SIA|Iza|cc|BSK|uthorization)",
    ),
    # "authorization:" in lowercase (HTTP/2, httpx's header dicts): "z" is rare.
    _Group(("z",), r"z(?<=authoriz)(?=ation)(?P<authl>)", {"authl": (7, (_AUTH_HEADER,))}),
    _Group(
        ("B",),
        (
            rf"B(?:(?:earer|EARER){_BEARER_SEP}(?P<bearer>)|(?=asic{_BEARER_SEP})(?P<basic>)"
            r"|(?<=[0-9A-Z]/B)(?=[A-Z0-9]{8,12}/)(?P<hook>))"
        ),
        {"bearer": (0, (_BEARER,)), "basic": (0, (_BASIC,)), "hook": (0, (_SLACK_HOOK,))},
    ),
    _Group(
        ("S",),
        r"S(?:(?=G\.)(?P<sendgrid>)|(?=K[0-9a-fA-F]{32})(?P<twilio>))",
        {"sendgrid": (0, (_SENDGRID,)), "twilio": (0, (_TWILIO,))},
        pre_source=r"S(?:G\.|K[0-9a-fA-F])",
    ),
    _Group(("9",), r"9(?<=ya29)(?=\.)(?P<ya29>)", {"ya29": (3, (_GOOGLE_OAUTH,))}),
    # "@" first (a memchr); then "://" is looked for as a literal.
    _Group(("@",), r"://(?P<url>)", {"url": (0, (_URL_PASSWORD, _TEAMS_HOOK))}),
    # "/" and "=": memchr gates for shapes whose anchors are longer words
    # ("webhooks/", "assword="); a screen's scan for the word itself costs
    # 7-15x more. Past the gate, find() tests the words before the anchor.
    # Only a URL with its scheme ("https://discord.com/..."): paths and
    # commands, full of "/", seldom hold a ":".
    _Group(
        ("/",), r"/(?<=/webhooks/)(?=[0-9])(?P<discord>)", {"discord": (0, (_DISCORD_HOOK,))},
        words=("webhooks/",), need=":",
    ),
    _Group(
        # A JDBC password follows "?", "&" or ";"; a connection string's has a ";".
        (";", "?", "&"),
        # ("PASSWORD=" is rare in connection strings, and would cost code one more scan.)
        r"=(?<=assword=)(?P<pw>)",
        {"pw": (0, (_JDBC_PASSWORD, _ADONET_PASSWORD))},
        words=("assword=",),
        screen=("=",),
        need="=",
    ),
)


def _any_gate(text: str) -> bool:
    """Whether any group's gate character occurs: one memchr per character,
    several times faster than a regex character class (and than a per-group
    loop), and most text has none of them."""
    return (
        "-" in text
        or "_" in text
        or "B" in text
        or "J" in text
        or "K" in text
        or "S" in text
        or "z" in text
        or "9" in text
        or "@" in text
        or "~" in text
        or "/" in text
        or ";" in text
        or "?" in text
        or "&" in text
    )


# _any_gate spells the gates out for speed; keep it in step with _GROUPS.
assert {g for grp in _GROUPS for g in grp.gate} == set("-_BJKSz9@~/;?&")

def _leading_literal(rx: re.Pattern[str]) -> str | None:
    """The character every match of *rx* starts with, if its pattern says so
    plainly: a letter, digit, ``-`` or ``_`` first, no quantifier on it, no
    case folding, and no ``|`` outside parentheses (``a|b`` need not start with a)."""
    return _leading_char(rx.pattern, rx.flags)


def _leading_char(p: str, flags: int) -> str | None:
    """:func:`_leading_literal` of a pattern not compiled yet."""
    if not p or flags & (re.IGNORECASE | re.VERBOSE) or not (p[0].isalnum() or p[0] in "-_"):
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
        lead = _leading_char(grp.source, 0)
        terms.extend(grp.screen or ((lead,) if lead is not None else grp.gate))
    return tuple(dict.fromkeys(terms))


GATES: tuple[str, ...] = _screen_gates()

#: Every built-in kind, for documentation and tests.
KINDS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [rule.kind for g in _GROUPS for _, rules in g.branches.values() for rule in rules]
        + [row[4].kind for g in _GROUPS for row in g.rows]
    )
)

# Shortest text any built-in shape can match ("xoxb-" + 10).
_MIN_SHAPE = 15

# -- environment literals -----------------------------------------------------------

_SECRET_WORDS = frozenset({"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "PASSPHRASE"})
# Glued to a prefix: PGPASSWORD, MYSQLPASSWORD, NPMTOKEN.
_SECRET_ENDINGS = ("PASSWORD", "PASSWD", "PASSPHRASE", "TOKEN", "SECRET")
_KEY_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"), ("AUTH", "TOKEN")})
# Names that end like these hold where a secret is, not the secret itself.
_NOT_SECRET_SUFFIXES = frozenset({"PATH", "FILE", "DIR", "URL", "URI", "HOST", "PORT", "NAME", "USER", "TYPE"})
# ... except a database URL, which holds the password (DATABASE_URL, *_DB_URL).
_DATABASE_WORDS = frozenset({"DATABASE", "DB"})
# *_KEY is a secret unless the name says the key is public.
_PUBLIC_WORDS = frozenset({"PUBLIC", "PUBLISHABLE", "PUB"})


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable's *name* says its value is a secret."""
    parts = [p for p in re.split(r"[^A-Z0-9]+", name.upper()) if p]
    if not parts:
        return False
    last = parts[-1]
    if last in ("URL", "URI") and len(parts) > 1 and parts[-2] in _DATABASE_WORDS:
        return True
    if last in _NOT_SECRET_SUFFIXES:
        return False
    if any(p in _SECRET_WORDS or p.endswith(_SECRET_ENDINGS) for p in parts):
        return True
    if len(parts) > 1 and last in ("KEY", "PWD") and not _PUBLIC_WORDS.intersection(parts):
        return True  # OPENAI_KEY, SIGNING_KEY, MYSQL_PWD (but not PWD, OLDPWD: the directory)
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
        # A value read from a file or pasted often keeps a newline or a space
        # around it; the text the secret shows up in usually does not.
        value = value.strip()
        if len(value) < MIN_LITERAL or not is_secret_env_name(name):
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

    __slots__ = ("_literals", "_custom", "_builtin", "_min_len", "escapes_matter", "_late")

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
        #: (name, value) of environment secrets added after it was built (see with_env_value).
        self._late: tuple[tuple[str, str], ...] = ()
        self._min_len = self._limits(self._literals)
        #: Whether JSON escapes other than ``\\u`` and ``\\/`` can hide a secret
        #: from a scan of raw JSON text: a literal with a quote, a backslash or a
        #: control character, or any user regex (which may match anything).
        self.escapes_matter: bool = bool(custom) or any(_json_escapes(lit) for lit in lits)

    def with_env_value(self, name: str, value: str) -> Redactor:
        """This redactor plus the value of the secret-looking environment
        variable *name*, set later: the cost of that one value (and of copying
        the literal list), never a scan of the whole environment. A value set
        later for the same name replaces the one it added, as a redactor built
        from the environment then would hold only the current one. *self* when
        nothing changes (too short, a path, already known, caught by a shape)."""
        value = value.strip()
        late = dict(self._late)
        old = late.pop(name, None)
        if old == value:
            return self
        lits = self._literals
        if old is not None and old not in late.values():
            lits = tuple(kv for kv in lits if kv[0] != old)
        if (
            len(value) >= MIN_LITERAL
            and not any(lit == value for lit, _ in lits)
            and not self._shape_covers(value)
            and not _is_existing_path(value)
        ):
            late[name] = value
            lits = tuple(sorted((*lits, (value, "env")), key=lambda kv: -len(kv[0])))
        if lits is self._literals:
            return self
        new = object.__new__(Redactor)
        new._builtin = self._builtin
        new._custom = self._custom
        new._literals = lits
        new._late = tuple(late.items())
        new._min_len = self._limits(lits)
        if old is not None and self.escapes_matter:
            new.escapes_matter = bool(self._custom) or any(_json_escapes(lit) for lit, _ in lits)
        else:
            new.escapes_matter = self.escapes_matter or (value in late.values() and _json_escapes(value))
        return new

    def _limits(self, lits: Sequence[tuple[str, str]]) -> int:
        min_len = min((len(v) for v, _ in lits), default=1 << 30)
        if self._custom:
            return 1
        return min(min_len, _MIN_SHAPE) if self._builtin else min_len

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
        :meth:`find` (tests/redact/test_guard_screen.py checks it on every positive
        sample of tests/redact/test_redact.py)."""
        if self._custom:
            return None
        terms = [lit for lit, _ in self._literals]
        if self._builtin:
            terms.extend(GATES)
        return tuple(dict.fromkeys(terms))

    def screen_literals(self) -> tuple[str, ...] | None:
        """:meth:`screen_terms` without the built-in shapes' characters: the
        literals, which a screen tests with ``in``, while it asks
        :func:`maybe_secret` about the shapes (when :attr:`builtin`)."""
        if self._custom:
            return None
        return tuple(dict.fromkeys(lit for lit, _ in self._literals))

    @property
    def builtin(self) -> bool:
        """Whether the built-in token shapes are looked for."""
        return self._builtin

    def find(self, text: str) -> list[Span]:
        """Secrets in *text* as ``(kind, start, end)``, sorted and non-overlapping.

        Also those a reader sees only after decoding the JSON escapes of
        *text* (``\\u0067hp_...``, ``\\/`` in a key, a literal's ``\\"``),
        any number of times: their spans cover the escaped form in *text*.
        """
        # The body of _find_plain, repeated: this runs on every field, and a
        # call costs as much as the common case's whole scan.
        if len(text) < self._min_len:
            return []
        spans: list[Span] = (
            _builtin_spans(text)
            if self._builtin and len(text) >= _MIN_SHAPE and _any_gate(text)
            else []
        )
        if self._literals or self._custom:
            self._add_literals(text, spans)
        if len(spans) > 1:
            spans = _merge(spans)
        # A backslash is a memchr; most text has none.
        if "\\" in text and (self.escapes_matter or _HIDING_ESCAPE.search(text) is not None):
            spans = self._find_escaped(text, spans)
        return spans

    def _find_plain(self, text: str) -> list[Span]:
        """:meth:`find` without looking behind escapes."""
        if len(text) < self._min_len:
            return []
        spans: list[Span] = (
            _builtin_spans(text)
            if self._builtin and len(text) >= _MIN_SHAPE and _any_gate(text)
            else []
        )
        if self._literals or self._custom:
            self._add_literals(text, spans)
        if len(spans) > 1:
            spans = _merge(spans)
        return spans

    def _add_literals(self, text: str, spans: list[Span]) -> None:
        for lit, kind in self._literals:
            i = text.find(lit)
            while i >= 0:
                spans.append((kind, i, i + len(lit)))
                i = text.find(lit, i + len(lit))
        for kind, rx in self._custom:
            for m in rx.finditer(text):
                if m.end() > m.start():
                    spans.append((kind, m.start(), m.end()))

    def _find_escaped(self, text: str, spans: list[Span]) -> list[Span]:
        """*spans* plus what each round of unescaping *text* reveals, mapped back onto *text*."""
        found = list(spans)
        levels = [text]  # levels[k + 1] is levels[k] unescaped
        maps: list[_EscapeMap] = []  # built only when a round finds something
        for _ in range(_MAX_UNESCAPES):
            current, n = _ESCAPE.subn(_unescape_one, levels[-1])
            if not n:
                break
            levels.append(current)
            hits = self._find_plain(current)
            if hits:
                while len(maps) < len(levels) - 1:
                    maps.append(_EscapeMap(levels[len(maps)]))
                for kind, a, b in hits:
                    for m in reversed(maps):
                        a, b = m.back(a, b)
                    found.append((kind, a, b))
            if "\\" not in current:
                break
        if len(found) == len(spans):
            return spans
        return _merge(found)

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


# -- JSON escapes ---------------------------------------------------------------------

# How many times text is unescaped looking for hidden secrets. Each round
# shrinks the text, so this only bounds pathological input (256 backslashes
# before a "u").
_MAX_UNESCAPES = 16
# Escapes that can split a built-in shape: any character as \\uXXXX, and "/"
# (base64, URLs) as \\/. Others (\\n, \\", ...) only matter for literals and
# user patterns (Redactor.escapes_matter); "Bearer\\t" is matched as it is.
_HIDING_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|/)")
_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _EscapeMap:
    """Maps positions in the unescaped form of a text back to the text."""

    __slots__ = ("_at", "_extra")

    def __init__(self, text: str) -> None:
        at: list[int] = []  # unescaped positions of the characters that were escapes
        extra = [0]  # extra[k]: characters the first k escapes added
        for m in _ESCAPE.finditer(text):
            at.append(m.start() - extra[-1])
            extra.append(extra[-1] + m.end() - m.start() - 1)
        self._at = at
        self._extra = extra

    def back(self, start: int, end: int) -> tuple[int, int]:
        """*start*/*end* of unescaped text as positions in the text (escapes kept whole)."""
        return start + self._extra[bisect_left(self._at, start)], end + self._extra[bisect_left(self._at, end)]


def _unescape_one(m: re.Match[str]) -> str:
    hexa = m.group(1)
    return chr(int(hexa, 16)) if hexa is not None else _SIMPLE_ESCAPES[m.group(2)]


def _json_escapes(s: str) -> bool:
    """Whether JSON text may write *s* with an escape other than ``\\uXXXX`` and ``\\/``
    (those are looked behind in every text: a non-ASCII literal, or one with a
    "/" such as a DATABASE_URL, does not make every backslash cost a second scan)."""
    return any(c in s for c in '"\\') or any(ord(c) < 0x20 for c in s)


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


class _LazySearch:
    """Stands in :data:`_SEARCHES` for a group not compiled yet: compiles it
    on first use (its filter, else its anchor) and takes its place."""

    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k

    def search(self, text: str) -> re.Match[str] | None:
        group = _GROUPS[self.k]
        group.compile()
        rx = group.pre or group.anchor
        _SEARCHES[self.k] = rx
        return rx.search(text)


#: Per group, what is searched first: its filter, else its anchor.
_SEARCHES: list[Any] = [_LazySearch(k) for k in range(len(_GROUPS))]


def _scan_code(first_only: bool) -> Callable[[str], Any]:
    """The per-text loop over the groups, written out: the gates as literal
    ``in`` tests (memchr speed) and one search per gated group. A loop over
    the groups' attributes cost about 50 ns a group (600 ns a text) before
    any scan.

    ``first_only``: ``True`` as soon as a group has a candidate (the guard's
    screen), else the list of ``(group index, where its search matched)``.
    """
    lines = ["def scan(text, S=_SEARCHES):", "    found = None" if not first_only else f"    if len(text) < {_MIN_SHAPE}: return False"]
    for k, g in enumerate(_GROUPS):
        conds = []
        if g.need:
            conds.append(f"{g.need!r} in text")
        conds.append("(" + " or ".join(f"{c!r} in text" for c in g.gate) + ")")
        if g.words:
            conds.append("(" + " or ".join(f"{w!r} in text" for w in g.words) + ")")
        lines.append(f"    if {' and '.join(conds)}:")
        lines.append(f"        m = S[{k}].search(text)")
        lines.append("        if m is not None:")
        if first_only:
            lines.append("            return True")
        else:
            lines.append("            if found is None:")
            lines.append("                found = []")
            lines.append(f"            found.append(({k}, m.start()))")
    lines.append("    return False" if first_only else "    return found")
    namespace: dict[str, Any] = {"_SEARCHES": _SEARCHES}
    exec("\n".join(lines) + "\n", namespace)
    scan: Callable[[str], Any] = namespace["scan"]
    return scan


# Generated at import (about 0.1 ms): the groups' patterns are still compiled
# on first use.
_scan_groups: Callable[[str], list[tuple[int, int]] | None] = _scan_code(False)
#: ``maybe_secret(text)``: whether a built-in shape may occur in *text*;
#: ``False`` means :func:`_builtin_spans` finds nothing in it. What the
#: guard's screen asks about the built-in shapes once one of :data:`GATES`
#: occurs: on ordinary text (code, paths, commands), which holds most of
#: them, a few scans instead of the whole of :meth:`Redactor.find`.
maybe_secret: Callable[[str], bool] = _scan_code(True)


def _builtin_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    if len(text) < _MIN_SHAPE:
        return spans
    hits = _scan_groups(text)
    if hits is None:
        return spans
    pem_ends: list[int] | None = None
    for k, at in hits:
        group = _GROUPS[k]
        anchor = group.anchor
        if group.pre is not None:
            # No anchor match starts before *at*: the filter (which matches
            # wherever the anchor does) matched first there.
            first = anchor.search(text, at)
            if first is None:
                continue
            at = first.start()
        done = 0  # candidates inside a span already found are skipped
        skip_until: dict[str, int] = {}  # per branch, after a failed candidate
        for m in anchor.finditer(text, at):
            branch = m.lastgroup
            if branch is None:
                continue
            rules: tuple[_Rule, ...]
            if branch == "row":
                row = _which_row(group.rows, text, m.start())
                if row is None:
                    continue
                back, branch, rules = row[2], row[3], (row[4],)
            else:
                back, rules = group.branches[branch]
            start = m.start() - back
            if start < done or start < skip_until.get(branch, 0):
                continue
            if rules[0] is _PEM:
                if pem_ends is None:
                    pem_ends = [-2]
                pem = _match_pem(text, start, pem_ends)
                if pem is not None:
                    spans.append(("private_key", pem[0], pem[1]))
                    done = pem[1]
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

