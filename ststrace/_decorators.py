"""``@tool``, ``@llm`` and the executor, as the package and the integrations
import them. Each lives in a module of its own:

- ``_wrapping``: the wrapt proxy, the function kind, the argument binder;
- ``_generators``: generator and async-generator tracing;
- ``_tool_calls``: ``@tool`` and ``tool_call_id``;
- ``_llm_calls``: ``@llm`` and ``_begin_llm`` (the instrumented clients' entry);
- ``_executor``: ``ThreadPoolExecutor``.
"""

from __future__ import annotations

from ._executor import ThreadPoolExecutor
from ._generators import _Observer, _trace_agen, _trace_gen
from ._llm_calls import _begin_llm, _LlmCall, llm
from ._tool_calls import _error_text, tool, tool_call_id
from ._wrapping import _ASYNC, _ASYNCGEN, _GEN, _SYNC, _Binder, _kind, _Wrapper

__all__ = [
    "_ASYNC",
    "_ASYNCGEN",
    "_GEN",
    "_SYNC",
    "ThreadPoolExecutor",
    "_Binder",
    "_LlmCall",
    "_Observer",
    "_Wrapper",
    "_begin_llm",
    "_error_text",
    "_kind",
    "_trace_agen",
    "_trace_gen",
    "llm",
    "tool",
    "tool_call_id",
]
