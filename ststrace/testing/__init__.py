"""Test helpers shipped with ststrace: a local fake LLM API server and a network guard.

Standard library only, so the examples can start the fake server without extra
packages. Nothing here is imported by ``ststrace`` itself.
"""

from __future__ import annotations

from ststrace.testing.fakeapi import (
    DEFAULT_TOOL_CALLS,
    FakeAPI,
    RecordedRequest,
    ScriptedReply,
    ScriptedToolCall,
)
from ststrace.testing.netguard import ExternalNetworkError, localhost_only

__all__ = [
    "DEFAULT_TOOL_CALLS",
    "ExternalNetworkError",
    "FakeAPI",
    "RecordedRequest",
    "ScriptedReply",
    "ScriptedToolCall",
    "localhost_only",
]
