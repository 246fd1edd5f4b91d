"""Nothing silently empty: a session that ends without a single message says
which model client it may have missed.

Checked once, when such a session closes, against ``sys.modules`` at that
moment (nothing on the hot path): each LLM client library imported then is
named with what ststrace knows of it: not instrumented, instrumented but
called outside any session (a thread or task that does not carry the
session's context) or outside the methods ststrace records, or a library
ststrace does not record at all. :mod:`ststrace._instrument` hands over
what it knows through :data:`report` (it imports this module, never the
reverse); a program that never called ``instrument()`` is told that.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from . import _registry
from ._errors import logger

OUTSIDE_SESSION = "outside any session while one was open (from a thread or task that does not carry its context?)"
OUTSIDE_METHODS = "outside the methods ststrace records (wrap that call with @llm)"


def note_missed(patch: Any, session: Any) -> None:
    """A patched call that records nothing: with no current *session* while a
    session is open elsewhere, remember it on *patch* (its ``missed``) for an
    empty session's warning. Two reads when no session is open."""
    if session is None and _registry._open:
        patch.missed = OUTSIDE_SESSION

#: Import name of an LLM client library -> the ``instrument()`` name that would
#: record it (which this build may or may not have).
CLIENTS: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "litellm": "litellm",
    "groq": "groq",
    "cerebras.cloud.sdk": "cerebras",
    "together": "together",
    "mistralai": "mistralai",
    "mistralai.client": "mistralai",
    "cohere": "cohere",
    "ollama": "ollama",
    "botocore": "bedrock",
    "google.genai": "google_genai",
    "google.generativeai": "google_generativeai",
    "vertexai": "vertexai",
    "google.adk": "google_adk",
    "claude_agent_sdk": "claude_agent_sdk",
    "dspy": "dspy",
    "aiobotocore": "aiobotocore",
    "replicate": "replicate",
    "fireworks": "fireworks",
    "ai21": "ai21",
    "xai_sdk": "xai_sdk",
    "zhipuai": "zhipuai",
    "dashscope": "dashscope",
}

#: Set by :mod:`ststrace._instrument`: ``() -> (called, supported, patched, missed)``:
#: whether ``instrument()`` was ever called, the names it knows, those patched
#: now, and, for those whose calls went unrecorded since the last report, why
#: (the flags are cleared).
report: Callable[[], tuple[bool, frozenset[str], frozenset[str], dict[str, str]]] | None = None


def explain(session_id: str) -> str | None:
    """The warning for a session that recorded nothing, or ``None`` if no LLM
    client library is imported."""
    imported: list[str] = []
    keys: set[str] = set()
    for name in CLIENTS:
        module = sys.modules.get(name)
        # A namespace package (mistralai 3's ``mistralai``; ``instrument()``
        # imports it looking for ``mistralai.client``) is no client by itself.
        namespace = getattr(module, "__file__", None) is None and hasattr(module, "__path__")
        if module is None or namespace or CLIENTS[name] in keys:
            continue
        keys.add(CLIENTS[name])
        imported.append(name)
    if not imported:
        return None
    called, supported, patched, missed = report() if report is not None else (False, frozenset(), frozenset(), {})
    notes: list[str] = []
    for name in imported:
        key = CLIENTS[name]
        if key in missed:
            notes.append(f"{name} was called {missed[key]}")
        elif key in patched:
            continue  # instrumented and never called: not what is missing
        elif key not in supported:
            notes.append(f"{name} is imported, and ststrace does not record it (wrap its calls with @llm)")
        elif not called:
            notes.append(f"{name} is imported, but ststrace.instrument() was never called")
        else:
            notes.append(f"{name} is imported but not instrumented (ststrace.instrument({key!r}))")
    if not notes:
        return None
    return f"ststrace: session {session_id} recorded no messages; " + "; ".join(notes)


def warn(session_id: str) -> None:
    """Log :func:`explain`'s warning, if any (a hook run as an empty session closes)."""
    text = explain(session_id)
    if text is not None:
        logger.warning("%s", text)
