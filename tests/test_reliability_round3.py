"""Issue 24, third adversarial round (items 7-13): history, usage values,
malformed traces, OTLP memory, directories and odd paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ststrace import Session, llm
from test_decorators_helpers import valid_messages
from test_instrument_helpers import patched, strip

__all__ = ["patched"]  # the fixture, imported for pytest

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "u1"},
    {"role": "assistant", "content": "a1"},
    {"role": "user", "content": "u2"},
]


def _roles_contents(path: Path) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in valid_messages(path)]


# -- 7: a session started from an earlier conversation records it whole ---------------


def test_llm_first_call_records_the_history_assistant_turns(tmp_path: Path) -> None:
    """[system, u1, a1, u2] sent by the first @llm call: all four, then the reply."""
    chat = llm(lambda messages: {"role": "assistant", "content": "r2"})
    with Session(tmp_path / "t.jsonl") as s:
        chat(HISTORY)
        chat([*HISTORY, {"role": "assistant", "content": "r2"}, {"role": "user", "content": "u3"}])
    assert _roles_contents(s.path) == [
        ("system", "Be brief."), ("user", "u1"), ("assistant", "a1"), ("user", "u2"),
        ("assistant", "r2"), ("user", "u3"), ("assistant", "r2"),
    ]


def test_history_tool_calls_and_results_are_recorded_paired(tmp_path: Path) -> None:
    """An earlier turn's tool call and its result, resent in the first call, are both recorded."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
    ]
    chat = llm(lambda messages: "r2")
    with Session(tmp_path / "t.jsonl") as s:
        chat(history)
    msgs = valid_messages(s.path)
    assert [(m["role"], m["content"], m.get("toolCallId")) for m in msgs] == [
        ("user", "u1", None), ("assistant", "", None), ("tool", "42", "c1"),
        ("assistant", "a1", None), ("user", "u2", None), ("assistant", "r2", None),
    ]
    assert msgs[1]["toolCalls"] == [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]


