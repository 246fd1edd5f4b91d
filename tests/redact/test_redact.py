"""Secret detection: every built-in kind found in real-looking text, tricky
look-alikes left alone, environment and custom literals, custom patterns.

Fake secrets are assembled at run time (prefix + random body) so that this
file holds no string a secret scanner would flag.
"""

from __future__ import annotations

import random
import re
import string
import threading
import time

import orjson
import pytest

from ststrace._guard import MessageGuard
from ststrace._redact import KINDS, Redactor, apply, env_secrets, is_secret_env_name, marker
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from ststrace import Session
from ststrace._reader import read, validate
import json
from ststrace import _hub, tool

_rng = random.Random(5)
_B62 = string.ascii_letters + string.digits


def body(n: int, alphabet: str = _B62) -> str:
    """A random-looking body holding every character class of *alphabet* (as real keys do)."""
    classes = [f for f in (str.isupper, str.islower, str.isdigit) if any(f(c) for c in alphabet)]
    while True:
        s = "".join(_rng.choice(alphabet) for _ in range(n))
        if all(any(f(c) for c in s) for f in classes):
            return s


def _b64url(n: int) -> str:
    return body(n, _B62 + "-_")


PEM_BODY = "\n".join(body(64, _B62 + "+/") for _ in range(6)) + "\n" + body(40, _B62 + "+/") + "=="
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    + "." + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

#: (kind, secret, text around it with {} where the secret goes, the part that must vanish)
POSITIVES: list[tuple[str, str, str]] = [
    ("openai_key", "sk-" + body(48), "export OPENAI_API_KEY={}"),
    ("openai_key", "sk-" + "proj-" + _b64url(156), 'client = OpenAI(api_key="{}")'),
    ("openai_key", "sk-" + "svcacct-" + _b64url(100), "key: {}\n"),
    ("anthropic_key", "sk-" + "ant-api03-" + _b64url(93) + "AA", "ANTHROPIC_API_KEY='{}'"),
    ("hf_token", "hf_" + body(34, string.ascii_letters), "huggingface-cli login --token {}"),
    ("github_token", "ghp_" + body(36), "git clone https://x:{}@github.com/o/r"),
    ("github_token", "gho_" + body(36), "token={}"),
    ("github_token", "ghs_" + body(36), "{}"),
    ("github_token", "ghu_" + body(36), "(GITHUB_TOKEN: {})"),
    ("github_token", "github_" + "pat_11" + body(20) + "_" + body(59), "GH_PAT={}"),
    ("aws_access_key", "AKIA" + body(16, string.ascii_uppercase + "234567"), "aws_access_key_id = {}"),
    ("aws_access_key", "ASIA" + body(16, string.ascii_uppercase + "234567"), '"AccessKeyId": "{}"'),
    ("google_api_key", "AIza" + _b64url(35), "https://maps.googleapis.com/maps/api/js?key={}&v=3"),
    ("slack_token", "xoxb-" + "123456789012-1234567890123-" + body(24), "SLACK_BOT_TOKEN={}"),
    ("slack_token", "xoxp-" + "123456789012-123456789012-123456789012-" + body(32, "abcdef0123456789"), "{}"),
    ("stripe_key", "sk_" + "live_" + body(99), "stripe.api_key = '{}'"),
    ("stripe_key", "rk_" + "live_" + body(24), "restricted: {}."),
    ("jwt", JWT, "cookie: session={}; Path=/"),
    ("private_key", "-----BEGIN RSA " + "PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----", "key file:\n{}\nend"),
    ("private_key", "-----BEGIN " + "PRIVATE KEY-----\n" + PEM_BODY + "\n-----END PRIVATE KEY-----", "{}"),
    ("private_key", "-----BEGIN OPENSSH " + "PRIVATE KEY-----\n" + PEM_BODY + "\n-----END OPENSSH PRIVATE KEY-----", "{}"),
    ("bearer_token", body(40, _B62 + "-._~"), "curl -H 'Authorization: Bearer {}' https://api.example.com"),
    ("bearer_token", body(32), '{{"Authorization": "Bearer {}"}}'),
    # A JWT after "Bearer" is reported as the more specific shape.
    ("jwt", JWT, "Authorization: Bearer {}\r\nHost: x"),
    ("aws_secret_key", body(40, _B62 + "/+"), "aws_secret_access_key = {}"),
    ("url_password", "s3cr3t-" + body(8), "postgres://app:{}@db.internal:5432/prod"),
]

NEGATIVES: list[str] = [
    "The skeleton crew met the task-force at the desk.",
    "risk-assessment-framework-for-large-teams and task-management-dashboard-v2",
    "See sk-this-is-a-really-long-kebab-case-slug for details",
    "skills: sk-learn, sk-image; asks-for-help",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "sha512 cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
    "request 123e4567-e89b-12d3-a456-426614174000 and 550E8400-E29B-41D4-A716-446655440000",
    "/home/user/.cache/huggingface/hub/models--openai--gpt-oss-20b/snapshots/3f786850e387550fdab836ed7e6dc881de23001b/config.json",
    r"C:\Users\me\AppData\Local\Temp\tmpa1b2c3d4\hf_hub_cache\model.safetensors",
    "def hf_hub_download_with_retries(repo_id: str, filename: str) -> pathlib.Path:",
    "gh_pages_branch = 'gh-pages'; ghp_ = None; github_pat_length = 93",
    "class AbstractSingletonProxyFactoryBean(BaseModel): pass",
    "base64: SGVsbG8sIHdvcmxkISBUaGlzIGlzIGp1c3QgYSBtZXNzYWdlLg== ok",
    "header only eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 is not a token",
    "The Bearer of this letter is a friend. Bearer tokens are described in RFC 6750.",
    "Authorization: Bearer <token>",
    "Authorization: Bearer $ACCESS_TOKEN",
    "Authorization: Bearer YOUR_ACCESS_TOKEN_HERE",
    "stripe.api_key = 'sk_live_...' or sk_live_XXXXXXXXXXXXXXXXXXXX",
    "xoxo-gossip-girl-fan-club forever",
    "ASIA_PACIFIC_REGION_IDENTIFIER and AKIA_PLACEHOLDER and Asia",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEexample\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUexample\n-----END CERTIFICATE-----",
    "mail john.doe@example.com or visit https://huggingface.co/datasets/org/traces/resolve/main/run.jsonl",
    "for i in range(10):\n    total += values[i] * weights[i]  # accumulate\nreturn total / len(values)",
    "numbers 1234567890123456789012345678901234567890 and 0xDEADBEEFCAFEBABE",
    "AIza",  # too short to be anything
    "sk-" + "proj-" + "this-is-not-a-key-just-words",
]


@pytest.fixture()
def redactor() -> Redactor:
    return Redactor(env=False)


@pytest.mark.parametrize("kind, secret, template", POSITIVES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(POSITIVES)])
def test_positive_is_redacted(redactor: Redactor, kind: str, secret: str, template: str) -> None:
    """Each real-looking secret is found with its kind and replaced, the text around it kept."""
    text = template.format(secret)
    out, counts = redactor.redact(text)
    assert secret not in out
    assert counts == {kind: 1}
    assert out == template.format(marker(kind))
    spans = redactor.find(text)
    assert [(k, text[a:b]) for k, a, b in spans] == [(kind, secret)]


