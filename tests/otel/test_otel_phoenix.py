"""``ststrace otlp`` and ``ststrace.otel.export()`` into a real Arize Phoenix.

Phoenix pins ``anthropic<2`` (the main test environment has anthropic 2), so
this file runs in an environment of its own: ``make test`` builds
``.venv-phoenix`` from the ``test-phoenix`` extra and runs it there; in the
main environment it is skipped. The test starts ``phoenix serve`` on
127.0.0.1 (free ports, data in a temporary directory, telemetry off), sends a
recorded session, reads the spans back through Phoenix's own REST API and
stops the server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("phoenix", reason="arize-phoenix runs in its own environment (.venv-phoenix, the test-phoenix extra)")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from ststrace import Session, otel  # noqa: E402
from ststrace._cli import main  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - 127.0.0.1 only
        return json.load(r)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    exe = shutil.which("phoenix", path=os.path.dirname(sys.executable)) or "phoenix"
    log = open(workdir / "server.log", "wb")
    proc = subprocess.Popen([exe, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2):  # noqa: S310
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("Phoenix did not start:\n" + (workdir / "server.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _session(path: Path, sid: str) -> Path:
    with Session(path, id=sid, name=f"weather {sid}", harness="my-agent") as s:
        s.system("Be brief.")
        s.user("Weather in Paris?")
        (cid,) = s.assistant(
            "Checking.", reasoning="I need the tool.", model="m-1",
            tool_calls=[{"id": f"call_{sid}", "name": "get_weather", "arguments": {"city": "Paris"}}],
            usage={"input": 10, "output": 5},
        )
        s.tool(cid, "Sunny, 21 C")
        s.assistant("It is sunny.", model="m-1", usage={"input": 20, "output": 3})
    return path


def _spans(base: str, sid: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while True:
        spans = [
            s for s in _get(f"{base}/v1/projects/default/spans?limit=1000")["data"]
            if s["attributes"].get("session.id") == sid or s["attributes"].get("gen_ai.conversation.id") == sid
            or s["name"].startswith("execute_tool") and sid in str(s["attributes"].get("gen_ai.tool.call.id"))
        ]
        if len(spans) >= 4 or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def _check(spans: list[dict[str, Any]], sid: str) -> None:
    assert len({s["context"]["trace_id"] for s in spans}) == 1, "one session, one trace"
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_kind.setdefault(s["span_kind"], []).append(s)
    (root,) = by_kind["AGENT"]
    assert root["name"] == f"invoke_agent weather {sid}" and root["parent_id"] is None
    # Both replies share a millisecond: told apart by what they said.
    chats = sorted(by_kind["LLM"], key=lambda s: "tool_call" not in s["attributes"]["gen_ai.output.messages"])
    assert [c["name"] for c in chats] == ["chat m-1", "chat m-1"]
    assert all(c["parent_id"] == root["context"]["span_id"] for c in chats)
    first_out = json.loads(chats[0]["attributes"]["gen_ai.output.messages"])
    parts = first_out[0]["parts"]
    assert {"type": "reasoning", "content": "I need the tool."} in parts
    call = next(p for p in parts if p["type"] == "tool_call")
    assert (call["id"], call["name"], json.loads(call["arguments"])) == (f"call_{sid}", "get_weather", {"city": "Paris"})
    assert chats[0]["attributes"]["gen_ai.usage.input_tokens"] == 10
    assert chats[0]["attributes"]["gen_ai.usage.output_tokens"] == 5
    assert chats[1]["attributes"]["gen_ai.usage.input_tokens"] == 20
    (tool,) = by_kind["TOOL"]
    assert tool["attributes"]["gen_ai.tool.name"] == "get_weather"
    assert tool["attributes"]["gen_ai.tool.call.result"] == "Sunny, 21 C"
    messages = json.loads(root["attributes"]["gen_ai.input.messages"])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]


def test_otel_export_into_phoenix(phoenix: str, tmp_path: Path) -> None:
    path = _session(tmp_path / "a.jsonl", "px-api")
    otel.export(path, endpoint=phoenix)
    _check(_spans(phoenix, "px-api"), "px-api")


def test_otlp_cli_into_phoenix(phoenix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _session(tmp_path / "b.jsonl", "px-cli")
    assert main(["otlp", str(path), "--endpoint", phoenix]) == 0
    assert "sent 1 session (4 spans)" in capsys.readouterr().out
    _check(_spans(phoenix, "px-cli"), "px-cli")
