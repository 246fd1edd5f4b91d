"""Every ```python block in README.md and in the documentation pages (docs/**/*.md)
runs on its own, as a reader would paste it into a fresh interpreter.

Each block runs in its own fresh process (all at once, so all the pages cost
about one interpreter's start-up per core), in its own temporary directory,
under the network guard, reaching nothing but the local fake servers:
OPENAI_BASE_URL / ANTHROPIC_BASE_URL point at the fake model server and
OTEL_EXPORTER_OTLP_ENDPOINT at a local OTLP receiver. No block sees another's
names. A block that cannot run here is preceded by
``<!-- readme-test: skip REASON -->``; the reason is required.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ststrace.testing import FakeAPI

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# The pages whose blocks run: the front door and every page of the docs site.
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(r"(?:<!--\s*readme-test:\s*(?P<directive>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)```", re.S)

# Run as `python -c`: the guard first, then the block compiled as its page from its
# own line (tracebacks point at the page), as top-level code of a fresh __main__.
_RUNNER = """
import os, sys
for name in os.environ.get("README_BLOCK_WITHOUT", "").split():
    sys.modules[name] = None  # import fails, as where the package is not installed
from ststrace.testing import localhost_only
guard = localhost_only()
refused = guard.__enter__()
with open(sys.argv[3], encoding="utf-8") as f:
    source = f.read()
line = int(sys.argv[1])
code = compile("\\n" * (line - 1) + source, sys.argv[2], "exec")
exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
if refused:
    raise SystemExit(f"reached a non-local address: {refused}")
"""


def _env(**extra: str) -> dict[str, str]:
    """This environment without ststrace's, OpenTelemetry's and the clients' settings,
    the worktree's ststrace first on the path (as `python -m pytest` has it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STSTRACE_", "OTEL_", "OPENAI_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return {**env, **extra}


def _blocks(page: Path = README) -> list[tuple[int, str, str | None]]:
    text = page.read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        out.append((line, textwrap.dedent(m.group("code")), m.group("directive")))
    return out


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_pages_have_python_blocks_and_skips_say_why() -> None:
    assert len(PAGES) >= 10, "the docs pages are missing"
    assert len(_blocks()) >= 3, "the README lost its examples"
    assert sum(len(_blocks(page)) for page in PAGES) >= 20
    for page in PAGES:
        for line, _, directive in _blocks(page):
            if directive is not None:
                assert re.fullmatch(r"skip \S.{8,}", directive), f"{_name(page)}:{line}: a skip needs a reason"


def test_every_python_block_in_the_readme_and_docs_runs_alone(tmp_path: Path) -> None:
    """Each block in a fresh process; a failure names the page and line where the block starts."""
    from test_otel_export import Receiver  # needs the `test` extra's OpenTelemetry packages

    # "From traces to training data" loads with datasets: offline, no download-count
    # ping, its cache in the test's directory.
    env = _env(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_UPDATE_DOWNLOAD_COUNTS="0",
        HF_DATASETS_CACHE=str(tmp_path / "hf-datasets-cache"),
    )
    otlp = Receiver()  # the OTLP/HTTP backend the OpenTelemetry section sends to
    try:
        with FakeAPI() as api:
            env.update(
                OPENAI_BASE_URL=api.openai_base_url,
                OPENAI_API_KEY="sk-local-test",
                ANTHROPIC_BASE_URL=api.anthropic_base_url,
                ANTHROPIC_API_KEY="sk-ant-local-test",
                OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
            )
            running: list[tuple[str, Path, subprocess.Popen[str]]] = []
            for page in PAGES:
                for line, code, directive in _blocks(page):
                    if directive is not None and directive.startswith("skip"):
                        continue
                    where = f"{_name(page)}:{line}"
                    slug = re.sub(r"\W", "-", where)
                    cwd = tmp_path / f"block-{slug}"
                    cwd.mkdir()
                    source = tmp_path / f"block-{slug}.py"
                    source.write_text(code, encoding="utf-8")
                    proc = subprocess.Popen(
                        [sys.executable, "-c", _RUNNER, str(line), str(page), str(source)],
                        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                    )
                    running.append((where, cwd, proc))
            failures = []
            for where, _, proc in running:
                try:
                    output = proc.communicate(timeout=120)[0]
                except subprocess.TimeoutExpired:
                    proc.kill()
                    output = proc.communicate()[0] + "\n(timed out after 120 s)"
                if proc.returncode != 0:
                    failures.append(f"{where}: the block failed when run alone:\n{output[-3000:]}")
    finally:
        otlp.close()
    assert not failures, "\n\n".join(failures)
    assert len(running) >= 20
    assert otlp.spans(), "the OpenTelemetry page's export block sent no span"
    traces = [p for _, cwd, _ in running for p in cwd.glob("traces/*.jsonl")]
    assert traces, "the blocks' sessions wrote no trace"


