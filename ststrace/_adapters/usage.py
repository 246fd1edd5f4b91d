"""Token usage: provider reports -> the ``usage`` object of an STS assistant message.

The shape is the one the Hub already renders for Pi sessions::

    {"input": int, "output": int, "cacheRead": int, "cacheWrite": int,
     "totalTokens": int, "reasoning": int?, "cost": {...}?}

``input`` counts the prompt tokens that were neither read from nor written to
the prompt cache, so the four counts add up to ``totalTokens`` (as in Pi).
``reasoning`` is the part of ``output`` the provider says was reasoning; it is
present only when the provider reports it. Providers count differently:

* OpenAI Chat Completions (and HF, LiteLLM, vLLM, ...): ``prompt_tokens``
  *includes* the cached tokens (``prompt_tokens_details.cached_tokens``) and,
  from LiteLLM, the cache writes (``cache_creation_input_tokens``).
* OpenAI Responses: ``input_tokens`` includes ``input_tokens_details.cached_tokens``.
* Anthropic: ``input_tokens`` *excludes* ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens``; a stream reports ``message_start`` usage and
  then cumulative ``message_delta`` usage.
* Gemini (``usage_metadata``, ``usageMetadata`` on the wire):
  ``prompt_token_count`` *includes* ``cached_content_token_count``;
  ``thoughts_token_count`` is counted *beside* ``candidates_token_count``, so
  output is their sum; a stream's chunks carry running totals, the last wins.
* Cohere v2: ``usage.tokens`` (what the model read and wrote) and
  ``usage.billed_units``; ``tokens`` is used when present. ``cached_tokens``
  are part of the input.
* Bedrock Converse: ``inputTokens`` *excludes* ``cacheReadInputTokens`` and
  ``cacheWriteInputTokens`` (``totalTokens`` adds all four).
* Ollama: no ``usage`` object; ``prompt_eval_count`` and ``eval_count`` on the
  reply (on a stream's last chunk).

Pure functions, no I/O; every reader goes through :func:`get`, so objects and
their dict forms read alike. Nothing here raises for odd input: an unknown
shape is "no usage".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .._errors import BadArgument
from . import gemini
from .._limits import MAX_TOKEN_COUNT, TOKEN_COUNT_KEYS, token_count
from ._common import get

__all__ = [
    "COST_KEYS",
    "USAGE_KEYS",
    "UsageAccumulator",
    "attach",
    "check_prices",
    "check_usage",
    "cost_of",
    "usage_from_response",
    "usage_of",
]

#: The counts every usage object carries, in the order they are written.
USAGE_KEYS = TOKEN_COUNT_KEYS[:5]
#: The keys of ``usage.cost`` (USD), and of a price table entry (USD per token) but ``total``.
COST_KEYS = ("input", "output", "cacheRead", "cacheWrite", "total")
_PRICE_KEYS = frozenset(("input", "output", "cacheRead", "cacheWrite"))

Usage = dict[str, Any]


_int = token_count


def _count(obj: Any, *keys: str) -> int | None:
    for key in keys:
        value = _int(get(obj, key))
        if value is not None:
            return value
    return None


def _build(inputs: int, output: int, cache_read: int, cache_write: int, reasoning: int | None) -> Usage:
    usage: Usage = {
        "input": inputs,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": min(inputs + output + cache_read + cache_write, MAX_TOKEN_COUNT),
    }
    if reasoning is not None:
        usage["reasoning"] = reasoning
    return usage


def _from_sts(raw: Any) -> Usage | None:
    """A usage object already in the STS / Pi shape (``@llm`` dicts, Pi sessions)."""
    inputs, output = _count(raw, "input"), _count(raw, "output")
    if inputs is None and output is None:
        return None
    cache_read = _count(raw, "cacheRead") or 0
    cache_write = _count(raw, "cacheWrite") or 0
    usage = _build(inputs or 0, output or 0, cache_read, cache_write, _count(raw, "reasoning"))
    cost = get(raw, "cost")
    if isinstance(cost, Mapping):
        clean = {k: float(v) for k, v in cost.items() if k in COST_KEYS and _number(v)}
        if clean:
            usage["cost"] = clean
    return usage


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _from_openai_chat(raw: Any) -> Usage:
    prompt = _count(raw, "prompt_tokens") or 0
    completion = _count(raw, "completion_tokens") or 0
    details = get(raw, "prompt_tokens_details")
    cache_read = _count(details, "cached_tokens") if details is not None else None
    if cache_read is None:
        cache_read = _count(raw, "cache_read_input_tokens", "prompt_cache_hit_tokens") or 0
    cache_write = _count(raw, "cache_creation_input_tokens")
    if cache_write is None and details is not None:
        cache_write = _count(details, "cache_creation_tokens", "cache_write_tokens")
    cache_write = cache_write or 0
    out_details = get(raw, "completion_tokens_details")
    reasoning = _count(out_details, "reasoning_tokens") if out_details is not None else None
    inputs = max(0, prompt - cache_read - cache_write)
    return _build(inputs, completion, cache_read, cache_write, reasoning)


def _from_responses(raw: Any) -> Usage:
    prompt = _count(raw, "input_tokens") or 0
    details = get(raw, "input_tokens_details")
    cache_read = (_count(details, "cached_tokens") if details is not None else None) or 0
    cache_write = (_count(details, "cache_write_tokens", "cache_creation_tokens") if details is not None else None) or 0
    out_details = get(raw, "output_tokens_details")
    reasoning = _count(out_details, "reasoning_tokens") if out_details is not None else None
    inputs = max(0, prompt - cache_read - cache_write)
    return _build(inputs, _count(raw, "output_tokens") or 0, cache_read, cache_write, reasoning)


def _from_anthropic(raw: Any) -> Usage:
    return _build(
        _count(raw, "input_tokens") or 0,
        _count(raw, "output_tokens") or 0,
        _count(raw, "cache_read_input_tokens") or 0,
        _count(raw, "cache_creation_input_tokens") or 0,
        None,
    )


#: prompt, tool-use prompt, cached, thoughts, candidates: as the SDK and as the wire spell them.
_GEMINI_SNAKE = (
    "prompt_token_count",
    "tool_use_prompt_token_count",
    "cached_content_token_count",
    "thoughts_token_count",
    "candidates_token_count",
)
_GEMINI_CAMEL = (
    "promptTokenCount",
    "toolUsePromptTokenCount",
    "cachedContentTokenCount",
    "thoughtsTokenCount",
    "candidatesTokenCount",
)


def _from_gemini(raw: Any) -> Usage:
    # One spelling per object: the wire's camelCase only in a raw JSON dict.
    camel = type(raw) is dict and ("promptTokenCount" in raw or "candidatesTokenCount" in raw)
    prompt_key, tool_key, cached_key, thoughts_key, candidates_key = _GEMINI_CAMEL if camel else _GEMINI_SNAKE
    prompt = _count(raw, prompt_key) or 0
    # Tokens of the tool results a server-side tool (search, code) fed back in.
    prompt += _count(raw, tool_key) or 0
    cache_read = _count(raw, cached_key) or 0
    reasoning = _count(raw, thoughts_key)
    output = (_count(raw, candidates_key) or 0) + (reasoning or 0)
    return _build(max(0, prompt - cache_read), output, cache_read, 0, reasoning)


_GEMINI_KEYS = ("prompt_token_count", "candidates_token_count", "promptTokenCount", "candidatesTokenCount")
def _from_cohere(raw: Any) -> Usage | None:
    counts = get(raw, "tokens")
    if counts is None or (_count(counts, "input_tokens") is None and _count(counts, "output_tokens") is None):
        counts = get(raw, "billed_units")
    inputs, output = _count(counts, "input_tokens"), _count(counts, "output_tokens")
    if inputs is None and output is None:
        return None
    cache_read = min(_count(raw, "cached_tokens") or 0, inputs or 0)
    return _build((inputs or 0) - cache_read, output or 0, cache_read, 0, None)


def usage_of(raw: Any) -> Usage | None:
    """A provider's usage report (object or dict, any known shape) -> STS usage, or ``None``."""
    if raw is None or isinstance(raw, (str, bytes, int, float, bool, list, tuple)):
        return None
    if type(raw).__name__ == "GenerateContentResponseUsageMetadata":
        return _from_gemini(raw)  # google-genai's, whose other providers' fields would all be missing
    if type(raw).__name__ == "UnreportedUsage":
        # LiteLLM's stand-in (all zeros) for a stream whose provider sent no usage.
        return None
    if get(raw, "prompt_tokens") is not None or get(raw, "completion_tokens") is not None:
        return _from_openai_chat(raw)
    if get(raw, "input_tokens") is not None or get(raw, "output_tokens") is not None:
        if get(raw, "input_tokens_details") is not None or get(raw, "total_tokens") is not None:
            return _from_responses(raw)
        return _from_anthropic(raw)
    if any(get(raw, key) is not None for key in _GEMINI_KEYS):
        return _from_gemini(raw)
    if get(raw, "tokens") is not None or get(raw, "billed_units") is not None:
        return _from_cohere(raw)
    if get(raw, "inputTokens") is not None or get(raw, "outputTokens") is not None:
        return _build(
            _count(raw, "inputTokens") or 0,
            _count(raw, "outputTokens") or 0,
            _count(raw, "cacheReadInputTokens") or 0,
            _count(raw, "cacheWriteInputTokens") or 0,
            None,
        )
    return _from_sts(raw)


