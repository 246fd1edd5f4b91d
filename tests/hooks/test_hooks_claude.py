"""``ststrace hooks`` with the REAL Claude Code CLI (the one bundled with
``claude-agent-sdk``), offline against the fake server's Anthropic route.

The hooks are installed with ``ststrace hooks install`` into a temporary
project; the CLI runs with a temporary ``HOME`` / ``CLAUDE_CONFIG_DIR``, every
switch that stops its telemetry, error reports, update checks and feature
flags, and its HTTP(S) proxy set to a trap that fails the test if anything
tries to leave through it. Each run's STS files must be byte for byte what
``ststrace convert`` writes for the transcripts the CLI left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sdk = pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed (pip install 'ststrace[test]')")

from hooks_helpers import Trap, convert_dir, hook_log, lines, sessions, settle  # noqa: E402

from ststrace._hooks import hook  # noqa: E402
from ststrace.testing import FakeAPI, ScriptedReply, ScriptedToolCall  # noqa: E402

CLAUDE = Path(sdk.__file__).parent / "_bundled" / "claude"
pytestmark = [
    pytest.mark.usefixtures("no_external_network"),
    pytest.mark.skipif(not CLAUDE.exists(), reason="claude-agent-sdk has no bundled CLI on this platform"),
]
PROMPT = "Run echo hi for me"


@pytest.fixture
def trap() -> Iterator[Trap]:
    t = Trap()
    yield t
    t.close()
    assert not t.attempts, f"the claude CLI tried to reach the network: {t.attempts}"


class Agent:
    def __init__(self, api: FakeAPI, trap: Trap, tmp: Path) -> None:
        self.api = api
        self.work = tmp / "work"
        self.home = tmp / "home"
        self.out = tmp / "sessions"
        self.work.mkdir()
        (self.home / ".claude").mkdir(parents=True)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "STSTRACE_KEY_FILE": os.environ["STSTRACE_KEY_FILE"],
            "XDG_STATE_HOME": str(tmp / "state"),
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "test-key",
            "HOME": str(self.home),
            "CLAUDE_CONFIG_DIR": str(self.home / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "ENABLE_TOOL_SEARCH": "false",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_UPDATES": "1",
            "DISABLE_GROWTHBOOK": "1",
            "CLAUDE_CODE_DISABLE_FEATURE_FLAGS": "1",
            "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
            "DISABLE_INSTALLATION_CHECKS": "1",
            "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
            "HTTPS_PROXY": trap.url,
            "HTTP_PROXY": trap.url,
            "https_proxy": trap.url,
            "http_proxy": trap.url,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        r = self.ststrace("hooks", "install", "claude-code", "--project", str(self.work), "--out", str(self.out))
        assert r.returncode == 0 and "installed" in r.stdout, r.stderr

    def ststrace(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ststrace", *args], capture_output=True, text=True, env=self.env, timeout=120)

    def argv(self, prompt: str, tools: str = "Bash") -> list[str]:
        return [str(CLAUDE), "-p", prompt, "--allowedTools", tools, "--max-turns", "8"]

    def run(self, prompt: str = PROMPT, tools: str = "Bash") -> str:
        r = subprocess.run(self.argv(prompt, tools), cwd=self.work, env=self.env, capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout

    @property
    def projects(self) -> Path:
        return self.home / ".claude" / "projects"

    def check_equal_to_convert(self, tmp: Path) -> dict[str, bytes]:
        settle(self.out)
        ours = sessions(self.out)
        assert ours == convert_dir(self.projects, tmp / "converted")
        assert hook_log(self.out) == ""
        return ours


@pytest.fixture
def agent(fake_api: FakeAPI, trap: Trap, tmp_path: Path) -> Agent:
    return Agent(fake_api, trap, tmp_path)


def bash(command: str, suffix: str) -> ScriptedToolCall:
    return ScriptedToolCall("Bash", {"command": command, "description": "run it"}, suffix)


def messages(data: bytes) -> list[dict[str, Any]]:
    return [{k: v for k, v in line["message"].items() if k not in ("timestamp", "usage", "model")} for line in lines(data)[1:]]


def test_a_run_with_a_tool_call_is_one_sts_file_equal_to_convert(agent: Agent, tmp_path: Path) -> None:
    """The hooks write one file per session, the tool call paired with its
    result, the reply with its usage; it is what ``convert`` writes for the transcript."""
    agent.api.script(ScriptedReply(text="Let me run it.", tool_calls=(bash("echo hi", "b1"),)), ScriptedReply(text="It printed hi."))
    assert agent.run() == "It printed hi.\n"
    ours = agent.check_equal_to_convert(tmp_path)
    (data,) = ours.values()
    head = lines(data)[0]
    assert head["harness"] == "claude-code" and head["cwd"] == str(agent.work)
    msgs = messages(data)
    assert [m["role"] for m in msgs if m["role"] != "system"] == ["user", "assistant", "tool", "assistant"]
    call = next(m for m in msgs if m.get("toolCalls"))
    assert call["toolCalls"][0]["id"] == "toolu_b1" and call["toolCalls"][0]["function"]["name"] == "Bash"
    assert next(m for m in msgs if m["role"] == "tool") == {"role": "tool", "content": "hi", "toolCallId": "toolu_b1"}
    state = hook.read_json(str(agent.out / hook.STATE_DIR / f"claude-code-{head['id']}.json"))
    assert state is not None and state["closed"] is True and state["last_event"] == "SessionEnd"
    # status names where the sessions go and the last event.
    status = agent.ststrace("hooks", "status", "--project", str(agent.work)).stdout
    assert f"sessions in {agent.out}" in status and f"SessionEnd at" in status and head["id"] in status


def test_a_sub_agent_is_a_linked_child_session(agent: Agent, tmp_path: Path) -> None:
    """The ``Agent`` tool: the sub-agent's own transcript becomes a second
    file naming its parent session and the call that started it."""
    task = {"description": "Say hi", "prompt": "Echo sub for me", "subagent_type": "general-purpose", "run_in_background": False}
    agent.api.script(
        ScriptedReply(text="Delegating.", tool_calls=(ScriptedToolCall("Agent", task, "task1"),), when=PROMPT),
        ScriptedReply(text="The sub-agent said sub.", when=PROMPT),
        ScriptedReply(text=None, tool_calls=(bash("echo sub", "s1"),), when=task["prompt"]),
        ScriptedReply(text="It printed sub.", when=task["prompt"]),
    )
    assert agent.run(tools="Bash,Agent") == "The sub-agent said sub.\n"
    ours = agent.check_equal_to_convert(tmp_path)
    assert len(ours) == 2
    heads = {name: lines(data)[0] for name, data in ours.items()}
    (parent,) = [h for h in heads.values() if "parentSessionId" not in h]
    (child,) = [h for h in heads.values() if "parentSessionId" in h]
    assert child["parentSessionId"] == parent["id"] and child["parentToolCallId"] == "toolu_task1"
    child_msgs = messages(ours[next(n for n, h in heads.items() if h is child)])
    assert {"role": "tool", "content": "sub", "toolCallId": "toolu_s1"} in child_msgs


class _Held(FakeAPI):
    """A fake server that holds its *n*-th request until released, telling the test when it arrived."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.arrived = threading.Event()
        self.release = threading.Event()

    def _reply_for(self, endpoint: Any, body: Any, n: int, request: Any) -> Any:
        if n == self.n:
            self.arrived.set()
            self.release.wait(60)
        return super()._reply_for(endpoint, body, n, request)


