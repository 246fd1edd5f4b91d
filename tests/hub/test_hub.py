"""Publishing traces to the Hugging Face Hub (ststrace._hub) and ``ststrace upload``.

Two kinds of fake Hub: an object with ``HfApi``'s method names that records
calls (each call is bound against the real ``HfApi`` method's signature, so a
call the real client would reject fails here too), and the real
``huggingface_hub.HfApi`` pointed at a local HTTP server on 127.0.0.1. A
network guard refuses anything that is not loopback.
"""

from __future__ import annotations

import argparse
import base64
import inspect
import json
import logging
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

huggingface_hub = pytest.importorskip("huggingface_hub")
from huggingface_hub import HfApi  # noqa: E402

from ststrace import (
    Session,  # noqa: E402
    _hub,  # noqa: E402
)
from ststrace._cli.upload import run as run_upload  # noqa: E402
from ststrace._convert import write_trace  # noqa: E402
from ststrace._reader import Trace  # noqa: E402
from ststrace.cli import build_parser  # noqa: E402
from ststrace.testing import localhost_only  # noqa: E402
from ststrace._redact import Redactor  # noqa: E402
from test_redact import AWS_SECRET, GH, _escaped_cases  # noqa: E402

FAKE_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"  # shaped like a Hugging Face token, made up


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_local_test_token")
    with localhost_only() as attempts:
        # The list is shared by nested guards: only what this test added counts.
        before = len(attempts)
        yield attempts
    assert attempts[before:] == [], f"tried to reach the network: {attempts[before:]}"


