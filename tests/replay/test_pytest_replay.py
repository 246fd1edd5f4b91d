"""The pytest plugin's replay options, run in pytester subprocesses:
``--ststrace-record=DIR`` then ``--ststrace-replay=DIR`` (the ``fake_llm``
fixture serves each test its own trace), a test without a trace (fails with
the path, or is recorded with ``--ststrace-record-missing``), a changed
prompt, and ``@pytest.mark.ststrace_replay``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ststrace
from ststrace.pytest_plugin import trace_file
from ststrace.testing import FakeAPI

pytest.importorskip("openai")

SUITE = '''
import openai
import pytest

import ststrace

PROMPT = "{prompt}"


def ask(fake_llm, prompt):
    ststrace.instrument("openai")
    try:
        client = openai.OpenAI(max_retries=0, timeout=5)
        reply = client.chat.completions.create(model="m", messages=[{{"role": "user", "content": prompt}}])
        return reply.choices[0].message.content
    finally:
        ststrace.uninstrument()


def test_hello(fake_llm):
    assert ask(fake_llm, PROMPT) == "Hello from the fake API."


def test_other(fake_llm):
    assert ask(fake_llm, "something else") == "Hello from the fake API."
'''


@pytest.fixture
def env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def pytest_run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # In process (a subprocess costs seconds of imports); hypothesis's summary
    # alone takes seconds per run.
    return pytester.runpytest_inprocess(*args, "-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def suite(pytester: pytest.Pytester, prompt: str = "hey") -> None:
    pytester.makepyfile(test_suite=SUITE.format(prompt=prompt))


def test_record_then_replay(env: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Recorded against a model (here FakeAPI, as the environment names it),
    then replayed with no model at all: every test passes from its own trace."""
    suite(env)
    out = tmp_path / "recorded"
    with FakeAPI() as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.openai_base_url)
        pytest_run(env, f"--ststrace-record={out}").assert_outcomes(passed=2)
    assert len(model.requests) == 2
    hello = out / trace_file("test_suite.py::test_hello")
    assert [m["content"] for m in ststrace.read(hello).messages] == ["hey", "Hello from the fake API."]
    # The model is gone: only the replay can answer.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    result = pytest_run(env, f"--ststrace-replay={out}")
    result.assert_outcomes(passed=2)
    # A changed prompt no longer matches its recording.
    suite(env, prompt="hey there")
    result = pytest_run(env, f"--ststrace-replay={out}")
    # The call fails on the replay's 409; the fixture's teardown names the mismatch.
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*ReplayMismatch*", "*request 1 (POST /v1/chat/completions) continues no recorded conversation*"])
    result.stdout.fnmatch_lines(["*- recorded: 'hey'*", "*+ sent:     'hey there'*"])


def test_a_test_without_a_trace_fails_with_the_path(env: pytest.Pytester, tmp_path: Path) -> None:
    suite(env)
    out = tmp_path / "empty"
    out.mkdir()
    result = pytest_run(env, f"--ststrace-replay={out}")
    result.assert_outcomes(errors=2)
    wanted = out / trace_file("test_suite.py::test_hello")
    result.stdout.fnmatch_lines([f"*no recorded trace to replay for test_suite.py::test_hello: looked for {wanted}*"])


