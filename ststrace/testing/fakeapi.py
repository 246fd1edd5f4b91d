"""A local HTTP server that answers like the OpenAI, Anthropic and Hugging Face chat APIs.

Standard library only. It listens on 127.0.0.1 (ephemeral port) in a daemon
thread and serves:

* ``POST …/chat/completions`` (OpenAI Chat Completions; also what
  ``huggingface_hub.InferenceClient(base_url=…)`` posts to): JSON, or SSE chunks
  ending in ``data: [DONE]``, with tool-call argument deltas split over many
  chunks, parallel tool calls (indexes 0 and 1) and an optional reasoning field.
* ``POST …/responses`` (OpenAI Responses API): JSON with ``reasoning``,
  ``message`` and ``function_call`` output items, or the named SSE events with
  ``sequence_number``.
* ``POST …/messages`` (Anthropic Messages): JSON, or SSE with named ``event:``
  lines for thinking, text and tool_use blocks.
* ``POST …/models/{model}:generateContent`` and ``…:streamGenerateContent?alt=sse``
  (the Gemini API and Vertex AI, as ``google-genai`` calls them; see
  :mod:`ststrace.testing._gemini`).
* ``POST /api/chat`` and ``/api/generate`` (Ollama): JSON or NDJSON (:mod:`ststrace.testing._ollama`).
* ``POST /v2/chat`` (Cohere v2): JSON or typed SSE events; ``POST /v1/chat`` (Cohere v1):
  JSON or one JSON event per line (:mod:`ststrace.testing._cohere`).
* ``POST /model/{modelId}/converse``, ``/converse-stream`` (AWS event-stream
  framing), ``/invoke`` and ``/invoke-with-response-stream`` with an Anthropic
  body (Amazon Bedrock Runtime; :mod:`ststrace.testing._bedrock`).
* Chat Completions in Groq's (``/openai/v1/…``) and Mistral's (``/mistral/v1/…``)
  dialects (:mod:`ststrace.testing._groq`, :mod:`ststrace.testing._mistral`).

Replies are scripted from the request, deterministically, so an agent loop
terminates: once tool results follow the last user message the reply is a final
text answer quoting them; otherwise, if tools are offered, the reply asks for the
configured tool calls (two in parallel by default); otherwise it is plain text.
Every request is recorded in :attr:`FakeAPI.requests`.

The client libraries are proven to accept these replies by tests that run them
with ``_strict_response_validation=True``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

from ststrace.testing import _bedrock, _cohere, _gemini, _groq, _mistral, _ollama, _wire

#: Protocols kept in modules of their own. Each has ``ENDPOINT``, ``matches(path)``,
#: ``tools_offered(body)``, ``results(body, path, native)``, ``streamed(path, body)``,
#: ``reply_json`` / ``reply_stream(api, body, reply, n, path, native)``,
#: ``STREAM_CONTENT_TYPE``, ``error_body(status, message, n)`` and ``headers(n)``.
#: ``native`` hands them the protocols defined here that they carry inside
#: their own (Bedrock's ``invoke_model`` carries Anthropic Messages), so they
#: need not import this module.
_PROTOCOLS: tuple[Any, ...] = (_ollama, _cohere, _bedrock)
_BY_ENDPOINT = {p.ENDPOINT: p for p in _PROTOCOLS}
#: Providers that speak Chat Completions in a dialect of their own, each under
#: a path prefix: ``PATH_PREFIX``, ``adapt(reply)`` and ``adapt_stream(chunks)``.
_CHAT_DIALECTS: tuple[Any, ...] = (_groq, _mistral)

__all__ = [
    "DEFAULT_TOOL_CALLS",
    "FakeAPI",
    "RecordedRequest",
    "ScriptedReply",
    "ScriptedToolCall",
]

Endpoint = Literal["chat", "responses", "messages", "gemini", "ollama", "cohere", "bedrock"]

CREATED = _wire.CREATED


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call the fake model makes. Provider ids derive from ``id_suffix``.

    Chat Completions and Responses ``call_id``: ``call_<suffix>``; Responses item
    id: ``fc_<suffix>``; Anthropic ``tool_use`` id: ``toolu_<suffix>``.
    """

    name: str
    arguments: dict[str, Any]
    id_suffix: str
    #: A recorded call's own id, sent as is to every API (a replay keeps ids).
    id: str | None = None
    #: A recorded call's argument text, sent as is instead of ``arguments`` encoded.
    arguments_text: str | None = None
    #: The recorded id was made by ststrace for a protocol without call ids
    #: (Ollama, Gemini): the protocols without ids do not send it.
    generated_id: bool = False

    @property
    def call_id(self) -> str:
        return self.id or f"call_{self.id_suffix}"

    @property
    def item_id(self) -> str:
        return f"fc_{self.id_suffix}"

    @property
    def toolu_id(self) -> str:
        return self.id or f"toolu_{self.id_suffix}"

    @property
    def arguments_json(self) -> str:
        if self.arguments_text is not None:
            return self.arguments_text
        # Compact, like the OpenAI API sends tool arguments.
        return json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class ScriptedReply:
    """One reply queued with :meth:`FakeAPI.script`, sent whatever the request holds.

    For agent frameworks that do not send tool results back as ``tool`` messages
    (smolagents' ``Observation:`` user turns, ReAct text prompts), so the default
    planning could not tell when to stop calling tools. ``reasoning=None`` sends
    none; the text may be ``None`` only when there are tool calls.
    """

    text: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    reasoning: str | None = None
    #: Only for a request whose first user message contains this text (``None``:
    #: any request). Agents that run at the same time (a sub-agent in the
    #: background beside its parent) each get their own replies in order.
    when: str | None = None
    #: Seconds to wait before answering (to order agents that run at once).
    delay: float = 0.0


