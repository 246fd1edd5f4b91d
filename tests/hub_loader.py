"""The Hub's trace detection (the ``datasets`` JSON loader), run offline on local files.

Imported by the tests that check a file is still taken for a trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip without ``datasets``; keep it from pinging the Hub (read at import, so set here)."""
    pytest.importorskip("datasets")
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", False)


def hub_detects(path: Path, cache: Path) -> tuple[bool, Any, Any]:
    """Run the Hub's detection on *path*: the ``datasets`` JSON loader infers the
    file's features and checks them against its agent-trace markers (as Data
    Studio does), then reads the session id and prompt as it does for a row.
    The decode step after it needs the ``teich`` package and is not run."""
    import datasets
    from datasets.packaged_modules.json.json import AGENT_TRACES_FEATURES, parse_traces_info

    builder = datasets.load_dataset_builder("json", data_files=str(path), cache_dir=str(cache))
    manager = datasets.DownloadManager(dataset_name="json", download_config=datasets.DownloadConfig(cache_dir=str(cache)))
    builder._split_generators(manager)
    _, session_id, prompt, *_ = parse_traces_info(path.read_text(encoding="utf-8").splitlines())
    return builder.info.features == AGENT_TRACES_FEATURES, session_id, prompt