def test_record_missing(env: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``--ststrace-record-missing``: a test with a trace replays it, one without is recorded."""
    suite(env)
    out = tmp_path / "partial"
    with FakeAPI() as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.openai_base_url)
        pytest_run(env, f"--ststrace-record={out}", "-k", "hello").assert_outcomes(passed=1)
        assert len(model.requests) == 1
        result = pytest_run(env, f"--ststrace-replay={out}", "--ststrace-record-missing")
        result.assert_outcomes(passed=2)
        assert len(model.requests) == 2  # only test_other reached the model
    other = out / trace_file("test_suite.py::test_other")
    assert [m["content"] for m in ststrace.read(other).messages] == ["something else", "Hello from the fake API."]
    hello = ststrace.read(out / trace_file("test_suite.py::test_hello"))
    assert len(hello.messages) == 2  # replayed, not recorded over
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    pytest_run(env, f"--ststrace-replay={out}").assert_outcomes(passed=2)


def test_marker_names_the_trace(env: pytest.Pytester, tmp_path: Path) -> None:
    """``@pytest.mark.ststrace_replay("traces/hello.jsonl")``: no option needed."""
    traces = env.path / "traces"
    traces.mkdir()
    (traces / "hello.jsonl").write_text(
        "\n".join(
            json.dumps(line)
            for line in [
                {"type": "session", "harness": "test", "id": "s1"},
                {"type": "message", "message": {"role": "user", "content": "hey"}},
                {"type": "message", "message": {"role": "assistant", "content": "Recorded hello.", "model": "m"}},
            ]
        )
        + "\n"
    )
    env.makepyfile(
        test_marked='''
import openai
import pytest


@pytest.mark.ststrace_replay("traces/hello.jsonl")
def test_marked(fake_llm):
    client = openai.OpenAI(max_retries=0, timeout=5)
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hey"}])
    assert reply.choices[0].message.content == "Recorded hello."
    assert fake_llm.misses == []


@pytest.mark.ststrace_replay("traces/absent.jsonl")
def test_absent(fake_llm):
    pass
'''
    )
    result = pytest_run(env)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([f"*looked for {traces / 'absent.jsonl'}*"])


def test_conflicting_options_are_refused(env: pytest.Pytester, tmp_path: Path) -> None:
    env.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytest_run(env, f"--ststrace-record={tmp_path}", f"--ststrace-replay={tmp_path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result = pytest_run(env, "--ststrace-record-missing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--ststrace-record-missing needs --ststrace-replay=DIR*"])


PARAMS = '''
import openai
import pytest

import ststrace


@pytest.mark.parametrize("word", ["a b", "a_b"])
def test_param(fake_llm, word):
    ststrace.instrument("openai")
    try:
        client = openai.OpenAI(max_retries=0, timeout=5)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": word}])
        assert reply.choices[0].message.content == "Hello from the fake API."
    finally:
        ststrace.uninstrument()
'''


def test_parameters_whose_names_collide_replay_their_own_trace(
    env: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``[a b]`` and ``[a_b]`` make one file name: the second is ``-2``, and replay
    finds each test's own by the node id in its header (issue 31, item 6)."""
    from ststrace.pytest_plugin import cassette

    env.makepyfile(test_params=PARAMS)
    out = tmp_path / "recorded"
    with FakeAPI() as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.openai_base_url)
        pytest_run(env, f"--ststrace-record={out}").assert_outcomes(passed=2)
    spaced, snake = "test_params.py::test_param[a b]", "test_params.py::test_param[a_b]"
    assert trace_file(spaced) == trace_file(snake)
    a, b = cassette(out, spaced), cassette(out, snake)
    assert a is not None and b is not None and a != b
    assert ststrace.read(a).messages[0]["content"] == "a b"
    assert ststrace.read(b).messages[0]["content"] == "a_b"
    # Replayed with no model: each test is served its own prompt's recording
    # (served the other's, its request would be a mismatch).
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    pytest_run(env, f"--ststrace-replay={out}").assert_outcomes(passed=2)


def test_re_recording_replaces_the_trace_and_says_so(
    env: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--ststrace-record=DIR`` over a directory holding the test's trace replaces it
    (one rename), and replay serves the new recording (issue 31, item 7)."""
    suite(env, prompt="old prompt")
    out = tmp_path / "recorded"
    with FakeAPI() as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.openai_base_url)
        pytest_run(env, f"--ststrace-record={out}").assert_outcomes(passed=2)
        suite(env, prompt="new prompt")
        result = pytest_run(env, f"--ststrace-record={out}")
        result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*ststrace: re-recorded 2 test(s), replacing their earlier trace*"])
    assert sorted(p.name for p in out.glob("*.jsonl")) == sorted(
        trace_file(f"test_suite.py::{t}") for t in ("test_hello", "test_other")
    )
    assert not list(out.glob(".*"))  # no temporary file left
    hello = ststrace.read(out / trace_file("test_suite.py::test_hello"))
    assert hello.messages[0]["content"] == "new prompt"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    pytest_run(env, f"--ststrace-replay={out}").assert_outcomes(passed=2)
