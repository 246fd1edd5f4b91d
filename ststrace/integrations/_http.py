"""The transport seam: model calls recorded from the HTTP exchange itself, for
the calls no SDK-level integration saw (a framework posting with its own
client, an SDK method ststrace does not patch, a hand-written ``httpx.post``).

One wrapper per client method, ``Client.send`` and ``AsyncClient.send`` of
``httpx`` and ``httpx2``, shared by the ``ststrace.integrations.httpx`` /
``httpx2`` specs. Not the transports (``HTTPTransport.handle_request``, as
OpenTelemetry's httpx instrumentation patches them): every request of a
client passes ``send`` whatever its transport, and the transports do not
share one method: litellm's async client runs on an aiohttp transport,
openai's and anthropic's ``DefaultAioHttpClient`` too, tests on
``MockTransport``. ``send`` also sees one logical call once (redirects are
followed inside it).

Per request it steps aside at once with no session, inside a call already
being recorded (``in_llm_call``, set by ``@llm`` and every SDK-level
integration around its call, the way OpenTelemetry's
``suppress_http_instrumentation`` works), and for anything but a POST to a
model path. For a model path it records the conversation from the request
body and the reply from the response body: read already (``send`` without
``stream=True`` reads it), at once; else as the caller reads it, the
response's decoded byte readers gaining a listener
(:func:`ststrace._adapters.raw.watch_http_response`), nothing the caller
holds replaced, a stream finished once, on exhaustion, close or error.
"""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import urlsplit

import orjson

from .._adapters.http import call_arguments, route, streamed
from .._adapters.raw import watch_http_response
from .._context import current, in_llm_call
from .._decorators import _begin_llm, _LlmCall
from .._errors import internal_error

_Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _httpx_request(request: Any) -> tuple[str, Any] | None:
    """``(path, body bytes)`` of an ``httpx`` / ``httpx2`` ``Request``."""
    return request.url.raw_path.decode("ascii", "replace"), request.__dict__.get("_content")


def _requests_request(request: Any) -> tuple[str, Any] | None:
    """``(path, body bytes)`` of a ``requests`` ``PreparedRequest``."""
    url = request.url
    if not isinstance(url, str):
        return None
    body = request.body
    return urlsplit(url).path, body.encode() if isinstance(body, str) else body


def _begin(
    session: Any, request: Any, read: Callable[[Any], tuple[str, Any] | None]
) -> tuple[_LlmCall, bool] | None:
    """``(call, lines)`` for a model call's request, else ``None``; the
    conversation and offered tools are recorded here, before it is sent."""
    if getattr(request, "method", None) != "POST":
        return None
    try:
        found = read(request)
        if found is None:
            return None
        path, content = found
        kind = route(path)
        if kind is None:
            return None
        if not isinstance(content, bytes) or not content:
            return None  # a streamed upload: not a JSON model request
        try:
            body = orjson.loads(content)
        except orjson.JSONDecodeError:
            return None
        named = call_arguments(kind, body, path)
        if named is None:
            return None
        call = _begin_llm(session, None, True, (), named)
        return None if call is None else (call, streamed(kind, body, path))
    except Exception as exc:
        internal_error(exc, "http request")
        return None


def _watch(patch: Any, begun: tuple[_LlmCall, bool], response: Any) -> None:
    call, lines = begun
    try:
        status = getattr(response, "status_code", 200)
        if isinstance(status, int) and status >= 400:
            return  # the client raises it: a failed call has no reply
        from .._instrument import _unrecorded

        session = call.session
        reason = watch_http_response(
            response,
            call.record,
            lambda why: _unrecorded(patch, why),
            lines=lines,
            usage=session._keep_usage,
            track=session._track_stream,
        )
        if reason is not None:
            _unrecorded(patch, reason)
    except Exception as exc:
        internal_error(exc, "http response")


def make_wrapper(path: str, patch: Any) -> _Wrapper:
    """The wrapper of one client's ``send`` (*path* ``AsyncClient.send`` is the
    async one; ``Session.send`` is ``requests``')."""
    read = _requests_request if path == "Session.send" else _httpx_request
    if path.startswith("Async"):

        async def settle(coro: Any, begun: tuple[_LlmCall, bool]) -> Any:
            response = await coro
            _watch(patch, begun, response)
            return response

        def async_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            session = current.get()
            if session is None or in_llm_call.get() or not patch.active:
                return wrapped(*args, **kwargs)
            begun = _begin(session, args[0] if args else kwargs.get("request"), read)
            if begun is None:
                return wrapped(*args, **kwargs)
            return settle(wrapped(*args, **kwargs), begun)

        return async_wrapper

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        session = current.get()
        if session is None or in_llm_call.get() or not patch.active:
            return wrapped(*args, **kwargs)
        begun = _begin(session, args[0] if args else kwargs.get("request"), read)
        if begun is None:
            return wrapped(*args, **kwargs)
        response = wrapped(*args, **kwargs)
        _watch(patch, begun, response)
        return response

    return wrapper
