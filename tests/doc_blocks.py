"""The ```python blocks of a Markdown page under docs/, run as the README's are
(tests/test_readme.py): each alone, in a fresh interpreter, in its own empty
directory, under the loopback-only network guard."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"(?:<!--\s*readme-test:\s*(?P<directive>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)```", re.S)

_RUNNER = """
import sys
from ststrace.testing import localhost_only
guard = localhost_only()
refused = guard.__enter__()
with open(sys.argv[3], encoding="utf-8") as f:
    source = f.read()
code = compile("\\n" * (int(sys.argv[1]) - 1) + source, sys.argv[2], "exec")
exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
if refused:
    raise SystemExit(f"reached a non-local address: {refused}")
"""


def blocks(page: str) -> list[tuple[int, str, str | None]]:
    """(line, code, skip directive or None) of each block of docs/*page*."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        out.append((line, textwrap.dedent(m.group("code")), m.group("directive")))
    return out


def run(page: str, line: int, code: str, workdir: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    source = workdir / "block.py"
    source.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STSTRACE_", "OTEL_", "OPENAI_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-c", _RUNNER, str(line), f"docs/{page}", str(source)],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
    )