class FakeHfApi:
    """Records calls; binds each against the real HfApi signature."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail
        self.event = threading.Event()

    def _record(self, name: str, *args: Any, **kwargs: Any) -> None:
        bound = inspect.signature(getattr(HfApi, name)).bind(None, *args, **kwargs)
        params = dict(bound.arguments)
        params.pop("self")
        self.calls.append((name, params))
        if self.fail is not None:
            self.event.set()
            raise self.fail

    def create_repo(self, *args: Any, **kwargs: Any) -> None:
        self._record("create_repo", *args, **kwargs)

    def create_commit(self, *args: Any, **kwargs: Any) -> None:
        self._record("create_commit", *args, **kwargs)
        self.event.set()

    def create_bucket(self, *args: Any, **kwargs: Any) -> None:
        self._record("create_bucket", *args, **kwargs)

    def batch_bucket_files(self, *args: Any, **kwargs: Any) -> None:
        self._record("batch_bucket_files", *args, **kwargs)
        self.event.set()

    def names(self) -> list[str]:
        return [n for n, _ in self.calls]

    def sent(self) -> dict[str, bytes]:
        """Destination -> bytes of every file sent."""
        out: dict[str, bytes] = {}
        for name, params in self.calls:
            if name == "create_commit":
                for op in params["operations"]:
                    assert isinstance(op, huggingface_hub.CommitOperationAdd)
                    out[op.path_in_repo] = op.path_or_fileobj
            elif name == "batch_bucket_files":
                for data, dest in params["add"]:
                    out[dest] = data
        return out


def _trace_file(path: Path, *, secret: str | None = None, orphan: bool = False) -> Path:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "list files" if secret is None else f"use token {secret} please", "timestamp": 1},
        {"role": "assistant", "content": "", "toolCalls": [{"id": "c1", "function": {"name": "ls", "arguments": "{}"}}], "model": "m", "timestamp": 2},
        {"role": "tool", "content": "a.txt", "toolCallId": "c1", "timestamp": 3},
    ]
    if orphan:
        messages.append({"role": "tool", "content": "stray", "toolCallId": "nope", "timestamp": 4})
    return write_trace(Trace({"type": "session", "harness": "t", "id": path.stem}, messages), path)


def test_upload_to_dataset_repo_sends_exact_bytes(tmp_path: Path) -> None:
    """A private dataset repo is created and both files go in one commit, byte for byte."""
    a = _trace_file(tmp_path / "a.jsonl")
    b = _trace_file(tmp_path / "b.jsonl")
    api = FakeHfApi()
    items = _hub.upload([a, b], repo="alice/traces", api=api)
    assert [i.status for i in items] == ["uploaded", "uploaded"]
    assert api.names() == ["create_repo", "create_commit"]
    create = api.calls[0][1]
    assert create["repo_id"] == "alice/traces"
    assert (create["repo_type"], create["private"], create["exist_ok"]) == ("dataset", True, True)
    commit = api.calls[1][1]
    assert commit["repo_id"] == "alice/traces" and commit["repo_type"] == "dataset"
    assert api.sent() == {"a.jsonl": a.read_bytes(), "b.jsonl": b.read_bytes()}


def test_upload_public_repo_and_directory_layout(tmp_path: Path) -> None:
    """--public creates a public repo; a directory argument keeps paths relative to it, under the prefix."""
    (tmp_path / "runs" / "day1").mkdir(parents=True)
    f = _trace_file(tmp_path / "runs" / "day1" / "s1.jsonl")
    (tmp_path / "runs" / "notes.txt").write_text("not a trace")
    api = FakeHfApi()
    _hub.upload([tmp_path / "runs"], repo="alice/traces/agent-x", public=True, api=api)
    assert api.calls[0][1]["private"] is False
    assert api.sent() == {"agent-x/day1/s1.jsonl": f.read_bytes()}


def test_upload_to_bucket_with_prefix(tmp_path: Path) -> None:
    """--bucket USER/NAME/prefix creates a private bucket and adds the files under the prefix."""
    f = _trace_file(tmp_path / "s.jsonl")
    api = FakeHfApi()
    items = _hub.upload([f], bucket="alice/agent-logs/prod/eu", api=api)
    assert items[0].dest == "prod/eu/s.jsonl"
    assert api.names() == ["create_bucket", "batch_bucket_files"]
    assert api.calls[0][1]["bucket_id"] == "alice/agent-logs"
    assert api.calls[0][1]["private"] is True and api.calls[0][1]["exist_ok"] is True
    assert api.calls[1][1]["bucket_id"] == "alice/agent-logs"
    assert api.sent() == {"prod/eu/s.jsonl": f.read_bytes()}


def test_invalid_file_refused_unless_forced(tmp_path: Path) -> None:
    """A file with validation errors is refused with file, line and code; the good file still goes."""
    good = _trace_file(tmp_path / "good.jsonl")
    bad = _trace_file(tmp_path / "bad.jsonl", orphan=True)
    api = FakeHfApi()
    items = _hub.upload([good, bad], repo="alice/t", api=api)
    assert [(i.path.name, i.status) for i in items] == [("good.jsonl", "uploaded"), ("bad.jsonl", "refused")]
    (finding,) = items[1].findings
    assert (finding.path, finding.line, finding.kind) == (bad, 5, "orphan-tool-result")
    assert str(finding).startswith(f"{bad}:5: orphan-tool-result")
    assert set(api.sent()) == {"good.jsonl"}

    forced = FakeHfApi()
    items = _hub.upload([good, bad], repo="alice/t", force=True, api=forced)
    assert [i.status for i in items] == ["uploaded", "uploaded"]
    assert forced.sent()["bad.jsonl"] == bad.read_bytes()


def test_secret_refused_without_leaking_it(tmp_path: Path) -> None:
    """A detected secret refuses the file; the finding names line and kind but not the secret."""
    f = _trace_file(tmp_path / "leaky.jsonl", secret=FAKE_TOKEN)
    api = FakeHfApi()
    (item,) = _hub.upload([f], bucket="alice/b", api=api)
    assert item.status == "refused"
    assert api.calls == []
    assert [x.line for x in item.findings] == [2]
    assert all(x.kind.startswith("secret:") for x in item.findings)
    assert FAKE_TOKEN not in " ".join(str(x) for x in item.findings)

    forced = FakeHfApi()
    (item,) = _hub.upload([f], bucket="alice/b", force=True, api=forced)
    assert item.status == "uploaded" and forced.sent() == {"leaky.jsonl": f.read_bytes()}


def test_secret_split_by_json_escapes_is_found(tmp_path: Path) -> None:
    """A PEM key's newlines are JSON escapes on disk; the decoded strings are scanned too."""
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAs1\n-----END RSA PRIVATE KEY-----"
    f = write_trace(Trace({"type": "session", "harness": "t", "id": "k"}, [{"role": "user", "content": pem, "model": "x"}, {"role": "assistant", "content": "ok"}]), tmp_path / "k.jsonl")
    data, findings = _hub.check_file(f)
    assert data == f.read_bytes()
    assert [x.line for x in findings] == [2] and findings[0].kind.startswith("secret:")


