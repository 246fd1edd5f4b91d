"""Nothing silently empty: a session that ends with no messages logs one WARNING
naming the LLM client library that is imported and why its calls were not
recorded (not instrumented, called outside any session or outside the
recorded methods, or a library ststrace does not record)."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

import ststrace
from ststrace import Session, _instrument, _unrecorded
from ststrace.testing import FakeAPI
from fakeapi_fixtures import openai_client
from test_instrument_helpers import chat_messages, instrumented, new_trace

MODEL = "gpt-test"


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ststrace" and r.levelno == logging.WARNING]


@pytest.fixture
def only(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Keep only the named client libraries in ``sys.modules`` for the check."""

    def keep(*names: str) -> None:
        monkeypatch.setattr(_unrecorded, "CLIENTS", {k: v for k, v in _unrecorded.CLIENTS.items() if k in names})

    return keep


def test_a_library_ststrace_does_not_record_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, only: Any
) -> None:
    monkeypatch.setitem(sys.modules, "replicate", types.ModuleType("replicate"))
    only("replicate")
    with caplog.at_level(logging.WARNING, logger="ststrace"):
        with Session(new_trace(tmp_path)) as s:
            pass
    assert warnings_of(caplog) == [
        f"ststrace: session {s.id} recorded no messages; "
        "replicate is imported, and ststrace does not record it (wrap its calls with @llm)"
    ]


def test_an_imported_library_not_instrumented_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, only: Any
) -> None:
    """``instrument()`` was called for other libraries, not this one."""
    import openai  # noqa: F401

    monkeypatch.setattr(_instrument, "_ever_called", True)
    only("openai")
    with caplog.at_level(logging.WARNING, logger="ststrace"):
        with Session(new_trace(tmp_path)) as s:
            pass
    assert warnings_of(caplog) == [
        f"ststrace: session {s.id} recorded no messages; "
        "openai is imported but not instrumented (ststrace.instrument('openai'))"
    ]


def test_a_call_from_a_thread_without_the_session_is_named(
    fake_api: FakeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture, only: Any
) -> None:
    """The model was called from a thread started without the session's context."""
    only("openai")
    client = openai_client(fake_api)
    with instrumented("openai"), caplog.at_level(logging.WARNING, logger="ststrace"):
        with Session(new_trace(tmp_path)) as s:
            worker = threading.Thread(
                target=lambda: client.chat.completions.create(model=MODEL, messages=chat_messages())
            )
            worker.start()
            worker.join()
    assert len(fake_api.requests) == 1
    assert warnings_of(caplog) == [
        f"ststrace: session {s.id} recorded no messages; openai was called outside any session while one "
        "was open (from a thread or task that does not carry its context?)"
    ]


def test_a_call_outside_the_recorded_methods_is_named(
    fake_api: FakeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture, only: Any
) -> None:
    """A legacy ``completions.create`` goes through ``request()`` but no method ststrace records."""
    openai = pytest.importorskip("openai")
    only("openai")
    client = openai_client(fake_api)
    with instrumented("openai"), caplog.at_level(logging.WARNING, logger="ststrace"):
        with Session(new_trace(tmp_path)) as s:
            with pytest.raises(openai.NotFoundError):
                client.completions.create(model=MODEL, prompt="hi")
    assert warnings_of(caplog) == [
        f"ststrace: session {s.id} recorded no messages; "
        "openai was called outside the methods ststrace records (wrap that call with @llm)"
    ]


def test_an_instrumented_library_never_called_is_not_blamed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, only: Any
) -> None:
    import openai  # noqa: F401

    only("openai")
    with instrumented("openai"), caplog.at_level(logging.WARNING, logger="ststrace"):
        with Session(new_trace(tmp_path)):
            pass
    assert warnings_of(caplog) == []


def test_a_session_with_messages_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, only: Any
) -> None:
    monkeypatch.setitem(sys.modules, "replicate", types.ModuleType("replicate"))
    only("replicate")
    with caplog.at_level(logging.WARNING, logger="ststrace"):
        with Session(new_trace(tmp_path)) as s:
            s.user("hi")
    assert warnings_of(caplog) == []


def test_no_client_library_imported_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, only: Any
) -> None:
    only()
    with caplog.at_level(logging.WARNING, logger="ststrace"):
        with Session(new_trace(tmp_path)):
            pass
    assert warnings_of(caplog) == []


