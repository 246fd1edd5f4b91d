"""Size caps, media placeholders, the guard's construction from Session
arguments, and redaction end to end through a real Session."""

from __future__ import annotations

import base64
import gc
import re
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest

import ststrace
from ststrace import Session, tool
from ststrace._guard import FAILED, MessageGuard, make_guard
from ststrace._limits import bytes_placeholder, plan_cuts, scrub_data_urls, string_leaves, truncation_marker
from ststrace._redact import Redactor
from test_decorators_helpers import calls_by_id, tool_results, valid_messages
from test_redact import POSITIVES

KEY = POSITIVES[1][1]  # an OpenAI project key
MARKER_RE = re.compile(r"\.\.\.\[truncated: (\d+) chars dropped\]$")


def _msg(content: str = "", **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "timestamp": 1, **extra}


def _call(arguments: str) -> dict[str, Any]:
    return _msg(toolCalls=[{"id": "c1", "function": {"name": "f", "arguments": arguments}}])


def _args(msg: dict[str, Any]) -> str:
    return str(msg["toolCalls"][0]["function"]["arguments"])


# -- text caps ---------------------------------------------------------------------


@pytest.mark.parametrize("field", ["content", "reasoningContent"])
def test_text_field_is_cut_with_a_marker(field: str) -> None:
    """A field over the cap keeps its first N characters and says how many were dropped."""
    guard = MessageGuard(None, max_field_chars=100)
    text = "".join(chr(0x41 + i % 26) for i in range(250))
    out = guard.message({"role": "assistant", "content": "x", field: text})
    assert out[field] == text[:100] + "...[truncated: 150 chars dropped]"
    at_cap = {"role": "assistant", "content": "y" * 100}
    assert guard.message(at_cap) is at_cap


def test_cut_never_keeps_part_of_a_secret() -> None:
    """A secret that straddles the cut is redacted whole; one after the cut is dropped."""
    guard = MessageGuard(Redactor(env=False), max_field_chars=100)
    text = "a" * 90 + " " + KEY + " tail " + POSITIVES[4][1] + " end"
    out = guard.message(_msg(text))["content"]
    assert out.startswith("a" * 90 + " [REDACTED:openai_key]")
    assert KEY[:6] not in out and "hf_" not in out
    dropped = int(MARKER_RE.search(out).group(1))  # type: ignore[union-attr]
    assert dropped == len(text) - (91 + len(KEY))
    assert guard.counts == {"openai_key": 1}


def test_secret_just_after_the_cut_leaves_no_prefix() -> None:
    """Even a key starting exactly at the cut leaves nothing of itself behind."""
    guard = MessageGuard(Redactor(env=False), max_field_chars=50)
    for offset in range(40, 52):
        text = "x" * offset + " " + KEY + " " + "y" * 100
        out = guard.message(_msg(text))["content"]
        assert "sk-" not in out and "proj" not in out, (offset, out)


def test_data_url_in_content_becomes_a_placeholder() -> None:
    """A base64 data URL pasted into a message is replaced by media type and size."""
    png = b"\x89PNG" + bytes(3000)
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    guard = MessageGuard(None)
    out = guard.message(_msg(f"see ![img]({url}) here"))["content"]
    assert out == f"see ![img](<image/png: {len(png)} bytes>) here"
    assert scrub_data_urls("data:;base64,AAAAAAAAAAAAAAAAAAAA") == "<application/octet-stream: 15 bytes>"
    plain = "semicolons; everywhere; but no data"
    assert scrub_data_urls(plain) is plain


def test_bytes_placeholder() -> None:
    """Size and sha256 of the bytes, never the bytes."""
    assert bytes_placeholder(b"") == "<bytes: 0 bytes, sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855>"
    assert bytes_placeholder(memoryview(bytearray(b"abc"))).startswith("<bytes: 3 bytes, sha256 ba7816bf")


# -- arguments caps ------------------------------------------------------------------


def test_long_argument_is_cut_inside_its_string() -> None:
    """An oversized arguments document stays valid JSON: its longest string is cut, small ones kept."""
    guard = MessageGuard(None, max_field_chars=200)
    raw = orjson.dumps({"path": "notes.txt", "mode": "w", "content": "line\n" * 300}).decode()
    out = _args(guard.message(_call(raw)))
    doc = orjson.loads(out)
    assert doc["path"] == "notes.txt" and doc["mode"] == "w"
    assert doc["content"].startswith("line\nline\n")
    assert MARKER_RE.search(doc["content"])
    assert len(out) <= 200 + len(truncation_marker(1500))


