"""The examples in examples/ run as a user would run them."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ststrace

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_writes_validates_and_renders_a_trace(tmp_path: Path) -> None:
    """`make demo` runs examples/quickstart.py: a valid trace in ./traces and its HTML page."""
    env = {k: v for k, v in os.environ.items() if k != "STSTRACE_DIR"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    traces = list((tmp_path / "traces").glob("*.jsonl"))
    assert len(traces) == 1
    assert f"trace written and valid: traces/{traces[0].name}" in proc.stdout
    html = traces[0].with_suffix(".html")
    assert html.exists() and str(html.relative_to(tmp_path)) in proc.stdout
    assert proc.stdout.count(html.name) == 1, proc.stdout  # the page's path is printed once
    assert not [p for p in ststrace.validate(traces[0]) if p.severity == "error"]
    trace = ststrace.read(traces[0])
    roles = [m["role"] for m in trace.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant"]
    call_ids = [c["id"] for c in trace.messages[2]["toolCalls"]]
    assert [m["toolCallId"] for m in trace.messages[3:5]] == call_ids
    assert trace.messages[2]["reasoningContent"]
    assert "ststrace internal error" not in proc.stderr


def test_bedrock_agent_runs_offline_and_records_the_loop(tmp_path: Path) -> None:
    """examples/bedrock_agent.py without AWS credentials: boto3 against the fake
    Bedrock Runtime, the undecorated tools' results paired by ``toolUseId``."""
    import pytest

    pytest.importorskip("boto3")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["STSTRACE_DIR"] = str(tmp_path / "traces")
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "none")
    env["PYTHONPATH"] = str(ROOT)  # this checkout's ststrace, whatever the venv has installed
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "bedrock_agent.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Here is what I found: Sunny, 21 C; 15:00" in proc.stdout
    [path] = (tmp_path / "traces").glob("*.jsonl")
    trace = ststrace.read(path)
    assert [m["role"] for m in trace.messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in trace.messages[2]["toolCalls"]] == ["tooluse_weather01", "tooluse_time02"]
    assert [m["toolCallId"] for m in trace.messages[3:5]] == ["tooluse_weather01", "tooluse_time02"]
    assert [m["content"] for m in trace.messages[3:5]] == ["Sunny, 21 C", "15:00"]
    assert "ststrace internal error" not in proc.stderr and "WARNING" not in proc.stderr


# --- each example says what to install, and that line installs what it imports ---

_INSTALL = re.compile(r"^\s*pip install (?P<q>['\"]?)ststrace(?:\[(?P<extras>[^\]]+)\])?(?P=q)\s*$", re.M)


def _requirement_names(extras: list[str]) -> set[str]:
    """The distributions `pip install ststrace[extras]` asks for (nested
    ``ststrace[...]`` extras followed), by normalised name."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {_norm(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in project["dependencies"]}
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        assert extra in project["optional-dependencies"], f"no extra named {extra!r}"
        for req in project["optional-dependencies"][extra]:
            m = re.match(r"ststrace\[([^\]]+)\]", req)
            if m:
                todo += m.group(1).split(",")
            else:
                names.add(_norm(re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]))
    return names


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imports(source: str) -> set[str]:
    """Every module the file imports, at the top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out |= {f"{node.module}.{a.name}" for a in node.names}  # `from google import genai`
    return out


def _distribution(module: str) -> str | None:
    """The installed distribution that provides ``module`` (None for the standard
    library); a module not installed here counts as the distribution named like it
    (``google.genai`` -> google-genai)."""
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top == "__future__":
        return None
    if top == "ststrace":
        return "ststrace"
    spec = importlib.util.find_spec(top)
    if spec is None:
        return _norm(top)
    parts = module.split(".")
    if spec.origin in (None, "namespace") and len(parts) > 1:
        # A namespace package (google.*): the distribution that ships the subpackage.
        sub = "/".join(parts[:2]) + "/"
        if importlib.util.find_spec(".".join(parts[:2])) is None:
            return _norm("-".join(parts[:2]))
        for dist in importlib.metadata.packages_distributions().get(top, []):
            if any(str(f).startswith(sub) for f in importlib.metadata.distribution(dist).files or []):
                return _norm(dist)
        return _norm("-".join(parts[:2]))
    (dist,) = importlib.metadata.packages_distributions()[top]
    return _norm(dist)


EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_each_example_states_an_install_line_that_brings_what_it_imports(example: Path) -> None:
    source = example.read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source)) or ""
    lines = list(_INSTALL.finditer(doc))
    assert len(lines) == 1, f"{example.name}: its docstring needs one `pip install ststrace[...]` line"
    extras = [e.strip() for e in (lines[0].group("extras") or "").split(",") if e.strip()]
    brought = _requirement_names(extras) | {"ststrace"}
    needed = {d for d in map(_distribution, _imports(source)) if d is not None}
    assert needed, example.name
    missing = sorted(needed - brought)
    assert not missing, f"{example.name}: `{lines[0].group(0).strip()}` does not install {missing}"


def test_the_install_line_check_catches_a_missing_package() -> None:
    """The check above can fail: boto3 is not in what the openai extra brings, and the
    old bedrock extra (botocore alone) did not bring what bedrock_agent.py imports."""
    assert _distribution("boto3") == "boto3"
    assert "boto3" not in _requirement_names(["openai"])
    assert _distribution("google.genai") == "google-genai"
    assert {"openai", "wrapt", "orjson"} <= _requirement_names(["openai"])
    assert {"boto3", "botocore"} <= _requirement_names(["bedrock"])
