"""Shared test set-up.

Internal errors that ststrace swallows in production (to protect the user's
program) fail the test here, so bugs cannot hide behind the safety net.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from ststrace import _errors


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
