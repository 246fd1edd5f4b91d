"""``instrument()`` / ``uninstrument()`` / ``instrumented()`` themselves: names,
errors, lazy patching on import, undo, idempotence and thread safety.

Process-wide states that a test cannot undo (a library never imported, a
module blocked) run in a fresh subprocess.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
import wrapt

import ststrace
from ststrace import InstrumentationError, Session
from ststrace._instrument import _patched, _wanted, instrumented as patched_now
from ststrace.integrations import openai as openai_integration
from test_instrument_helpers import (
    INPUTS,
    chat_messages,
    instrumented,
    new_trace,
    recorded,
    targets,
    tool_reply,
    CHAT_TOOLS,
    MODEL,
)

openai = pytest.importorskip("openai")
from openai.resources.chat.completions.completions import AsyncCompletions, Completions  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def installed_integrations(*excluded: str) -> list[str]:
    """Names ``instrument()`` covers whose library is installed here, minus *excluded*."""
    from ststrace._instrument import INTEGRATIONS

    out = []
    for key, module in INTEGRATIONS.items():
        library = importlib.import_module(module).LIBRARY
        if key not in excluded and importlib.util.find_spec(library) is not None:
            out.append(key)
    return sorted(out)


def run_python(code: str, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run *code* in a fresh interpreter (the repository importable, traces in *tmp_path*)."""
    env = dict(os.environ)
    env["STSTRACE_DIR"] = str(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --------------------------------------------------------------------------- names


def test_unknown_name_raises_instrumentation_error() -> None:
    from ststrace._instrument import INTEGRATIONS

    supported = ", ".join(sorted(INTEGRATIONS))
    assert {"anthropic", "huggingface_hub", "litellm", "google_genai", "bedrock"} <= set(INTEGRATIONS)
    with pytest.raises(InstrumentationError, match=rf"'nonexistent'.*supported: {re.escape(supported)}$"):
        ststrace.instrument("nonexistent")
    with pytest.raises(InstrumentationError, match="'nonexistent'"):
        ststrace.uninstrument("nonexistent")
    assert patched_now() == [] and not _wanted


def test_a_bad_name_among_good_ones_patches_nothing() -> None:
    """Names are checked before anything is patched."""
    with pytest.raises(InstrumentationError):
        ststrace.instrument("openai", "nonexistent")
    assert patched_now() == []


@pytest.mark.parametrize("alias", ["hf", "huggingface-hub", "huggingface", "huggingface_hub"])
def test_huggingface_aliases(alias: str) -> None:
    with instrumented(alias):
        assert patched_now() == ["huggingface_hub"]
        assert ststrace.instrument(alias) == ["huggingface_hub"]


def test_instrument_returns_and_instrumented_lists_the_patched_libraries() -> None:
    with instrumented("openai", "anthropic"):
        assert patched_now() == ["anthropic", "openai"]
        create = Completions.__dict__["create"]
        assert isinstance(create, wrapt.FunctionWrapper)
        assert not isinstance(create.__wrapped__, wrapt.FunctionWrapper)
        # A second call patches nothing more: still one wrapper deep.
        assert ststrace.instrument("openai", "anthropic") == ["openai", "anthropic"]
        assert Completions.__dict__["create"] is create
    assert patched_now() == []
    assert not isinstance(Completions.__dict__["create"], wrapt.FunctionWrapper)


def test_uninstrument_one_library_leaves_the_others() -> None:
    with instrumented("openai", "anthropic"):
        ststrace.uninstrument("anthropic")
        assert patched_now() == ["openai"]
        ststrace.uninstrument("anthropic")  # again: nothing to undo, no error
        assert patched_now() == ["openai"]


def test_patched_methods_keep_their_names_signatures_and_async_nature() -> None:
    """Introspection (``help()``, frameworks inspecting signatures) sees the original."""
    import inspect

    plain_sync = inspect.signature(Completions.create)
    plain_async = inspect.signature(AsyncCompletions.create)
    with instrumented("openai"):
        assert Completions.create.__name__ == "create"
        assert Completions.create.__doc__ == Completions.create.__wrapped__.__doc__
        assert inspect.signature(Completions.create) == plain_sync
        assert inspect.signature(AsyncCompletions.create) == plain_async


# --------------------------------------------------------------------------- unsupported versions, moved methods


def test_unsupported_version_by_name_raises_and_without_names_is_skipped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Asked by name: a clear error. Not asked by name: skipped without a warning."""
    caplog.set_level(logging.WARNING, logger="ststrace")
    monkeypatch.setattr(openai_integration, "MIN_VERSION", (999, 0))
    with pytest.raises(InstrumentationError, match=r"cannot instrument openai 3\.57.*needs openai >= 999\.0"):
        ststrace.instrument("openai")
    assert patched_now() == []
    try:
        done = ststrace.instrument()
        assert "openai" not in done
        assert "openai" not in patched_now()
    finally:
        ststrace.uninstrument()
    assert not isinstance(Completions.__dict__["create"], wrapt.FunctionWrapper)
    assert caplog.records == []


def test_unsupported_version_is_skipped_silently_on_a_later_import(tmp_path: Path) -> None:
    proc = run_python(
        """
        import logging
        logging.basicConfig(level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
        import ststrace
        from ststrace.integrations import openai as spec
        spec.MIN_VERSION = (999,)
        ststrace.instrument(http=False)  # openai imports httpx2: the seam would patch it
        import openai
        from ststrace._instrument import instrumented
        print("PATCHED", instrumented())
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "PATCHED []"
    ours = [line for line in proc.stderr.splitlines() if line.startswith("ststrace ")]
    assert ours == ["ststrace DEBUG ststrace: not instrumenting openai: cannot instrument openai 3.57.0: "
                    "ststrace needs openai >= 999"]


def test_a_moved_method_raises_and_patches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """If one target is missing (a client version that moved it), no target is patched."""
    before = targets("openai")
    monkeypatch.setattr(
        openai_integration,
        "TARGETS",
        [*openai_integration.TARGETS, ("openai.resources.chat.completions.completions", "Completions.gone")],
    )
    with pytest.raises(InstrumentationError, match=r"Completions\.gone not found"):
        ststrace.instrument("openai")
    monkeypatch.undo()
    assert targets("openai") == before
    assert patched_now() == []


def test_a_missing_optional_target_leaves_the_others_patched(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A method only some versions have (``OPTIONAL``) is skipped when missing;
    every other target is still patched and undone."""
    caplog.set_level(logging.WARNING, logger="ststrace")
    gone = ("openai.resources.chat.completions.completions", "Completions.gone")
    monkeypatch.setattr(openai_integration, "TARGETS", [*openai_integration.TARGETS, gone])
    monkeypatch.setattr(openai_integration, "OPTIONAL", openai_integration.OPTIONAL | {"Completions.gone"})
    try:
        assert ststrace.instrument("openai") == ["openai"]
        assert isinstance(Completions.__dict__["create"], wrapt.FunctionWrapper)
        assert len(_patched["openai"]) == len(openai_integration.TARGETS) - 1
    finally:
        ststrace.uninstrument()
    assert not isinstance(Completions.__dict__["create"], wrapt.FunctionWrapper)
    assert caplog.records == []


def test_a_moved_module_is_found_in_its_other_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target naming two modules (an SDK that moved one) patches the first that has it."""
    moved = (("openai.resources.no_such_module", "openai.resources.chat.completions.completions"), "Completions.create")
    rest = [t for t in openai_integration.TARGETS if t[1] != "Completions.create"]
    monkeypatch.setattr(openai_integration, "TARGETS", [moved, *rest])
    try:
        ststrace.instrument("openai")
        assert isinstance(Completions.__dict__["create"], wrapt.FunctionWrapper)
    finally:
        ststrace.uninstrument()
    assert not isinstance(Completions.__dict__["create"], wrapt.FunctionWrapper)
    monkeypatch.setattr(openai_integration, "TARGETS", [(("openai.nowhere", "openai.nowhere2"), "X.create"), *rest])
    with pytest.raises(InstrumentationError, match=r"openai\.nowhere\.X\.create not found.*openai\.nowhere2\.X\.create"):
        ststrace.instrument("openai")
    assert patched_now() == []


def test_missing_library_by_name_raises_and_without_names_is_skipped(tmp_path: Path) -> None:
    """A library that cannot be imported (blocked here with ``sys.modules[name] = None``)."""
    proc = run_python(
        """
        import sys
        sys.modules["litellm"] = None
        sys.modules["agents"] = None  # the OpenAI Agents SDK, left out of this count too
        import ststrace
        from ststrace._instrument import _wanted, instrumented
        try:
            ststrace.instrument("openai", "litellm")
        except ststrace.InstrumentationError as exc:
            print("ERROR:", exc)
        print("PATCHED:", instrumented())
        done = ststrace.instrument()
        print("DONE:", sorted(done))
        print("PATCHED:", instrumented(), "WANTED:", sorted(_wanted))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == (
        "ERROR: cannot instrument litellm: the 'litellm' package is not installed (pip install 'ststrace[litellm]')"
    )
    # Checked before anything is patched: openai, named first, is not patched either.
    assert lines[1] == "PATCHED: []"
    others = installed_integrations("litellm", "openai_agents")
    assert {"anthropic", "huggingface_hub", "openai"} <= set(others)
    assert lines[2] == f"DONE: {others}"
    # Nothing was imported yet, so all of them wait for their import.
    assert lines[3] == f"PATCHED: [] WANTED: {others}"
    assert proc.stderr == ""


# --------------------------------------------------------------------------- lazy patching


LAZY_SCRIPT = """
import sys
import ststrace
from ststrace._instrument import instrumented
from ststrace.testing import FakeAPI, localhost_only

done = ststrace.instrument()
print("DONE:", sorted(done))
print("IMPORTED:", sorted(n for n in ("openai", "anthropic", "huggingface_hub", "litellm") if n in sys.modules))
print("BEFORE:", instrumented())
{between}
import openai
print("AFTER:", instrumented())

with localhost_only() as refused, FakeAPI() as api:
    client = openai.OpenAI(base_url=api.openai_base_url, api_key="k", max_retries=0)
    with ststrace.Session() as s:
        client.chat.completions.create(model="m", messages=[{{"role": "user", "content": "hi"}}])
    print("ROLES:", [m["role"] for m in ststrace.read(s.path).messages])
    print("REFUSED:", refused)
"""


def test_instrument_before_import_patches_on_import(tmp_path: Path) -> None:
    """``instrument()`` imports no client library; ``import openai`` later patches it."""
    proc = run_python(LAZY_SCRIPT.format(between=""), tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == f"DONE: {installed_integrations()}"
    assert out[1] == "IMPORTED: []"
    assert out[2] == "BEFORE: []"
    # openai 3 imports httpx2: the transport seam is patched on that import too.
    assert out[3] == "AFTER: ['httpx2', 'openai']"
    assert out[4] == "ROLES: ['user', 'assistant']"
    assert out[5] == "REFUSED: []"


def test_uninstrument_before_import_cancels_the_lazy_patch(tmp_path: Path) -> None:
    proc = run_python(LAZY_SCRIPT.format(between="ststrace.uninstrument()"), tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[3] == "AFTER: []"
    assert out[4] == "ROLES: []"


def test_a_failing_lazy_patch_never_breaks_the_users_import(tmp_path: Path) -> None:
    """The post-import hook runs inside ``import openai``: a failure there is
    logged as a warning and the import succeeds, unpatched."""
    proc = run_python(
        """
        import logging
        logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
        import ststrace
        from ststrace.integrations import openai as spec
        spec.TARGETS = [*spec.TARGETS, ("openai.resources.chat.completions.completions", "Completions.gone")]
        ststrace.instrument()
        import openai
        from ststrace._instrument import instrumented
        print("IMPORTED", openai.OpenAI.__name__, instrumented())
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "IMPORTED OpenAI ['httpx2']"  # openai unpatched; the seam below it is
    assert "ststrace WARNING ststrace: could not instrument openai" in proc.stderr
    assert "Completions.gone not found" in proc.stderr


def test_already_imported_libraries_are_patched_at_once() -> None:
    """With no names, a library imported already is patched now, not on a later import."""
    assert "openai" in sys.modules
    try:
        assert "openai" in ststrace.instrument()
        assert "openai" in patched_now()
    finally:
        ststrace.uninstrument()
    assert not _wanted and not _patched


# --------------------------------------------------------------------------- undo when wrapped again


def test_uninstrument_leaves_a_wrapper_added_on_top(
    openai_sync: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another tool (an OpenTelemetry instrumentation, say) wrapped our patch:
    uninstrument keeps its wrapper working and stops our recording."""
    original = Completions.__dict__["create"]
    seen: list[str] = []

    def theirs(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        seen.append(kwargs["model"])
        return wrapped(*args, **kwargs)

    try:
        ststrace.instrument("openai")
        wrapt.wrap_function_wrapper(Completions, "create", theirs)
        with caplog.at_level(logging.WARNING, logger="ststrace"):
            ststrace.uninstrument("openai")
        assert "wrapped again after ststrace patched it" in caplog.text
        path = new_trace(tmp_path)
        with Session(path):
            openai_sync.chat.completions.create(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS)
        assert seen == [MODEL]
        assert recorded(path) == []
        # Instrumenting again works through the stack of wrappers.
        with instrumented("openai"):
            with Session(path.with_name("again.jsonl")) as again:
                openai_sync.chat.completions.create(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS)
        assert recorded(again.path) == [*INPUTS, tool_reply()]
    finally:
        ststrace.uninstrument()
        Completions.create = original  # type: ignore[method-assign]


# --------------------------------------------------------------------------- threads


def test_concurrent_instrument_calls_patch_once() -> None:
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def go() -> None:
        try:
            barrier.wait()
            ststrace.instrument("openai", "anthropic")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with instrumented("openai", "anthropic"):
        threads = [threading.Thread(target=go) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for current in targets("openai").values():
            assert isinstance(current, wrapt.FunctionWrapper)
            assert not isinstance(current.__wrapped__, wrapt.FunctionWrapper)


def test_minimum_versions_match_the_extras() -> None:
    """``pip install ststrace[openai]`` etc. never installs a version instrument() refuses."""
    import importlib
    import re

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    from ststrace._instrument import _EXTRAS, HTTP_SEAMS, INTEGRATIONS

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for key, module in INTEGRATIONS.items():
        if key in HTTP_SEAMS:
            continue  # the transport seam patches the HTTP client an SDK brought; no extra installs it
        spec = importlib.import_module(module)
        name = getattr(spec, "DISTRIBUTION", spec.LIBRARY).replace("-", "_").replace(".", "_")
        requirement = next(r for r in extras[_EXTRAS[key]] if r.replace("-", "_").startswith(name))
        floor = re.search(r">=\s*([\d.]+)", requirement)
        assert floor is not None, requirement
        assert tuple(int(p) for p in floor.group(1).split(".")) == spec.MIN_VERSION, (key, requirement)
