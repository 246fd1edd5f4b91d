"""google-genai (the Gemini API and Vertex AI): every model round trip.

The public methods (``models.generate_content`` / ``generate_content_stream``,
their ``client.aio`` twins, ``chats`` ``send_message`` / ``send_message_stream``)
all reach the API through the private ``_generate_content`` /
``_generate_content_stream`` of ``Models`` and ``AsyncModels``, once per HTTP
request. Patching there records each request once, including the ones
automatic function calling (``tools=[python_function]``) makes inside the SDK:
each of those resends the conversation with the model's function calls and
the SDK's function responses, so the tool calls and their results are
recorded in order although the caller never sees them.
"""

from __future__ import annotations

LIBRARY = "google.genai"
DISTRIBUTION = "google-genai"
MIN_VERSION = (1, 0)

TARGETS = [
    ("google.genai.models", "Models._generate_content"),
    ("google.genai.models", "Models._generate_content_stream"),
    ("google.genai.models", "AsyncModels._generate_content"),
    ("google.genai.models", "AsyncModels._generate_content_stream"),
]