DEFAULT_TOOL_CALLS: tuple[ScriptedToolCall, ...] = (
    ScriptedToolCall("get_weather", {"city": "Paris"}, "weather01"),
    ScriptedToolCall("get_time", {"tz": "Europe/Paris"}, "time02"),
)

DEFAULT_TEXT_REPLY = "Hello from the fake API."
DEFAULT_TOOL_PREAMBLE = "Let me look that up."
DEFAULT_ANSWER_PREFIX = "Here is what I found: "
DEFAULT_REASONING_TEXT = "A short greeting is enough here."
DEFAULT_REASONING_ANSWER = "The tool results answer the question."


def _default_reasoning_tools(calls: Sequence[ScriptedToolCall]) -> str:
    return "I should call " + " and ".join(c.name for c in calls) + "."


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    endpoint: Endpoint | None

    @property
    def stream(self) -> bool:
        if self.endpoint == "gemini":
            return _gemini.is_stream(self.path)
        return isinstance(self.body, dict) and self.body.get("stream") is True


@dataclass(frozen=True)
class _Reply:
    kind: Literal["tools", "answer", "text"]
    reasoning: str | None
    text: str | None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    #: A reply from a trace (``ststrace.testing.replay``): its ``usage`` (STS
    #: shape, or ``None`` for none) and ``model`` are reported instead of estimates.
    recorded: bool = False
    usage: dict[str, int] | None = None
    model: str | None = None


@dataclass(frozen=True)
class _Failure:
    status: int
    message: str | None
    error_type: str | None
    #: False sends ``x-should-retry: false``, which the OpenAI and Anthropic SDKs
    #: obey (they retry a 409 otherwise).
    retry: bool = True


@dataclass
class _Drop:
    after_events: int


_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


_dumps = _wire.dumps
_pieces = _wire.pieces
_sse = _wire.sse
_text_of = _wire.text_of
_tokens = _wire.tokens


def _signature(thinking: str) -> str:
    return base64.b64encode(hashlib.sha256(thinking.encode()).digest() * 2).decode()


