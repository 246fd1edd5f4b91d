"""The pytest plugin (``pytest --ststrace[=DIR]``), run in pytester subprocesses:
passing, failing, skipped, parametrized and async tests, ``instrument()`` with
the fake LLM fixture, and pytest-xdist workers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ststrace.pytest_plugin import file_name
from test_redact import REPO, SECRET

SUITE = '''
import asyncio

import pytest

import ststrace
from ststrace import tool


@tool
def add(a, b):
    return a + b


def test_pass(ststrace_session):
    assert ststrace.current_session() is ststrace_session
    ststrace_session.user("hi")
    ststrace_session.assistant("hello", model="m", usage={"input": 3, "output": 2})
    assert add(1, 2) == 3


def test_fail(ststrace_session):
    ststrace_session.user("doomed")
    assert 1 == 2, "one is not two"


@pytest.mark.skip(reason="not today")
def test_skip():
    pass


@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert False


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_setup_error(broken):
    pass


@pytest.mark.parametrize("city, n", [("Paris", 1), ("a/b c", 2)])
def test_param(city, n):
    ststrace.current_session().user(f"{city} {n}")


async def test_async(ststrace_session):
    await asyncio.sleep(0)

    async def inner():
        return ststrace.current_session()

    assert await asyncio.create_task(inner()) is ststrace_session
    ststrace_session.user("async")


def test_instrumented(fake_llm):
    import openai

    fake_llm.cached_tokens = 4
    ststrace.instrument("openai")
    try:
        client = openai.OpenAI(max_retries=0, timeout=5)
        client.chat.completions.create(model="fake-m", messages=[{"role": "user", "content": "hey"}])
    finally:
        ststrace.uninstrument()
'''

NODES = [
    "test_suite.py::test_pass",
    "test_suite.py::test_fail",
    "test_suite.py::test_skip",
    "test_suite.py::test_xfail",
    "test_suite.py::test_setup_error",
    "test_suite.py::test_param[Paris-1]",
    "test_suite.py::test_param[a/b c-2]",
    "test_suite.py::test_async",
    "test_suite.py::test_instrumented",
]


def make_suite(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_suite=SUITE)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_run(out: Path, xdist: bool) -> dict[str, dict[str, Any]]:
    index = json.loads((out / "index.json").read_text())
    tests = {t["nodeid"]: t for t in index["tests"]}
    assert sorted(tests) == sorted(NODES)
    assert index["totals"]["tests"] == len(NODES)
    assert (index["totals"]["passed"], index["totals"]["failed"], index["totals"]["skipped"]) == (5, 2, 2)

    assert tests["test_suite.py::test_pass"]["outcome"] == "passed"
    assert tests["test_suite.py::test_pass"]["tokens"] == 5
    assert tests["test_suite.py::test_pass"]["messages"] == 4  # user, assistant, tool call, tool result
    assert tests["test_suite.py::test_fail"]["outcome"] == "failed"
    assert "one is not two" in tests["test_suite.py::test_fail"]["reason"]
    assert "\n" not in tests["test_suite.py::test_fail"]["reason"]
    assert tests["test_suite.py::test_skip"] | {"duration": 0} == {
        "nodeid": "test_suite.py::test_skip",
        "outcome": "skipped",
        "reason": "not today",
        "duration": 0,
        "messages": 0,
        "tokens": 0,
        "file": file_name("test_suite.py::test_skip") + ".jsonl",
    }
    assert tests["test_suite.py::test_xfail"]["reason"] == "xfail: known bug"
    setup_error = tests["test_suite.py::test_setup_error"]
    assert setup_error["outcome"] == "failed" and setup_error["reason"].startswith("error in setup: RuntimeError")
    instrumented = tests["test_suite.py::test_instrumented"]
    assert instrumented["outcome"] == "passed"
    assert instrumented["messages"] == 2 and instrumented["tokens"] > 0
    assert instrumented["usage"]["cacheRead"] == 4

    for nodeid, entry in tests.items():
        path = out / entry["file"]
        records = lines(path)
        header = records[0]
        assert header["name"] == nodeid
        assert header["pytest"]["nodeid"] == nodeid
        assert ("worker" in header["pytest"]) is xdist
        assert isinstance(entry["duration"], float)
        assert len(records) - 1 == entry["messages"]
    param = lines(out / tests["test_suite.py::test_param[a/b c-2]"]["file"])
    assert param[0]["pytest"]["parameters"] == {"city": "a/b c", "n": 2}
    assert param[1]["message"]["content"] == "a/b c 2"
    assert len(list(out.glob("*.jsonl"))) == len(NODES)
    return tests


def test_plugin_records_every_test_and_writes_the_index(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """One trace per test and an index with outcomes, reasons, counts and tokens."""
    make_suite(pytester)
    out = tmp_path / "out"
    result = pytester.runpytest_subprocess(f"--ststrace={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5, failed=1, skipped=1, xfailed=1, errors=1)
    check_run(out, xdist=False)
    result.stdout.fnmatch_lines([f"ststrace: traces and index.json in {out}"])


def test_plugin_with_xdist_workers(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``-n 2``: the workers write the traces into the controller's directory, one
    file per test, and the controller writes one index."""
    pytest.importorskip("xdist")
    make_suite(pytester)
    out = tmp_path / "out"
    result = pytester.runpytest_subprocess(f"--ststrace={out}", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5, failed=1, skipped=1, xfailed=1, errors=1)
    check_run(out, xdist=True)
    workers = {lines(p)[0]["pytest"]["worker"] for p in out.glob("*.jsonl")}
    assert workers <= {"gw0", "gw1"} and workers


