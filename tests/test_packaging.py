"""The wheel a user installs: built by hatchling from this tree, it carries the
licence's full text, the metadata `pip show` prints, the project's links and the
Python versions the suite runs on (issue 34, item 4). Offline: hatchling and pip
come from the test environment, the wheel is installed with --no-index."""

from __future__ import annotations

import email
import subprocess
import sys
import zipfile
from email.message import Message
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from hatchling.build import build_wheel; print(build_wheel(sys.argv[1]))", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return out / done.stdout.strip().splitlines()[-1]


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(z.read(name))


def test_the_wheel_carries_the_full_licence(wheel: Path) -> None:
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence  # the full text, not a pointer to it
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert z.read(name).decode("utf-8") == licence
    meta = _metadata(wheel)
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]


def test_the_wheel_names_its_links_and_python_versions(wheel: Path) -> None:
    meta = _metadata(wheel)
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Repository", "Issues", "Changelog"} <= set(urls)
    assert all(u.startswith("https://") for u in urls.values())
    classifiers = meta.get_all("Classifier") or []
    versions = sorted(c.rsplit(" ", 1)[1] for c in classifiers if c.startswith("Programming Language :: Python :: 3."))
    # The interpreter this suite runs on is one of the versions declared ...
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in versions
    # ... and none is declared below the floor pip enforces.
    assert meta["Requires-Python"] == ">=3.10"
    assert all(tuple(map(int, v.split("."))) >= (3, 10) for v in versions)
    assert meta.get_all("Requires-Dist")[:2] == ["orjson>=3.9", "wrapt>=1.17"]


def test_pip_show_prints_the_licence(wheel: Path, tmp_path: Path) -> None:
    """Installed into a fresh environment, `pip show ststrace` prints the licence
    and the home page (it printed an empty `License:` before)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    target = str(venv / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", target]
    subprocess.run([*pip, "install", "--quiet", "--no-deps", "--no-index", str(wheel)], check=True, timeout=300)
    shown = subprocess.run([*pip, "show", "ststrace"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    fields = dict(line.split(": ", 1) for line in shown.stdout.splitlines() if ": " in line)
    assert fields["Name"] == "ststrace"
    assert fields["License-Expression"] == "Apache-2.0"
    assert fields["Home-page"].startswith("https://")
    assert str(venv) in fields["Location"]
