"""requests, the transport seam for the few clients built on it (see
:mod:`ststrace.integrations._http`): ``Session.send``, which ``requests.post``
and every ``Session`` method pass (sync only: requests has no async API)."""

from __future__ import annotations

from ._http import make_wrapper

LIBRARY = "requests"
MIN_VERSION = (2, 20)

TARGETS = [("requests.sessions", "Session.send")]

__all__ = ["LIBRARY", "MIN_VERSION", "TARGETS", "make_wrapper"]
