"""``ststrace hooks``: the settings edits, the hook program, the worker, reconcile, sync.

Hook payloads here are the ones Claude Code's hooks reference documents
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``); the
real CLI runs in tests/hooks/test_hooks_claude.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hooks_helpers import convert_dir, hook_log, lines, sessions, settle
from test_hub import FakeHfApi

from ststrace import _hub
from ststrace._hooks import hook, settings, worker

WILD = Path(__file__).resolve().parents[1] / "fixtures" / "convert-wild"
HOOK = [sys.executable, "-I", hook.__file__]


def cli(*args: str, env: dict[str, str] | None = None, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ststrace", *args], input=stdin, capture_output=True, env=env, timeout=120)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The user's state (settings backups) and data directories inside *tmp_path*."""
    return {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")}


USER_SETTINGS = b"""{
    "model": "opus",
    "hooks": {
        "Stop": [ { "hooks": [ { "type": "command", "command": "notify-send done" } ] } ],
        "PreToolUse": [ { "matcher": "Bash", "hooks": [ { "type": "command", "command": "./guard.sh" } ] } ]
    },
    "permissions": { "allow": ["Bash(ls:*)"] }
}
"""


# -- settings -----------------------------------------------------------------------


def test_install_adds_only_marked_entries_and_uninstall_gives_the_file_back(tmp_path: Path, env: dict[str, str]) -> None:
    project = tmp_path / "proj"
    path = project / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(USER_SETTINGS)
    r = cli("hooks", "install", "claude-code", "--project", str(project), "--out", str(tmp_path / "out"), env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == f"claude-code (project): installed in {path}; sessions go to {tmp_path / 'out'}\n"
    after = json.loads(path.read_bytes())
    before = json.loads(USER_SETTINGS)
    assert after["model"] == "opus" and after["permissions"] == before["permissions"]
    assert after["hooks"]["PreToolUse"] == before["hooks"]["PreToolUse"]  # not an event we hook
    assert after["hooks"]["Stop"][0] == before["hooks"]["Stop"][0]  # the user's hook first, untouched
    ours = settings.installed_commands(after)
    assert set(ours) == set(settings.EVENTS["claude-code"])
    assert all(c == ours["Stop"] for c in ours.values())
    assert f"{hook.__file__} claude-code --out {tmp_path / 'out'}" in ours["Stop"] and ours["Stop"].startswith(sys.executable)
    # Installing twice is installing once.
    installed = path.read_bytes()
    r = cli("hooks", "install", "claude-code", "--project", str(project), "--out", str(tmp_path / "out"), env=env)
    assert b"already installed" in r.stdout and path.read_bytes() == installed
    # Another --out replaces our entries, not adds to them.
    r = cli("hooks", "install", "claude-code", "--project", str(project), "--out", str(tmp_path / "o2"), env=env)
    assert b"updated" in r.stdout
    assert sum(len(g) for g in json.loads(path.read_bytes())["hooks"].values()) == len(settings.EVENTS["claude-code"]) + 2
    r = cli("hooks", "uninstall", "claude-code", "--project", str(project), env=env)
    assert r.returncode == 0 and b"uninstalled" in r.stdout
    assert path.read_bytes() == USER_SETTINGS  # byte for byte, formatting too
    r = cli("hooks", "uninstall", "claude-code", "--project", str(project), env=env)
    assert b"not installed" in r.stdout and path.read_bytes() == USER_SETTINGS


def test_uninstall_keeps_what_the_user_changed_meanwhile(tmp_path: Path, env: dict[str, str]) -> None:
    project = tmp_path / "proj"
    path = project / ".gemini" / "settings.json"
    assert cli("hooks", "install", "gemini", "--project", str(project), env=env).returncode == 0
    obj = json.loads(path.read_bytes())
    assert obj["hooks"]["AfterTool"][0]["matcher"] == "*"
    obj["ui"] = {"theme": "dark"}
    obj["hooks"]["AfterTool"].append({"hooks": [{"type": "command", "command": "mine"}]})
    path.write_text(json.dumps(obj))
    assert cli("hooks", "uninstall", "gemini", "--project", str(project), env=env).returncode == 0
    assert json.loads(path.read_bytes()) == {"ui": {"theme": "dark"}, "hooks": {"AfterTool": [{"hooks": [{"type": "command", "command": "mine"}]}]}}


def test_install_into_no_file_and_uninstall_removes_it(tmp_path: Path, env: dict[str, str]) -> None:
    home = Path(env["HOME"])
    r = cli("hooks", "install", "claude-code", "--user", env=env)
    path = home / ".claude" / "settings.json"
    assert r.returncode == 0 and path.exists()
    assert f"sessions go to {tmp_path / 'data' / 'ststrace' / 'sessions'}" in r.stdout.decode()
    assert cli("hooks", "uninstall", "claude-code", "--user", env=env).returncode == 0
    assert not path.exists()


@pytest.mark.parametrize(
    "text, why",
    [(b"{ not json", "not valid JSON"), (b"[1, 2]", "holds a JSON list"), (b'{"hooks": []}', '"hooks" is not an object')],
)
def test_a_settings_file_it_cannot_read_is_left_untouched(tmp_path: Path, env: dict[str, str], text: bytes, why: str) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_bytes(text)
    for action in ("install", "uninstall"):
        r = cli("hooks", action, "claude-code", "--project", str(tmp_path), env=env)
        err = r.stderr.decode()
        assert r.returncode == 1 and err.count("\n") == 1 and str(path) in err and why in err and "left untouched" in err
        assert path.read_bytes() == text
    assert "cannot read" in cli("hooks", "status", "--project", str(tmp_path), env=env).stdout.decode()


def test_codex_install_writes_hooks_json_and_says_how_to_trust(tmp_path: Path, env: dict[str, str]) -> None:
    r = cli("hooks", "install", "codex", "--project", str(tmp_path), env=env)
    out = r.stdout.decode()
    assert r.returncode == 0 and "trust them" in out and "/hooks" in out
    assert set(settings.installed_commands(json.loads((tmp_path / ".codex" / "hooks.json").read_bytes()))) == set(settings.EVENTS["codex"])
    assert "trust: not checked" in cli("hooks", "status", "--project", str(tmp_path), env=env).stdout.decode()
    assert cli("hooks", "uninstall", "codex", "--project", str(tmp_path), env=env).returncode == 0
    assert not (tmp_path / ".codex").exists()  # the folder install made goes too


# -- the hook -----------------------------------------------------------------------


def _event(transcript: Path, name: str, session: str = "cc-main-1", cwd: str = "/home/dev/shop") -> bytes:
    return json.dumps({"session_id": session, "transcript_path": str(transcript), "cwd": cwd, "hook_event_name": name}).encode()


def _hook(out: Path, payload: bytes, *extra: str, agent: str = "claude-code") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*HOOK, agent, "--out", str(out), *extra], input=payload, capture_output=True, timeout=60)


