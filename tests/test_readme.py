"""Every ```python block in README.md runs, in order, as a reader would paste it.

The blocks share one namespace (a later block may use what an earlier one made),
run in a temporary directory, and reach no network but the local fake server:
OPENAI_BASE_URL / ANTHROPIC_BASE_URL point at it. A block that cannot run here is
preceded by ``<!-- readme-test: skip REASON -->``; the reason is required.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

import ststrace
from ststrace.testing import FakeAPI

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"(?:<!--\s*readme-test:\s*(?P<directive>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)```", re.S)


def _blocks() -> list[tuple[int, str, str | None]]:
    text = README.read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        out.append((line, m.group("code"), m.group("directive")))
    return out


def test_readme_has_python_blocks_and_skips_say_why() -> None:
    blocks = _blocks()
    assert len(blocks) >= 5
    for line, _, directive in blocks:
        if directive is not None:
            assert re.fullmatch(r"skip \S.{8,}", directive), f"README.md:{line}: a skip needs a reason"


def test_every_python_block_in_the_readme_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run each block; a failure names the README line where the block starts."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STSTRACE_DIR", raising=False)
    try:
        import datasets.config
    except ImportError:
        pass
    else:
        # "From traces to training data" loads with datasets: no download-count ping
        # (read from the environment at import, so set here).
        monkeypatch.setattr(datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", False)
        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets-cache")
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    ran = 0
    from test_otel_export import Receiver  # needs the `test` extra's OpenTelemetry packages

    otlp = Receiver()  # the OTLP/HTTP backend the OpenTelemetry section sends to
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.url)
    with FakeAPI() as api:
        monkeypatch.setenv("OPENAI_BASE_URL", api.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-local-test")
        try:
            for line, code, directive in _blocks():
                if directive is not None and directive.startswith("skip"):
                    continue
                source = "\n" * (line - 1) + textwrap.dedent(code)  # tracebacks point at README lines
                compiled = compile(source, str(README), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                try:
                    result = eval(compiled, namespace)  # noqa: S307 - our own README
                    if inspect.iscoroutine(result):
                        asyncio.run(result)
                except BaseException as exc:
                    raise AssertionError(f"README.md:{line}: the block raised {type(exc).__name__}: {exc}") from exc
                ran += 1
        finally:
            ststrace.uninstrument()
            otlp.close()
    assert ran >= 5
    assert otlp.spans(), "the README's export block sent no span"
    assert list(tmp_path.joinpath("traces").glob("*.jsonl")), "the README's sessions wrote no trace"