def test_never_instrumented_program_is_told(tmp_path: Path) -> None:
    """In a fresh interpreter that never called ``instrument()``, the warning says so."""
    code = (
        "import logging, sys, types\n"
        "logging.basicConfig(level=logging.WARNING, format='%(message)s', stream=sys.stdout)\n"
        "sys.modules['groq'] = types.ModuleType('groq')\n"
        "import ststrace\n"
        f"with ststrace.Session({str(tmp_path)!r}) as s:\n"
        "    pass\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith(
        "recorded no messages; groq is imported, but ststrace.instrument() was never called"
    ), out.stdout
    assert out.stdout.count("WARNING") == 0 and out.stdout.count("recorded no messages") == 1


def test_instrument_is_not_imported_by_the_check() -> None:
    """The check reads what ``_instrument`` reported; it never imports it."""
    assert "_instrument" not in open(_unrecorded.__file__).read().replace("ststrace._instrument", "")
    assert ststrace.Session is not None


def test_mistralai_3_installed_is_not_blamed_for_an_empty_session(tmp_path: Path) -> None:
    """``instrument()`` imports the ``mistralai`` namespace package looking for
    ``mistralai.client``: that alone is no client in use, so an empty session
    where mistralai 3 is installed says nothing of it (a fresh interpreter:
    nothing imported it before)."""
    pytest.importorskip("mistralai.client")
    from test_instrument import run_python

    proc = run_python(
        """
        import logging, sys
        logging.basicConfig(level=logging.WARNING, format="%(name)s %(message)s")
        import ststrace
        ststrace.instrument()
        print("IMPORTED", sys.modules.get("mistralai") is not None)
        with ststrace.Session():
            pass
        from mistralai.client import Mistral
        print("PATCHED", "mistralai" in ststrace._instrument.instrumented())
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["IMPORTED", "True", "PATCHED", "True"]
    assert "mistralai" not in proc.stderr, proc.stderr


def test_ollama_generate_is_named_when_nothing_is_recorded(
    fake_api: FakeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture, only: Any
) -> None:
    """ollama ``generate`` (sync, async, module-level) is not recorded by the
    SDK-level integration: an empty session names it."""
    ollama = pytest.importorskip("ollama")
    import asyncio

    only("ollama")
    client = ollama.Client(host=fake_api.ollama_base_url)
    calls = [
        lambda: client.generate(model=MODEL, prompt="hi"),
        lambda: asyncio.run(ollama.AsyncClient(host=fake_api.ollama_base_url).generate(model=MODEL, prompt="hi")),
    ]
    expected = ["ollama._client.Client.generate", "ollama._client.AsyncClient.generate"]
    with instrumented("ollama"):
        for call, method in zip(calls, expected):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="ststrace"):
                with Session(new_trace(tmp_path)) as s:
                    try:
                        call()
                    except ollama.ResponseError:
                        pass  # a server without /api/generate: the call was still made
            assert warnings_of(caplog) == [
                f"ststrace: session {s.id} recorded no messages; ollama was called through {method}, "
                "which ststrace does not record (wrap that call with @llm)"
            ]


def test_cohere_v1_chat_is_named_when_nothing_is_recorded(
    fake_api: FakeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture, only: Any
) -> None:
    """cohere's v1 ``Client.chat`` is not recorded by the SDK-level integration
    (it records the v2 API): an empty session names it; v2 is not affected."""
    cohere = pytest.importorskip("cohere")
    only("cohere")
    with instrumented("cohere"):
        # Built after instrument(): cohere binds ``self.chat`` at construction.
        client = cohere.Client(api_key="k", base_url=fake_api.cohere_base_url)
        with caplog.at_level(logging.WARNING, logger="ststrace"):
            with Session(new_trace(tmp_path)) as s:
                try:
                    client.chat(model=MODEL, message="hi")
                except cohere.core.ApiError:
                    pass  # a server without /v1/chat: the call was still made
        assert warnings_of(caplog) == [
            f"ststrace: session {s.id} recorded no messages; cohere was called through "
            "cohere.base_client.BaseCohere.chat, which ststrace does not record (wrap that call with @llm)"
        ]
        v2 = cohere.ClientV2(api_key="k", base_url=fake_api.cohere_base_url)
        with Session(new_trace(tmp_path)) as s2:
            v2.chat(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        assert len(ststrace.read(s2.path).messages) == 2