def _transcripts(tmp_path: Path) -> Path:
    projects = tmp_path / "projects" / "-home-dev-shop"
    projects.mkdir(parents=True)
    shutil.copy(WILD / "cc-main-1.jsonl", projects / "cc-main-1.jsonl")
    shutil.copytree(WILD / "cc-main-1", projects / "cc-main-1")
    return projects / "cc-main-1.jsonl"


def test_the_hook_prints_nothing_exits_0_and_writes_what_convert_writes(tmp_path: Path) -> None:
    """A session with a sub-agent transcript beside it: two files, equal to ``convert``'s."""
    transcript = _transcripts(tmp_path)
    out = tmp_path / "out"
    r = _hook(out, _event(transcript, "Stop"))
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    settle(out)
    ours = sessions(out)
    assert len(ours) == 2 and ours == convert_dir(transcript.parent, tmp_path / "conv")
    child = next(lines(d)[0] for d in ours.values() if "parentSessionId" in lines(d)[0])
    assert child["parentSessionId"] == "cc-main-1"
    assert hook_log(out) == ""


def test_the_hook_never_imports_ststrace(tmp_path: Path) -> None:
    """What keeps it fast: the hook process loads the standard library only."""
    transcript = _transcripts(tmp_path)
    r = subprocess.run(
        [sys.executable, "-I", "-X", "importtime", hook.__file__, "claude-code", "--out", str(tmp_path / "out")],
        input=_event(transcript, "UserPromptSubmit"),
        capture_output=True,
        timeout=60,
    )
    imported = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.decode().splitlines() if line.startswith("import time:")]
    assert "json" in imported and not [m for m in imported if m.split(".")[0] in ("ststrace", "orjson", "wrapt")]
    settle(tmp_path / "out")


