"""cohere: the v2 API's ``ClientV2.chat`` / ``chat_stream`` and their async twins
(``ClientV2`` inherits them from ``V2Client``, as ``AsyncClientV2`` does from
``AsyncV2Client``)."""

from __future__ import annotations

LIBRARY = "cohere"
MIN_VERSION = (5, 13)

TARGETS = [
    ("cohere.v2.client", "V2Client.chat"),
    ("cohere.v2.client", "V2Client.chat_stream"),
    ("cohere.v2.client", "AsyncV2Client.chat"),
    ("cohere.v2.client", "AsyncV2Client.chat_stream"),
    # The v1 API (``cohere.Client.chat``): not recorded here; an empty
    # session's warning names it.
    ("cohere.base_client", "BaseCohere.chat", "unrecorded"),
    ("cohere.base_client", "BaseCohere.chat_stream", "unrecorded"),
    ("cohere.base_client", "AsyncBaseCohere.chat", "unrecorded"),
    ("cohere.base_client", "AsyncBaseCohere.chat_stream", "unrecorded"),
]
OPTIONAL = frozenset({"BaseCohere.chat", "BaseCohere.chat_stream", "AsyncBaseCohere.chat", "AsyncBaseCohere.chat_stream"})