def test_env_flag_and_default_directory(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """STSTRACE_PYTEST=1 turns the plugin on, writing under ./traces/pytest/<timestamp>/."""
    pytester.makepyfile(test_one="def test_one(ststrace_session):\n    ststrace_session.user('x')\n")
    monkeypatch.setenv("STSTRACE_PYTEST", "1")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (run,) = (pytester.path / "traces" / "pytest").iterdir()
    assert (run / "test_one.py__test_one.jsonl").exists()
    assert json.loads((run / "index.json").read_text())["tests"][0]["outcome"] == "passed"


def test_directory_with_a_tilde_is_under_home(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--ststrace=~/dir`` means the home directory, as a shell user expects (not ``./~``)."""
    home = pytester.path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    pytester.makepyfile(test_one="def test_one(ststrace_session):\n    ststrace_session.user('x')\n")
    result = pytester.runpytest_subprocess("--ststrace=~/runs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert (home / "runs" / "test_one.py__test_one.jsonl").exists()
    assert not (pytester.path / "~").exists()


def test_plugin_is_inert_when_not_asked_for(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """No option, no env: no session around tests, no files, no summary line;
    the ststrace_session fixture still gives a working session in tmp_path."""
    monkeypatch.delenv("STSTRACE_PYTEST", raising=False)
    pytester.makepyfile(
        test_inert="""
import ststrace

def test_none():
    assert ststrace.current_session() is None

def test_fixture(ststrace_session, tmp_path):
    assert ststrace.current_session() is ststrace_session
    assert ststrace_session.path.parent == tmp_path
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert not (pytester.path / "traces").exists()
    assert "ststrace:" not in result.stdout.str()


def test_a_test_path_given_as_the_directory_is_refused(pytester: pytest.Pytester) -> None:
    """``--ststrace test_x.py`` would swallow the test path: a clear usage error instead."""
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--ststrace", "test_x.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*looks like a test path*--ststrace=DIR*"])


def test_file_names_are_safe_and_distinct() -> None:
    assert file_name("tests/test_a.py::test_x[a/b c-2]") == "tests_test_a.py__test_x_a_b_c-2"
    long_a, long_b = file_name("t.py::test[" + "x" * 300 + "a]"), file_name("t.py::test[" + "x" * 300 + "b]")
    assert long_a != long_b and len(long_a) < 200
    assert "/" not in file_name("../../etc/passwd") and not file_name("../x").startswith(".")


def test_a_secret_in_a_parametrize_id_stays_out_of_file_names_and_the_index(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A token in a parametrize id (and in the failure message): the header is redacted, and
    so are the trace's file name and index.json, where the test is listed once, with its file."""
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    pytester.makepyfile(
        test_tok=(
            "import pytest\n"
            f"TOK = 'ghp_' + {token[4:]!r}\n"
            "@pytest.mark.parametrize('key', [TOK])\n"
            "def test_key(key):\n"
            "    assert key == 'plain', 'bad key ' + key\n"
        )
    )
    out = tmp_path / "out"
    result = pytester.runpytest_subprocess(f"--ststrace={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    names = [p.name for p in out.iterdir()]
    assert not [n for n in names if token in n], names
    text = (out / "index.json").read_text()
    assert token not in text
    (entry,) = json.loads(text)["tests"]
    assert entry["outcome"] == "failed" and "[REDACTED:github_token]" in entry["reason"]
    assert entry["nodeid"] == "test_tok.py::test_key[[REDACTED:github_token]]"
    assert entry["file"] is not None and lines(out / entry["file"])[0]["pytest"]["nodeid"] == entry["nodeid"]


def test_a_directory_used_by_two_runs_indexes_only_the_last_run(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--ststrace=DIR`` twice: the second run's test is written to ``name-2.jsonl``; the index
    points at that file (it pointed at the first run's), and counts only this run's messages."""
    pytester.makepyfile(
        test_flip=(
            "import os\n"
            "def test_flip(ststrace_session):\n"
            "    ststrace_session.user('run ' + os.environ['RUN'])\n"
            "    assert os.environ['RUN'] == '1'\n"
        )
    )
    out = tmp_path / "out"
    for run in ("1", "2"):
        monkeypatch.setenv("RUN", run)
        result = pytester.runpytest_subprocess(f"--ststrace={out}", "-p", "no:cacheprovider")
        result.assert_outcomes(**({"passed": 1} if run == "1" else {"failed": 1}))
    (entry,) = json.loads((out / "index.json").read_text())["tests"]
    assert entry["outcome"] == "failed"
    assert entry["file"] == "test_flip.py__test_flip-2.jsonl"
    assert lines(out / entry["file"])[1]["message"]["content"] == "run 2"
    assert entry["messages"] == 1 and "files" not in entry



def test_env_secret_set_in_a_test_traced_by_the_pytest_plugin(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: monkeypatch.setenv inside a test the plugin records."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # this checkout's ststrace in the subprocess
    pytester.makepyfile(
        test_late=f"""
        import ststrace

        @ststrace.tool
        def read_key():
            import os
            return os.environ["SERVICE_API_KEY"]

        def test_it(monkeypatch):
            monkeypatch.setenv("SERVICE_API_KEY", "{SECRET}")
            assert read_key() == "{SECRET}"
        """
    )
    out = tmp_path / "out"
    result = pytester.runpytest_subprocess(f"--ststrace={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (trace,) = out.glob("*.jsonl")
    text = trace.read_text()
    assert SECRET not in text and "[REDACTED:env]" in text