def test_arguments_with_many_long_strings_are_all_cut_as_needed() -> None:
    """Several long values: the longest go first until the document fits."""
    guard = MessageGuard(None, max_field_chars=1000)
    raw = orjson.dumps({"a": "a" * 3000, "b": "b" * 2000, "c": "c" * 500, "n": list(range(10))}).decode()
    doc = orjson.loads(_args(guard.message(_call(raw))))
    assert doc["c"] == "c" * 500 and doc["n"] == list(range(10))
    assert MARKER_RE.search(doc["a"]) and len(orjson.dumps(doc)) < 1000 + 200


def test_arguments_that_strings_cannot_shrink_are_wrapped() -> None:
    """A huge array of numbers (or non-JSON text) becomes {"_truncated": "..."}: still JSON."""
    guard = MessageGuard(None, max_field_chars=300)
    for raw in (orjson.dumps(list(range(5000))).decode(), "not json " * 200):
        out = _args(guard.message(_call(raw)))
        doc = orjson.loads(out)
        assert list(doc) == ["_truncated"]
        assert doc["_truncated"].startswith(raw[:100]) and MARKER_RE.search(doc["_truncated"])
        assert len(out) <= 300 + 60


def test_wrapped_arguments_with_many_escapes_still_fit() -> None:
    """Quotes double in length when escaped; the wrapper trims until it fits."""
    guard = MessageGuard(None, max_field_chars=300)
    out = _args(guard.message(_call('"' * 2000)))
    assert len(out) <= 300 + 60 and orjson.loads(out)["_truncated"].startswith('""')


def test_plan_cuts_longest_first() -> None:
    doc = {"a": "x" * 10, "b": ["y" * 100, {"c": "z" * 50}]}
    leaves: list[tuple[int, Any, Any]] = []
    string_leaves(doc, leaves)
    assert sorted(n for n, _, _ in leaves) == [10, 50, 100]
    (only,) = plan_cuts(leaves, 30)
    assert only[0] is doc["b"] and only[1] == 0 and only[2] == 100 - 30 - len(truncation_marker(100))


def test_secret_in_cut_argument_is_redacted_and_json_valid() -> None:
    """Redaction and the cap together on arguments: no secret, valid JSON."""
    guard = MessageGuard(Redactor(env=False), max_field_chars=200)
    raw = orjson.dumps({"token": KEY, "body": ("word " * 100) + KEY + (" word" * 100)}).decode()
    out = _args(guard.message(_call(raw)))
    doc = orjson.loads(out)
    assert doc["token"] == "[REDACTED:openai_key]"
    assert KEY[:8] not in out


# -- big values ----------------------------------------------------------------------------


def test_50mb_string_through_the_guard_is_fast_and_lean() -> None:
    """A 50 MB field is cut in well under a second, without copying it whole."""
    big = ("All work and no play makes Jack a dull boy. " * 1_200_000)[:50_000_000]
    guard = MessageGuard(Redactor(env=False))
    msg = _msg(big)
    gc.collect()
    tracemalloc.start()
    t0 = time.thread_time()  # CPU time: the same on a loaded machine
    out = guard.message(msg)
    elapsed = time.thread_time() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(out["content"]) < 1_000_100
    assert out["content"].endswith("...[truncated: 49000000 chars dropped]")
    assert elapsed < 1.0, f"{elapsed:.2f}s"
    assert peak < 10_000_000, f"peak {peak / 1e6:.1f} MB"


def test_50mb_tool_result_through_a_session(tmp_path: Path) -> None:
    """A tool returning 50 MB: the call returns the real value; the trace holds ~1 MB and validates."""
    big = "z" * 50_000_000

    @tool
    def read_everything(path: str) -> str:
        return big

    path = tmp_path / "t.jsonl"
    t0 = time.process_time()  # CPU time of all threads: the same on a loaded machine
    with Session(path):
        assert read_everything("/dev/zero") is big
    assert time.process_time() - t0 < 5
    assert path.stat().st_size < 1_100_000
    (result,) = tool_results(valid_messages(path))
    assert result["content"].endswith("...[truncated: 49000000 chars dropped]")


def test_50mb_bytes_result(tmp_path: Path) -> None:
    """Binary results are summarised by size and hash."""
    blob = bytes(50_000_000)

    @tool
    def download() -> bytes:
        return blob

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert download() is blob
    (result,) = tool_results(valid_messages(path))
    assert result["content"] == bytes_placeholder(blob)


# -- guard construction ---------------------------------------------------------------