@pytest.mark.parametrize("payload", [b"", b"not json", b"[1]", b'{"hook_event_name": "Stop"}'])
def test_a_bad_event_is_logged_never_shown_to_the_agent(tmp_path: Path, payload: bytes) -> None:
    out = tmp_path / "out"
    r = _hook(out, payload)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert "hook claude-code:" in hook_log(out)
    r = _hook(out, b"{}", "--as", "xml")
    assert (r.returncode, r.stdout) == (0, b"")
    assert "--as must be sts or pi" in hook_log(out)


def test_the_offset_stops_at_the_last_whole_line(tmp_path: Path) -> None:
    t = tmp_path / "t.jsonl"
    t.write_bytes(b'{"a":1}\n{"b":2}\n{"torn')
    opts = hook.Options("claude-code", str(tmp_path / "out"), None, "sts")
    hook.note(opts, hook._event("claude-code", json.loads(_event(t, "Stop", session="s1")), []))
    st = hook.read_json(str(tmp_path / "out" / hook.STATE_DIR / "claude-code-s1.json"))
    assert st is not None and st["offset"] == 16 and st["gen"] == 1 and st["closed"] is False


def test_two_sessions_in_one_directory_get_their_own_files(tmp_path: Path) -> None:
    transcript = _transcripts(tmp_path)
    other = transcript.with_name("other.jsonl")
    other.write_bytes(transcript.read_bytes().replace(b'"sessionId":"cc-main-1"', b'"sessionId":"other"'))
    out = tmp_path / "out"
    _hook(out, _event(transcript, "Stop"))
    _hook(out, _event(other, "Stop", session="other"))
    settle(out)
    names = sorted(sessions(out))
    assert "cc-main-1.jsonl" in names and "other.jsonl" in names
    assert lines(sessions(out)["other.jsonl"])[0]["id"] == "other"


# -- nothing lost -------------------------------------------------------------------


def _dead_process() -> list[Any]:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    st = hook._stat(p.pid)
    assert st is not None
    p.kill()
    p.wait()
    return [p.pid, st[20]]