def test_dry_run_sends_nothing(tmp_path: Path) -> None:
    """--dry-run checks and reports, and makes no call at all."""
    f = _trace_file(tmp_path / "s.jsonl")
    bad = _trace_file(tmp_path / "x.jsonl", secret=FAKE_TOKEN)
    api = FakeHfApi()
    items = _hub.upload([f, bad], repo="alice/t", dry_run=True, api=api)
    assert [(i.status, i.dest) for i in items] == [("would-upload", "s.jsonl"), ("refused", "x.jsonl")]
    assert api.calls == []
    # No API object at all is fine for a dry run.
    assert _hub.upload([f], repo="alice/t", dry_run=True)[0].status == "would-upload"


def test_upload_argument_errors(tmp_path: Path) -> None:
    """One destination exactly; missing files and clashing destinations fail before sending."""
    f = _trace_file(tmp_path / "s.jsonl")
    (tmp_path / "other").mkdir()
    g = _trace_file(tmp_path / "other" / "s.jsonl")
    api = FakeHfApi()
    with pytest.raises(ValueError):
        _hub.upload([f], api=api)
    with pytest.raises(ValueError):
        _hub.upload([f], repo="a/b", bucket="a/c", api=api)
    with pytest.raises(ValueError, match="USER/NAME"):
        _hub.upload([f], repo="just-a-name", api=api)
    with pytest.raises(FileNotFoundError):
        _hub.upload([tmp_path / "missing.jsonl"], repo="a/b", api=api)
    with pytest.raises(ValueError, match="both be uploaded"):
        _hub.upload([f, g], repo="a/b", api=api)
    assert api.calls == []


def test_parse_target() -> None:
    """hf:// URIs and USER/NAME[/prefix] forms."""
    assert _hub.parse_target(to="hf://buckets/u/b/x/y/") == _hub.Target("bucket", "u/b", "x/y")
    assert _hub.parse_target(to="hf://datasets/u/d") == _hub.Target("dataset", "u/d", "")
    assert str(_hub.parse_target(bucket="u/b/p")) == "hf://buckets/u/b/p"
    with pytest.raises(ValueError):
        _hub.parse_target(to="s3://bucket/x")
    with pytest.raises(ValueError):
        _hub.parse_target(bucket="u/b/../etc")


# -- the real client against a local Hub ---------------------------------------------


class _LocalHub(BaseHTTPRequestHandler):
    requests: list[tuple[str, str, bytes]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.requests.append(("POST", self.path, body))
        host = f"http://127.0.0.1:{self.server.server_address[1]}"  # type: ignore[index]
        if self.path == "/api/repos/create":
            req = json.loads(body)
            self._reply(200, {"url": f"{host}/datasets/{req.get('organization')}/{req['name']}", "name": req["name"]})
        elif "/preupload/" in self.path:
            files = json.loads(body)["files"]
            self._reply(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]})
        elif "/commit/" in self.path:
            repo = self.path.split("/commit/")[0].removeprefix("/api/")
            oid = "1" * 40
            self._reply(200, {"commitUrl": f"{host}/{repo}/commit/{oid}", "commitOid": oid, "pullRequestUrl": None})
        else:
            self._reply(404, {"error": "not found"})

    def do_GET(self) -> None:  # noqa: N802
        self.requests.append(("GET", self.path, b""))
        self._reply(404, {"error": "not found"})


