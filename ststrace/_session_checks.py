"""What ``Session(...)`` checks before anything is opened: moved out of
``_session`` (issue 32). The path (a ``.jsonl`` file or a directory), the
private directories a trace goes in, ``sync_to`` and ``prices``, and the
environment flag that turns tracing off."""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any

from ._env import getenv as _getenv
from ._errors import BadArgument, logger


def _env_flag(name: str) -> bool:
    return (_getenv(name) or "").strip().lower() in ("1", "true", "yes", "on")


def _check_prices(prices: Any) -> Any:
    if prices is None:
        return None
    from ._adapters.usage import check_prices

    return check_prices(prices)


def _make_private_dirs(directory: Path) -> None:
    """Create *directory* and any missing parents, each 0700 (traces hold prompts)."""
    missing: list[Path] = []
    d = directory
    while not d.exists():
        if d.is_symlink():
            # mkdir would fail with FileExistsError, which reads as "the trace exists".
            raise FileNotFoundError(
                f"{d} is a symbolic link to {os.readlink(d)!r}, which does not exist; "
                "create that directory or give the session another path"
            )
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    for d in reversed(missing):
        d.mkdir(mode=0o700, exist_ok=True)


_disabled_noted = False


def _check_path(arg: str | os.PathLike[str]) -> None:
    """A path with a suffix is a ``.jsonl`` file or an existing directory:
    ``Session("trace.json")`` would otherwise make a directory of that name."""
    text = os.fspath(arg)
    suffix = os.path.splitext(text.rstrip("/" + os.sep))[1]
    if suffix and suffix != ".jsonl" and not os.path.isdir(text):
        raise BadArgument(
            f"Session path {text!r}: give a directory (the file is named after the session id) "
            f"or a file ending in .jsonl, such as {os.path.splitext(text)[0] + '.jsonl'!r}"
        )


def _note_disabled() -> None:
    global _disabled_noted
    if not _disabled_noted:
        _disabled_noted = True
        logger.info("ststrace: STSTRACE_DISABLED is set; sessions record nothing and write no file")


def _load_sync(sync_to: str) -> None:
    """Fail at construction, not at close, when ``sync_to`` cannot work."""
    if not isinstance(sync_to, str) or not sync_to:
        raise BadArgument(f"sync_to must be a non-empty string such as 'hf://datasets/USER/NAME', not {sync_to!r}")
    if importlib.util.find_spec("huggingface_hub") is None:
        raise ImportError(
            "Session(sync_to=...) uploads with huggingface_hub, which is not installed: "
            "pip install 'ststrace[hub]'"
        )
    # The hub module registers its after-close upload on import; importing it by
    # name keeps the arrows one way (_hub imports the registry, not the reverse).
    hub = importlib.import_module("ststrace._hub")
    hub.parse_target(to=sync_to)
