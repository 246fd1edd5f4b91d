"""Provider adapters: model replies, streams and input conversations -> STS.

Pure functions and proxies with no I/O and no session access; the ``@llm``
decorator and the client instrumentation decide what to record.
"""

from __future__ import annotations

from .convert import response_to_message
from .inputs import input_messages
from .streams import accumulate, is_stream, is_wrapped_stream, wrap_stream

__all__ = [
    "accumulate",
    "input_messages",
    "is_stream",
    "is_wrapped_stream",
    "response_to_message",
    "wrap_stream",
]
