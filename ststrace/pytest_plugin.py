"""pytest plugin: one STS trace per test, and an index of the run.

Registered through the ``pytest11`` entry point, and inert unless asked for
with ``pytest --ststrace[=DIR]`` or ``STSTRACE_PYTEST=1``: without either it
only defines the ``--ststrace`` option and the ``ststrace_session`` /
``fake_llm`` fixtures, which do nothing until a test requests them.

When on, every test (setup, call and teardown) runs inside its own
:class:`ststrace.Session` named after the test's node id, written to
``DIR/<sanitised node id>.jsonl`` (default ``./traces/pytest/<run timestamp>/``).
The header's ``pytest`` metadata holds the node id, the parameters and the
xdist worker. ``@llm``, ``@tool`` and ``instrument()``-ed clients record into
it; a ``Session`` the code under test opens becomes its child. At the end of the
run ``DIR/index.json`` lists every test: outcome (``passed`` / ``failed`` /
``skipped``), a one-line reason, duration, message count, tokens and file.

Replaying: ``--ststrace-record=DIR`` records like ``--ststrace=DIR`` and makes
the ``fake_llm`` fixture step aside (the provider the environment names
answers, and is recorded); ``--ststrace-replay=DIR`` makes ``fake_llm`` a
:func:`ststrace.testing.replay` of the test's own trace in DIR (same file name)
with the providers' variables pointing at it. A test without a trace there
fails with the path looked for, or is recorded into DIR with
``--ststrace-record-missing``. ``@pytest.mark.ststrace_replay("file.jsonl")``
names a test's trace (relative to the test file), with or without the options.

With pytest-xdist the controller picks DIR and hands it to the workers; each
worker writes the files of the tests it runs (created exclusively, never
clobbered) and the controller writes the index from the reports it receives
and the files' headers.
"""

from __future__ import annotations

import datetime as _dt
import glob
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ststrace.testing.fixtures import REPLAY_PLAN, Plan, fake_llm

__all__ = ["fake_llm", "ststrace_session"]

ENV_FLAG = "STSTRACE_PYTEST"
INDEX = "index.json"
_FALSE = ("", "0", "false", "no", "off")
_MAX_NAME = 150


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ststrace", "ststrace tracing")
    group.addoption(
        "--ststrace",
        action="store",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        dest="ststrace",
        help="record one STS trace per test in DIR (write --ststrace=DIR; default "
        "./traces/pytest/<run timestamp>/) and an index.json of the run. Also: STSTRACE_PYTEST=1.",
    )
    group.addoption(
        "--ststrace-record",
        action="store",
        default=None,
        metavar="DIR",
        dest="ststrace_record",
        help="record one trace per test in DIR for --ststrace-replay=DIR; the fake_llm fixture "
        "steps aside, so the model the environment names answers",
    )
    group.addoption(
        "--ststrace-replay",
        action="store",
        default=None,
        metavar="DIR",
        dest="ststrace_replay",
        help="the fake_llm fixture replays each test's recorded trace in DIR (a test without one fails)",
    )
    group.addoption(
        "--ststrace-record-missing",
        action="store_true",
        default=False,
        dest="ststrace_record_missing",
        help="with --ststrace-replay=DIR: record the tests that have no trace in DIR yet instead of failing them",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "ststrace_replay(path): the fake_llm fixture replays this trace (relative to the test file)"
    )
    value = config.getoption("ststrace", None)
    record = config.getoption("ststrace_record", None)
    replay_dir = config.getoption("ststrace_replay", None)
    missing = bool(config.getoption("ststrace_record_missing", False))
    if record is not None and replay_dir is not None:
        raise pytest.UsageError("--ststrace-record and --ststrace-replay exclude each other")
    if missing and replay_dir is None:
        raise pytest.UsageError("--ststrace-record-missing needs --ststrace-replay=DIR")
    base = config.invocation_params.dir
    replay_path = _absolute(base, replay_dir) if replay_dir else None
    config.stash[REPLAY_PLAN] = lambda item: _plan(item, record is not None, replay_path, missing)
    if record is not None:
        if value is not None:
            raise pytest.UsageError("--ststrace-record=DIR is --ststrace=DIR for replays: give one of them")
        value = record
    only_missing = None
    if missing and replay_path is not None:
        value, only_missing = str(replay_path), replay_path
    if value is None:
        if os.environ.get(ENV_FLAG, "").strip().lower() in _FALSE:
            return  # not asked for: the plugin stays out of the run
        value = ""
    if value and (value.endswith(".py") or "::" in value or os.path.isfile(value)):
        raise pytest.UsageError(
            f"--ststrace {value!r}: that looks like a test path, not a trace directory; "
            "write --ststrace=DIR, or put --ststrace after the test paths"
        )
    workerinput = getattr(config, "workerinput", None)
    # The run's id goes into every header, so the index of a directory used by
    # several runs counts only this one's files; xdist workers get the controller's.
    run = workerinput.get("ststrace_run") if workerinput is not None else None
    if not isinstance(run, str) or not run:
        run = f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%dT%H%M%S.%fZ')}-{os.getpid()}"
    if workerinput is not None and workerinput.get("ststrace_dir"):
        directory = Path(workerinput["ststrace_dir"])
    else:
        directory = Path(value).expanduser() if value else _default_dir(config.invocation_params.dir)
        if not directory.is_absolute():
            directory = config.invocation_params.dir / directory
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise pytest.UsageError(f"--ststrace: cannot create {directory}: {exc}") from exc
    recorder = _Recorder(directory, worker=workerinput is not None, run=run)
    if only_missing is not None:
        recorder.only_missing = True
    recorder.replace = record is not None
    config.pluginmanager.register(recorder, "ststrace-recorder")