def _usage_field(obj: Any) -> Any:
    raw = get(obj, "usage")
    if raw is not None and type(obj) is not dict and isinstance(obj, Mapping):
        # huggingface_hub's outputs are dicts whose dict side keeps only the
        # fields its types know (no prompt_tokens_details); the attribute keeps all.
        return getattr(obj, "usage", raw)
    return raw


def _gemini_usage_field(obj: Any) -> Any:
    # Apart from _usage_field, which runs for every chat stream chunk.
    return gemini.field(gemini.resolved(obj), "usage_metadata", "usageMetadata")
def _from_counts(obj: Any) -> Usage | None:
    """Ollama's ``prompt_eval_count`` / ``eval_count`` (no usage object)."""
    prompt, output = _count(obj, "prompt_eval_count"), _count(obj, "eval_count")
    if prompt is None and output is None:
        return None
    return _build(prompt or 0, output or 0, 0, 0, None)


def usage_from_response(obj: Any) -> Usage | None:
    """The usage of a whole model reply (ChatCompletion, Response, Anthropic Message,
    Gemini GenerateContentResponse, Ollama ChatResponse, LiteLLM / HF outputs, or an
    STS-shaped dict with ``usage``), or ``None``."""
    if obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return None
    if type(obj).__name__ == "GenerateContentResponse":
        return usage_of(_gemini_usage_field(obj))
    raw = _usage_field(obj)
    if raw is None:
        raw = _gemini_usage_field(obj)
        if raw is None:
            return _from_counts(obj)
    return usage_of(raw)


