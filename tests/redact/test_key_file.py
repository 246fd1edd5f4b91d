"""The machine key of redacted ids' digests is refused as ssh refuses a private
key: a symbolic link, or a file others can read (issue 31, "also, from reading")."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GH = "ghp_" + "Zq8" + "x7Kp2Lm9Nq4Rs6Tv1Wy3Ab5Cd8Ef0Gh2Ij"

IDENT = """
    import sys
    from ststrace._guard import make_guard
    print(make_guard(True).ident(sys.argv[1]))
    """


def _ident(key: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STSTRACE_KEY_FILE": str(key)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(IDENT), GH], capture_output=True, text=True, env=env, timeout=60, check=True
    )


def _known_key(tmp_path: Path) -> tuple[Path, str]:
    """A key someone else knows, and the digest it gives."""
    known = tmp_path / "known-key"
    known.write_bytes(b"k" * 32)
    known.chmod(0o600)
    return known, _ident(known).stdout


@pytest.mark.skipif(os.name != "posix", reason="POSIX modes and links")
def test_a_key_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    known, digest = _known_key(tmp_path)
    link = tmp_path / "id-key"
    link.symlink_to(known)
    proc = _ident(link)
    assert "symbolic link; refused" in proc.stderr
    assert proc.stdout != digest and GH not in proc.stdout


@pytest.mark.skipif(os.name != "posix", reason="POSIX modes and links")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o606])
def test_a_key_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    known, digest = _known_key(tmp_path)
    known.chmod(mode)
    proc = _ident(known)
    assert f"accessible by others (mode {mode:04o}); refused" in proc.stderr
    assert proc.stdout != digest and GH not in proc.stdout


@pytest.mark.skipif(os.name != "posix", reason="POSIX modes and links")
def test_a_private_key_file_is_used_silently(tmp_path: Path) -> None:
    known, digest = _known_key(tmp_path)
    again = _ident(known)
    assert again.stdout == digest and again.stderr == ""
