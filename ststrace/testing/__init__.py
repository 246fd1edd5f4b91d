"""Test helpers shipped with ststrace: a local fake LLM API server, trace replay and a network guard.

Nothing beyond ststrace's own dependencies, so the examples can start the fake
server without extra packages. Nothing here is imported by ``ststrace`` itself.
"""

from __future__ import annotations

from ststrace.testing.compare import assert_same_conversation, conversation_differences
from ststrace.testing.fakeapi import (
    DEFAULT_TOOL_CALLS,
    FakeAPI,
    RecordedRequest,
    ScriptedReply,
    ScriptedToolCall,
)
from ststrace.testing.netguard import ExternalNetworkError, localhost_only
from ststrace.testing._replay import Miss, ReplayAPI, ReplayMismatch, ReplayProtocol, register_protocol, replay

__all__ = [
    "DEFAULT_TOOL_CALLS",
    "ExternalNetworkError",
    "FakeAPI",
    "Miss",
    "RecordedRequest",
    "ReplayAPI",
    "ReplayMismatch",
    "ReplayProtocol",
    "ScriptedReply",
    "ScriptedToolCall",
    "assert_same_conversation",
    "conversation_differences",
    "localhost_only",
    "register_protocol",
    "replay",
]