_GUARD: list[Any] = []


def _clean_nodeid(text: str) -> str:
    """*text* redacted as a session header's node id is.

    The session redacts the node id in the header; the file name and the index
    must not hold what the header hides (a token in a parametrize id, or in a
    failure message), and the index must find the test's file by the header's
    (redacted) node id. Same default as Session(redact=True)."""
    if not _GUARD:
        from ._guard import make_guard

        _GUARD.append(make_guard(True, None))
    guard = _GUARD[0]
    if guard is None:
        return text
    # Through the header's own path, so the result equals the header's node id.
    value = guard.header({"type": "session", "nodeid": text}).get("nodeid")
    return value if isinstance(value, str) else text


_ITEM_PLAN = pytest.StashKey[Plan]()


def _absolute(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def trace_file(nodeid: str) -> str:
    """The file name a test's trace gets: its node id, redacted as the header's
    is, made a safe file name (see :func:`file_name`)."""
    return file_name(_clean_nodeid(nodeid)) + ".jsonl"


def _marked(item: pytest.Item) -> Path | None:
    marker = item.get_closest_marker("ststrace_replay")
    if marker is None:
        return None
    if len(marker.args) != 1 or not isinstance(marker.args[0], (str, os.PathLike)):
        raise pytest.UsageError(f"{item.nodeid}: write @pytest.mark.ststrace_replay(\"trace.jsonl\") (one path)")
    path = Path(marker.args[0]).expanduser()
    return path if path.is_absolute() else Path(item.path).parent / path


def _plan(item: pytest.Item, recording: bool, replay_dir: Path | None, missing: bool) -> Plan:
    """What ``fake_llm`` serves *item*: ``("fake", None)``, ``("live", None)``,
    ``("replay", path)``, or ``("missing", path)`` (a trace to replay is not there).
    Decided once per test: a trace recorded for it must not turn it into a replay."""
    plan = item.stash.get(_ITEM_PLAN, None)
    if plan is None:
        plan = item.stash[_ITEM_PLAN] = _decide(item, recording, replay_dir, missing)
    return plan


def _decide(item: pytest.Item, recording: bool, replay_dir: Path | None, missing: bool) -> Plan:
    path = _marked(item)
    if path is None and replay_dir is not None:
        path = cassette(replay_dir, item.nodeid) or replay_dir / trace_file(item.nodeid)
    if path is None:
        return ("live", None) if recording else ("fake", None)
    if path.is_file():
        return ("replay", path)
    return ("live", None) if missing or recording else ("missing", path)


def _header_meta(path: Path) -> dict[str, Any] | None:
    """The ``pytest`` metadata of a trace's header; ``None`` when it has none."""
    import orjson

    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20)
        header = orjson.loads(first)
    except (OSError, orjson.JSONDecodeError):
        return None
    meta = header.get("pytest") if isinstance(header, dict) else None
    return meta if isinstance(meta, dict) else None