@pytest.fixture
def local_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    _LocalHub.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LocalHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    # huggingface_hub asks its default endpoint for an "agent harness" list when
    # it builds its first request headers; that must reach the local hub too.
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
    try:
        yield endpoint, _LocalHub.requests
    finally:
        server.shutdown()
        server.server_close()


def test_real_hfapi_against_local_hub(tmp_path: Path, local_hub: tuple[str, list[tuple[str, str, bytes]]]) -> None:
    """The real HfApi creates a private dataset repo and commits the checked bytes."""
    endpoint, requests = local_hub
    f = _trace_file(tmp_path / "s1.jsonl")
    api = HfApi(endpoint=endpoint, token="hf_local_test_token")
    items = _hub.upload([f], repo="alice/traces", api=api)
    assert items[0].status == "uploaded"
    posts = [(p, b) for method, p, b in requests if method == "POST"]
    paths = [p for p, _ in posts]
    assert paths[0] == "/api/repos/create"
    create = json.loads(posts[0][1])
    assert create["name"] == "traces" and create["organization"] == "alice" and create["type"] == "dataset"
    assert create.get("private") is True or create.get("visibility") == "private"
    assert any(p.startswith("/api/datasets/alice/traces/preupload/") for p in paths)
    commit_body = next(b for p, b in posts if p.startswith("/api/datasets/alice/traces/commit/"))
    records = [json.loads(line) for line in commit_body.splitlines() if line.strip()]
    files = [r["value"] for r in records if r["key"] == "file"]
    assert [x["path"] for x in files] == ["s1.jsonl"]
    assert base64.b64decode(files[0]["content"]) == f.read_bytes()


# -- sync and background sync ------------------------------------------------------------


def test_sync_skips_open_and_torn_files_and_unchanged_ones(tmp_path: Path) -> None:
    """Only closed, complete sessions go; a second pass sends nothing new; a closed session goes next time."""
    d = tmp_path / "traces"
    closed = _trace_file(d / "closed.jsonl")
    torn = d / "torn.jsonl"
    torn.write_bytes(closed.read_bytes() + b'{"type":"message","message":{"role":"us')
    s = Session(d / "live.jsonl", harness="t")
    s.open()
    try:
        s.user("still going")
        s.flush()
        api = FakeHfApi()
        items = _hub.sync(d, to="hf://buckets/alice/logs/w1", api=api)
        status = {i.path.name: i.status for i in items}
        assert status == {"closed.jsonl": "uploaded", "live.jsonl": "open", "torn.jsonl": "open"}
        assert api.sent() == {"w1/closed.jsonl": closed.read_bytes()}

        again = FakeHfApi()
        items = _hub.sync(d, to="hf://buckets/alice/logs/w1", api=again)
        assert {i.path.name: i.status for i in items}["closed.jsonl"] == "unchanged"
        assert again.calls == []
    finally:
        s.close()
    later = FakeHfApi()
    _hub.sync(d, to="hf://buckets/alice/logs/w1", api=later)
    assert later.sent() == {"w1/live.jsonl": (d / "live.jsonl").read_bytes()}


def test_sync_refuses_secrets_and_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """sync never sends a file with a secret; it says so on the ststrace logger."""
    leaky = _trace_file(tmp_path / "leaky.jsonl", secret=FAKE_TOKEN)
    api = FakeHfApi()
    with caplog.at_level(logging.WARNING, logger="ststrace"):
        items = _hub.sync(tmp_path, to="hf://datasets/alice/d", api=api)
    assert items[0].status == "refused" and api.calls == []
    assert f"{leaky}:2: secret:" in caplog.text
    assert FAKE_TOKEN not in caplog.text