@pytest.mark.parametrize("text", NEGATIVES, ids=range(len(NEGATIVES)))
def test_negative_is_untouched(redactor: Redactor, text: str) -> None:
    """Ordinary words, hashes, UUIDs, paths, code and placeholders come through as they are."""
    assert redactor.find(text) == []
    out, counts = redactor.redact(text)
    assert out is text and counts == {}


def test_every_kind_has_a_positive() -> None:
    """The table covers built-in kinds only (tests/redact/test_redact_breadth.py checks
    that this table and its own cover every one)."""
    assert {k for k, _, _ in POSITIVES} <= set(KINDS)


def test_many_secrets_in_one_text(redactor: Redactor) -> None:
    """All secrets of a long text are found, in order, with correct offsets."""
    filler = "\nSome ordinary words -- with code_like_names and a path /tmp/x. "
    text = filler.join(t.format(s) for _, s, t in POSITIVES) + filler
    spans = redactor.find(text)
    assert [text[a:b] for _, a, b in spans] == [s for _, s, _ in POSITIVES]
    assert all(b1 <= a2 for (_, _, b1), (_, a2, _) in zip(spans, spans[1:]))
    out, counts = redactor.redact(text)
    assert sum(counts.values()) == len(POSITIVES)
    assert not any(s in out for _, s, _ in POSITIVES)


def test_glued_prefix_is_not_a_key(redactor: Redactor) -> None:
    """'sk-' ending a longer word is not an OpenAI key; URL-encoded '=' before it still is."""
    key = "sk-" + body(48)
    assert redactor.find("desk-" + body(30)) == []
    assert redactor.find("task" + key[2:]) == []
    text = "?api_key%3D" + key
    assert [text[a:b] for _, a, b in redactor.find(text)] == [key]


def test_truncated_pem_is_redacted_to_the_end_of_its_body(redactor: Redactor) -> None:
    """A key block without its END line (cut or pasted in part) does not leak its body."""
    text = "here: -----BEGIN EC " + "PRIVATE KEY-----\n" + PEM_BODY[:150] + '" and more'
    out, counts = redactor.redact(text)
    assert counts == {"private_key": 1}
    assert PEM_BODY[:60] not in out and out.endswith('" and more')


def test_pem_inside_json_text_is_redacted(redactor: Redactor) -> None:
    """In JSON text the key's newlines are '\\n' escapes; the whole block still goes."""
    pem = POSITIVES[18][1]
    doc = orjson.dumps({"key": pem, "n": 1}).decode()
    out, counts = redactor.redact(doc)
    assert counts == {"private_key": 1}
    assert orjson.loads(out) == {"key": marker("private_key"), "n": 1}