def test_make_guard_defaults_and_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Default on; redact=False off; STSTRACE_REDACT=0 off unless a Redactor is given; caps stay."""
    g = make_guard(True, 1_000_000)
    assert g is not None and isinstance(g.redactor, Redactor) and g.max_field_chars == 1_000_000
    g = make_guard(False, 1_000_000)
    assert g is not None and g.redactor is None
    assert make_guard(False, 0) is None and make_guard(False, None) is None
    custom = Redactor(literals=["zzzzzzzz"], env=False)
    monkeypatch.setenv("STSTRACE_REDACT", "0")
    g = make_guard(True, 1_000_000)
    assert g is not None and g.redactor is None
    g = make_guard(custom, 1_000_000)
    assert g is not None and g.redactor is custom
    monkeypatch.setenv("STSTRACE_REDACT", "1")
    g = make_guard(True, None)
    assert g is not None and g.redactor is not None and g.max_field_chars is None
    with pytest.raises(ValueError):
        make_guard("yes", 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        MessageGuard(None, -1)


def test_guard_without_cap_leaves_long_text() -> None:
    """max_field_chars=None: no cut, no media placeholder."""
    guard = MessageGuard(Redactor(env=False), max_field_chars=None)
    text = "x" * 2_000_000 + " data:image/png;base64," + "A" * 100
    msg = _msg(text)
    assert guard.message(msg) is msg


def test_guard_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """If redaction itself breaks, the field is withheld (and the error logged), never written raw."""
    errors: list[BaseException] = []
    monkeypatch.setattr(ststrace._errors, "internal_error_hook", errors.append)

    class Broken(Redactor):
        def find(self, text: str) -> list[tuple[str, int, int]]:
            raise RuntimeError("detector crashed")

    guard = MessageGuard(Broken(env=False))
    out = guard.message(_call('{"k": "' + KEY + '"}') | {"content": "secret " + KEY})
    assert out["content"] == FAILED
    assert orjson.loads(_args(out)) == {"_truncated": FAILED}
    assert len(errors) == 2


# -- end to end through Session ---------------------------------------------------------


def test_session_redacts_by_default_and_counts(tmp_path: Path) -> None:
    """Default Session: secrets never reach the file; stats() counts them by kind."""
    path = tmp_path / "t.jsonl"
    hf = POSITIVES[4][1]
    with Session(path, metadata={"note": f"run with {hf}"}) as s:
        s.user(f"my key is {KEY}")
        ids = s.assistant("ok", reasoning=f"user gave {KEY}", tool_calls=[{"name": "login", "arguments": {"token": hf}}])
        s.tool(ids[0], {"echo": hf})
        stats = s.stats()
    data = path.read_bytes()
    assert KEY.encode() not in data and hf.encode() not in data
    assert stats["redactions"] == {"openai_key": 2, "hf_token": 3}
    trace = ststrace.read(path)
    assert trace.header["note"] == "run with [REDACTED:hf_token]"
    assert orjson.loads(calls_by_id(valid_messages(path))[ids[0]]["arguments"]) == {"token": "[REDACTED:hf_token]"}


def test_session_redact_false_and_env_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """redact=False and STSTRACE_REDACT=0 both write the text as given."""
    with Session(tmp_path / "a.jsonl", redact=False) as s:
        s.user(KEY)
        assert s.stats()["redactions"] == {}
    assert KEY.encode() in (tmp_path / "a.jsonl").read_bytes()
    monkeypatch.setenv("STSTRACE_REDACT", "0")
    with Session(tmp_path / "b.jsonl") as s:
        s.user(KEY)
    assert KEY.encode() in (tmp_path / "b.jsonl").read_bytes()


def test_session_custom_redactor_and_cap(tmp_path: Path) -> None:
    """redact=Redactor(...) adds the user's detectors; max_field_chars caps fields."""
    path = tmp_path / "t.jsonl"
    r = Redactor(literals=["Project Nightingale"], patterns=[("ticket", r"TCK-\d+")], env=False)
    with Session(path, redact=r, max_field_chars=80) as s:
        s.user("Project Nightingale is TCK-4411 " + "." * 200)
        assert s.stats()["redactions"] == {"literal": 1, "ticket": 1}
    (msg,) = valid_messages(path)
    assert msg["content"].startswith("[REDACTED:literal] is [REDACTED:ticket] ....")
    assert msg["content"].endswith("chars dropped]")


def test_redactions_in_wrapped_arguments_are_counted_once() -> None:
    """The wrapper may retry its cut; each secret still counts once."""
    guard = MessageGuard(Redactor(env=False), max_field_chars=300)
    raw = "not json " + KEY + ' "quoted" ' * 200
    out = _args(guard.message(_call(raw)))
    assert orjson.loads(out)["_truncated"].startswith("not json [REDACTED:openai_key]")
    assert guard.counts == {"openai_key": 1}
