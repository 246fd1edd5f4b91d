"""``ststrace hooks`` with the REAL Gemini CLI (``@google/gemini-cli`` 0.61
from npm, installed into ``.agents/`` by ``make agents`` or on first use),
offline against the fake server's Gemini route (``GOOGLE_GEMINI_BASE_URL``).

``gemini -p`` runs with a temporary ``HOME`` whose user settings select
API-key auth, turn folder trust off, and turn usage statistics, telemetry and
update checks off; its HTTP(S) proxy is a trap that fails the test if the CLI
tries to go anywhere through it. A model is named, so the CLI's model router
(one more model call) stays out of the way.
"""

from __future__ import annotations

import json
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
def gemini() -> Path:
    exe = agent_bin("gemini")
    if isinstance(exe, str):
        pytest.skip(exe)
    return exe


@pytest.fixture
def trap() -> Iterator[Trap]:
    t = Trap()
    yield t
    t.close()
    assert not t.attempts, f"the gemini CLI tried to reach the network: {t.attempts}"


USER_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}


def test_a_gemini_cli_run_is_one_sts_file_equal_to_convert(
    gemini: Path, fake_api: FakeAPI, trap: Trap, tmp_path: Path
) -> None:
    """A prompt, a shell tool call, its result, the answer: the hooks' file is
    byte for byte what ``convert`` writes for the CLI's ``session-*.jsonl``."""
    home, work, out = tmp_path / "home", tmp_path / "work", tmp_path / "sessions"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(USER_SETTINGS))
    work.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "STSTRACE_KEY_FILE": os.environ["STSTRACE_KEY_FILE"],
        "GEMINI_API_KEY": "test-key",
        "GOOGLE_GEMINI_BASE_URL": fake_api.url,
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "HTTPS_PROXY": trap.url,
        "HTTP_PROXY": trap.url,
        "https_proxy": trap.url,
        "http_proxy": trap.url,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    r = subprocess.run(
        [sys.executable, "-m", "ststrace", "hooks", "install", "gemini", "--project", str(work), "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    fake_api.script(
        ScriptedReply(text="Let me run it.", tool_calls=(ScriptedToolCall("run_shell_command", {"command": "echo hi"}, "s1"),)),
        ScriptedReply(text="It printed hi."),
    )
    r = subprocess.run(
        [str(gemini), "-p", "Run echo hi for me", "--yolo", "-m", "gemini-2.5-flash"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "It printed hi." in r.stdout
    assert [q.endpoint for q in fake_api.requests] == ["gemini", "gemini"]
    settle(out)
    ours = sessions(out)
    assert len(ours) == 1
    assert ours == convert_dir(home / ".gemini" / "tmp", tmp_path / "converted")
    assert hook_log(out) == ""
    (data,) = ours.values()
    head, *msgs = lines(data)
    assert head["harness"] == "gemini-cli"
    roles = [m["message"]["role"] for m in msgs]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = msgs[2]["message"]["toolCalls"][0]
    assert call["function"]["name"] == "run_shell_command" and msgs[3]["message"]["toolCallId"] == call["id"]
    assert "hi" in msgs[3]["message"]["content"]
    state = hook.read_json(str(out / hook.STATE_DIR / f"gemini-{head['id']}.json"))
    assert state is not None and state["closed"] is True and state["last_event"] == "SessionEnd"