def attach(message: dict[str, Any] | None, obj: Any) -> dict[str, Any] | None:
    """*message* with the ``usage`` of reply *obj* added, when it reports one."""
    if message is not None and "usage" not in message:
        usage = usage_from_response(obj)
        if usage is not None:
            message["usage"] = usage
    return message


class UsageAccumulator:
    """The usage of a stream, from whichever of its chunks carry one.

    Chat Completions send it on a last chunk (``choices: []``) when the caller
    asked with ``stream_options.include_usage``; Responses on
    ``response.completed``; Anthropic on ``message_start`` (input side) and
    ``message_delta`` (cumulative output, and sometimes updated input counts).
    """

    __slots__ = ("_raw", "_anthropic")

    def __init__(self) -> None:
        self._raw: Any = None
        self._anthropic: dict[str, Any] | None = None

    def add_chat(self, chunk: Any) -> None:
        """A Chat Completions chunk; only the one that carries ``usage`` matters
        (Groq's last chunk also has it in ``x_groq.usage``)."""
        raw = _usage_field(chunk)
        if raw is None:
            extra = get(chunk, "x_groq")
            raw = get(extra, "usage") if extra is not None else None
        if raw is not None:
            self._raw = raw

    def add_gemini(self, chunk: Any) -> None:
        """A Gemini stream chunk: its ``usage_metadata`` holds running totals."""
        raw = _gemini_usage_field(chunk)
        if raw is not None:
            self._raw = raw
    def add_counts(self, chunk: Any) -> None:
        """An Ollama chunk; the last one carries the counts."""
        found = _from_counts(chunk)
        if found is not None:
            self._raw = found  # already in the STS shape

    def add_event(self, kind: str, event: Any) -> None:
        """A typed stream event (Responses ``response.*`` or an Anthropic event)."""
        if kind == "message_start":
            self._merge_anthropic(get(get(event, "message"), "usage"))
        elif kind == "message_delta":
            self._merge_anthropic(get(event, "usage"))
        elif kind == "message-end":  # Cohere
            raw = get(get(event, "delta"), "usage")
            if raw is not None:
                self._raw = raw
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            raw = get(get(event, "response"), "usage")
            if raw is not None:
                self._raw = raw

    def _merge_anthropic(self, raw: Any) -> None:
        if raw is None:
            return
        merged = self._anthropic if self._anthropic is not None else {}
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = _int(get(raw, key))
            if value is not None:
                merged[key] = value  # message_delta counts are cumulative: the last one wins
        self._anthropic = merged

    def result(self) -> Usage | None:
        if self._anthropic:
            return _from_anthropic(self._anthropic)
        return usage_of(self._raw)


