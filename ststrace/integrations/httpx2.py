"""httpx2, the transport seam of the newest SDK majors (openai 3, anthropic 2,
mistralai 3, huggingface_hub 2): see :mod:`ststrace.integrations._http`."""

from __future__ import annotations

from ._http import make_wrapper

LIBRARY = "httpx2"
MIN_VERSION = (2, 0)

TARGETS = [
    ("httpx2", "Client.send"),
    ("httpx2", "AsyncClient.send"),
]

__all__ = ["LIBRARY", "MIN_VERSION", "TARGETS", "make_wrapper"]
