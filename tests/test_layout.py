"""The package's import graph: no circle, and the record path reads one way.

The graph is built from the source (AST), counting every kind of import:
module level, inside functions, under ``if TYPE_CHECKING:``, and
``importlib.import_module("ststrace....")`` with a literal name. A lazy import
is still an arrow a reader has to follow, so it counts.

The record path's stages, lowest first, as the code has them (a module may
import its own stage and any lower one, never, even through other modules, a
higher one):

0. foundations: ``_errors``, ``_env``, ``_context`` (context variables; the
   current session is typed ``Any`` there, so it needs no ``_session``)
1. writer: ``_writer`` (the buffered writer), ``_flusher`` (its background
   thread), ``_fds`` (opening, locking and pooling descriptors), ``_files``
   (file creation off the event loop)
2. encode: ``_encode`` (orjson and its fallbacks for odd values; decides
   nothing about what a record holds, imports no other stage)
3. text rules: ``_limits`` (size caps, media placeholders, token counts),
   ``_redact`` (secret detectors), ``_keyfile`` (the machine's id key),
   ``_envwatch`` (secrets exported while sessions are open)
4. sanitize: ``_guard`` (redaction, caps and media applied to a record's
   fields, once each), ``_text`` (user values as text, media placeholders
   applied while the value is still structured)
5. records: ``_records`` (pure builders), ``_tools`` (tool schemas),
   ``_links`` (sub-agent header links), ``_pairing`` (tool calls waiting for
   results), ``_dedup`` (the conversation across turns)
6. session: ``_session`` (lifecycle and the recording methods),
   ``_session_calls`` (its base class: what decorators and integrations call
   on a session), ``_resume`` (reading a trace to append to it),
   ``_session_checks`` (the arguments and the path, checked before anything
   is opened)
7. call: ``_decorators`` (re-exports the next five), ``_wrapping`` (the wrapt
   proxy, function kinds, argument binding), ``_generators`` (generator
   tracing), ``_tool_calls`` (``@tool``), ``_llm_calls`` (``@llm``),
   ``_executor``, ``_subagents`` (``new_child`` builds a ``Session``)
8. instrumentation: ``_instrument`` and ``integrations.*``
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ststrace"

STAGES: list[tuple[str, set[str]]] = [
    ("foundations", {"_errors", "_env", "_context"}),
    ("writer", {"_writer", "_flusher", "_fds", "_files"}),
    ("encode", {"_encode"}),
    ("text rules", {"_limits", "_redact", "_keyfile", "_envwatch"}),
    ("sanitize", {"_guard", "_text"}),
    ("records", {"_records", "_tools", "_links", "_pairing", "_dedup"}),
    ("session", {"_session", "_session_calls", "_resume", "_session_checks"}),
    ("call", {"_decorators", "_wrapping", "_generators", "_tool_calls", "_llm_calls", "_executor", "_subagents"}),
    ("instrumentation", {"_instrument", "integrations"}),
]


def _modules(root: Path, package: str) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join([package, *parts])] = path
    return mods


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, by any of the four kinds."""
    mods = _modules(root, package)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                targets = [f"{name}.{a.name}" if f"{name}.{a.name}" in mods else name for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                targets = [node.args[0].value]
            edges[mod].update(t for t in targets if t in mods and t != mod)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def _stage(module: str) -> int | None:
    rest = module.removeprefix("ststrace.")
    for n, (_, names) in enumerate(STAGES):
        if rest in names or rest.startswith("integrations.") and "integrations" in names:
            return n
    return None


def _reachable(edges: dict[str, set[str]], start: str) -> dict[str, list[str]]:
    """Every module *start* reaches, with one import chain to it."""
    paths = {start: [start]}
    todo = [start]
    while todo:
        node = todo.pop()
        for nxt in sorted(edges[node]):
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                todo.append(nxt)
    return paths


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE, "ststrace")


def test_the_package_has_no_import_circle(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_every_stage_names_real_modules(graph: dict[str, set[str]]) -> None:
    """A renamed module must not silently drop out of the layering."""
    for _, names in STAGES:
        for name in names:
            assert f"ststrace.{name}" in graph, name


def test_the_record_path_never_climbs(graph: dict[str, set[str]]) -> None:
    """No staged module reaches a module of a higher stage, directly or not."""
    climbs = []
    for mod in sorted(graph):
        own = _stage(mod)
        if own is None:
            continue
        for other, chain in _reachable(graph, mod).items():
            theirs = _stage(other)
            if theirs is not None and theirs > own:
                climbs.append(" -> ".join(chain))
    assert climbs == []


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_graph_sees_lazy_typing_and_import_module_arrows(tmp_path: Path) -> None:
    """The checks above can fail: each kind of import closes a circle here."""
    _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from . import b\n",
            "b.py": "def f():\n    from .a import x\n",
            "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n",
            "d.py": "import importlib\nimportlib.import_module('pkg.c')\n",
            "sub/__init__.py": "from .e import e\n",
            "sub/e.py": "from pkg.sub import f\n",
            "sub/f.py": "",
            "g.py": "import pkg.a\n",
        },
    )
    edges = import_graph(tmp_path, "pkg")
    assert edges["pkg.b"] == {"pkg.a"}
    assert edges["pkg.c"] == {"pkg.d"}
    assert edges["pkg.d"] == {"pkg.c"}
    assert edges["pkg.sub.e"] == {"pkg.sub.f"}
    assert edges["pkg.g"] == {"pkg.a"}
    assert sorted(cycles(edges)) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]


def test_a_climb_is_reported_with_its_chain() -> None:
    edges = {"ststrace._writer": {"ststrace._x"}, "ststrace._x": {"ststrace._session"}, "ststrace._session": set()}
    chains = [c for o, c in _reachable(edges, "ststrace._writer").items() if (_stage(o) or 0) > 1]
    assert chains == [["ststrace._writer", "ststrace._x", "ststrace._session"]]