# -- checking what users give us ------------------------------------------------


def check_usage(value: Any) -> Usage:
    """Usage given by hand (``s.assistant(usage=...)``, ``s.record``): the STS
    shape or any provider's usage object; ``ValueError`` if it is neither."""
    if isinstance(value, Mapping) and any(k in value for k in (*USAGE_KEYS, "reasoning", "cost")):
        for key in (*USAGE_KEYS, "reasoning"):
            if key in value and _int(value[key]) is None:
                raise BadArgument(
                    f"usage[{key!r}] must be a non-negative integer of at most 2**53 - 1, got {value[key]!r}"
                )
        if "input" not in value and "output" not in value:
            raise BadArgument("usage needs at least 'input' or 'output' token counts")
        cost = value.get("cost")
        if cost is not None:
            if not isinstance(cost, Mapping):
                raise BadArgument(f"usage['cost'] must be a dict, not {type(cost).__name__}")
            for key, amount in cost.items():
                if key not in COST_KEYS or not _number(amount):
                    raise BadArgument(f"usage['cost'][{key!r}] must be one of {COST_KEYS} with a non-negative number")
    usage = usage_of(value)
    if usage is None:
        raise BadArgument(
            "usage must be a dict like {'input': 10, 'output': 5} or a provider's usage object, "
            f"not {type(value).__name__}"
        )
    return usage


def check_prices(prices: Any) -> Any:
    """``Session(prices=...)``: a dict ``{model: {"input": usd_per_token, ...}}`` or a
    callable ``model -> that dict or None``; bad tables fail at construction."""
    if prices is None or callable(prices):
        return prices
    if not isinstance(prices, Mapping):
        raise BadArgument(f"prices must be a dict of model -> per-token prices, or a callable, not {type(prices).__name__}")
    for model, table in prices.items():
        if not isinstance(model, str):
            raise BadArgument(f"prices keys must be model names (strings), got {model!r}")
        _check_table(table, f"prices[{model!r}]")
    return prices


def _check_table(table: Any, where: str) -> Mapping[str, float]:
    if not isinstance(table, Mapping):
        raise BadArgument(f"{where} must be a dict of USD per token, not {type(table).__name__}")
    for key, price in table.items():
        if key not in _PRICE_KEYS:
            raise BadArgument(f"{where}: unknown price {key!r}; use {sorted(_PRICE_KEYS)} (USD per token)")
        if not _number(price):
            raise BadArgument(f"{where}[{key!r}] must be a non-negative number (USD per token), got {price!r}")
    return table


def cost_of(usage: Mapping[str, Any], model: str | None, prices: Any) -> dict[str, float] | None:
    """``usage.cost`` in USD for *model* under the user's *prices*, or ``None``
    when there is no price for that model. A callable's bad answer raises
    ``ValueError`` (the caller logs it)."""
    if not model or prices is None:
        return None
    if callable(prices):
        table = prices(model)
        if table is None:
            return None
        table = _check_table(table, f"prices({model!r})")
    else:
        table = prices.get(model)
        if table is None:
            return None
    cost = {key: float(usage.get(key, 0) or 0) * float(table.get(key, 0) or 0) for key in COST_KEYS[:4]}
    cost["total"] = sum(cost.values())
    return cost
