"""``ststrace hooks`` with the REAL Codex CLI (``@openai/codex`` 0.171 from
npm, installed into ``.agents/`` by ``make agents`` or on first use), offline
against the fake server's Responses route through a custom model provider.

``codex exec`` runs with a temporary ``CODEX_HOME`` whose config names the
fake provider and turns analytics, OpenTelemetry export and update checks
off; its HTTP(S) proxy is a trap that fails the test if anything tries to go
out through it. Codex runs project hooks only once they are trusted: the test
passes ``--dangerously-bypass-hook-trust`` (ststrace itself never does either).
Codex sends no end event: the session is completed by ``reconcile``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents_npm import agent_bin
from hooks_helpers import Trap, convert_dir, hook_log, lines, sessions, settle

from ststrace._hooks import hook
from ststrace.testing import FakeAPI, ScriptedReply, ScriptedToolCall

pytestmark = pytest.mark.usefixtures("no_external_network")


@pytest.fixture(scope="module")
def codex() -> Path:
    exe = agent_bin("codex")
    if isinstance(exe, str):
        pytest.skip(exe)
    return exe


@pytest.fixture
def trap() -> Iterator[Trap]:
    t = Trap()
    yield t
    t.close()
    assert not t.attempts, f"the codex CLI tried to reach the network: {t.attempts}"


def test_a_codex_exec_run_is_one_sts_file_equal_to_convert(codex: Path, fake_api: FakeAPI, trap: Trap, tmp_path: Path) -> None:
    home, work, out = tmp_path / "home", tmp_path / "work", tmp_path / "sessions"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    work.mkdir()
    (codex_home / "config.toml").write_text(
        f"""model = "gpt-5.4"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{fake_api.url}/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[otel]
exporter = "none"

# What would reach past the fake provider: the plugin marketplace (a git
# clone from github.com), apps and connectors, model discovery, updates.
[features]
apps = false
plugins = false
remote_plugin = false
plugin_sharing = false
api_key_model_discovery = false
in_app_updates = false
tool_suggest = false
skill_mcp_dependency_install = false
workspace_dependencies = false
daemon_auto_start = false
"""
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "STSTRACE_KEY_FILE": os.environ["STSTRACE_KEY_FILE"],
        "FAKE_API_KEY": "test-key",
        "HTTPS_PROXY": trap.url,
        "HTTP_PROXY": trap.url,
        "https_proxy": trap.url,
        "http_proxy": trap.url,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }

    def ststrace(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ststrace", *args], capture_output=True, text=True, env=env, timeout=120)

    r = ststrace("hooks", "install", "codex", "--project", str(work), "--out", str(out))
    assert r.returncode == 0 and "trust them" in r.stdout, r.stderr
    fake_api.script(
        ScriptedReply(text="Let me run it.", tool_calls=(ScriptedToolCall("exec_command", {"cmd": "echo hi"}, "c1"),)),
        ScriptedReply(text="It printed hi."),
    )
    r = subprocess.run(
        [str(codex), "exec", "--trust", "--dangerously-bypass-hook-trust", "--skip-git-repo-check",
         "--dangerously-bypass-approvals-and-sandbox", "Run echo hi for me"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "It printed hi." in r.stdout
    assert [q.endpoint for q in fake_api.requests] == ["responses", "responses"]
    settle(out)
    (state,) = [hook.read_json(str(p)) for p in (out / hook.STATE_DIR).glob("*.json")]
    assert state is not None and state["last_event"] == "Stop" and state["closed"] is False
    r = ststrace("hooks", "reconcile", "--out", str(out))
    assert r.returncode == 0, r.stderr
    ours = sessions(out)
    assert len(ours) == 1
    assert ours == convert_dir(codex_home / "sessions", tmp_path / "converted")
    assert hook_log(out) == ""
    (data,) = ours.values()
    head, *msgs = lines(data)
    assert head["harness"] == "codex"
    calls = [m["message"] for m in msgs if m["message"].get("toolCalls")]
    assert calls and calls[0]["toolCalls"][0]["function"]["name"] == "exec_command"
    result = next(m["message"] for m in msgs if m["message"]["role"] == "tool")
    assert result["toolCallId"] == calls[0]["toolCalls"][0]["id"] and "hi" in result["content"]
    assert msgs[-1]["message"]["content"] == "It printed hi."
    after = hook.read_json(str(out / hook.STATE_DIR / f"codex-{state['session']}.json"))
    assert after is not None and after["closed"] is True
