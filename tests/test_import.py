"""``import ststrace`` loads only what recording needs; the rest of the public
API is imported on first use and still looks complete (``__all__``, ``dir()``)."""

from __future__ import annotations

import subprocess
import sys

import ststrace

# Modules the traced program never needs at import time.
LAZY = ("ststrace._convert", "ststrace._hub", "ststrace._view", "ststrace._cli", "ststrace.cli", "ststrace._reader", "ststrace._adapters")


def _fresh(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return proc.stdout


def test_import_loads_no_converter_hub_viewer_reader_or_cli() -> None:
    """A fresh ``import ststrace`` imports none of the modules that are only used on demand."""
    out = _fresh("import sys, ststrace; print('\\n'.join(sorted(sys.modules)))").split()
    loaded = [m for m in out if m.startswith(LAZY)]
    assert loaded == []
    assert "ststrace._session" in out and "ststrace._decorators" in out  # the recording API is there
    assert "importlib.metadata" not in out or "wrapt" in out  # only wrapt may load it, not __version__


def test_lazy_names_resolve_to_the_real_objects() -> None:
    """Every public name resolves, to the very object its module defines."""
    from ststrace import _convert, _hub, _reader

    assert ststrace.convert is _convert.convert
    assert ststrace.ConvertResult is _convert.ConvertResult
    assert ststrace.upload is _hub.upload
    assert ststrace.read is _reader.read and ststrace.validate is _reader.validate
    for name in ststrace.__all__:
        assert getattr(ststrace, name) is not None, name


def test_from_import_of_a_lazy_name_works_in_a_fresh_process() -> None:
    """``from ststrace import validate`` imports the reader then, and only it."""
    out = _fresh(
        "import sys\nfrom ststrace import validate, Trace\n"
        "print(validate.__module__, Trace.__name__, 'ststrace._convert' in sys.modules, 'ststrace._hub' in sys.modules)"
    )
    assert out.split() == ["ststrace._reader", "Trace", "False", "False"]


def test_all_is_sorted_and_dir_is_complete() -> None:
    """``__all__`` stays sorted, and ``dir()`` lists every public name before it is used."""
    assert ststrace.__all__ == sorted(ststrace.__all__)
    out = _fresh("import ststrace; print(' '.join(dir(ststrace)))").split()
    assert set(ststrace.__all__) <= set(out)


def test_version_and_unknown_names() -> None:
    """``__version__`` is a string; an unknown name is an AttributeError naming it."""
    assert isinstance(ststrace.__version__, str) and ststrace.__version__
    try:
        ststrace.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_the_command_line_still_runs() -> None:
    """``python -m ststrace --help`` loads the command line on demand."""
    proc = subprocess.run([sys.executable, "-m", "ststrace", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "validate" in proc.stdout
