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
    """The table covers built-in kinds only (tests/test_redact_breadth.py checks
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
