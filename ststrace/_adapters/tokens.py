"""Token ids and log-probabilities of a reply, kept when the caller asked the
provider for them (nothing here asks for anything).

* OpenAI Chat ``logprobs=True``: ``choices[].logprobs.content[].logprob``
  (TGI's and vLLM's OpenAI-compatible servers answer the same way);
* vLLM ``return_token_ids`` (``extra_body``): ``prompt_token_ids`` on the
  response (the first chunk of a stream), ``token_ids`` on each choice (each
  chunk's delta tokens when streamed);
* Hugging Face TGI ``details``: ``details.tokens[].id`` / ``.logprob`` and
  ``details.prefill[].id``.

On the assistant message: ``tokenIds``, ``promptTokenIds``, ``logprobs`` (one
float per output token). A list longer than :data:`MAX_TOKENS` is left out
whole (a cut list would no longer match the text) and said in the log.
"""

from __future__ import annotations

from typing import Any

from .._errors import logger
from ._common import Message, get

__all__ = ["MAX_TOKENS", "TokenAccumulator", "add_tokens"]

#: The longest token list kept (a 256k-token reply; JSON about 2 MB).
MAX_TOKENS = 1 << 18


def _ints(value: Any) -> list[int] | None:
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if all(type(v) is int for v in value):
        return list(value)
    return None


def _logprobs(entries: Any) -> list[float] | None:
    """``logprobs.content`` (or TGI ``details.tokens``) entries -> their floats."""
    if not isinstance(entries, (list, tuple)) or not entries:
        return None
    out: list[float] = []
    for entry in entries:
        lp = get(entry, "logprob")
        if isinstance(lp, bool) or not isinstance(lp, (int, float)):
            return None
        out.append(float(lp))
    return out


def _store(msg: Message, key: str, values: list[Any] | None) -> None:
    if not values:
        return
    if len(values) > MAX_TOKENS:
        logger.warning("ststrace: a reply's %s (%d entries) is over %d; left out of the trace", key, len(values), MAX_TOKENS)
        return
    msg[key] = values


def add_tokens(msg: Message, response: Any, choice: Any) -> None:
    """Put the token fields of a whole (not streamed) reply on *msg*."""
    logprobs = get(choice, "logprobs") if choice is not None else None
    if logprobs is not None:
        _store(msg, "logprobs", _logprobs(get(logprobs, "content")))
    if choice is not None:
        _store(msg, "tokenIds", _ints(get(choice, "token_ids")))
    prompt = _ints(get(response, "prompt_token_ids"))
    if prompt is None and choice is not None:
        prompt = _ints(get(choice, "prompt_token_ids"))
    _store(msg, "promptTokenIds", prompt)
    details = get(response, "details")
    if details is not None:
        tokens = get(details, "tokens")
        if "tokenIds" not in msg and isinstance(tokens, (list, tuple)):
            _store(msg, "tokenIds", _ints([get(t, "id") for t in tokens]))
        if "logprobs" not in msg:
            _store(msg, "logprobs", _logprobs(tokens))
        prefill = get(details, "prefill")
        if "promptTokenIds" not in msg and isinstance(prefill, (list, tuple)):
            _store(msg, "promptTokenIds", _ints([get(t, "id") for t in prefill]))


class TokenAccumulator:
    """The token fields of a streamed reply, chunk by chunk. Costs one
    attribute look-up per chunk while no chunk carries any."""

    __slots__ = ("ids", "logprobs", "prompt", "broken")

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.prompt: list[int] | None = None
        self.broken = False  # a chunk with malformed entries: the lists no longer line up

    def add(self, chunk: Any, choice: Any) -> None:
        if self.prompt is None:
            self.prompt = _ints(get(chunk, "prompt_token_ids"))
        logprobs = get(choice, "logprobs")
        if logprobs is not None:
            content = get(logprobs, "content")
            if content:
                values = _logprobs(content)
                if values is None:
                    self.broken = True
                else:
                    self.logprobs.extend(values)
        ids = get(choice, "token_ids")
        if ids:
            values_i = _ints(ids)
            if values_i is None:
                self.broken = True
            else:
                self.ids.extend(values_i)

    def finish(self, msg: Message) -> None:
        if self.broken:
            logger.warning("ststrace: a streamed reply's token ids or logprobs were malformed; left out of the trace")
            return
        _store(msg, "tokenIds", self.ids)
        _store(msg, "logprobs", self.logprobs)
        _store(msg, "promptTokenIds", self.prompt)
