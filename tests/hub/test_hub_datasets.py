"""What the Hub's ``datasets`` loader makes of ststrace's uploads: its own JSON
loader with agent-trace parsing (teich), as Data Studio runs it, offline, on
``convert --to pi`` output and on what ``upload --as pi`` / ``Session(sync_as="pi")``
send (the fake Hub of tests/hub/test_hub.py records the bytes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("datasets")
pytest.importorskip("teich")
pytest.importorskip("huggingface_hub")

import ststrace  # noqa: E402
from ststrace import Session, _hub  # noqa: E402
from ststrace._cli import main  # noqa: E402
from ststrace._convert.to_pi import pi_bytes  # noqa: E402
from test_hub import FakeHfApi  # noqa: E402

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
UNUSED = {"type": "function", "function": {"name": "send_mail", "description": "Send an email.", "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture
def load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    import datasets
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", False)
    assert datasets.config.TEICH_AVAILABLE

    def run(files: list[str]) -> Any:
        return datasets.load_dataset("json", data_files=files, split="train", cache_dir=str(tmp_path / "hf-cache"))

    return run


def _trace(path: Path, **session: Any) -> Path:
    with Session(path, id="sess-a", name="weather", harness="my-agent", **session) as s:
        s.tools([WEATHER, UNUSED])
        s.system("Be brief.")
        s.user("Weather in Paris?")
        (cid,) = s.assistant(
            "Checking.", reasoning="I need the tool.", model="m-1",
            tool_calls=[{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}],
        )
        s.tool(cid, "Sunny, 21 C")
        s.assistant("It is sunny.", model="m-1")
    return path


ROW_MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_content": "I need the tool.",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "Sunny, 21 C"},
    {"role": "assistant", "content": "It is sunny."},
]


def _check_row(row: dict[str, Any]) -> None:
    assert row["session_id"] == "sess-a"
    assert row["prompt"] == "Weather in Paris?"
    assert row["num_tool_calls"] == 1 and row["num_user_messages"] == 1
    assert row["messages"] == ROW_MESSAGES
    assert row["tools"] == [WEATHER, UNUSED]  # the tool never called too


def test_convert_to_pi_loads_whole(tmp_path: Path, load: Any) -> None:
    sts = _trace(tmp_path / "sts" / "a.jsonl")
    assert main(["convert", "--to", "pi", str(sts), "-o", str(tmp_path / "pi")]) == 0
    (row,) = load([str(p) for p in (tmp_path / "pi").iterdir()])
    _check_row(row)


def test_sts_file_loads_without_its_tool_calls(tmp_path: Path, load: Any) -> None:
    """Why --as pi exists: the loader reads an STS file as Pi and finds no content blocks."""
    sts = _trace(tmp_path / "sts" / "a.jsonl")
    (row,) = load([str(sts)])
    assert row["session_id"] == "sess-a"
    assert row["num_tool_calls"] == 0 and row["tools"] == []
    assert all("tool_calls" not in m for m in row["messages"])


def test_upload_as_pi_sends_what_the_loader_reads_whole(tmp_path: Path, load: Any) -> None:
    sts = _trace(tmp_path / "sts" / "a.jsonl")
    api = FakeHfApi()
    items = ststrace.upload([sts], repo="alice/traces", api=api, layout="pi")
    assert [i.status for i in items] == ["uploaded"]
    sent = api.sent()
    assert list(sent) == ["a.jsonl"]
    assert sent["a.jsonl"] == pi_bytes(ststrace.read(sts))
    out = tmp_path / "hub" / "a.jsonl"
    out.parent.mkdir()
    out.write_bytes(sent["a.jsonl"])
    (row,) = load([str(out)])
    _check_row(row)


def test_upload_as_pi_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sts = _trace(tmp_path / "sts" / "a.jsonl")
    api = FakeHfApi()
    monkeypatch.setattr(_hub, "_default_api", lambda: api)
    assert main(["upload", str(sts), "--repo", "alice/traces", "--as", "pi"]) == 0
    assert f"uploaded {sts} as Pi -> dataset alice/traces:a.jsonl" in capsys.readouterr().out
    assert api.sent() == {"a.jsonl": pi_bytes(ststrace.read(sts))}
    assert main(["upload", str(sts), "--repo", "alice/traces", "--as", "csv"]) == 2  # argparse: bad choice


def test_upload_as_pi_still_refuses_secrets(tmp_path: Path) -> None:
    secret = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
    path = _trace(tmp_path / "a.jsonl", redact=False)
    text = path.read_text().replace("Weather in Paris?", f"token {secret}")
    path.write_text(text)
    api = FakeHfApi()
    items = ststrace.upload([path], repo="alice/traces", api=api, layout="pi")
    assert items[0].status == "refused" and api.calls == []
    with pytest.raises(ValueError, match="unknown upload layout 'zip'"):
        ststrace.upload([path], repo="alice/traces", api=api, layout="zip")


def test_a_pi_session_is_sent_as_it_is(tmp_path: Path) -> None:
    sts = _trace(tmp_path / "sts" / "a.jsonl")
    assert main(["convert", "--to", "pi", str(sts), "-o", str(tmp_path / "pi")]) == 0
    (pi,) = (tmp_path / "pi").iterdir()
    api = FakeHfApi()
    ststrace.upload([pi], repo="alice/traces", api=api, layout="pi")
    assert api.sent() == {pi.name: pi.read_bytes()}


def test_session_sync_as_pi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, load: Any) -> None:
    api = FakeHfApi()
    monkeypatch.setattr(_hub, "_default_api", lambda: api)
    path = _trace(tmp_path / "run.jsonl", sync_to="hf://datasets/alice/traces/prod", sync_as="pi")
    assert _hub.flush_sync(10.0)
    sent = api.sent()
    assert list(sent) == ["prod/run.jsonl"]
    assert sent["prod/run.jsonl"] == pi_bytes(ststrace.read(path))
    assert json.loads(path.read_text().splitlines()[0])["harness"] == "my-agent"  # the local file stays STS
    out = tmp_path / "hub" / "run.jsonl"
    out.parent.mkdir()
    out.write_bytes(sent["prod/run.jsonl"])
    (row,) = load([str(out)])
    _check_row(row)
    with pytest.raises(ValueError, match="sync_as must be 'sts' or 'pi'"):
        Session(tmp_path, sync_to="hf://datasets/alice/traces", sync_as="parquet")