def test_an_agent_killed_mid_run_is_completed_at_the_next_start(trap: Trap, tmp_path: Path, no_external_network: Any) -> None:
    """``kill -9`` while the model answers: no end event ever comes. The file
    holds what the hooks saw; the next session started in that directory
    completes it from its transcript (and it equals ``convert``'s)."""
    with _Held(2) as api:
        agent = Agent(api, trap, tmp_path)
        api.script(ScriptedReply(text="Let me run it.", tool_calls=(bash("echo hi", "b1"),)), ScriptedReply(text="unused"))
        proc = subprocess.Popen(agent.argv(PROMPT), cwd=agent.work, env=agent.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert api.arrived.wait(120), "the CLI never asked for its second reply"
            proc.kill()
            proc.wait(60)
        finally:
            api.release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        settle(agent.out)
        state_dir = agent.out / hook.STATE_DIR
        (killed,) = [hook.read_json(str(p)) for p in state_dir.glob("*.json")]
        assert killed is not None and killed["closed"] is False and killed["last_event"] == "PostToolUse"
        assert (state_dir / "open" / f"claude-code-{killed['session']}").exists()
        # The next session in that directory.
        api.script(ScriptedReply(text="Hello again."))
        assert agent.run("hello") == "Hello again.\n"
        ours = agent.check_equal_to_convert(tmp_path)
    assert len(ours) == 2
    after = hook.read_json(str(state_dir / f"claude-code-{killed['session']}.json"))
    assert after is not None and after["closed"] is True and after["closed_by"] == "reconcile"
    assert not (state_dir / "open" / f"claude-code-{killed['session']}").exists()
    msgs = messages(ours[f"{killed['session']}.jsonl"])
    # What the CLI had written when it died: the prompt and the call (its
    # result may not have reached the transcript before the kill).
    assert [m["role"] for m in msgs if m["role"] != "system"][:2] == ["user", "assistant"]
    assert msgs[1]["toolCalls"][0]["id"] == "toolu_b1"


def test_a_background_sub_agent_and_two_parallel_ones_are_linked_children(agent: Agent, tmp_path: Path) -> None:
    """The CLI's default (the sub-agent runs in the background while the parent
    goes on), two of them started by one reply: one child file each, every one
    linked to its own call, all equal to ``convert``'s."""
    tasks = [
        {"description": f"Echo {w}", "prompt": f"Echo {w} for me", "subagent_type": "general-purpose"}
        for w in ("one", "two")
    ]
    agent.api.script(
        ScriptedReply(
            text="Delegating.",
            tool_calls=tuple(ScriptedToolCall("Agent", t, f"task{i}") for i, t in enumerate(tasks)),
            when=PROMPT,
        ),
        ScriptedReply(text="Both agents started.", when=PROMPT),
        ScriptedReply(text="Both agents are done.", when=PROMPT),
        ScriptedReply(text="And done.", when=PROMPT),
        *(
            r
            for i, t in enumerate(tasks)
            for r in (
                ScriptedReply(text=None, tool_calls=(bash(f"echo {t['prompt'].split()[1]}", f"s{i}"),), when=t["prompt"], delay=0.3),
                ScriptedReply(text=f"It printed {t['prompt'].split()[1]}.", when=t["prompt"]),
            )
        ),
    )
    agent.run(tools="Bash,Agent")
    ours = agent.check_equal_to_convert(tmp_path)
    heads = [lines(d)[0] for d in ours.values()]
    (parent,) = [h for h in heads if "parentSessionId" not in h]
    children = [h for h in heads if "parentSessionId" in h]
    assert sorted(h["parentToolCallId"] for h in children) == ["toolu_task0", "toolu_task1"]
    assert all(h["parentSessionId"] == parent["id"] for h in children)
    parent_msgs = messages(next(d for d in ours.values() if lines(d)[0]["id"] == parent["id"]))
    launched = [m["content"] for m in parent_msgs if m["role"] == "tool"]
    assert len(launched) == 2 and all(c.startswith("Async agent launched") for c in launched)  # in the background
