"""Shared test set-up.

Internal errors that ststrace swallows in production (to protect the user's
program) fail the test here, so bugs cannot hide behind the safety net.
"""

from __future__ import annotations

import os
import tempfile
from typing import Iterator

# Before anything imports a client library: huggingface_hub phones home for
# telemetry and litellm fetches a price list at import. No test may reach any
# address but 127.0.0.1 (the guard below enforces it).
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The machine key of redacted ids' digests lives under ~/.cache by default:
# the suite (and the processes it starts, which inherit it) uses its own.
os.environ.setdefault(
    "STSTRACE_KEY_FILE", os.path.join(tempfile.mkdtemp(prefix="ststrace-tests-"), "id-key")
)

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

# Test modules import helpers from one another by module name (`from test_redact
# import POSITIVES`), across the stage folders: every folder is on sys.path, so
# running one file alone works too. Basenames must therefore be unique.
_TESTS = Path(__file__).resolve().parent
sys.path[1:1] = [str(d) for d in sorted(_TESTS.iterdir()) if d.is_dir() and any(d.glob("test_*.py"))]

import pytest  # noqa: E402

from ststrace import _errors  # noqa: E402
from ststrace.testing import localhost_only  # noqa: E402

pytest_plugins = ["fakeapi_fixtures", "pytester"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="run slow soak/fuzz tests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: opt in with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fail_on_internal_errors(request: pytest.FixtureRequest) -> Iterator[list[BaseException]]:
    errors: list[BaseException] = []
    previous = _errors.internal_error_hook
    _errors.internal_error_hook = errors.append
    try:
        yield errors
    finally:
        _errors.internal_error_hook = previous
    if errors and "allow_internal_errors" not in request.keywords:
        raise AssertionError(f"ststrace swallowed {len(errors)} internal error(s): {errors!r}") from errors[0]


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    # Traces written with the default path land in a temp dir, never the repo.
    monkeypatch.setenv("STSTRACE_DIR", str(tmp_path_factory.mktemp("traces")))
    for var in ("STSTRACE_DISABLED", "STSTRACE_HARNESS", "STSTRACE_REDACT"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def _no_external_traffic(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test runs under the loopback-only guard and fails if it tried more."""
    with localhost_only() as attempts:
        yield
        refused = list(attempts)
    if "allow_refused_network" not in request.keywords:
        assert not refused, f"test tried to reach the network beyond 127.0.0.1: {refused}"


@pytest.fixture(autouse=True)
def _not_an_xdist_worker_inside(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make test` runs the suite on pytest-xdist workers, which export
    PYTEST_XDIST_WORKER; a pytest run a test starts (pytester) would inherit it
    and take itself for a worker."""
    if "pytester" in request.fixturenames:
        for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
            monkeypatch.delenv(var, raising=False)