def test_reconcile_completes_a_session_whose_agent_died(tmp_path: Path, env: dict[str, str]) -> None:
    """The agent died after its last event and wrote more before dying: reconcile
    converts the whole transcript and marks the session ended; a running one stays open."""
    transcript = _transcripts(tmp_path)
    full = transcript.read_bytes()
    cut = full.index(b"\n", len(full) // 2) + 1
    transcript.write_bytes(full[:cut])
    out = tmp_path / "out"
    _hook(out, _event(transcript, "PostToolUse"))
    _hook(out, _event(transcript, "Stop", session="alive"))
    settle(out)
    state = out / hook.STATE_DIR
    for key, proc in (("claude-code-cc-main-1", _dead_process()), ("claude-code-alive", [os.getpid(), hook._stat(os.getpid())[20]])):  # type: ignore[index]
        st = hook.read_json(str(state / f"{key}.json"))
        assert st is not None
        st["process"] = proc
        hook.write_json(str(state / f"{key}.json"), st)
    transcript.write_bytes(full)  # the lines no event announced
    r = cli("hooks", "reconcile", "--out", str(out))
    assert r.returncode == 0 and b"brought 2 sessions up to date" in r.stdout, r.stderr
    assert hook.read_json(str(state / "claude-code-cc-main-1.json"))["closed"] is True  # type: ignore[index]
    assert hook.read_json(str(state / "claude-code-alive.json"))["closed"] is False  # type: ignore[index]
    assert (state / "open" / "claude-code-alive").exists() and not (state / "open" / "claude-code-cc-main-1").exists()
    assert sessions(out)["cc-main-1.jsonl"] == convert_dir(transcript.parent, tmp_path / "conv")["cc-main-1.jsonl"]


def test_a_new_session_in_the_directory_completes_the_abandoned_one(tmp_path: Path) -> None:
    transcript = _transcripts(tmp_path)
    out = tmp_path / "out"
    opts = hook.Options("claude-code", str(out), None, "sts")
    hook.note(opts, hook._event("claude-code", json.loads(_event(transcript, "Stop")), []))
    path = out / hook.STATE_DIR / "claude-code-cc-main-1.json"
    st = hook.read_json(str(path))
    assert st is not None
    st["process"] = _dead_process()
    hook.write_json(str(path), st)
    keys = hook.note(opts, hook._event("claude-code", json.loads(_event(transcript, "SessionStart", session="next")), []))
    assert keys == ["claude-code-next", "claude-code-cc-main-1"]
    assert hook.read_json(str(path))["closed"] is True  # type: ignore[index]
    # Another directory's session is not touched.
    hook.note(opts, hook._event("claude-code", json.loads(_event(transcript, "Stop", session="elsewhere", cwd="/x")), []))
    assert hook.note(opts, hook._event("claude-code", json.loads(_event(transcript, "SessionStart", session="n2")), [])) == ["claude-code-n2"]


# -- sync ---------------------------------------------------------------------------


def test_an_ended_session_is_synced_once_through_sync_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeHfApi()
    monkeypatch.setattr(_hub, "_default_api", lambda: api)
    transcript = _transcripts(tmp_path)
    out = tmp_path / "out"
    opts = hook.Options("claude-code", str(out), "hf://buckets/alice/agents", "sts")
    key = hook.note(opts, hook._event("claude-code", json.loads(_event(transcript, "Stop")), []))[0]
    worker.process(opts, key)
    assert api.calls == []  # still open: nothing sent
    hook.note(opts, hook._event("claude-code", json.loads(_event(transcript, "SessionEnd")), []))
    worker.process(opts, key)
    assert api.sent() == {name: data for name, data in sessions(out).items()}
    done = hook.read_json(str(out / hook.STATE_DIR / f"{key}.done"))
    assert done is not None and done["synced"] == done["gen"]


def _big_transcript(path: Path, copies: int) -> None:
    """cc-main-1's conversation repeated *copies* times (fresh line and reply ids), a few MB."""
    src = [json.loads(line) for line in (WILD / "cc-main-1.jsonl").read_text().splitlines()]
    with open(path, "w") as f:
        for i in range(copies):
            for obj in src:
                obj = dict(obj)
                if "uuid" in obj:
                    obj["uuid"] = f"{obj['uuid']}-{i}"
                msg = obj.get("message")
                if isinstance(msg, dict) and msg.get("id"):
                    obj["message"] = {**msg, "id": f"{msg['id']}-{i}"}
                f.write(json.dumps(obj) + "\n")


def test_a_worker_killed_mid_conversion_leaves_a_valid_file_and_the_next_event_completes_it(tmp_path: Path) -> None:
    import signal
    import time

    import ststrace

    transcript = _transcripts(tmp_path)
    out = tmp_path / "out"
    _hook(out, _event(transcript, "Stop"))
    settle(out)
    before = sessions(out)["cc-main-1.jsonl"]
    _big_transcript(transcript, 300)
    state = out / hook.STATE_DIR
    lock = state / "claude-code-cc-main-1.lock"
    first = lock.read_text()  # the pid of the worker that has finished
    _hook(out, _event(transcript, "Stop"))
    # Wait for the new worker to hold the session's lock (it writes its pid there).
    deadline = time.monotonic() + 60
    while True:
        with hook._Flock(str(lock), wait=False) as probe:
            holder = lock.read_text()
            if not probe.held and holder and holder != first:
                break
        assert time.monotonic() < deadline, "no worker took the lock"
        time.sleep(0.01)
    os.kill(int(holder), signal.SIGKILL)
    assert hook.needs_work(str(state), "claude-code-cc-main-1")
    # The file is the previous whole one (replaced atomically, never written in place).
    assert sessions(out)["cc-main-1.jsonl"] == before
    assert not [p for p in ststrace.validate(out / "cc-main-1.jsonl") if p.severity == "error"]
    _hook(out, _event(transcript, "Stop"))
    settle(out)
    assert sessions(out)["cc-main-1.jsonl"] == convert_dir(transcript.parent, tmp_path / "conv")["cc-main-1.jsonl"]


def test_as_pi_writes_what_convert_to_pi_writes(tmp_path: Path) -> None:
    transcript = _transcripts(tmp_path)
    out = tmp_path / "out"
    r = _hook(out, _event(transcript, "Stop"), "--as", "pi")
    assert (r.returncode, r.stdout) == (0, b"")
    settle(out)
    conv = subprocess.run(
        [sys.executable, "-m", "ststrace", "convert", "--to", "pi", "-o", str(tmp_path / "conv"), str(transcript.parent)],
        capture_output=True, timeout=120,
    )
    assert conv.returncode == 0, conv.stderr
    ours = sessions(out)
    assert len(ours) == 2 and ours == {p.name: p.read_bytes() for p in (tmp_path / "conv").glob("*.jsonl")}
    assert all(lines(d)[0]["type"] == "session" and "harness" in lines(d)[0] for d in ours.values())
    assert hook_log(out) == ""
