"""Secrets, second round (issue 13, items 1-9): leaks an adversarial review found.

PEM keys split by any separator, top-level metadata keys, env values with
surrounding whitespace, every field of a message and of the header, deep
nesting, ``Bearer<TAB>``, escapes at any depth (the guard and the upload scan
must agree), Slack ``xapp-``/``xoxe-`` tokens, and the detectors added for
AWS secret access keys, URL passwords, more env names and ``Bearer%20``.

Fake secrets are assembled at run time (prefix + random body) so that this
file holds no string a secret scanner would flag.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_redact import _B62, body

from ststrace import Session, _hub, tool
from ststrace._guard import MessageGuard
from ststrace._reader import read, validate
from ststrace._redact import Redactor, env_secrets, is_secret_env_name, marker

PEM_LINES = [body(64, _B62 + "+/") for _ in range(8)] + [body(36, _B62 + "+/") + "=="]
PEM = "\n".join(["-----BEGIN RSA " + "PRIVATE KEY-----", *PEM_LINES, "-----END RSA PRIVATE KEY-----"])
GH = "ghp_" + body(36)
OPENAI = "sk-" + body(48)
AWS_SECRET = body(30, _B62 + "/+") + "/" + body(9)  # 40 characters, like the real ones


@pytest.fixture()
def redactor() -> Redactor:
    return Redactor(env=False)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def _no_pem_body(text: str) -> bool:
    return not any(line in text for line in PEM_LINES)


# -- 1. PEM keys across any separators -----------------------------------------------------


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


# -- 2. top-level metadata keys ---------------------------------------------------------------


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


# -- 3. env values with surrounding whitespace ------------------------------------------------------


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


# -- 4. every string that reaches the file -------------------------------------------------------


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


# -- 5. deep nesting fails closed ---------------------------------------------------------------------


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


# -- 6. Bearer<TAB> in tool arguments ------------------------------------------------------------------


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


# -- 7. escapes at any depth: the guard and the upload scan agree ---------------------------------------


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


def test_upload_scan_sees_secrets_behind_any_number_of_escapes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file written with ``redact=False`` is refused whatever depth of JSON escaping hides a secret."""
    password = "Pässwörter-Geheim-42"
    monkeypatch.setenv("DB_PASSWORD", password)
    for i, (_, raw) in enumerate(_escaped_cases(password)):
        path = tmp_path / f"raw{i}.jsonl"
        with Session(path, redact=False) as s:
            s.assistant(tool_calls=[{"id": "c1", "name": "run", "arguments": raw}])
        items = _hub.upload([path], repo="alice/t", dry_run=True)
        assert items[0].status == "refused", (i, raw)


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


def test_upload_scan_keeps_clean_escaped_text(tmp_path: Path) -> None:
    """Escapes, Windows paths, unicode and nested JSON without secrets still pass."""
    raw = json.dumps({"code": json.dumps({"path": "C:\\Users\\me\\new", "s": "naïve café", "n": "a\tb\\u00"})})
    path = tmp_path / "clean.jsonl"
    with Session(path, redact=False) as s:
        s.assistant(tool_calls=[{"id": "c1", "name": "run", "arguments": raw}])
        s.tool("c1", "ok")
    assert _hub.check_file(path)[1] == []


def test_upload_scan_survives_deep_nesting(tmp_path: Path) -> None:
    """Header metadata nested ~1000 deep (valid) is decoded and scanned without a RecursionError."""
    path = tmp_path / "deep.jsonl"
    escaped = '"\\u0067' + GH[1:] + '"'
    path.write_text(
        '{"type":"session","harness":"h","id":"d","m":' + "[" * 1000 + escaped + "]" * 1000 + "}\n"
        '{"type":"message","message":{"role":"user","content":"hi"}}\n'
        '{"type":"message","message":{"role":"assistant","content":"ok","model":"m"}}\n'
    )
    findings = _hub.scan_secrets(path, path.read_bytes(), Redactor(env=False))
    assert [f.kind for f in findings] == ["secret:github_token"]


# -- 8. Slack xapp- and xoxe- tokens -------------------------------------------------------------------


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


# -- 9. new detectors ---------------------------------------------------------------------------------


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