def _numbered(directory: Path, nodeid: str) -> list[Path]:
    """``<name>.jsonl``, ``<name>-2.jsonl``, ... of *nodeid* in *directory*, in that order.

    Distinct node ids can share a name (``[a b]`` and ``[a_b]`` both become
    ``_a_b_``): the second one recorded is ``<name>-2.jsonl``, and the header's
    node id tells them apart."""
    base = file_name(_clean_nodeid(nodeid))
    found = [p for p in directory.glob(glob.escape(base) + "*.jsonl") if p.is_file()]
    numbered = [(_attempt(p.name, base, named=True), p) for p in found]
    return [p for n, p in sorted(numbered) if p.name == f"{base}.jsonl" or n > 1]


def cassette(directory: Path, nodeid: str) -> Path | None:
    """The trace in *directory* that ``--ststrace-replay`` serves the test *nodeid*:
    the last one whose header names this test (a test rerun in the recording
    run has several); a file of its name with no node id in its header (one
    written by hand); else ``None``."""
    clean = _clean_nodeid(nodeid)
    files = _numbered(directory, nodeid)
    metas = [(p, _header_meta(p)) for p in files]
    mine = [p for p, meta in metas if meta is not None and meta.get("nodeid") == clean]
    if mine:
        return mine[-1]
    plain = directory / trace_file(nodeid)
    if files and files[0] == plain and metas[0][1] is None:
        return plain
    return None


def _default_dir(base: Path) -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    root = base / "traces" / "pytest"
    candidate = root / stamp
    n = 1
    while candidate.exists():  # two runs in the same second
        n += 1
        candidate = root / f"{stamp}-{n}"
    return candidate


