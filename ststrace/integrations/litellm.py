"""litellm: the module-level ``completion`` / ``acompletion`` functions.

Code that did ``from litellm import completion`` before ``instrument()`` keeps
the unpatched function; call ``litellm.completion`` or instrument first."""

from __future__ import annotations

LIBRARY = "litellm"
MIN_VERSION = (1, 53)

TARGETS = [
    ("litellm", "completion"),
    ("litellm", "acompletion"),
]
