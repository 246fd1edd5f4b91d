"""A secret-looking environment variable set while sessions are open costs the
one value, not a scan of the environment; nothing once no session is open
(issue 31, item 9). Bounded by counting calls, not by timing."""

from __future__ import annotations

from pathlib import Path

import weakref

import pytest
from test_redact import body

from ststrace import Session, _envwatch, _redact

SECRET = "Zq8" + body(29)


@pytest.fixture(autouse=True)
def only_this_tests_guards(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards that earlier tests in this worker process still hold (a session
    left open, a guard kept by a fixture) follow the environment too: the counts
    here are of this test's sessions alone."""
    monkeypatch.setattr(_envwatch, "_followers", weakref.WeakSet())


@pytest.fixture()
def env_scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = _redact.env_secrets
    monkeypatch.setattr(_redact, "env_secrets", lambda *a: calls.append(1) or real(*a))
    return calls


def test_a_set_with_sessions_open_reads_no_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env_scans: list[int]
) -> None:
    monkeypatch.delenv("LATE_API_KEY", raising=False)
    sessions = [Session(tmp_path / f"s{i}.jsonl").open() for i in range(20)]
    env_scans.clear()
    monkeypatch.setenv("LATE_API_KEY", SECRET)
    assert env_scans == []
    for s in sessions:
        s.user(f"key {SECRET}")
        s.close()
    for i in range(20):
        assert SECRET not in (tmp_path / f"s{i}.jsonl").read_text()


def test_guards_sharing_a_redactor_share_its_extension(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One redactor built per set, however many sessions share it."""
    monkeypatch.delenv("LATE_API_KEY", raising=False)
    calls: list[str] = []
    real = _redact.Redactor.with_env_value

    def counting(self: _redact.Redactor, name: str, value: str) -> _redact.Redactor:
        calls.append(name)
        return real(self, name, value)

    monkeypatch.setattr(_redact.Redactor, "with_env_value", counting)
    sessions = [Session(tmp_path / f"s{i}.jsonl").open() for i in range(30)]
    try:
        monkeypatch.setenv("LATE_API_KEY", SECRET)
        assert calls == ["LATE_API_KEY"]
        redactors = {id(s._guard.redactor) for s in sessions if s._guard is not None}
        assert len(redactors) == 1
    finally:
        for s in sessions:
            s.close()


def test_nothing_is_done_once_no_session_is_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LATE_API_KEY", raising=False)
    with Session(tmp_path / "t.jsonl") as s:
        s.user("hello")
    calls: list[object] = []
    monkeypatch.setattr(_envwatch, "environ_set", lambda *a: calls.append(a))
    monkeypatch.setenv("LATE_API_KEY", SECRET)
    assert calls == []


def test_a_name_set_again_replaces_its_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A token rotated a thousand times leaves one literal, not a thousand."""
    monkeypatch.delenv("LATE_API_KEY", raising=False)
    with Session(tmp_path / "t.jsonl") as s:
        guard = s._guard
        assert guard is not None and guard.redactor is not None
        before = guard.redactor.literal_count
        for i in range(1000):
            monkeypatch.setenv("LATE_API_KEY", f"{SECRET}{i:04d}")
        assert guard.redactor.literal_count == before + 1
        s.user(f"now {SECRET}0999")
    text = (tmp_path / "t.jsonl").read_text()
    assert f"{SECRET}0999" not in text and "[REDACTED:env]" in text