def file_name(nodeid: str) -> str:
    """A file name for *nodeid*: path separators and odd characters become ``_``;
    long ids are cut and keep a hash of the whole id, so they stay apart."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid.replace("::", "__")).strip("._") or "test"
    if len(safe) > _MAX_NAME:
        digest = hashlib.sha1(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        safe = f"{safe[:_MAX_NAME]}-{digest}"
    return safe


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    text = repr(value)
    return text if len(text) <= 200 else text[:199] + "\u2026"


_ITEM_SESSION = pytest.StashKey[Any]()
# A re-recording: (the temporary file, the trace it replaces, the earlier run's other files).
_ITEM_REPLACES = pytest.StashKey[tuple[Path, Path, list[Path]]]()


class _Outcome:
    __slots__ = ("outcome", "reason", "duration")

    def __init__(self) -> None:
        self.outcome = "passed"
        self.reason: str | None = None
        self.duration = 0.0


def _one_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()[:500]
    return ""


def _failure_reason(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if isinstance(message, str) and message.strip():
        return _one_line(message)
    return _one_line(str(report.longrepr))


def _skip_reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        reason = str(report.longrepr[2])
        return _one_line(reason[len("Skipped: ") :] if reason.startswith("Skipped: ") else reason)
    return _one_line(str(report.longrepr))


class _Recorder:
    """The plugin when on: sessions around tests (workers / single process) and
    the index (controller / single process)."""

    def __init__(self, directory: Path, worker: bool, run: str | None = None) -> None:
        self.directory = directory
        self.worker = worker
        self.run = run
        #: Record only the tests with no trace to replay (--ststrace-record-missing).
        self.only_missing = False
        #: --ststrace-record: a test's trace from an earlier run is replaced, not
        #: kept beside the new one (replay would go on serving the stale one).
        self.replace = False
        #: Traces replaced so far (names), for the summary.
        self.replaced: list[str] = []
        self.outcomes: dict[str, _Outcome] = {}
        self.started = _dt.datetime.now(_dt.timezone.utc)

    def _clean(self, text: str) -> str:
        return _clean_nodeid(text)

    # -- xdist: the controller hands its directory to every worker ---------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["ststrace_dir"] = str(self.directory)
        node.workerinput["ststrace_run"] = self.run

    # -- one session per test ------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[Any]:
        plan = item.config.stash.get(REPLAY_PLAN, None)
        skip = self.only_missing and plan is not None and plan(item)[0] == "replay"
        session = None if skip else self._open(item)
        try:
            return (yield)
        finally:
            if session is not None:
                self._close(session)
                self._put_in_place(item, session)

    def _open(self, item: pytest.Item) -> Any:
        from ststrace import Session

        meta: dict[str, Any] = {"nodeid": item.nodeid, "run": self.run}
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            meta["parameters"] = {str(k): _jsonable(v) for k, v in callspec.params.items()}
            meta["id"] = callspec.id
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        if worker:
            meta["worker"] = worker
        base = file_name(self._clean(item.nodeid))
        if self.replace:
            session = self._open_replacing(item, meta)
            if session is not False:
                return session
        for n in range(1, 100):
            # A test run twice (reruns, a repeated node id) gets name-2, name-3...
            path = self.directory / (f"{base}.jsonl" if n == 1 else f"{base}-{n}.jsonl")
            # parent=None: a test is a root session, even when pytest itself runs
            # inside a traced program.
            session = Session(path, name=item.nodeid, metadata={"pytest": meta}, parent=None)
            try:
                session.open()
            except FileExistsError:
                continue
            except Exception as exc:
                item.warn(pytest.PytestWarning(f"ststrace: cannot record {item.nodeid}: {exc}"))
                return None
            item.stash[_ITEM_SESSION] = session
            return session
        item.warn(pytest.PytestWarning(f"ststrace: no free file name for {item.nodeid} in {self.directory}"))
        return None

    def _open_replacing(self, item: pytest.Item, meta: dict[str, Any]) -> Any:
        """Re-recording (``--ststrace-record`` over a directory that holds this
        test's trace from an earlier run): record beside it under a temporary
        name, moved over it when the test ends (see _put_in_place). ``False``
        when there is nothing to replace (a new test, or a rerun in this run)."""
        from ststrace import Session

        clean = self._clean(item.nodeid)
        earlier = []
        for path in _numbered(self.directory, item.nodeid):
            found = _header_meta(path)
            if found is not None and found.get("nodeid") == clean:
                if found.get("run") == self.run:
                    return False  # run again in this run (reruns): a file of its own
                earlier.append(path)
        if not earlier:
            return False
        target = earlier[0]
        tmp = self.directory / f".{target.stem}.{os.getpid()}.recording.jsonl"
        try:
            session = Session(tmp, name=item.nodeid, metadata={"pytest": meta}, parent=None)
            session.open()
        except Exception as exc:
            item.warn(pytest.PytestWarning(f"ststrace: cannot record {item.nodeid}: {exc}"))
            return None
        item.stash[_ITEM_SESSION] = session
        item.stash[_ITEM_REPLACES] = (tmp, target, earlier[1:])
        return session

    def _put_in_place(self, item: pytest.Item, session: Any) -> None:
        """Move a re-recorded trace over the earlier one in one rename (a reader
        sees the old trace or the new one, never half of it); the earlier run's
        other files of this test (its reruns) go too."""
        plan = item.stash.get(_ITEM_REPLACES, None)
        if plan is None:
            return
        tmp, target, stale = plan
        try:
            if not session._close_done:
                raise OSError("the new trace was not closed")
            os.replace(tmp, target)
            for path in stale:
                path.unlink(missing_ok=True)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            item.warn(pytest.PytestWarning(f"ststrace: {target} kept; re-recording {item.nodeid} failed: {exc}"))
            return
        self.replaced.append(target.name)

    def _close(self, session: Any) -> None:
        try:
            session.close()
        except Exception as exc:
            import warnings

            warnings.warn(f"ststrace: closing the trace of {session.name} failed: {exc}", pytest.PytestWarning, stacklevel=1)

    # -- outcomes and the index -------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.worker:
            return
        state = self.outcomes.setdefault(self._clean(report.nodeid), _Outcome())
        state.duration += report.duration
        xfail = getattr(report, "wasxfail", None)
        if report.failed:
            if state.outcome != "failed":
                state.outcome = "failed"
                reason = self._clean(_failure_reason(report))
                state.reason = reason if report.when == "call" else f"error in {report.when}: {reason}"
        elif report.skipped and state.outcome == "passed":
            state.outcome = "skipped"
            state.reason = self._clean(f"xfail: {xfail}" if xfail is not None else _skip_reason(report))
            if xfail == "":
                state.reason = "xfail"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.worker:
            return
        try:
            write_index(self.directory, self.outcomes, self.started, run=self.run)
        except Exception as exc:
            import warnings

            warnings.warn(f"ststrace: could not write {self.directory / INDEX}: {exc}", pytest.PytestWarning, stacklevel=1)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.replaced:
            shown = ", ".join(self.replaced[:5]) + (", ..." if len(self.replaced) > 5 else "")
            terminalreporter.write_line(
                f"ststrace: re-recorded {len(self.replaced)} test(s), replacing their earlier trace: {shown}",
                yellow=True,
            )
        if not self.worker:
            terminalreporter.write_line(f"ststrace: traces and {INDEX} in {self.directory}")


def _scan(path: Path) -> dict[str, Any] | None:
    """Node id, message count and token totals of one trace file of ours."""
    import orjson

    nodeid = None
    run = None
    messages = 0
    usage: dict[str, int] = {}
    cost = 0.0
    with open(path, "rb") as f:
        for n, line in enumerate(f):
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a torn last line
            if n == 0:
                meta = record.get("pytest") if isinstance(record, dict) else None
                nodeid = meta.get("nodeid") if isinstance(meta, dict) else None
                if not isinstance(nodeid, str):
                    return None
                run = meta.get("run") if isinstance(meta, dict) else None
                continue
            messages += 1
            msg = record.get("message") if isinstance(record, dict) else None
            u = msg.get("usage") if isinstance(msg, dict) else None
            if isinstance(u, dict):
                for key, value in u.items():
                    if isinstance(value, int) and not isinstance(value, bool):
                        usage[key] = usage.get(key, 0) + value
                c = u.get("cost")
                if isinstance(c, dict) and isinstance(c.get("total"), (int, float)):
                    cost += float(c["total"])
    info: dict[str, Any] = {"nodeid": nodeid, "run": run, "messages": messages, "tokens": usage.get("totalTokens", 0)}
    if usage:
        info["usage"] = usage
    if cost:
        info["cost"] = cost
    return info


def _attempt(name: str, nodeid: str, *, named: bool = False) -> int:
    """1 for ``<name>.jsonl``, N for ``<name>-N.jsonl`` (the N-th file of one test)."""
    stem = name[: -len(".jsonl")]
    base = nodeid if named else file_name(nodeid)
    if stem.startswith(base + "-") and stem[len(base) + 1 :].isdigit():
        return int(stem[len(base) + 1 :])
    return 1


def write_index(directory: Path, outcomes: dict[str, _Outcome], started: _dt.datetime, run: str | None = None) -> Path:
    """Write ``DIR/index.json`` atomically; returns its path. With *run*, only the
    files of that run (a directory may hold earlier runs' files too)."""
    import orjson

    files: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for path in sorted(directory.glob("*.jsonl")):
        try:
            info = _scan(path)
        except OSError:
            continue
        if info is not None and (run is None or info["run"] == run):
            files.setdefault(info["nodeid"], []).append((path.name, info))
    for found in files.values():
        # In the order written: name.jsonl, name-2.jsonl, ..., name-10.jsonl (not by name).
        found.sort(key=lambda f: _attempt(f[0], f[1]["nodeid"]))
    tests: list[dict[str, Any]] = []
    totals: dict[str, Any] = {"tests": 0, "passed": 0, "failed": 0, "skipped": 0, "messages": 0, "tokens": 0}
    for nodeid in list(outcomes) + [n for n in files if n not in outcomes]:
        state = outcomes.get(nodeid)
        entry: dict[str, Any] = {"nodeid": nodeid, "outcome": state.outcome if state else "unknown"}
        if state is not None and state.reason:
            entry["reason"] = state.reason
        if state is not None:
            entry["duration"] = round(state.duration, 6)
        found = files.get(nodeid) or []
        entry["messages"] = sum(i["messages"] for _, i in found)
        entry["tokens"] = sum(i["tokens"] for _, i in found)
        usage: dict[str, int] = {}
        for _, i in found:
            for key, value in i.get("usage", {}).items():
                usage[key] = usage.get(key, 0) + value
        if usage:
            entry["usage"] = usage
        cost = sum(i.get("cost", 0.0) for _, i in found)
        if cost:
            entry["cost"] = cost
        entry["file"] = found[-1][0] if found else None  # a test run again (reruns): the last run
        if len(found) > 1:
            entry["files"] = [name for name, _ in found]
        tests.append(entry)
        totals["tests"] += 1
        if entry["outcome"] in ("passed", "failed", "skipped"):
            totals[entry["outcome"]] += 1
        totals["messages"] += entry["messages"]
        totals["tokens"] += entry["tokens"]
    index = {
        "version": 1,
        "started": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "finished": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "directory": str(directory),
        "totals": totals,
        "tests": tests,
    }
    target = directory / INDEX
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".index.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(orjson.dumps(index, option=orjson.OPT_INDENT_2) + b"\n")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


@pytest.fixture
def ststrace_session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The test's :class:`ststrace.Session`.

    With the plugin on, the session recording this test; otherwise a session
    written to the test's ``tmp_path``, current for the test's duration."""
    session = request.node.stash.get(_ITEM_SESSION, None)
    if session is not None:
        yield session
        return
    from ststrace import Session

    with Session(tmp_path / "ststrace.jsonl", name=request.node.nodeid) as own:
        yield own

