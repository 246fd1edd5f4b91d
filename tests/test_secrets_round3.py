"""Secrets, third round (issue 24, items 1-5): what an adversarial review found.

Session ids that are secrets (the file name, error messages), redacted ids that
pair across processes, secret environment variables set after a session opened,
and Slack ``xoxc-``/``xoxd-`` tokens. The breadth of the token shapes (gitleaks'
rules and samples) is in tests/test_redact_gitleaks.py.

Fake secrets are assembled at run time, as in tests/test_redact.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_redact import body

from ststrace import Session
from ststrace._reader import read, validate

GH = "ghp_" + body(36)
REPO = Path(__file__).resolve().parent.parent


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


# -- 1. a secret session id ------------------------------------------------------------


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


# -- 5. redacted ids are the same in every process ----------------------------------------


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


# -- 2. a secret exported after the session opened -------------------------------------

SECRET = "Zq8" + body(29)  # no token shape: only the environment says it is a secret


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


def test_env_secret_set_in_a_test_traced_by_the_pytest_plugin(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: monkeypatch.setenv inside a test the plugin records."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # this checkout's ststrace in the subprocess
    pytester.makepyfile(
        test_late=f"""
        import ststrace

        @ststrace.tool
        def read_key():
            import os
            return os.environ["SERVICE_API_KEY"]

        def test_it(monkeypatch):
            monkeypatch.setenv("SERVICE_API_KEY", "{SECRET}")
            assert read_key() == "{SECRET}"
        """
    )
    out = tmp_path / "out"
    result = pytester.runpytest_subprocess(f"--ststrace={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (trace,) = out.glob("*.jsonl")
    text = trace.read_text()
    assert SECRET not in text and "[REDACTED:env]" in text