class FakeAPI:
    """A scripted OpenAI / Anthropic / HF / Gemini-compatible server on 127.0.0.1.

    Use as a context manager (``with FakeAPI() as api:``) or call
    :meth:`start` / :meth:`stop`. Point clients at :attr:`openai_base_url`,
    :attr:`anthropic_base_url`, :attr:`hf_base_url` or :attr:`gemini_base_url`.

    The attributes below shape the replies and may be changed between requests.
    """

    def __init__(
        self,
        *,
        tool_calls: Sequence[ScriptedToolCall] = DEFAULT_TOOL_CALLS,
        reasoning: bool = True,
        chat_reasoning_field: str = "reasoning_content",
        text_reply: str = DEFAULT_TEXT_REPLY,
        tool_preamble: str | None = DEFAULT_TOOL_PREAMBLE,
        answer_prefix: str = DEFAULT_ANSWER_PREFIX,
        chunk_size: int = 4,
        usage: bool = True,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> None:
        #: Tool calls made when tools are offered and no tool results are pending.
        self.tool_calls: tuple[ScriptedToolCall, ...] = tuple(tool_calls)
        #: Include reasoning (``reasoning_content`` / reasoning items / thinking blocks) in every reply.
        self.reasoning = reasoning
        #: Name of the extra reasoning field in Chat Completions messages and deltas
        #: (``reasoning_content`` as vLLM/DeepSeek send it; ``reasoning`` as TGI and
        #: ``huggingface_hub`` types name it).
        self.chat_reasoning_field = chat_reasoning_field
        #: Reply text when no tools are offered.
        self.text_reply = text_reply
        #: Text sent alongside tool calls (``None``: tool calls only).
        self.tool_preamble = tool_preamble
        #: The final answer is this prefix followed by the tool results' texts joined by ``"; "``.
        self.answer_prefix = answer_prefix
        #: Characters per streamed delta (text, reasoning and tool arguments).
        self.chunk_size = chunk_size
        #: Report token usage (OpenAI Chat Completions and Responses only: the
        #: Anthropic API always does; a chat stream still needs the client's
        #: ``stream_options={"include_usage": True}``, as with the real API).
        self.usage = usage
        #: Prompt tokens reported as read from the prompt cache (chat
        #: ``prompt_tokens_details.cached_tokens``, Responses
        #: ``input_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``).
        self.cached_tokens = cached_tokens
        #: Prompt tokens reported as written to the cache (Responses
        #: ``input_tokens_details.cache_write_tokens``, Anthropic
        #: ``cache_creation_input_tokens``; Chat Completions has no such field).
        self.cache_write_tokens = cache_write_tokens
        #: Send ids with Gemini function calls (the Gemini API sends none).
        self.gemini_call_ids = False

        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._failures: deque[_Failure] = deque()
        self._drops: deque[_Drop] = deque()
        self._scripted: deque[ScriptedReply] = deque()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> FakeAPI:
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.name = f"ststrace-fakeapi-{server.server_address[1]}"
        thread.daemon = True
        thread.start()
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeAPI is not running; call start() or use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` with no path."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """For ``openai.OpenAI(base_url=…)`` (ends in ``/v1`` like the real default)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For ``anthropic.Anthropic(base_url=…)`` (the client adds ``/v1/messages``)."""
        return self.url

    @property
    def gemini_base_url(self) -> str:
        """For ``google.genai.Client(http_options={"base_url": …})``, the Gemini API
        and Vertex AI alike (the client adds ``/v1beta/models/…`` or ``/v1beta1/projects/…``)."""
        return self.url

    @property
    def hf_base_url(self) -> str:
        """For ``huggingface_hub.InferenceClient(base_url=…)``."""
        return f"{self.url}/v1"

    @property
    def mistral_base_url(self) -> str:
        """For ``mistralai.client.Mistral(server_url=…)`` (Mistral's dialect of Chat Completions)."""
        return f"{self.url}/mistral"

    @property
    def bedrock_base_url(self) -> str:
        """For ``boto3.client("bedrock-runtime", endpoint_url=…)`` (any region, dummy credentials)."""
        return self.url

    @property
    def cohere_base_url(self) -> str:
        """For ``cohere.ClientV2(base_url=…)`` (the client adds ``/v2/chat``)."""
        return self.url

    @property
    def ollama_base_url(self) -> str:
        """For ``ollama.Client(host=…)`` (or ``OLLAMA_HOST``; the client adds ``/api/chat``)."""
        return self.url

    # -- scripting ---------------------------------------------------------

    def fail_next(
        self,
        status: int = 400,
        message: str | None = None,
        *,
        times: int = 1,
        error_type: str | None = None,
    ) -> None:
        """Answer the next ``times`` API requests with HTTP ``status`` and the provider's error JSON."""
        with self._lock:
            for _ in range(times):
                self._failures.append(_Failure(status, message, error_type))

    def drop_next_stream(self, after_events: int = 3) -> None:
        """Cut the connection of the next streamed reply after ``after_events`` SSE events.

        The chunked body is left unterminated, as when a connection dies mid-stream,
        so the client's iteration raises.
        """
        with self._lock:
            self._drops.append(_Drop(after_events))

    def script(self, *replies: ScriptedReply) -> None:
        """Answer the next API requests with *replies*, in order, instead of the
        default planning (which resumes once they are used up)."""
        with self._lock:
            self._scripted.extend(replies)

    def reset(self) -> None:
        """Forget recorded requests and pending failures/drops (the configuration stays)."""
        with self._lock:
            self.requests.clear()
            self._failures.clear()
            self._drops.clear()
            self._scripted.clear()

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            if not self.requests:
                raise LookupError("no request received yet")
            return self.requests[-1]

    def requests_to(self, endpoint: Endpoint) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.endpoint == endpoint]

    def answer_for(self, results: Sequence[str]) -> str:
        """The exact final-answer text for the given tool-result texts."""
        return self.answer_prefix + "; ".join(results)

    # -- internals used by the handler ----------------------------------------

    def _record(self, request: RecordedRequest) -> int:
        with self._lock:
            self.requests.append(request)
            self._counter += 1
            return self._counter

    def _pop_failure(self) -> _Failure | None:
        with self._lock:
            return self._failures.popleft() if self._failures else None

    def _pop_drop(self) -> _Drop | None:
        with self._lock:
            return self._drops.popleft() if self._drops else None

    def _pop_scripted(self, body: Any = None) -> _Reply | None:
        first = _first_user_text(body)
        with self._lock:
            s = next((r for r in self._scripted if r.when is None or r.when in first), None)
            if s is None:
                return None
            self._scripted.remove(s)
        if s.delay > 0:
            time.sleep(s.delay)  # this request's own handler thread
        return _Reply("tools" if s.tool_calls else "text", s.reasoning, s.text, tuple(s.tool_calls))

    def _reply_for(
        self, endpoint: Endpoint, body: dict[str, Any], n: int, request: RecordedRequest
    ) -> _Reply | _Failure:
        """The reply to *request*, number *n* (the replay server overrides this to answer from a trace)."""
        protocol = _BY_ENDPOINT.get(endpoint)
        if endpoint == "gemini":
            reply = self._plan(_gemini.tools_offered(body), _gemini.results(body))
        elif protocol is not None:
            reply = self._plan(protocol.tools_offered(body), protocol.results(body, request.path, _NATIVE))
        else:
            if endpoint == "chat":
                results = _chat_results(body)
            elif endpoint == "responses":
                results = _responses_results(body)
            else:
                results = _anthropic_results(body)
            reply = self._plan(_tools_offered(body), results, _parallel(body))
        scripted = self._pop_scripted(body)
        return reply if scripted is None else scripted

    def _plan(self, tools_offered: bool, results: list[str] | None, parallel: bool = True) -> _Reply:
        if results is not None:
            return _Reply(
                "answer",
                DEFAULT_REASONING_ANSWER if self.reasoning else None,
                self.answer_for(results),
            )
        if tools_offered and self.tool_calls:
            # Like the real APIs, a request that disables parallel calls gets one.
            calls = self.tool_calls if parallel else self.tool_calls[:1]
            return _Reply(
                "tools",
                _default_reasoning_tools(calls) if self.reasoning else None,
                self.tool_preamble,
                calls,
            )
        return _Reply("text", DEFAULT_REASONING_TEXT if self.reasoning else None, self.text_reply)


# ---------------------------------------------------------------------------
# Reading requests: which tool results follow the last user turn?


def _first_user_text(body: Any) -> str:
    """The text of a request's first user message (chat, Responses or Anthropic shape)."""
    if not isinstance(body, dict):
        return ""
    messages = body.get("messages")
    if messages is None:
        messages = body.get("input")
        if isinstance(messages, str):
            return messages
    for m in messages or ():
        if isinstance(m, dict) and m.get("role") == "user":
            return _text_of(m.get("content"))
    return ""


def _tools_offered(body: dict[str, Any]) -> bool:
    if body.get("tool_choice") == "none" or (
        isinstance(body.get("tool_choice"), dict) and body["tool_choice"].get("type") == "none"
    ):
        return False
    return bool(body.get("tools") or body.get("functions"))


def _parallel(body: dict[str, Any]) -> bool:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("disable_parallel_tool_use") is True:
        return False
    return body.get("parallel_tool_calls") is not False


def _chat_results(body: dict[str, Any]) -> list[str] | None:
    messages = body.get("messages") or []
    last_user = -1
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            last_user = i
    results = [
        _text_of(m.get("content"))
        for m in messages[last_user + 1 :]
        if isinstance(m, dict) and m.get("role") in ("tool", "function")
    ]
    return results or None


def _responses_results(body: dict[str, Any]) -> list[str] | None:
    items = body.get("input")
    if not isinstance(items, list):
        return None
    last_user = -1
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("role") == "user":
            last_user = i
    results = [
        _text_of(item.get("output"))
        for item in items[last_user + 1 :]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    return results or None


def _anthropic_tool_results(message: Any) -> list[dict[str, Any]]:
    if not isinstance(message, dict) or message.get("role") != "user":
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _anthropic_results(body: dict[str, Any]) -> list[str] | None:
    messages = body.get("messages") or []
    last_user = -1
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "user" and not _anthropic_tool_results(m):
            last_user = i
    results = [_text_of(b.get("content")) for m in messages[last_user + 1 :] for b in _anthropic_tool_results(m)]
    return results or None


def _model(body: dict[str, Any], reply: _Reply) -> str:
    return reply.model or str(body.get("model") or "fake-model")


def _recorded_prompt(usage: dict[str, int]) -> int:
    """Prompt tokens as OpenAI counts them: cache reads and writes included."""
    return usage.get("input", 0) + usage.get("cacheRead", 0) + usage.get("cacheWrite", 0)


def _prompt_tokens(body: dict[str, Any]) -> int:
    return _tokens(_dumps(body.get("messages") or body.get("input") or ""))


# ---------------------------------------------------------------------------
# OpenAI Chat Completions


def _reports_usage(api: FakeAPI, reply: _Reply) -> bool:
    return reply.usage is not None if reply.recorded else api.usage


def _token_id(piece: str) -> int:
    """A stable fake token id for *piece* (the same piece, the same id)."""
    return int.from_bytes(hashlib.blake2s(piece.encode(), digest_size=2).digest(), "big") + 100


def _output_pieces(api: FakeAPI, reply: _Reply) -> list[str]:
    """The reply's output 'tokens': the pieces it is streamed in (text, then each call's arguments)."""
    pieces = list(_pieces(reply.text or "", api.chunk_size))
    for call in reply.tool_calls:
        pieces.extend(_pieces(call.arguments_json, api.chunk_size))
    return pieces


def _token_logprob(piece: str, position: int) -> dict[str, Any]:
    return {"token": piece, "logprob": -0.125 * (position % 8), "bytes": list(piece.encode()), "top_logprobs": []}


def _asked_tokens(body: dict[str, Any]) -> tuple[bool, bool]:
    """(logprobs, token ids): what the request asked for (OpenAI ``logprobs``, vLLM ``return_token_ids``)."""
    return body.get("logprobs") is True, body.get("return_token_ids") is True


def _prompt_token_ids(body: dict[str, Any]) -> list[int]:
    return [_token_id(w) for w in json.dumps(body.get("messages"), sort_keys=True).split()][:512]


def _chat_json(api: FakeAPI, body: dict[str, Any], reply: _Reply, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text,
        "refusal": None,
        "annotations": [],
    }
    if reply.reasoning is not None:
        message[api.chat_reasoning_field] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
            for c in reply.tool_calls
        ]
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": "tool_calls" if reply.tool_calls else "stop",
    }
    out: dict[str, Any] = {
        "id": f"chatcmpl-fake{n:04d}",
        "object": "chat.completion",
        "created": CREATED,
        "model": _model(body, reply),
        "choices": [choice],
        "usage": _chat_usage(body, reply, api) if _reports_usage(api, reply) else None,
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }
    want_logprobs, want_ids = _asked_tokens(body)
    pieces = _output_pieces(api, reply) if want_logprobs or want_ids else []
    if want_logprobs:
        choice["logprobs"] = {"content": [_token_logprob(p, i) for i, p in enumerate(pieces)], "refusal": None}
    if want_ids:  # vLLM's shape
        choice["token_ids"] = [_token_id(p) for p in pieces]
        out["prompt_token_ids"] = _prompt_token_ids(body)
    return out


def _chat_usage(body: dict[str, Any], reply: _Reply, api: FakeAPI | None = None) -> dict[str, Any]:
    if reply.usage is not None:
        u = reply.usage
        prompt, output = _recorded_prompt(u), u.get("output", 0)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": u.get("cacheRead", 0), "cache_write_tokens": u.get("cacheWrite", 0)},
            "completion_tokens_details": {"reasoning_tokens": u["reasoning"]} if "reasoning" in u else None,
        }
    cached = api.cached_tokens if api is not None else 0
    # OpenAI counts cached tokens inside prompt_tokens.
    prompt = _prompt_tokens(body) + cached
    reasoning = _tokens(reply.reasoning) if reply.reasoning else 0
    completion = reasoning + (_tokens(reply.text) if reply.text else 0) + sum(
        _tokens(c.arguments_json) for c in reply.tool_calls
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chat_sse(api: FakeAPI, body: dict[str, Any], reply: _Reply, n: int) -> Iterator[bytes]:
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True and _reports_usage(api, reply)
    base: dict[str, Any] = {
        "id": f"chatcmpl-fake{n:04d}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": _model(body, reply),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }
    if include_usage:
        base["usage"] = None

    want_logprobs, want_ids = _asked_tokens(body)
    position = 0

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, token: str | None = None) -> bytes:
        # *token*: the output token this chunk carries (its logprob and id when asked for).
        nonlocal position
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        if token is not None:
            if want_logprobs:
                choice["logprobs"] = {"content": [_token_logprob(token, position)], "refusal": None}
            if want_ids:
                choice["token_ids"] = [_token_id(token)]
            position += 1
        return _sse({**base, "choices": [choice]})

    if want_ids:
        yield _sse({**base, "prompt_token_ids": _prompt_token_ids(body), "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": "", "refusal": None}, "logprobs": None, "finish_reason": None}
        ]})
    else:
        yield chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in _pieces(reply.reasoning or "", api.chunk_size):
        yield chunk({api.chat_reasoning_field: piece})
    for piece in _pieces(reply.text or "", api.chunk_size):
        yield chunk({"content": piece}, token=piece)
    for index, call in enumerate(reply.tool_calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in _pieces(call.arguments_json, api.chunk_size):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, token=piece)
    yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
    if include_usage:
        yield _sse({**base, "choices": [], "usage": _chat_usage(body, reply, api)})
    yield _sse("[DONE]")


# ---------------------------------------------------------------------------
# OpenAI Responses API


def _responses_items(reply: _Reply, n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        items.append(
            {
                "id": f"rs_fake{n:04d}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": reply.reasoning}],
            }
        )
    if reply.text is not None:
        items.append(
            {
                "id": f"msg_fake{n:04d}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}],
            }
        )
    for call in reply.tool_calls:
        items.append(
            {
                "id": call.item_id,
                "type": "function_call",
                "status": "completed",
                "arguments": call.arguments_json,
                "call_id": call.call_id,
                "name": call.name,
            }
        )
    return items


def _responses_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("name"), str):
            tools.append(
                {
                    "type": "function",
                    "name": tool["name"],
                    "description": tool.get("description"),
                    "parameters": tool.get("parameters"),
                    "strict": tool.get("strict", True),
                }
            )
    return tools


def _response_object(
    body: dict[str, Any],
    reply: _Reply,
    n: int,
    status: str,
    output: list[dict[str, Any]],
    api: FakeAPI | None = None,
) -> dict[str, Any]:
    done = status == "completed"
    cached = api.cached_tokens if api is not None else 0
    cache_write = api.cache_write_tokens if api is not None else 0
    requested = body.get("reasoning")
    reasoning: dict[str, Any] = requested if isinstance(requested, dict) else {}
    prompt = _prompt_tokens(body) + cached + cache_write  # input_tokens includes the cache
    reasoning_tokens = _tokens(reply.reasoning) if reply.reasoning else 0
    completion = reasoning_tokens + (_tokens(reply.text) if reply.text else 0)
    completion += sum(_tokens(c.arguments_json) for c in reply.tool_calls)
    return {
        "id": f"resp_fake{n:04d}",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "background": False,
        "completed_at": CREATED + 1 if done else None,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": _model(body, reply),
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "service_tier": "default",
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": _responses_tools(body),
        "top_logprobs": 0,
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": (
            {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": cache_write},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
                "total_tokens": prompt + completion,
            }
            if done and (api is None or api.usage) and not reply.recorded
            else _responses_recorded_usage(reply.usage)
            if done and reply.usage is not None
            else None
        ),
        "user": None,
        "metadata": body.get("metadata") or {},
    }


def _responses_recorded_usage(u: dict[str, int]) -> dict[str, Any]:
    prompt, output = _recorded_prompt(u), u.get("output", 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": u.get("cacheRead", 0), "cache_write_tokens": u.get("cacheWrite", 0)},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": u.get("reasoning", 0)},
        "total_tokens": prompt + output,
    }


def _responses_json(api: FakeAPI, body: dict[str, Any], reply: _Reply, n: int) -> dict[str, Any]:
    return _response_object(body, reply, n, "completed", _responses_items(reply, n), api)


def _responses_sse(api: FakeAPI, body: dict[str, Any], reply: _Reply, n: int) -> Iterator[bytes]:
    seq = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal seq
        data = {"type": kind, **fields, "sequence_number": seq}
        seq += 1
        return _sse(data, event=kind)

    yield event("response.created", response=_response_object(body, reply, n, "in_progress", []))
    yield event("response.in_progress", response=_response_object(body, reply, n, "in_progress", []))
    for index, item in enumerate(_responses_items(reply, n)):
        item_id = item["id"]
        if item["type"] == "reasoning":
            text = item["summary"][0]["text"]
            yield event("response.output_item.added", output_index=index, item={**item, "summary": []})
            part = {"type": "summary_text", "text": ""}
            yield event(
                "response.reasoning_summary_part.added",
                item_id=item_id,
                output_index=index,
                summary_index=0,
                part=part,
            )
            for piece in _pieces(text, api.chunk_size):
                yield event(
                    "response.reasoning_summary_text.delta",
                    item_id=item_id,
                    output_index=index,
                    summary_index=0,
                    delta=piece,
                )
            yield event(
                "response.reasoning_summary_text.done",
                item_id=item_id,
                output_index=index,
                summary_index=0,
                text=text,
            )
            yield event(
                "response.reasoning_summary_part.done",
                item_id=item_id,
                output_index=index,
                summary_index=0,
                part={"type": "summary_text", "text": text},
            )
        elif item["type"] == "message":
            text = item["content"][0]["text"]
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield event(
                "response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=empty
            )
            for piece in _pieces(text, api.chunk_size):
                yield event(
                    "response.output_text.delta",
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            yield event(
                "response.output_text.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            yield event(
                "response.content_part.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=item["content"][0],
            )
        else:
            arguments = item["arguments"]
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for piece in _pieces(arguments, api.chunk_size):
                yield event(
                    "response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece
                )
            yield event(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                name=item["name"],
                arguments=arguments,
            )
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=_responses_json(api, body, reply, n))


# ---------------------------------------------------------------------------
# Anthropic Messages


def _anthropic_blocks(reply: _Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": _signature(reply.reasoning)})
    if reply.text is not None:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        blocks.append({"type": "tool_use", "id": call.toolu_id, "name": call.name, "input": dict(call.arguments)})
    return blocks


def _anthropic_usage(body: dict[str, Any], reply: _Reply, api: FakeAPI | None = None) -> dict[str, Any]:
    if reply.recorded:
        # The Messages API always reports usage: zeros when the trace has none.
        u = reply.usage or {}
        return {
            "input_tokens": u.get("input", 0),
            "output_tokens": u.get("output", 0),
            "cache_creation_input_tokens": u.get("cacheWrite", 0),
            "cache_read_input_tokens": u.get("cacheRead", 0),
            "service_tier": "standard",
        }
    output = (_tokens(reply.reasoning) if reply.reasoning else 0) + (_tokens(reply.text) if reply.text else 0)
    output += sum(_tokens(c.arguments_json) for c in reply.tool_calls)
    return {
        "input_tokens": _prompt_tokens(body),
        "output_tokens": output,
        # Anthropic counts cached tokens outside input_tokens.
        "cache_creation_input_tokens": api.cache_write_tokens if api is not None else 0,
        "cache_read_input_tokens": api.cached_tokens if api is not None else 0,
        "service_tier": "standard",
    }


def _anthropic_json(api: FakeAPI, body: dict[str, Any], reply: _Reply, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_fake{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": _model(body, reply),
        "content": _anthropic_blocks(reply),
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(body, reply, api),
    }


def _anthropic_sse(api: FakeAPI, body: dict[str, Any], reply: _Reply, n: int) -> Iterator[bytes]:
    final = _anthropic_json(api, body, reply, n)
    usage = final["usage"]
    start = {
        **final,
        "content": [],
        "stop_reason": None,
        "usage": {**usage, "output_tokens": 1},
    }
    yield _sse({"type": "message_start", "message": start}, event="message_start")
    yield _sse({"type": "ping"}, event="ping")
    for index, block in enumerate(final["content"]):
        kind = block["type"]
        if kind == "thinking":
            opening: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
        elif kind == "text":
            opening = {"type": "text", "text": ""}
        else:
            opening = {**block, "input": {}}
        yield _sse({"type": "content_block_start", "index": index, "content_block": opening}, "content_block_start")

        def delta(d: dict[str, Any], index: int = index) -> bytes:
            return _sse({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta")

        if kind == "thinking":
            for piece in _pieces(block["thinking"], api.chunk_size):
                yield delta({"type": "thinking_delta", "thinking": piece})
            yield delta({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            for piece in _pieces(block["text"], api.chunk_size):
                yield delta({"type": "text_delta", "text": piece})
        else:
            # The real API opens every tool_use input with an empty fragment.
            yield delta({"type": "input_json_delta", "partial_json": ""})
            for piece in _pieces(_dumps(block["input"]), api.chunk_size):
                yield delta({"type": "input_json_delta", "partial_json": piece})
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    yield _sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": final["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
        "message_delta",
    )
    yield _sse({"type": "message_stop"}, "message_stop")


#: What the protocol modules may reuse (see ``_PROTOCOLS``).
_NATIVE: dict[str, Any] = {
    "anthropic_results": _anthropic_results,
    "anthropic_json": _anthropic_json,
    "anthropic_sse": _anthropic_sse,
}


# ---------------------------------------------------------------------------
# HTTP plumbing


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default backlog of 5 resets connections when many agents call at once.
    request_queue_size = 256
    fake: FakeAPI

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients drop connections all the time (a stream closed after [DONE], a
        # timeout, a test ending); that is not a server error worth a traceback.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def _endpoint(path: str) -> Endpoint | None:
    # Suffix matching accepts both `/v1/chat/completions` and `/chat/completions`
    # (clients whose base_url already ends in /v1 or not).
    path = path.split("?", 1)[0].rstrip("/")
    for protocol in _PROTOCOLS:
        if protocol.matches(path):
            return protocol.ENDPOINT  # type: ignore[no-any-return]
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages"):
        return "messages"
    if _gemini.is_path(path):
        return "gemini"
    return None


def _error_body(endpoint: Endpoint | None, status: int, message: str, error_type: str | None, n: int) -> Any:
    if endpoint == "gemini":
        return _gemini.error_body(status, message, error_type)
    if endpoint in _BY_ENDPOINT:
        return _BY_ENDPOINT[endpoint].error_body(status, message, n)
    if endpoint == "messages":
        kind = error_type or _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}, "request_id": f"req_fake{n:04d}"}
    kind = error_type or _OPENAI_ERROR_TYPES.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


_DEFAULT_MESSAGES = {
    400: "Invalid request (scripted by FakeAPI.fail_next).",
    401: "Invalid API key (scripted by FakeAPI.fail_next).",
    404: "Not found.",
    429: "Rate limit reached (scripted by FakeAPI.fail_next).",
    500: "The server had an error while processing your request (scripted by FakeAPI.fail_next).",
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Without TCP_NODELAY the body write waits on the client's delayed ACK of the
    # headers (~40 ms per call), which would swamp any overhead measurement.
    disable_nagle_algorithm = True
    server: _Server
    server_version = "FakeAPI/1"

    def log_message(self, format: str, *args: Any) -> None:
        # Quiet: test output should not carry an access log.
        return

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        fake = self.server.fake
        raw = self._read_body()
        body: Any = None
        bad_json = False
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                bad_json = True
        endpoint = _endpoint(self.path) if self.command == "POST" else None
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = RecordedRequest(self.command, self.path, headers, body, raw, endpoint)
        n = fake._record(request)

        if endpoint is None:
            self._send_json(404, _error_body(None, 404, f"Unknown path {self.path}", "invalid_request_error", n), n)
            return
        failure = fake._pop_failure()
        if failure is not None:
            message = failure.message or _DEFAULT_MESSAGES.get(failure.status, f"HTTP {failure.status}")
            error = _error_body(endpoint, failure.status, message, failure.error_type, n)
            self._send_json(failure.status, error, n, endpoint)
            return
        if bad_json or not isinstance(body, dict):
            self._send_json(400, _error_body(endpoint, 400, "Request body must be a JSON object.", None, n), n, endpoint)
            return

        reply = fake._reply_for(endpoint, body, n, request)
        if isinstance(reply, _Failure):
            error = _error_body(endpoint, reply.status, reply.message or "", reply.error_type, n)
            self._send_json(reply.status, error, n, endpoint, retry=reply.retry)
            return
        if endpoint == "gemini":
            if _gemini.is_stream(self.path):
                events = _gemini.sse_reply(fake, self.path, body, reply, n)
                self._send_stream(events, n, endpoint, fake._pop_drop())
            else:
                self._send_json(200, _gemini.json_reply(fake, self.path, body, reply, n), n, endpoint)
            return
        protocol = _BY_ENDPOINT.get(endpoint)
        if protocol is not None:
            if protocol.streamed(self.path, body):
                events = protocol.reply_stream(fake, body, reply, n, self.path, _NATIVE)
                content_type = getattr(protocol, "stream_content_type", None)
                content_type = content_type(self.path) if content_type else protocol.STREAM_CONTENT_TYPE
                self._send_stream(events, n, endpoint, fake._pop_drop(), content_type)
            else:
                self._send_json(200, protocol.reply_json(fake, body, reply, n, self.path, _NATIVE), n, endpoint)
            return
        if endpoint == "chat":
            json_fn, sse_fn = _chat_json, _chat_sse
        elif endpoint == "responses":
            json_fn, sse_fn = _responses_json, _responses_sse
        else:
            json_fn, sse_fn = _anthropic_json, _anthropic_sse

        dialect = None
        if endpoint == "chat":
            dialect = next((d for d in _CHAT_DIALECTS if self.path.startswith(d.PATH_PREFIX)), None)
        if body.get("stream") is True:
            events = sse_fn(fake, body, reply, n)
            if dialect is not None:
                events = _wire.map_sse(events, dialect.adapt_stream)
            self._send_stream(events, n, endpoint, fake._pop_drop())
        else:
            payload = json_fn(fake, body, reply, n)
            self._send_json(200, payload if dialect is None else dialect.adapt(payload), n, endpoint)

    def _common_headers(self, n: int, endpoint: Endpoint | None) -> None:
        request_id = f"req_fake{n:04d}"
        if endpoint in _BY_ENDPOINT:
            for name, value in _BY_ENDPOINT[endpoint].headers(n).items():
                self.send_header(name, value)
        elif endpoint == "messages":
            self.send_header("request-id", request_id)
        else:
            self.send_header("x-request-id", request_id)
            self.send_header("openai-processing-ms", "1")

    def _send_json(
        self, status: int, payload: Any, n: int, endpoint: Endpoint | None = None, *, retry: bool = True
    ) -> None:
        data = _dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        if not retry:
            self.send_header("x-should-retry", "false")
        self._common_headers(n, endpoint)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(
        self,
        events: Iterator[bytes],
        n: int,
        endpoint: Endpoint,
        drop: _Drop | None,
        content_type: str = "text/event-stream; charset=utf-8",
    ) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self._common_headers(n, endpoint)
        self.end_headers()
        # One HTTP chunk per SSE event, flushed as it goes, so clients really
        # decode incrementally rather than receiving one buffered body.
        for count, data in enumerate(events):
            if drop is not None and count >= drop.after_events:
                self.close_connection = True
                return
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