def test_session_sync_to_uploads_in_background(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session(sync_to=...) hands the closed file to a background upload of exactly its bytes."""
    api = FakeHfApi()
    monkeypatch.setattr(_hub, "_default_api", lambda: api)
    with Session(tmp_path / "run.jsonl", harness="t", sync_to="hf://buckets/alice/logs/prod") as s:
        s.user("hello")
        s.assistant("hi", model="m")
    assert _hub.flush_sync(10.0)
    assert api.sent() == {"prod/run.jsonl": (tmp_path / "run.jsonl").read_bytes()}
    assert api.calls[0] == ("create_bucket", {"bucket_id": "alice/logs", "private": True, "exist_ok": True})


def test_background_sync_failure_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An upload error in the background ends up on the ststrace logger; nothing raises."""
    f = _trace_file(tmp_path / "s.jsonl")
    api = FakeHfApi(fail=ConnectionError("hub unreachable"))
    with caplog.at_level(logging.ERROR, logger="ststrace"):
        _hub.schedule_sync(f, "hf://buckets/alice/logs", api=api)
        assert _hub.flush_sync(10.0)
    assert "could not sync" in caplog.text and "hub unreachable" in caplog.text
    with caplog.at_level(logging.ERROR, logger="ststrace"):
        _hub.schedule_sync(f, "s3://nowhere")  # a bad destination: logged, not raised
    assert "s3://nowhere" in caplog.text


# -- the command ------------------------------------------------------------------------


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def test_cli_upload_reports_refusals_and_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ststrace upload: one line per refusal naming file, line and kind; exit 1; the good file is sent."""
    good = _trace_file(tmp_path / "good.jsonl")
    leaky = _trace_file(tmp_path / "leaky.jsonl", secret=FAKE_TOKEN)
    api = FakeHfApi()
    args = _parse(["upload", str(good), str(leaky), "--repo", "alice/t"])
    assert args.command == "upload"
    assert run_upload(args, api=api) == 1
    out, err = capsys.readouterr()
    assert f"refused {leaky}:2: secret:" in err
    assert FAKE_TOKEN not in out + err
    assert f"uploaded {good} -> dataset alice/t:good.jsonl" in out
    assert "refused 1 file" in out
    assert set(api.sent()) == {"good.jsonl"}


def test_cli_upload_dry_run_and_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--dry-run lists what would go and sends nothing; --force sends a refused file and says so."""
    leaky = _trace_file(tmp_path / "leaky.jsonl", secret=FAKE_TOKEN)
    api = FakeHfApi()
    assert run_upload(_parse(["upload", str(leaky), "--bucket", "alice/b/p", "--dry-run", "--force"]), api=api) == 0
    out, _ = capsys.readouterr()
    assert f"would upload {leaky} -> bucket alice/b:p/leaky.jsonl" in out and "forced past: secret:" in out
    assert api.calls == []
    assert run_upload(_parse(["upload", str(leaky), "--bucket", "alice/b/p", "--force"]), api=api) == 0
    assert set(api.sent()) == {"p/leaky.jsonl"}


def test_cli_upload_hub_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Hub failure ends the command with exit 1 and one line, not a traceback."""
    f = _trace_file(tmp_path / "s.jsonl")
    api = FakeHfApi(fail=ConnectionError("refused by hub"))
    assert run_upload(_parse(["upload", str(f), "--repo", "alice/t"]), api=api) == 1
    _, err = capsys.readouterr()
    host = huggingface_hub.constants.ENDPOINT
    assert err.strip().splitlines() == [f"ststrace upload: cannot reach {host}: refused by hub; a Hugging Face token was found"]


def test_file_held_open_by_another_process_is_not_sent(tmp_path: Path) -> None:
    """A file another process still has open counts as a session being written: sync skips it, upload refuses it."""
    f = _trace_file(tmp_path / "busy.jsonl")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'ab'); print('ready', flush=True); time.sleep(60)", str(f)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        api = FakeHfApi()
        assert [i.status for i in _hub.sync(tmp_path, to="hf://buckets/alice/b", api=api)] == ["open"]
        (item,) = _hub.upload([f], bucket="alice/b", api=api)
        assert item.status == "refused" and item.findings[0].kind == "open"
        assert api.calls == []
    finally:
        holder.kill()
        holder.wait()
    api = FakeHfApi()
    assert [i.status for i in _hub.sync(tmp_path, to="hf://buckets/alice/b", api=api)] == ["uploaded"]
    assert api.sent() == {"busy.jsonl": f.read_bytes()}


def test_cli_upload_unknown_path_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing input is reported in one line before anything is sent."""
    api = FakeHfApi()
    assert run_upload(_parse(["upload", str(tmp_path / "nope.jsonl"), "--repo", "alice/t"]), api=api) == 1
    assert capsys.readouterr().err.strip() == f"ststrace upload: {tmp_path / 'nope.jsonl'}: no such file or directory"
    assert api.calls == []


def test_sync_in_background_picks_up_new_sessions(tmp_path: Path) -> None:
    """The watcher sends sessions as they close; stop() runs a final pass for the last ones."""
    api = FakeHfApi()
    first = _trace_file(tmp_path / "one.jsonl")
    watcher = _hub.sync_in_background(tmp_path, "hf://buckets/alice/logs/w", interval=0.05, api=api)
    try:
        assert api.event.wait(10.0)
        assert api.sent() == {"w/one.jsonl": first.read_bytes()}
    finally:
        watcher.stop(final=False, timeout=10.0)
    second = _trace_file(tmp_path / "two.jsonl")
    watcher.stop()  # already stopped: only the final pass runs
    assert api.sent() == {"w/one.jsonl": first.read_bytes(), "w/two.jsonl": second.read_bytes()}
    # Nothing was sent twice.
    assert sum(len(p["add"]) for n, p in api.calls if n == "batch_bucket_files") == 2
    with pytest.raises(ValueError):
        _hub.sync_in_background(tmp_path, "s3://x", api=api)


def test_a_pi_layout_file_from_convert_to_pi_is_checked_as_pi_not_refused(tmp_path: Path) -> None:
    """``convert --to pi`` writes the layout the Hub renders as Pi; upload took every Pi entry
    for a broken STS line and refused the file. It is checked as a Pi session (the secret scan
    still applies, and a damaged Pi file is still refused)."""
    from ststrace._convert.to_pi import pi_bytes

    trace = Trace({"type": "session", "harness": "my-agent", "id": "p1"}, [
        {"role": "user", "content": "hi", "timestamp": 1751382000000},
        {"role": "assistant", "content": "", "toolCalls": [{"id": "t1", "function": {"name": "f", "arguments": "{}"}}],
         "model": "m", "timestamp": 1751382001000},
        {"role": "tool", "content": "done", "toolCallId": "t1", "timestamp": 1751382002000},
        {"role": "assistant", "content": "ok", "model": "m", "timestamp": 1751382003000},
    ])
    pi = tmp_path / "p1.jsonl"
    pi.write_bytes(pi_bytes(trace))
    api = FakeHfApi()
    (item,) = _hub.upload([pi], repo="alice/t", api=api)
    assert (item.status, item.findings) == ("uploaded", [])
    assert api.sent() == {"p1.jsonl": pi.read_bytes()}

    leaky = tmp_path / "leaky.jsonl"
    leaky.write_bytes(pi_bytes(Trace(trace.header, [{"role": "user", "content": FAKE_TOKEN, "timestamp": 1751382000000}])))
    (item,) = _hub.upload([leaky], repo="alice/t", dry_run=True)
    assert item.status == "refused" and [f.kind[:7] for f in item.findings] == ["secret:"]

    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(pi.read_bytes() + b'{"type":"message","id":"x"\n')
    (item,) = _hub.upload([torn], repo="alice/t", dry_run=True)
    assert item.status == "refused" and item.findings


def test_cli_upload_shows_at_most_20_findings_per_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Pi session without a harness (hundreds of non-STS lines) was refused with one line per
    problem (650 for the sample session); like validate: the first 20 and how many more."""
    f = tmp_path / "pi.jsonl"
    rows = [{"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/"}]
    rows += [{"type": "message", "id": f"{n}", "parentId": None, "message": {"role": "user", "content": [{"type": "text", "text": "x"}]}}
             for n in range(60)]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_upload(_parse(["upload", str(f), "--repo", "alice/t", "--dry-run"]), api=FakeHfApi()) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 21
    assert all(line.startswith(f"ststrace upload: refused {f}:") for line in err[:20])
    assert err[20].startswith(f"ststrace upload: refused {f}: ... and ") and err[20].endswith("more problems")



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