def test_the_quick_start_runs_where_only_ststrace_is_installed(tmp_path: Path) -> None:
    """The first Quick start block runs in what `make demo` builds: no client library."""
    text = README.read_text(encoding="utf-8")
    start = text.index("## Quick start")
    line, code, _ = next(b for b in _blocks() if text.count("\n", 0, start) < b[0])
    assert "openai" not in code.split("@tool")[0]
    source = tmp_path / "block.py"
    source.write_text(code, encoding="utf-8")
    without = "openai anthropic huggingface_hub litellm opentelemetry"
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(line), str(README), str(source)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env=_env(README_BLOCK_WITHOUT=without),
    )
    assert done.returncode == 0, done.stderr
    (trace,) = tmp_path.glob("traces/*.jsonl")
    assert done.stdout.strip() == str(Path("traces") / trace.name)


@pytest.mark.parametrize(
    "code, error",
    [("print(undefined_name)", "NameError"), ("async with x:\n    pass", "SyntaxError")],
    ids=["name-from-another-block", "top-level-async-with"],
)
def test_a_block_that_needs_another_block_fails(tmp_path: Path, code: str, error: str) -> None:
    """The runner is a fresh interpreter: names from other blocks and top-level await fail there."""
    source = tmp_path / "block.py"
    source.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, "1", "README.md", str(source)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env=_env(),
    )
    assert done.returncode != 0 and error in done.stderr


def test_the_replay_blocks_run_offline_exactly_as_printed(tmp_path: Path) -> None:
    """Record -> replay -> assert, with no API key and no base URL in the environment:
    the block itself starts the local server it records against (issue 34, item 6)."""
    blocks = [(page, line, code) for page in PAGES for line, code, d in _blocks(page) if "replay(" in code and d is None]
    assert {_name(page) for page, _, _ in blocks} >= {"README.md", "docs/replay.md"}
    for page, line, code in blocks:
        cwd = tmp_path / re.sub(r"\W", "-", f"{_name(page)}-{line}")
        cwd.mkdir()
        source = cwd.with_suffix(".py")
        source.write_text(code, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-c", _RUNNER, str(line), str(page), str(source)],
            cwd=cwd, capture_output=True, text=True, timeout=120, env=_env(),
        )
        assert done.returncode == 0, f"{_name(page)}:{line}:\n{done.stderr[-3000:]}"
        assert sorted(p.name for p in cwd.glob("*.jsonl")) == ["recorded.jsonl", "replayed.jsonl"]


def test_the_readme_is_a_front_door_whose_links_resolve() -> None:
    """At most 300 lines of reasonable width; every relative link names a file that
    exists (the docs site's own links are checked by `mkdocs build --strict`)."""
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 300
    assert max(map(len, lines)) <= 120, max(lines, key=len)
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(local) >= 20
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == []
    for required in ("make demo", "make test", "## Quick start"):
        assert required in text