def test_env_literals(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values of secret-looking env vars (>= 8 chars) are redacted; others are not."""
    monkeypatch.setenv("MY_SERVICE_API_KEY", "correct-horse-battery")
    monkeypatch.setenv("DB_PASSWORD", "p@ss w0rd!")
    monkeypatch.setenv("SHORT_TOKEN", "abc1234")  # 7 chars: too short
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false-but-long")
    monkeypatch.setenv("EDITOR_THEME", "solarized-dark")
    r = Redactor()
    text = "a correct-horse-battery b p@ss w0rd! c abc1234 d false-but-long e solarized-dark"
    out, counts = r.redact(text)
    assert out == "a [REDACTED:env] b [REDACTED:env] c abc1234 d false-but-long e solarized-dark"
    assert counts == {"env": 2}
    assert Redactor(env=False).redact(text)[0] is text


def test_env_literals_are_read_when_the_redactor_is_created(monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable set later is not picked up by an existing Redactor, but by a new one."""
    monkeypatch.delenv("LATE_SECRET", raising=False)
    r = Redactor()
    monkeypatch.setenv("LATE_SECRET", "zebra-quartz-lantern")
    assert r.find("zebra-quartz-lantern") == []
    assert Redactor().find("x zebra-quartz-lantern y") == [("env", 2, 22)]


def test_env_value_already_caught_by_a_shape_is_not_scanned_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """An env key with a known shape adds no literal scan, and is still redacted (even glued)."""
    key = "sk-" + "proj-" + _b64url(80)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA" + body(16, string.ascii_uppercase + "234567"))
    base = Redactor(env=False).literal_count
    r = Redactor()
    # The AWS id is only a shape when it stands alone, so it stays a literal.
    assert r.literal_count == base + 1
    assert r.redact("x" + key + " y")[1] == {"openai_key": 1}
    assert r.redact("xx" + str(__import__("os").environ["AWS_ACCESS_KEY_ID"]) + "9")[1] == {"env": 1}


@pytest.mark.parametrize(
    "name, secret",
    [
        ("OPENAI_API_KEY", True),
        ("HF_TOKEN", True),
        ("HUGGING_FACE_HUB_TOKEN", True),
        ("GITHUB_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("AWS_ACCESS_KEY_ID", True),
        ("DJANGO_SECRET_KEY", True),
        ("POSTGRES_PASSWORD", True),
        ("MYAPP_APIKEY", True),
        ("CLIENT_SECRET", True),
        ("HF_TOKEN_PATH", False),
        ("PASSWORD_FILE", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("GOOGLE_APPLICATION_CREDENTIALS", False),
        ("SSH_AUTH_SOCK", False),
        ("PWD", False),
        ("KEYBOARD_LAYOUT", False),
    ],
)
def test_secret_env_names(name: str, secret: bool) -> None:
    """Names are judged by their words, not by substrings."""
    assert is_secret_env_name(name) is secret


def test_env_value_that_is_a_path_is_not_a_secret(tmp_path: object) -> None:
    """SOME_TOKEN=/run/secrets/token names a file; the path itself is not redacted."""
    assert env_secrets({"SOME_TOKEN": str(tmp_path), "OTHER_TOKEN": "/no/such/dir/x1y2"}) == ["/no/such/dir/x1y2"]


def test_custom_literals_and_patterns() -> None:
    """User literals (kind 'literal'), bare regexes ('custom') and (kind, regex) pairs."""
    r = Redactor(
        literals=["acme-codename-bluebird"],
        patterns=[r"ACME-\d{6}", ("employee_id", re.compile(r"EMP\d{5}")), ("card", r"\b4\d{15}\b")],
        env=False,
    )
    text = "acme-codename-bluebird ticket ACME-123456 by EMP04211 paid 4111111111111111; ACME-12 EMP1"
    out, counts = r.redact(text)
    assert out == (
        "[REDACTED:literal] ticket [REDACTED:custom] by [REDACTED:employee_id] paid [REDACTED:card]; ACME-12 EMP1"
    )
    assert counts == {"literal": 1, "custom": 1, "employee_id": 1, "card": 1}


def test_builtin_can_be_turned_off() -> None:
    """builtin=False keeps only the user's detectors."""
    key = POSITIVES[0][1]
    r = Redactor(builtin=False, env=False, literals=["hunter2hunter2"])
    assert r.redact(f"{key} hunter2hunter2")[0] == f"{key} [REDACTED:literal]"


def test_bad_patterns_are_refused() -> None:
    """A pattern matching the empty string would redact everywhere: refused up front."""
    with pytest.raises(ValueError):
        Redactor(patterns=[r"x*"])
    with pytest.raises(ValueError):
        Redactor(patterns=[("", r"abc")])
    with pytest.raises(ValueError):
        Redactor(literals=[b"bytes"])  # type: ignore[list-item]


def test_overlapping_detections_merge() -> None:
    """A literal inside a token (or two overlapping hits) becomes one marker."""
    key = POSITIVES[0][1]
    r = Redactor(literals=[key[5:25]], env=False)
    out, counts = r.redact(f"a {key} b")
    assert out == "a [REDACTED:openai_key] b" and counts == {"openai_key": 1}


def test_redact_returns_the_same_object_when_clean(redactor: Redactor) -> None:
    """No secret: the very same string comes back (callers test with ``is``)."""
    text = "nothing to see here " * 100
    out, counts = redactor.redact(text)
    assert out is text and counts == {}
    assert redactor.redact("") == ("", {})


def test_apply_with_explicit_spans() -> None:
    """apply() is what the guard uses after find(); offsets and counts line up."""
    assert apply("abcdef", [("x", 1, 2), ("y", 3, 5)]) == ("a[REDACTED:x]c[REDACTED:y]f", {"x": 1, "y": 1})


def test_secrets_in_tool_arguments_keep_valid_json(redactor: Redactor) -> None:
    """Secrets in argument values, keys, escaped forms and nested lists go; the JSON stays valid."""
    key, pem, gh = POSITIVES[1][1], POSITIVES[18][1], POSITIVES[5][1]
    guard = MessageGuard(redactor)
    escaped_key = "".join(f"\\u{ord(c):04x}" for c in key[:6]) + key[6:]
    raw = (
        '{"api_key": "' + key + '", "files": [{"name": "id_rsa", "data": ' + orjson.dumps(pem).decode() + "}], "
        '"' + gh + '": 1, "escaped": "' + escaped_key + '", "n": 12345678901234567890123}'
    )
    msg = {"role": "assistant", "content": "", "toolCalls": [{"id": "c1", "function": {"name": "f", "arguments": raw}}]}
    out = guard.message(msg)
    args = out["toolCalls"][0]["function"]["arguments"]
    decoded = orjson.loads(args.replace("12345678901234567890123", "0"))
    assert decoded == {
        "api_key": marker("openai_key"),
        "files": [{"name": "id_rsa", "data": marker("private_key")}],
        marker("github_token"): 1,
        "escaped": marker("openai_key"),
        "n": 0,
    }
    assert "12345678901234567890123" in args  # big integers survive exactly
    assert guard.counts == {"openai_key": 2, "private_key": 1, "github_token": 1}
    assert msg["toolCalls"][0]["function"]["arguments"] is raw  # the input is not mutated


def test_clean_arguments_keep_their_exact_text(redactor: Redactor) -> None:
    """No secret: the arguments string is returned as is, formatting and escapes included."""
    guard = MessageGuard(redactor)
    for raw in ['{"a": 1,  "b": [1, 2]}', '{"code": "line1\\nline2\\t\\"q\\""}', '{"path": "C:\\\\x\\\\y"}', "not json"]:
        msg = {"role": "assistant", "content": "", "toolCalls": [{"id": "c", "function": {"name": "f", "arguments": raw}}]}
        assert guard.message(msg) is msg


def test_non_json_arguments_are_redacted_as_text(redactor: Redactor) -> None:
    """Arguments that are not JSON (a model's broken output) are still redacted."""
    key = POSITIVES[0][1]
    guard = MessageGuard(redactor)
    msg = {"role": "assistant", "content": "", "toolCalls": [{"id": "c", "function": {"name": "f", "arguments": f"{{broken {key}"}}]}
    assert guard.message(msg)["toolCalls"][0]["function"]["arguments"] == "{broken [REDACTED:openai_key]"


def test_guard_redacts_content_reasoning_and_header(redactor: Redactor) -> None:
    """content and reasoningContent are redacted; header metadata too, but not type/id/harness."""
    key, hf = POSITIVES[0][1], POSITIVES[4][1]
    guard = MessageGuard(redactor)
    msg = {"role": "assistant", "content": f"use {key}", "reasoningContent": f"the token {hf}", "model": "m", "timestamp": 1}
    out = guard.message(msg)
    assert out == {
        "role": "assistant",
        "content": "use [REDACTED:openai_key]",
        "reasoningContent": "the token [REDACTED:hf_token]",
        "model": "m",
        "timestamp": 1,
    }
    assert msg["content"] == f"use {key}"  # copy-on-write
    header = {"type": "session", "harness": "h", "id": "abc", "name": f"run with {key}", "env": {"tokens": [hf, "ok"]}}
    out_h = guard.header(header)
    assert out_h == {
        "type": "session",
        "harness": "h",
        "id": "abc",
        "name": "run with [REDACTED:openai_key]",
        "env": {"tokens": ["[REDACTED:hf_token]", "ok"]},
    }
    assert guard.counts == {"openai_key": 2, "hf_token": 2}
    clean = {"type": "session", "harness": "h", "id": "x", "name": "plain"}
    assert guard.header(clean) is clean


def test_header_objects_are_redacted_through_their_json_form(redactor: Redactor) -> None:
    """Metadata values that are objects are judged by what would be written for them."""
    key = POSITIVES[0][1]

    class Config:
        def __repr__(self) -> str:
            return f"Config(key={key!r})"

    out = MessageGuard(redactor).header({"type": "session", "harness": "h", "id": "x", "cfg": Config()})
    assert out["cfg"] == "Config(key='[REDACTED:openai_key]')"


def test_counts_are_exact_under_threads(redactor: Redactor) -> None:
    """Redactions counted from many threads at once add up exactly."""
    guard = MessageGuard(redactor)
    key = POSITIVES[0][1]
    n_threads, per = 8, 200

    def work() -> None:
        for _ in range(per):
            guard.message({"role": "user", "content": f"k {key}", "timestamp": 1})

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert guard.counts == {"openai_key": n_threads * per}


def test_find_is_cheap_on_text_without_secrets(redactor: Redactor) -> None:
    """A 100 KB text with no secret (prose + code) is scanned in well under a millisecond per 10 KB."""
    text = (
        "The agent read config.yaml, found retry_count = 10 and suggested lowering it -- see load_config(). "
        "def parse(path: str) -> dict[str, Any]:\n    return yaml.safe_load(open(path)) or {}\n"
    ) * 600
    assert redactor.find(text) == []
    t0 = time.perf_counter()
    for _ in range(10):
        redactor.find(text)
    per_10kb = (time.perf_counter() - t0) / 10 / (len(text) / 10_000)
    assert per_10kb < 1e-3, f"{per_10kb * 1e6:.0f} us per 10 KB"


def test_escapes_in_raw_arguments_do_not_hide_secrets() -> None:
    """A key right after a JSON escape (\\n), or a literal JSON must escape, is still found."""
    aws = POSITIVES[10][1]
    guard = MessageGuard(Redactor(literals=['pa"ss\\word!'], env=False))
    raw = orjson.dumps({"text": f"line one\n{aws}\nline three", "pw": 'pa"ss\\word!'}).decode()
    assert "\\n" + aws in raw and 'pa\\"ss' in raw
    msg = {"role": "assistant", "content": "", "toolCalls": [{"id": "c", "function": {"name": "f", "arguments": raw}}]}
    doc = orjson.loads(guard.message(msg)["toolCalls"][0]["function"]["arguments"])
    assert doc == {"text": "line one\n[REDACTED:aws_access_key]\nline three", "pw": "[REDACTED:literal]"}
    assert Redactor(env=False).escapes_matter is False
    assert Redactor(literals=["plain-literal"], env=False).escapes_matter is False


@pytest.mark.parametrize(
    "unit",
    ["sk-", "sk-Ab1", "eyJ", "eyJaaaaaaaaaaa.eyJbbbbbbbbbbb.", "hf_", "ghp_", "github_pat_", "AKIA", "xoxb-1", "sk_live_",
     "-----BEGIN PRIVATE KEY-----\n", "Bearer ", "-", "_"],
)
def test_adversarial_text_stays_linear(redactor: Redactor, unit: str) -> None:
    """1 MB of one anchor repeated (the worst case for candidate checks) is scanned in well under a second."""
    text = unit * (1_000_000 // len(unit))
    t0 = time.thread_time()  # CPU time: the same on a loaded machine
    redactor.find(text)
    assert time.thread_time() - t0 < 1.0


def test_header_objects_nested_in_containers_are_redacted(redactor: Redactor) -> None:
    """An object deep inside a metadata dict is judged by its written form too."""
    key = POSITIVES[0][1]

    class Cred:
        def __repr__(self) -> str:
            return f"Cred({key})"

    out = MessageGuard(redactor).header({"type": "session", "harness": "h", "id": "x", "cfg": {"a": [Cred()], "n": 1}})
    assert out["cfg"] == {"a": ["Cred([REDACTED:openai_key])"], "n": 1}


def test_str_subclass_content_is_redacted(redactor: Redactor) -> None:
    """Content that is a str subclass (numpy.str_, markup types) is not a way around redaction."""

    class Markup(str):
        pass

    key = POSITIVES[0][1]
    out = MessageGuard(redactor).message({"role": "user", "content": Markup(f"k {key}"), "timestamp": 1})
    assert out["content"] == "k [REDACTED:openai_key]"


def test_numbers_survive_redaction_even_on_the_slow_path(redactor: Redactor) -> None:
    """Arguments are re-encoded after redaction: numbers stay as written, also next to a lone surrogate."""
    key = POSITIVES[0][1]
    raw = '{"k": "' + key + '", "big": 123456789012345678901234567890, "f": 1.50, "bad": "\\ud800"}'
    guard = MessageGuard(redactor)
    out = guard.arguments(raw)
    assert out == '{"k":"[REDACTED:openai_key]","big":123456789012345678901234567890,"f":1.50,"bad":"\ufffd"}'


GH = "ghp_" + body(36)
REPO = Path(__file__).resolve().parents[2]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def _run(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """*code* in a fresh interpreter (the worktree's ststrace), which must succeed."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


# -- a secret exported after the session opened -------------------------------------

SECRET = "Zq8" + body(29)  # no token shape: only the environment says it is a secret


# -- a secret session id ------------------------------------------------------------


def test_secret_session_id_never_names_the_file(tmp_path: Path) -> None:
    """The file is named after the id as the header holds it: redacted."""
    with Session(tmp_path, id=GH) as s:
        s.user("hi")
    assert s.path is not None
    names = [p.name for p in tmp_path.iterdir()]
    assert len(names) == 1 and GH not in names[0] and GH[4:] not in names[0]
    header = _lines(s.path)[0]
    assert header["id"].startswith("[REDACTED:github_token]~")
    assert s.path.name.startswith("REDACTED_github_token_")
    assert GH not in repr(s) and GH not in s.path.read_text()


def test_two_secret_ids_get_two_files(tmp_path: Path) -> None:
    other = "ghp_" + body(36)
    with Session(tmp_path, id=GH) as a, Session(tmp_path, id=other) as b:
        a.user("a")
        b.user("b")
    assert a.path != b.path and len(list(tmp_path.iterdir())) == 2


def test_secret_id_resumes_its_own_file(tmp_path: Path) -> None:
    with Session(tmp_path, id=GH) as s:
        s.user("one")
    with Session(tmp_path, id=GH, resume=True) as again:
        again.user("two")
    assert again.path == s.path
    assert [m["content"] for m in read(s.path).messages] == ["one", "two"]


def test_resume_mismatch_does_not_print_the_ids(tmp_path: Path) -> None:
    """The message quotes both ids as redaction leaves them."""
    path = tmp_path / "t.jsonl"
    with Session(path, id=GH) as s:
        s.user("one")
    other = "ghp_" + body(36)
    with pytest.raises(ValueError, match="cannot resume") as err:
        Session(path, id=other, resume=True).open()
    assert GH not in str(err.value) and other not in str(err.value)
    assert "[REDACTED:github_token]~" in str(err.value)


def test_invalid_id_error_does_not_print_the_secret() -> None:
    with pytest.raises(ValueError, match="invalid session id") as err:
        Session(id=GH + " ")
    assert GH not in str(err.value)


def test_closed_session_error_does_not_print_the_secret(tmp_path: Path) -> None:
    s = Session(tmp_path, id=GH)
    s.open()
    s.close()
    with pytest.raises(RuntimeError) as err:
        s.open()
    assert GH not in str(err.value)


def test_plain_ids_are_unchanged(tmp_path: Path) -> None:
    with Session(tmp_path, id="run-42") as s:
        s.user("hi")
    assert s.path == tmp_path / "run-42.jsonl" and _lines(s.path)[0]["id"] == "run-42"


# -- redacted ids are the same in every process ----------------------------------------


def test_redacted_ids_pair_across_processes(tmp_path: Path) -> None:
    """A call whose id holds a secret, made in one process and answered after
    resume=True in another, pairs; the file validates clean."""
    call_id = "call-" + GH
    _run(
        """
        import sys, ststrace
        with ststrace.Session(sys.argv[1], id=sys.argv[2]) as s:
            s.assistant(tool_calls=[{"id": sys.argv[3], "name": "look", "arguments": {}}])
        """,
        str(tmp_path),
        GH,
        call_id,
    )
    _run(
        """
        import sys, ststrace
        with ststrace.Session(sys.argv[1], id=sys.argv[2], resume=True) as s:
            s.tool(sys.argv[3], "found")
        """,
        str(tmp_path),
        GH,
        call_id,
    )
    (path,) = tmp_path.iterdir()
    text = path.read_text()
    assert GH not in text
    lines = _lines(path)
    assert lines[1]["message"]["toolCalls"][0]["id"] == lines[2]["message"]["toolCallId"]
    assert [p.code for p in validate(path)] == []


def test_parent_id_from_a_worker_process_links(tmp_path: Path) -> None:
    """``parent="<id>"`` in a worker gives the parent's header id, redacted alike."""
    with Session(tmp_path / "parent.jsonl", id=GH) as parent:
        parent.user("go")
        _run(
            """
            import sys, ststrace
            with ststrace.Session(sys.argv[1], parent=sys.argv[2]) as s:
                s.user("working")
            """,
            str(tmp_path / "child.jsonl"),
            GH,
        )
    assert _lines(tmp_path / "child.jsonl")[0]["parentSessionId"] == _lines(tmp_path / "parent.jsonl")[0]["id"]


def test_the_key_file_is_private_and_shared(tmp_path: Path) -> None:
    """Made once (mode 0600), read by every later process; a different key gives
    a different digest, so the digest depends on a secret, not on the id alone."""
    key = tmp_path / "k" / "id-key"
    code = """
        import sys
        from ststrace._guard import make_guard
        print(make_guard(True).ident(sys.argv[1]))
        """
    first = _run(code, GH, env={"STSTRACE_KEY_FILE": str(key)}).stdout
    second = _run(code, GH, env={"STSTRACE_KEY_FILE": str(key)}).stdout
    other = _run(code, GH, env={"STSTRACE_KEY_FILE": str(tmp_path / "other-key")}).stdout
    assert first == second != other and GH not in first
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32


def test_an_unusable_key_file_falls_back_with_a_warning(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = _run(
        """
        import sys
        from ststrace._guard import make_guard
        g = make_guard(True)
        print(g.ident(sys.argv[1]) == g.ident(sys.argv[1]))
        """,
        GH,
        env={"STSTRACE_KEY_FILE": str(blocker / "id-key")},
    )
    assert proc.stdout.strip() == "True" and "cannot read or create the id key" in proc.stderr


def test_env_secret_set_after_open_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """monkeypatch.setenv inside a session: what is recorded after it is redacted."""
    monkeypatch.delenv("SERVICE_API_KEY", raising=False)
    with Session(tmp_path / "t.jsonl") as s:
        s.user("before")
        monkeypatch.setenv("SERVICE_API_KEY", SECRET)
        s.user(f"the key is {SECRET}")
        s.tool("call_1", SECRET)
        s.assistant(tool_calls=[{"id": "c2", "name": "f", "arguments": {"k": SECRET}}])
    text = (tmp_path / "t.jsonl").read_text()
    assert SECRET not in text and text.count("[REDACTED:env]") == 3
    assert s.stats()["redactions"] == {"env": 3}


def test_env_secret_from_load_dotenv_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dotenv = pytest.importorskip("dotenv")
    monkeypatch.delenv("VAULT_TOKEN", raising=False)
    env_file = tmp_path / ".env"
    env_file.write_text(f"VAULT_TOKEN={SECRET}\n")
    with Session(tmp_path / "t.jsonl") as s:
        try:
            dotenv.load_dotenv(env_file)
            s.user(SECRET)
        finally:
            os.environ.pop("VAULT_TOKEN", None)
    assert SECRET not in (tmp_path / "t.jsonl").read_text()


def test_env_secret_set_later_reaches_every_session_on_the_default_redactor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every session sharing the default redactor follows it; one with its own
    Redactor (built with what the environment held then) keeps it."""
    from ststrace import Redactor

    monkeypatch.delenv("LATE_SECRET", raising=False)
    own = Redactor()
    with Session(tmp_path / "a.jsonl") as a, Session(tmp_path / "b.jsonl", redact=own) as b:
        monkeypatch.setenv("LATE_SECRET", SECRET)
        a.user(SECRET)
        b.user(SECRET)
    assert SECRET not in (tmp_path / "a.jsonl").read_text()
    assert SECRET in (tmp_path / "b.jsonl").read_text()


def test_env_secret_names_that_are_not_secret_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Session(tmp_path / "t.jsonl") as s:
        guard = s._guard
        assert guard is not None
        before = guard.redactor
        monkeypatch.setenv("SOME_SETTING", SECRET)
        monkeypatch.setenv("LATE_TOKEN", "short")
        assert guard.redactor is before
        s.user(SECRET)
    assert SECRET in (tmp_path / "t.jsonl").read_text()


def test_records_never_read_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot path does not scan the environment per record: only a set does."""
    from ststrace import _redact

    calls = []
    real = _redact.env_secrets
    monkeypatch.setattr(_redact, "env_secrets", lambda *a: calls.append(1) or real(*a))
    with Session(tmp_path / "t.jsonl") as s:
        calls.clear()
        for i in range(200):
            s.user(f"message {i} with a_b-c")
            s.tool("call_1", f"result {i}")
    assert calls == []


PEM_LINES = [body(64, _B62 + "+/") for _ in range(8)] + [body(36, _B62 + "+/") + "=="]
PEM = "\n".join(["-----BEGIN RSA " + "PRIVATE KEY-----", *PEM_LINES, "-----END RSA PRIVATE KEY-----"])
OPENAI = "sk-" + body(48)
AWS_SECRET = body(30, _B62 + "/+") + "/" + body(9)  # 40 characters, like the real ones


def _no_pem_body(text: str) -> bool:
    return not any(line in text for line in PEM_LINES)


# -- escapes at any depth: the guard and the upload scan agree ---------------------------------------


def _escaped_cases(password: str) -> list[tuple[str, str]]:
    """(what leaks, tool arguments text) for secrets hidden behind escapes at several depths."""
    gh_escaped = "\\u0067" + GH[1:]
    return [
        (password, json.dumps({"cmd": json.dumps({"pw": password})})),
        (password, json.dumps({"cmd": json.dumps({"cmd": json.dumps({"pw": password})})})),
        (GH, '{"token": "' + gh_escaped + '"}'),  # arguments text that holds \u0067hp_...
        (GH, json.dumps({"log": '{"token": "' + gh_escaped + '"}'})),
        (AWS_SECRET, json.dumps({"env": json.dumps("aws_secret_access_key=" + AWS_SECRET.replace("/", "\\/"))})),
    ]


def _decoded_views(text: str) -> list[str]:
    """*text* and every string found by JSON-decoding it, and its strings, again and again."""
    views, todo = [], [text]
    while todo:
        s = todo.pop()
        views.append(s)
        try:
            doc = json.loads(s)
        except ValueError:
            continue
        stack = [doc]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                todo.append(item)
            elif isinstance(item, dict):
                stack.extend(item)
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
    return views


# -- new detectors ---------------------------------------------------------------------------------


NEW_POSITIVES: list[tuple[str, str, str]] = [
    ("aws_secret_key", AWS_SECRET, "aws_secret_access_key = {}"),
    ("aws_secret_key", AWS_SECRET, "export AWS_SECRET_ACCESS_KEY={}\n"),
    ("aws_secret_key", AWS_SECRET, '{{"AccessKeyId": "x", "SecretAccessKey": "{}"}}'),
    ("aws_secret_key", AWS_SECRET, "aws configure set aws_secret_access_key {}"),
    ("aws_secret_key", AWS_SECRET, 'secretAccessKey: "{}",'),
    ("url_password", "s3cr3t-Pa55", "DATABASE=postgres://app:{}@db.internal:5432/prod"),
    ("url_password", "hunter2hunter2", "redis://:{}@cache:6379/0"),
    ("url_password", "tiger", "see https://scott:{}@example.com/path?q=1"),
    ("url_password", "p@ss:w%40rd", "mysql://root:{}@127.0.0.1/db"),
    ("url_password", "x9", "amqp://guest:{}@rabbit"),
    # The issue's own examples.
    ("url_password", "pass", "postgres://user:{}@host"),
    ("url_password", "pass", "redis://:{}@host"),
    ("url_password", "pass", "https://user:{}@host"),
    ("bearer_token", body(40), "GET /?h=Authorization%3A%20Bearer%20{}&x=1"),
    ("bearer_token", body(32), "Bearer%20{}"),
]

NEW_NEGATIVES: list[str] = [
    # AWS names without a key, or next to something that is not one
    'aws_secret_access_key = os.environ["AWS_SECRET_ACCESS_KEY"]',
    "AWS_SECRET_ACCESS_KEY=<your-secret-access-key>",
    "aws_secret_access_key: ${AWS_SECRET}",
    "secret_access_key = 3f786850e387550fdab836ed7e6dc881de23001b4",  # 41: not a key length
    "SecretAccessKey: the-secret-access-key-of-the-service-account",
    "sha1 3f786850e387550fdab836ed7e6dc881de23001b and base64 " + body(40, _B62 + "/+"),
    # URLs without a real password
    "postgres://user:...@localhost:5432/mydb",
    "postgres://user:password@localhost:5432/mydb and redis://:PASSWORD@host:6379/1",
    "postgres://user:${DB_PASSWORD}@localhost/db",
    "redis://:$REDIS_PASSWORD@cache:6379",
    "https://user:****@example.com",
    "https://example.com:8443/path@v2 and ssh://git@github.com/org/repo.git",
    "git@github.com:org/repo.git and mailto:john.doe@example.com",
    "https://huggingface.co/api/models?search=a:b@c",
    "http://[::1]:8080/x and http://localhost:8000/@admin",
    "postgres://app:[REDACTED:url_password]@db/prod",
    "mysql://root:%(password)s@localhost/db and {scheme}://{user}:{pw}@{host}",
    # Bearer forms
    "Authorization%3A%20Bearer%20%24TOKEN",
    "Bearer%20<token>",
    # code, hashes, uuids, paths
    "for url in urls: user, pw = url.split(':'); print(f'{user}@{host}')",
    "request 123e4567-e89b-12d3-a456-426614174000 at /var/lib/postgres/data@2024",
]


# -- every shape of every secret: the guard and the upload scan agree ----------------------------------


def _all_positives() -> list[tuple[str, str, str]]:
    import test_redact  # the table of the first round, in this directory

    return [(k, s, t) for k, s, t in test_redact.POSITIVES + NEW_POSITIVES if len(s) >= 8]


def _record_everywhere(s: Session, text: str) -> None:
    escaped = "".join(f"\\u{ord(c):04x}" for c in text)
    s.user(text)
    s.user(escaped)
    s.assistant(
        f"reply {text}",
        reasoning=text,
        model=text,
        tool_calls=[
            {"id": "a1", "name": text, "arguments": {"cmd": text}},
            {"id": "a2", "name": "run", "arguments": json.dumps({"cmd": json.dumps({"x": text})})},
            {"id": "a3", "name": "run", "arguments": '{"escaped": "' + escaped + '"}'},
        ],
    )
    s.tool("a1", json.dumps({"out": text}))
    s.tool("a2", {"nested": [{"deep": text}]})
    s.tool("a3", escaped)
    s.record({"role": "user", "content": "x", "extra": {text: text}})


# -- PEM keys across any separators -----------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    [
        str(PEM.split("\n")),  # a Python list repr
        json.dumps(PEM.split("\n")),  # a JSON array of lines
        "\n".join("> " + x for x in PEM.split("\n")),  # a quoted block
        " | ".join(PEM.split("\n")),
        "\r\n".join(PEM.split("\n")),
        repr(PEM),  # a repr with \n escapes
        json.dumps(json.dumps(PEM.split("\n"))),  # escaped twice
    ],
    ids=["list-repr", "json-array", "quoted", "pipes", "crlf", "repr", "twice-escaped"],
)
def test_pem_is_redacted_from_begin_to_end_across_any_separator(redactor: Redactor, shape: str) -> None:
    """The whole key goes, whatever joins its lines; text around it stays."""
    text = f"before {shape} after"
    out, counts = redactor.redact(text)
    assert _no_pem_body(out), out
    assert counts == {"private_key": 1}
    assert out.startswith("before ") and out.endswith(" after")


def test_truncated_pem_in_a_list_repr_loses_its_body(redactor: Redactor) -> None:
    """A key cut before its END line, lines joined by "', '", still loses every body line."""
    text = "lines: " + str(PEM.split("\n")[:6])
    out, counts = redactor.redact(text)
    assert counts == {"private_key": 1}
    assert _no_pem_body(out), out


def test_truncated_encrypted_pem_loses_its_body_past_its_header_lines(redactor: Redactor) -> None:
    """A legacy encrypted key (Proc-Type / DEK-Info lines) cut before END, escaped as JSON text."""
    lines = ["-----BEGIN RSA " + "PRIVATE KEY-----", "Proc-Type: 4,ENCRYPTED", "DEK-Info: AES-128-CBC,3F17F5316E2BA4A8", "", *PEM_LINES[:5]]
    text = json.dumps({"out": "\n".join(lines)}) + " done"
    out, counts = redactor.redact(text)
    assert counts == {"private_key": 1} and _no_pem_body(out) and out.endswith(" done")


def test_pem_lines_returned_by_a_tool_are_not_written_and_upload_scan_agrees(tmp_path: Path) -> None:
    """A tool returning ``pem.split("\\n")`` writes no body line; without redaction the scan refuses the file."""

    @tool
    def read_key() -> list[str]:
        return PEM.split("\n")

    for redact in (True, False):
        path = tmp_path / f"k-{redact}.jsonl"
        with Session(path, redact=redact):
            read_key()
        data = path.read_bytes().decode()
        _, findings = _hub.check_file(path)
        if redact:
            assert _no_pem_body(data)
            assert findings == []
        else:
            assert not _no_pem_body(data)
            assert [f.kind for f in findings] == ["secret:private_key"]


def test_pem_lines_in_tool_arguments_metadata_and_extra_fields_are_not_written(tmp_path: Path) -> None:
    """A key given as a JSON list of lines (arguments, metadata, a record() field) loses every line."""
    path = tmp_path / "args.jsonl"
    lines = PEM.split("\n")
    with Session(path, metadata={"deploy": {"key": lines, "n": 1}}) as s:
        s.assistant(tool_calls=[{"id": "c1", "name": "write_key", "arguments": {"path": "id_rsa", "lines": lines}}])
        s.tool("c1", "written")
        s.record({"role": "user", "content": "x", "attachment": {"lines": lines}})
    data = path.read_text()
    assert _no_pem_body(data)
    assert validate(path) == []
    msgs = read(path).messages
    doc = json.loads(msgs[0]["toolCalls"][0]["function"]["arguments"])
    assert doc["path"] == "id_rsa" and marker("private_key") in doc["lines"]
    assert _lines(path)[0]["deploy"]["n"] == 1


def test_pem_split_over_deep_list_items_fails_closed(redactor: Redactor) -> None:
    """Past the depth limit, a key split over list items still takes its subtree with it."""
    raw = json.dumps({"a": {"b": PEM.split("\n")}})
    for _ in range(250):
        raw = '{"x": ' + raw + "}"
    guard = MessageGuard(redactor)
    out = guard.arguments(raw)
    assert _no_pem_body(out) and guard.counts.get("too_deep") == 1


def test_public_keys_and_certificates_in_lists_are_untouched(redactor: Redactor) -> None:
    """Only PRIVATE KEY blocks are secrets; a certificate chain split in lines stays."""
    cert = ["-----BEGIN CERTIFICATE-----", *PEM_LINES[:3], "-----END CERTIFICATE-----"]
    pub = ["-----BEGIN PUBLIC KEY-----", *PEM_LINES[:2], "-----END PUBLIC KEY-----"]
    for text in (str(cert), str(pub), "\n".join("> " + x for x in cert)):
        assert redactor.find(text) == []


def test_pem_begin_after_a_certificate_does_not_swallow_it(redactor: Redactor) -> None:
    """Text before BEGIN is kept; text after END is kept."""
    cert = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUexample\n-----END CERTIFICATE-----"
    text = cert + "\n" + str(PEM.split("\n")) + "\nkept tail"
    out, _ = redactor.redact(text)
    assert out == cert + "\n['" + marker("private_key") + "']\nkept tail"


# -- top-level metadata keys ---------------------------------------------------------------


def test_top_level_metadata_keys_are_redacted(tmp_path: Path) -> None:
    """A secret used as a metadata key is redacted like a nested key is; its value is kept."""
    path = tmp_path / "m.jsonl"
    with Session(path, metadata={GH: "gh token", "plain": {OPENAI: 1}}) as s:
        pass
    header = _lines(path)[0]
    assert GH not in path.read_text() and OPENAI not in path.read_text()
    assert header[marker("github_token")] == "gh token"
    assert header["plain"] == {marker("openai_key"): 1}
    assert s.stats()["redactions"] == {"github_token": 1, "openai_key": 1}


def test_metadata_keys_that_redact_alike_are_both_kept(redactor: Redactor) -> None:
    """Two secret keys that become the same marker do not overwrite each other."""
    other = "ghp_" + body(36)
    out = MessageGuard(redactor).header({"type": "session", "harness": "h", "id": "x", GH: 1, other: 2})
    assert sorted(v for k, v in out.items() if k.startswith("[REDACTED")) == [1, 2]


# -- env values with surrounding whitespace ------------------------------------------------------


def test_env_secret_with_surrounding_whitespace_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    """``DB_PASSWORD="...\\n"`` or a leading space: the stripped value is redacted too."""
    monkeypatch.setenv("DB_PASSWORD", "Tr0ub4dor&3horse\n")
    monkeypatch.setenv("SERVICE_TOKEN", "  zq8Lp0-vNe7Rt2")
    r = Redactor()
    out, counts = r.redact("pw Tr0ub4dor&3horse and token zq8Lp0-vNe7Rt2.")
    assert out == "pw [REDACTED:env] and token [REDACTED:env]."
    assert counts == {"env": 2}
    assert "Tr0ub4dor&3horse" in env_secrets()


def test_env_whitespace_only_or_short_after_strip_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value that is short once stripped is not a literal (it would match everywhere)."""
    monkeypatch.setenv("X_TOKEN", "   abc    ")
    monkeypatch.setenv("Y_TOKEN", " " * 20)
    values = env_secrets()
    assert "abc" not in values and "" not in values and not any(v.strip() == "" for v in values)


# -- every string that reaches the file -------------------------------------------------------


def test_every_field_of_a_recorded_message_is_redacted(tmp_path: Path) -> None:
    """Extra record() keys and values, model, tool-call names and ids: nothing leaves unredacted."""
    path = tmp_path / "r.jsonl"
    call_id = "call_" + GH
    with Session(path) as s:
        s.record(
            {
                "role": "assistant",
                "content": "",
                "model": f"ft:{OPENAI}",
                "toolCalls": [{"id": call_id, "function": {"name": f"fn_{GH}", "arguments": "{}"}}],
                "extra": {"nested": [OPENAI]},
                GH: "as a key",
            }
        )
        s.tool(call_id, "done")
        s.record({"role": "user", "content": "hi", "note": f"key={OPENAI}"})
    text = path.read_text()
    assert GH not in text and OPENAI not in text
    lines = _lines(path)
    assistant, result, user = (x["message"] for x in lines[1:])
    assert assistant["model"] == "ft:" + marker("openai_key")
    assert assistant["extra"] == {"nested": [marker("openai_key")]}
    assert assistant[marker("github_token")] == "as a key"
    call = assistant["toolCalls"][0]
    assert call["function"]["name"] == "fn_" + marker("github_token")
    # The call and its result still pair: the same id is redacted the same way.
    assert call["id"].startswith("call_" + marker("github_token")) and result["toolCallId"] == call["id"]
    assert user["note"] == "key=" + marker("openai_key")
    assert validate(path) == []


def test_distinct_secret_ids_stay_distinct(redactor: Redactor) -> None:
    """Two tool-call ids that each hold a secret do not collapse to one id."""
    guard = MessageGuard(redactor)
    a, b = "ghp_" + body(36), "ghp_" + body(36)
    msg = {
        "role": "assistant",
        "content": "",
        "toolCalls": [
            {"id": a, "function": {"name": "f", "arguments": "{}"}},
            {"id": b, "function": {"name": "f", "arguments": "{}"}},
        ],
    }
    ids = [c["id"] for c in guard.message(msg)["toolCalls"]]
    assert len(set(ids)) == 2 and not any(x in "".join(ids) for x in (a, b))
    assert guard.message({"role": "tool", "content": "r", "toolCallId": b})["toolCallId"] == ids[1]


def test_header_harness_and_name_are_redacted(tmp_path: Path) -> None:
    """Header fields other than ``type`` go through the guard: a token in the harness is not written."""
    path = tmp_path / "h.jsonl"
    with Session(path, harness=f"agent-{GH}", name=f"n {OPENAI}"):
        pass
    text = path.read_text()
    assert GH not in text and OPENAI not in text
    assert _lines(path)[0]["harness"].startswith("agent-" + marker("github_token"))


def test_clean_fields_are_returned_as_the_same_objects(redactor: Redactor) -> None:
    """Nothing to redact anywhere: the very same message dict comes back."""
    guard = MessageGuard(redactor)
    msgs = [
        {"role": "assistant", "content": "", "model": "claude-3-5-sonnet-20241022", "timestamp": 1,
         "toolCalls": [{"id": "call_Ab3dEf6hIj9kLmN0pQrStUvW", "function": {"name": "get_weather_forecast", "arguments": "{}"}}]},
        {"role": "tool", "content": "sunny", "toolCallId": "call_Ab3dEf6hIj9kLmN0pQrStUvW", "timestamp": 1},
        {"role": "user", "content": "hi", "usage": {"prompt_tokens": 12, "detail": "cached_input_tokens"}, "timestamp": 1},
    ]
    for m in msgs:
        assert guard.message(m) is m


# -- deep nesting fails closed ---------------------------------------------------------------------


@pytest.mark.parametrize("depth", [510, 700, 950])
def test_secret_deep_in_arguments_is_redacted_with_its_subtree(redactor: Redactor, depth: int) -> None:
    """A token 501-990 levels deep is not written; the subtree is replaced and counted."""
    raw = '{"a": ' + "[" * depth + json.dumps(f"token {GH}") + "]" * depth + ', "b": "kept"}'
    guard = MessageGuard(redactor)
    out = guard.arguments(raw)
    assert GH not in out
    doc = json.loads(out)
    assert doc["b"] == "kept"
    assert sum(guard.counts.values()) >= 1


def test_deep_arguments_without_secret_are_kept_as_written(redactor: Redactor) -> None:
    """Deep nesting alone is not a reason to drop anything."""
    raw = '{"a": ' + "[" * 700 + '"plain words"' + "]" * 700 + "}"
    assert MessageGuard(redactor).arguments(raw) is raw


# -- Bearer<TAB> in tool arguments ------------------------------------------------------------------


def test_bearer_tab_in_tool_arguments_is_redacted(redactor: Redactor) -> None:
    """The tab is ``\\t`` in the JSON text of arguments; the token still goes, as in content."""
    token = body(40)
    raw = json.dumps({"headers": f"Authorization: Bearer\t{token}"})
    assert "\\t" in raw
    guard = MessageGuard(redactor)
    out = guard.arguments(raw)
    assert token not in out
    assert json.loads(out) == {"headers": "Authorization: Bearer\t" + marker("bearer_token")}
    assert guard.text(f"Bearer\t{token}") == "Bearer\t" + marker("bearer_token")


def test_guard_redacts_what_the_upload_scan_would_find(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With redaction on, the same files hold no secret at any depth and pass the scan."""
    password = "Pässwörter-Geheim-42"
    monkeypatch.setenv("DB_PASSWORD", password)
    for i, (secret, raw) in enumerate(_escaped_cases(password)):
        path = tmp_path / f"red{i}.jsonl"
        with Session(path) as s:
            s.assistant(tool_calls=[{"id": "c1", "name": "run", "arguments": raw}])
            s.tool("c1", raw)  # the same text as a tool result (content)
        _, findings = _hub.check_file(path)
        assert findings == [], (i, raw, findings)
        msgs = read(path).messages
        args = msgs[0]["toolCalls"][0]["function"]["arguments"]
        # What a reader decoding it any number of times sees holds no secret.
        views = _decoded_views(args) + _decoded_views(msgs[1]["content"])
        assert len(views) >= 3 and not any(secret in v for v in views), views


# -- Slack xapp- and xoxe- tokens -------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [
        "xapp-1-A0" + body(9, string.ascii_uppercase + string.digits) + "-" + "1234567890123-" + body(64, "abcdef0123456789"),
        "xoxe-1-" + body(140, _B62),
        "xoxe.xoxp-1-" + body(140, _B62),
    ],
    ids=["xapp", "xoxe-1", "xoxe.xoxp"],
)
def test_slack_app_and_refresh_tokens(redactor: Redactor, token: str) -> None:
    """App-level and refresh tokens are Slack tokens too."""
    out, counts = redactor.redact(f"SLACK_APP_TOKEN={token} rest")
    assert counts == {"slack_token": 1}
    assert out.endswith(" rest") and token[5:] not in out and token[-30:] not in out


@pytest.mark.parametrize("text", ["xapp-settings-panel and xoxe-handler", "the xapp-config file", "xoxe-1-a"])
def test_slack_lookalikes_are_untouched(redactor: Redactor, text: str) -> None:
    """Words that start like Slack tokens but carry no token body stay."""
    assert redactor.find(text) == []


@pytest.mark.parametrize("kind, secret, template", NEW_POSITIVES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(NEW_POSITIVES)])
def test_new_detector_positive(redactor: Redactor, kind: str, secret: str, template: str) -> None:
    """Each new shape is found with its kind, and only the secret part is replaced."""
    text = template.format(secret)
    out, counts = redactor.redact(text)
    assert counts == {kind: 1}, (out, counts)
    assert out == template.format(marker(kind))


@pytest.mark.parametrize("text", NEW_NEGATIVES, ids=range(len(NEW_NEGATIVES)))
def test_new_detector_negative(redactor: Redactor, text: str) -> None:
    """Look-alikes of the new shapes come through as they are."""
    assert redactor.find(text) == [], [text[a:b] for _, a, b in redactor.find(text)]


@pytest.mark.parametrize(
    "name, secret",
    [
        ("DATABASE_URL", True),
        ("ANALYTICS_DATABASE_URL", True),
        ("PGPASSWORD", True),
        ("MYSQL_PWD", True),
        ("OPENAI_KEY", True),
        ("STRIPE_KEY", True),
        ("SIGNING_KEY", True),
        ("PWD", False),
        ("OLDPWD", False),
        ("KEY", False),
        ("HOME_URL", False),
        ("VAPID_PUBLIC_KEY", False),
        ("STRIPE_PUBLISHABLE_KEY", False),
        ("SSH_KEY_PATH", False),
        ("KEYBOARD_LAYOUT", False),
    ],
)
def test_more_secret_env_names(name: str, secret: bool) -> None:
    """DATABASE_URL, PGPASSWORD and ``*_KEY`` are secret names; public keys and paths are not."""
    assert is_secret_env_name(name) is secret


def test_database_url_value_is_redacted_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole DATABASE_URL value (it names host and user too) is an env literal."""
    url = "postgresql://svc:Qw3rty-Uiop@db.prod.internal:5432/orders"
    monkeypatch.setenv("DATABASE_URL", url)
    out, counts = Redactor().redact(f"connecting to {url} ...")
    assert out == "connecting to [REDACTED:env] ..." and counts == {"env": 1}


# -- cost -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "unit",
    [
        "xapp-1", "xoxe-1-", "://a:b@", "://" + "a:" * 40, "secret_access_key=", "SecretAccessKey ", "Bearer%20",
        "Bearer\\t", "\\u0067", "\\\\\\\\u0067hp_", "-----BEGIN PRIVATE KEY-----\n> ", "-----BEGIN RSA PRIVATE KEY-----', '",
        "-----END RSA PRIVATE KEY-----",
    ],
)
def test_adversarial_text_for_new_shapes_stays_linear(redactor: Redactor, unit: str) -> None:
    """1 MB of one new anchor repeated is scanned in well under a second."""
    import time

    text = unit * (1_000_000 // len(unit))
    t0 = time.thread_time()  # CPU time: the same on a loaded machine
    redactor.find(text)
    assert time.thread_time() - t0 < 1.0


def test_many_begin_lines_then_one_end_are_one_block(redactor: Redactor) -> None:
    """Thousands of BEGIN lines before one END: every body line goes, in linear time."""
    text = ("-----BEGIN PRIVATE KEY-----\n" + PEM_LINES[0] + "\n") * 2000 + "-----END PRIVATE KEY-----\ntail"
    out, _ = redactor.redact(text)
    assert PEM_LINES[0] not in out and out.endswith("\ntail")


def test_tool_calls_of_other_shapes_keep_their_fields(redactor: Redactor) -> None:
    """A call with extra fields (a converter's, an OpenAI ``type``): each is redacted, none is lost."""
    guard = MessageGuard(redactor)
    call = {"id": "c1", "type": "function", "meta": (1, 2), "function": {"name": "f", "arguments": "{}", "strict": True, "note": GH}}
    msg = {"role": "assistant", "content": "", "toolCalls": [call], "timestamp": 1}
    out = guard.message(msg)["toolCalls"][0]
    assert out == {"id": "c1", "type": "function", "meta": (1, 2), "function": {"name": "f", "arguments": "{}", "strict": True, "note": marker("github_token")}}
    clean = {"id": "c1", "type": "function", "meta": (1, 2), "function": {"name": "f", "arguments": "{}", "strict": True}}
    assert guard.message({"role": "assistant", "content": "", "toolCalls": [clean], "timestamp": 1})["toolCalls"][0] is clean


@pytest.mark.parametrize("kind, secret, template", _all_positives(), ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(_all_positives())])
def test_no_shape_of_a_secret_reaches_the_file(tmp_path: Path, kind: str, secret: str, template: str) -> None:
    """Each known secret, in every field and encoding, is redacted; the written file passes the upload scan."""
    text = template.format(secret)
    path = tmp_path / "t.jsonl"
    with Session(path, metadata={"note": text, text: "as a key"}) as s:
        _record_everywhere(s, text)
    data = path.read_text()
    for line in data.splitlines():
        assert not any(secret in v for v in _decoded_views(line)), line
    assert _hub.check_file(path)[1] == []
    assert validate(path) == []


def test_name_and_id_caches_stay_small(redactor: Redactor) -> None:
    """Thousands of distinct ids and names cost a bounded memory per session (many may be open)."""
    guard = MessageGuard(redactor)
    for i in range(5000):
        cid = f"toolu_{i:024d}"
        guard.message({"role": "assistant", "content": "", "model": f"model-{i:020d}",
                       "toolCalls": [{"id": cid, "function": {"name": f"tool_number_{i:08d}", "arguments": "{}"}}]})
        guard.message({"role": "tool", "content": "ok", "toolCallId": cid, "timestamp": 1})
    assert len(guard._clean) <= 256 and len(guard._clean_ids) <= 64
    assert len(guard._names) + len(guard._ids) == 0