def test_instrumented_openai_first_call_records_history(tmp_path: Path, patched: None) -> None:
    """The real openai client, instrumented, against the fake server."""
    from fakeapi_fixtures import openai_client
    from ststrace.testing import FakeAPI

    with FakeAPI(text_reply="r2") as api, Session(tmp_path / "t.jsonl") as s:
        client = openai_client(api)
        client.chat.completions.create(model="m", messages=HISTORY)
        client.close()
    assert [(m["role"], m["content"]) for m in strip(valid_messages(s.path))] == [
        ("system", "Be brief."), ("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("assistant", "r2"),
    ]


# -- 8, 9: token counts are JSON integers, one rule everywhere --------------------------

BIG = 2**64


def _write_trace(path: Path, *messages: dict[str, Any]) -> Path:
    import json  # not orjson: it cannot write integers of 2**64 and more

    lines = [{"type": "session", "harness": "t", "id": "s1"}] + [{"type": "message", "message": m} for m in messages]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.mark.parametrize("bad", [BIG, 2**53, -1, 1.5, "10", True, None, [1], {"n": 1}])
def test_assistant_usage_refuses_counts_that_are_not_json_safe_integers(tmp_path: Path, bad: Any) -> None:
    with Session(tmp_path / "t.jsonl") as s:
        with pytest.raises(ValueError, match=r"usage\['output'\] must be a non-negative integer of at most 2\*\*53 - 1"):
            s.assistant("hi", usage={"input": 1, "output": bad})
        s.assistant("ok", usage={"input": 2**53 - 1, "output": 0})
        assert s.stats()["usage"]["input"] == 2**53 - 1
    (msg,) = valid_messages(s.path)
    assert msg["usage"] == {"input": 2**53 - 1, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2**53 - 1}


def test_provider_usage_with_a_huge_count_drops_that_count_not_the_reply(tmp_path: Path) -> None:
    """An adapter (here an OpenAI-shaped dict returned from @llm) with prompt_tokens >= 2**64:
    the count is left out as unreported; the file holds integers only and s.stats() agrees with `ststrace stats`."""
    from ststrace.cli import main

    reply = {"choices": [{"message": {"role": "assistant", "content": "r"}}],
             "usage": {"prompt_tokens": BIG, "completion_tokens": 7}}
    chat = llm(lambda messages: reply)
    with Session(tmp_path / "t.jsonl") as s:
        chat([{"role": "user", "content": "q"}])
        totals = s.stats()["usage"]
    (_, msg) = valid_messages(s.path)
    assert msg["content"] == "r"
    assert msg["usage"] == {"input": 0, "output": 7, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 7}
    assert totals == msg["usage"]
    assert main(["stats", "--json", str(s.path)]) == 0


def test_total_tokens_is_capped_when_the_counts_add_up_past_the_limit(tmp_path: Path) -> None:
    with Session(tmp_path / "t.jsonl") as s:
        s.assistant("x", usage={"input": 2**53 - 1, "output": 2**53 - 1})
    (msg,) = valid_messages(s.path)
    assert msg["usage"]["totalTokens"] == 2**53 - 1


def test_validate_and_stats_agree_on_bad_usage_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file written by someone else with a count as a string, a count >= 2**64 and a negative one:
    validate reports each (file:line), stats counts only the valid ones."""
    import orjson

    from ststrace import validate
    from ststrace.cli import main

    path = _write_trace(
        tmp_path / "t.jsonl",
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "model": "m", "usage": {"input": "18446744073709551616", "output": 3}},
        {"role": "assistant", "content": "b", "model": "m", "usage": {"input": 5, "output": BIG}},
        {"role": "assistant", "content": "c", "model": "m", "usage": {"input": -2, "output": 1}},
        {"role": "assistant", "content": "d", "model": "m", "usage": "lots"},
    )
    problems = [(p.line, p.code) for p in validate(path) if p.severity == "error"]
    assert problems == [(3, "usage-invalid"), (4, "usage-invalid"), (5, "usage-invalid"), (6, "usage-invalid")]
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:4: error: usage-invalid: usage.output must be an integer from 0 to 2**53 - 1" in out
    assert main(["stats", "--json", str(path)]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["files"][0]["usage"] == {"input": 5, "output": 4}


def test_otel_negative_token_count_drops_the_count_and_keeps_the_reply(tmp_path: Path) -> None:
    """A span reporting output_tokens=-5 (and cache reads >= 2**64): the reply is recorded,
    the bad counts are left out, and no internal error is logged (the conftest would fail the test)."""
    import orjson

    pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace import TracerProvider

    from ststrace.otel import SpanProcessor

    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    with tp.get_tracer("t").start_as_current_span("chat m", attributes={
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": orjson.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]).decode(),
        "gen_ai.output.messages": orjson.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "yo"}]}]).decode(),
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": -5,
        "gen_ai.usage.cache_read.input_tokens": float(BIG),
    }):
        pass
    tp.shutdown()
    (path,) = tmp_path.glob("*.jsonl")
    user, reply = valid_messages(path)
    assert (user["content"], reply["content"]) == ("hi", "yo")
    assert reply["usage"] == {"input": 10, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 10}


# -- 12: every command that takes traces takes directories ------------------------------


def _two_traces(root: Path) -> list[Path]:
    out = []
    for n in range(2):
        with Session(root / "sub" / f"t{n}.jsonl") as s:
            s.user(f"q{n}")
            s.assistant(f"a{n}", model="m")
        out.append(s.path)
    return out


def test_validate_takes_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ststrace.cli import main

    paths = _two_traces(tmp_path / "traces")
    assert main(["validate", str(tmp_path / "traces")]) == 0
    assert capsys.readouterr().out == "".join(f"{p}: ok\n" for p in paths)
    (tmp_path / "empty").mkdir()
    assert main(["validate", str(tmp_path / "empty"), str(paths[0])]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"{paths[0]}: ok\n"
    assert captured.err == f"ststrace validate: {tmp_path / 'empty'}: is a directory with no trace files (*.jsonl)\n"


def test_otlp_takes_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from ststrace.cli import main
    from test_otel_export import Receiver  # the local OTLP receiver the export tests use

    _two_traces(tmp_path / "traces")
    receiver = Receiver()
    try:
        assert main(["otlp", str(tmp_path / "traces"), "--endpoint", receiver.url]) == 0
    finally:
        receiver.close()
    assert len(receiver.spans()) == 4  # a root and a chat span per session
    assert capsys.readouterr().out.startswith("sent 2 sessions (")


# -- 13: odd paths -----------------------------------------------------------------------


def test_dangling_symlink_as_the_trace_directory_says_so(tmp_path: Path) -> None:
    link = tmp_path / "traces"
    link.symlink_to(tmp_path / "gone")
    for kwargs in ({}, {"resume": True, "id": "x"}):
        with pytest.raises(FileNotFoundError, match=r"traces is a symbolic link to '.*gone', which does not exist"):
            Session(link, **kwargs).open()
    assert not (tmp_path / "gone").exists()


def test_otel_conversation_id_of_dots_gives_a_visible_file(tmp_path: Path) -> None:
    import orjson

    pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace import TracerProvider

    from ststrace.otel import SpanProcessor

    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SpanProcessor(tmp_path))
    for conv in ("...", ".hidden"):
        with tp.get_tracer("t").start_as_current_span("chat", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": conv,
            "gen_ai.input.messages": orjson.dumps([{"role": "user", "parts": [{"type": "text", "content": conv}]}]).decode(),
        }):
            pass
    tp.shutdown()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and not any(n.startswith(".") for n in names), names
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == names


# -- 11: ststrace otlp sends as it builds; memory bounded by the largest span -----------


def _long_session(path: Path, turns: int) -> Path:
    with Session(path, id="long-1", redact=False) as s:
        for i in range(turns):
            s.user(f"question {i}: how is item {i} doing in the queue today?")
            if i % 3 == 2:
                (cid,) = s.assistant("", model="m", tool_calls=[{"name": "lookup", "arguments": {"item": i}}])
                s.tool(cid, f"item {i} is waiting")
            s.assistant(f"answer {i}: item {i} is fine.", model="m")
    return path


class _Discard:
    """An OTLP/HTTP receiver on 127.0.0.1 that counts and drops each request."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.sizes: list[int] = []
        sizes = self.sizes

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(n)
                sizes.append(n)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_otlp_export_memory_does_not_grow_with_the_square_of_the_session(tmp_path: Path) -> None:
    """1,600 messages with the whole history on every chat span (about 30 MB of spans): the
    Python memory export() allocates at its peak stays near one request (3 MiB), not all spans."""
    import tracemalloc

    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from ststrace.otel import export

    path = _long_session(tmp_path / "long.jsonl", 600)
    receiver = _Discard()
    try:
        export(path, endpoint=receiver.url)  # warm-up: imports and first-use caches are not the export's
        receiver.sizes.clear()
        tracemalloc.start()
        try:
            result = export(path, endpoint=receiver.url, max_history_chars=None)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        receiver.close()
    sent = sum(receiver.sizes)
    assert result.spans == 1 + 800 + 200 and sent > 25_000_000, (result, sent)
    assert peak < 14_000_000, f"peak {peak / 1e6:.1f} MB of Python memory for {sent / 1e6:.0f} MB sent"


def test_chat_spans_carry_the_recent_history_and_round_trip(tmp_path: Path) -> None:
    """With a small budget each chat span holds the most recent messages that fit (and counts the
    rest in ststrace.input.messages_omitted); read back by SpanProcessor, the session is whole."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    import ststrace
    from ststrace._otel import export as export_module
    from ststrace.otel import SpanProcessor
    from test_otel_export import Receiver, rebuilt

    path = _long_session(tmp_path / "long.jsonl", 40)
    receiver = Receiver()
    try:
        ststrace.otel.export(path, endpoint=receiver.url, max_history_chars=2_000)
    finally:
        receiver.close()
    chats = [s for s in receiver.spans() if s.name.startswith("chat")]
    omitted = [next((a.value.int_value for a in s.attributes if a.key == "ststrace.input.messages_omitted"), 0) for s in chats]
    sizes = [len(next(a.value.string_value for a in s.attributes if a.key == "gen_ai.input.messages")) for s in chats]
    assert omitted[:3] == [0, 0, 0] and omitted[-1] > 50, omitted
    assert max(sizes) <= 2_000, sizes
    assert export_module.MAX_HISTORY_CHARS == 65_536  # the CLI's default says the same
    from ststrace._cli.otlp import MAX_HISTORY_CHARS

    assert MAX_HISTORY_CHARS == export_module.MAX_HISTORY_CHARS
    out = tmp_path / "back"
    processor = SpanProcessor(out)
    for span in rebuilt(receiver.spans()):
        processor.on_end(span)
    processor.shutdown()
    (back,) = out.glob("*.jsonl")
    keep = ("role", "content", "toolCalls", "toolCallId", "model")
    assert [{k: m[k] for k in keep if k in m} for m in ststrace.read(back).messages] == [
        {k: m[k] for k in keep if k in m} for m in ststrace.read(path).messages
    ]


# -- issue 26, newcomer 6: a refused connection says nothing is listening ----------------


def test_otlp_to_a_closed_port_says_nothing_is_listening(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket
    import time

    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from ststrace.cli import main

    with socket.socket() as probe:  # a port that was free a moment ago, with nothing bound to it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (path,) = _two_traces(tmp_path)[:1]
    start = time.monotonic()
    assert main(["otlp", str(path), "--endpoint", f"http://127.0.0.1:{port}"]) == 1
    assert time.monotonic() - start < 5  # no exporter retries for the whole timeout
    assert capsys.readouterr().err == (
        f"ststrace otlp: http://127.0.0.1:{port}/v1/traces: nothing is listening at 127.0.0.1:{port} "
        "(connection refused); is the collector running?\n"
    )


# -- issue 26, newcomer 5: tail on a finished trace ends ---------------------------------


def test_tail_on_a_finished_trace_ends_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from ststrace._cli import tail
    from ststrace.cli import main

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to tell that no process writes the file")
    monkeypatch.setattr(tail, "IDLE_SECONDS", 0.3)
    (path,) = _two_traces(tmp_path)[:1]
    start = time.monotonic()
    assert main(["tail", "--no-color", "--interval", "0.05", str(path)]) == 0
    assert time.monotonic() - start < 10
    captured = capsys.readouterr()
    assert "q0" in captured.out and "a0" in captured.out
    assert captured.err == f"ststrace tail: {path}: the session is closed (no process is writing it); stopping\n"


def test_tail_on_a_live_idle_session_says_it_waits_and_how_to_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ststrace._cli import tail
    from ststrace.cli import main

    monkeypatch.setattr(tail, "IDLE_SECONDS", 0.2)
    with Session(tmp_path / "live.jsonl") as s:
        s.user("hello")
        s.flush()
        assert main(["tail", "--no-color", "--interval", "0.05", "--timeout", "1", str(s.path)]) == 0
    captured = capsys.readouterr()
    assert "hello" in captured.out
    assert "ststrace tail: waiting for " in captured.err and "; Ctrl-C to stop\n" in captured.err
    assert "closed" not in captured.err
    assert captured.err.count("waiting") == 1  # said once, not on every check


def test_otlp_sends_a_file_whose_usage_count_is_past_64_bit_signed(tmp_path: Path) -> None:
    """A file written elsewhere with a count of 2**63 + 5 (an int to JSON readers, too big for an
    OTel int attribute): the other counts are sent, the batch is not lost."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from ststrace.otel import export
    from test_otel_export import Receiver

    path = _write_trace(
        tmp_path / "t.jsonl",
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "model": "m", "usage": {"input": 5, "output": 2**63 + 5}},
    )
    receiver = Receiver()
    try:
        assert export(path, endpoint=receiver.url).spans == 2
        (chat,) = [s for s in receiver.spans() if s.name.startswith("chat")]
    finally:
        receiver.close()
    attrs = {a.key: a.value.int_value for a in chat.attributes if a.key.startswith("gen_ai.usage.")}
    assert attrs == {"gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 0}
