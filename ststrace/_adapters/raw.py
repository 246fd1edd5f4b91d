"""Raw HTTP responses: record the reply of a ``with_raw_response`` /
``with_streaming_response`` call from the body bytes, as the caller reads them.

The openai and anthropic SDKs hand such calls back as an ``*APIResponse``
wrapping an ``httpx`` response; the caller may ``.parse()`` it (into a model
object or a ``Stream``), read it (``read()``, ``json()``, ``text``), or iterate
it (``iter_bytes()``, ``iter_lines()``, ``iter_text()``, their async twins).
Every one of those paths reads the decoded body through the httpx response's
``iter_bytes`` / ``aiter_bytes``, so that is the one place we listen: nothing
the caller holds is replaced or wrapped, the bytes pass through unchanged, and
however the body is read (parsed *and* iterated, read twice) each byte is seen
once, so the reply is recorded once.

A body the client has already read (a non-streamed ``with_raw_response`` call)
is recorded at once. A streamed body is recorded when it ends, when the
response is closed (the SDK's ``Stream`` closes it right after ``[DONE]``),
when reading it fails, or when its reader is garbage-collected; what arrived is
recorded, or nothing when nothing did (like a failed call).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import orjson

from ._common import Message, internal_error
from .convert import convert
from .streams import StreamState, accumulate
from .usage import attach as attach_usage

OnDone = Callable[[Message], None]
OnSkip = Callable[[str], None]

_SSE = "text/event-stream"


def _content_type(http: Any) -> str:
    try:
        value = http.headers.get("content-type", "")
    except Exception:
        return ""
    return value.lower() if isinstance(value, str) else ""


def _read_content(http: Any) -> bytes | None:
    """The body when the client has read it already, else ``None`` (never reads)."""
    if "_content" not in getattr(http, "__dict__", {}):
        return None
    content = http.__dict__["_content"]
    return content if isinstance(content, bytes) else None


class _Body:
    """Parses the body bytes as they pass and feeds one :class:`StreamState`."""

    def __init__(self, on_done: OnDone, on_skip: OnSkip, sse: bool, usage: bool = False, lines: bool = False) -> None:
        # SSE events and JSON lines (Ollama's and Cohere v1's streams) go
        # through the stream accumulators; a JSON body is one reply,
        # converted once at its end.
        self.lines = lines and not sse
        sse = sse or self.lines
        self.state = StreamState(on_done, None, started=True, usage=usage) if sse else None
        #: Add the reply's token usage, as the non-raw path does (LangChain's
        #: ``ChatOpenAI`` and the Agents SDK's streamed runs only ever go
        #: through raw responses: without this their replies had no usage).
        self.usage = usage
        self.on_done = on_done
        self.on_skip = on_skip
        self.sse = sse
        self.done = False
        self.failed = False  # an SSE error event arrived
        self.seen = 0  # bytes that passed through
        self.running = 0  # >0 while the client library is producing the next chunk
        self._line = bytearray()  # an SSE line not ended yet / the whole JSON body
        self._data: list[bytes] = []  # ``data:`` lines of the SSE event being read

    # -- feeding -----------------------------------------------------------

    def feed(self, chunk: Any) -> None:
        if self.done or not isinstance(chunk, (bytes, bytearray)):
            return
        try:
            self.seen += len(chunk)
            if not self.sse:
                self._line += chunk
                return
            buffer = self._line
            buffer += chunk
            start = 0
            while True:
                end = buffer.find(b"\n", start)
                if end < 0:
                    break
                self._line_done(bytes(buffer[start:end]).rstrip(b"\r"))
                start = end + 1
            if start:
                del buffer[:start]
        except Exception:
            internal_error("raw response body")

    def _line_done(self, line: bytes) -> None:
        if self.lines:
            self._json_line(line)
        elif not line:
            self._dispatch()
        elif line.startswith(b"data:"):
            data = line[5:]
            self._data.append(data[1:] if data.startswith(b" ") else data)
        # ``event:`` / ``id:`` / ``retry:`` / comments: the JSON data carries
        # everything the accumulators need (its ``type``).

    def _json_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        if isinstance(event, dict) and self.state is not None:
            if "error" in event and len(event) <= 2:
                self.failed = True  # Ollama's mid-stream {"error": ...}
                return
            self.state.add(event)

    def _dispatch(self) -> None:
        if not self._data:
            return
        data = b"\n".join(self._data)
        self._data = []
        if data.startswith(b"[DONE]"):
            return
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return  # not JSON: not a model event; the SDK decides what it means
        if not isinstance(event, dict):
            return
        if event.get("type") == "error" or ("error" in event and "choices" not in event):
            # An error event: the SDK raises it to the caller, as a failed
            # stream; what arrived before it is all there is.
            self.failed = True
            return
        if self.state is not None:
            self.state.add(event)

    # -- ending ------------------------------------------------------------

    def finish(self, ended: bool) -> None:
        """End the body, once: record the reply (or say why there is none)."""
        if self.done:
            return
        self.done = True
        content, self._line = bytes(self._line), bytearray()
        state = self.state
        if state is None:
            self.json_body(content, ended)
            return
        try:
            if ended:
                if content:
                    self._line_done(content.rstrip(b"\r"))
                self._dispatch()  # a last event with no blank line after it
            self._data = []
        except Exception:
            internal_error("raw response body")
        state.finish(ended and not self.failed)

    def json_body(self, content: bytes, ended: bool) -> None:
        """Record the reply a JSON body holds; *ended*: the body was read whole."""
        self.done = True
        message = None
        reason = None
        if not content:
            reason = "its body is empty" if ended else None  # never read: no reply arrived
        else:
            try:
                obj = orjson.loads(content)
                if isinstance(obj, list):
                    # Gemini's streamGenerateContent without alt=sse: one JSON
                    # array of the chunks.
                    message = accumulate(obj, usage=self.usage) if obj else None
                else:
                    message = convert(obj)
                    if self.usage:
                        message = attach_usage(message, obj)
            except orjson.JSONDecodeError:
                reason = "its body is not JSON" if ended else "its body was not read to the end"
            except Exception:
                internal_error("raw response body")
                return
            if message is None and reason is None:
                reason = "its body is not a model reply ststrace understands"
        if message is not None:
            try:
                self.on_done(message)
            except Exception:
                internal_error("raw response on_done callback")
        elif reason is not None:
            self.on_skip(reason)

    def closed(self, consumed: bool) -> None:
        """The response was closed: by the library's own read, which ends the
        body (then the read itself finishes, after its last bytes), or by the
        caller, which ends it here with what arrived. *consumed*: the body was
        read, by whatever means."""
        if self.running or self.done:
            return
        if consumed and not self.seen:
            self.on_skip("its body was read undecoded (iter_raw), which ststrace does not read")
        self.finish(ended=False)

    # -- the tapped readers --------------------------------------------------

    def iterate(self, inner: Iterator[Any]) -> Iterator[Any]:
        try:
            while True:
                self.running += 1
                try:
                    chunk = next(inner)
                except StopIteration:
                    break
                finally:
                    self.running -= 1
                self.feed(chunk)
                yield chunk
        except GeneratorExit:
            try:
                close = getattr(inner, "close", None)
                if close is not None:
                    close()
            finally:
                self.finish(ended=False)
            raise
        except BaseException:
            self.finish(ended=False)
            raise
        self.finish(ended=True)

    async def aiterate(self, inner: AsyncIterator[Any]) -> AsyncIterator[Any]:
        try:
            while True:
                self.running += 1
                try:
                    chunk = await inner.__anext__()
                except StopAsyncIteration:
                    break
                finally:
                    self.running -= 1
                self.feed(chunk)
                yield chunk
        except GeneratorExit:
            try:
                aclose = getattr(inner, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                self.finish(ended=False)
            raise
        except BaseException:
            self.finish(ended=False)
            raise
        self.finish(ended=True)


_TAPPED = ("iter_bytes", "aiter_bytes", "close", "aclose")


def watch_raw_response(
    raw: Any, on_done: OnDone, on_skip: OnSkip, usage: bool = False, track: Callable[[StreamState], None] | None = None
) -> str | None:
    """Call ``on_done(message)`` once with the reply held by the raw response *raw*.

    Returns ``None`` when the reply is (or will be) recorded, else why it cannot
    be, for the caller to report; a body that turns out not to hold a reply
    once read is reported through ``on_skip(reason)``. *raw* and the httpx response inside it keep
    their type and behaviour; only the httpx response's byte readers gain a
    listener. With ``usage=True`` the reply carries its token usage, when reported.
    ``track(state)`` is given the stream state of a body still to be read, for
    the session to finish it if the caller leaves it half-read.
    """
    http = getattr(raw, "http_response", None)
    if http is None:
        return f"{type(raw).__qualname__} has no http_response"
    sse = _SSE in _content_type(http)
    content = _read_content(http)
    if content is not None:
        body = _Body(on_done, on_skip, sse, usage)
        if sse:
            body.feed(content)
            body.finish(ended=True)
        else:
            body.json_body(content, ended=True)
        return None
    attributes = getattr(http, "__dict__", None)
    if not isinstance(attributes, dict):
        return f"{type(http).__qualname__} cannot be observed"
    if any(name in attributes for name in _TAPPED):
        return "its body readers were replaced by someone else"
    cls = type(http)
    missing = [name for name in _TAPPED if not callable(getattr(cls, name, None))]
    if missing:
        return f"{cls.__qualname__} has no {', '.join(missing)}"
    body = _Body(on_done, on_skip, sse, usage)
    _tap(http, cls, body)
    if track is not None and body.state is not None:
        track(body.state)
    return None


def watch_http_response(
    http: Any,
    on_done: OnDone,
    on_skip: OnSkip,
    lines: bool = False,
    usage: bool = False,
    track: Callable[[StreamState], None] | None = None,
) -> str | None:
    """Like :func:`watch_raw_response`, for an ``httpx`` / ``httpx2`` response
    as ``send`` returns it: a body read already is recorded at once, one not
    read yet from the decoded bytes as whoever reads them does. *lines*: a streamed body that
    is not SSE is one JSON object per line. Returns why it cannot be watched,
    or ``None``."""
    sse = _SSE in _content_type(http)
    content = _read_content(http)
    if content is not None:
        body = _Body(on_done, on_skip, sse, usage, lines)
        # ``requests`` holds ``_content = False`` until the body is read.
        if sse or body.lines:
            body.feed(content)
            body.finish(ended=True)
        else:
            body.json_body(content, ended=True)
        return None
    attributes = getattr(http, "__dict__", None)
    if not isinstance(attributes, dict):
        return f"{type(http).__qualname__} cannot be observed"
    cls = type(http)
    names = _TAPPED_REQUESTS if callable(getattr(cls, "iter_content", None)) else _TAPPED
    missing = [name for name in names if not callable(getattr(cls, name, None))]
    if missing or any(name in attributes for name in names):
        return f"{cls.__qualname__}'s body readers cannot be observed"
    body = _Body(on_done, on_skip, sse, usage, lines)
    (_tap_requests if names is _TAPPED_REQUESTS else _tap)(http, cls, body)
    if track is not None and body.state is not None:
        track(body.state)
    return None


def _tap(http: Any, cls: type, body: _Body) -> None:
    # Closures over a weak reference: the response must not keep itself alive
    # through its own attributes (that would leave it to the cycle collector).
    ref = weakref.ref(http)
    iter_bytes, aiter_bytes, close, aclose = (getattr(cls, name) for name in _TAPPED)

    def tapped_iter_bytes(chunk_size: int | None = None) -> Iterator[bytes]:
        return body.iterate(iter_bytes(ref(), chunk_size))

    def tapped_aiter_bytes(chunk_size: int | None = None) -> AsyncIterator[bytes]:
        return body.aiterate(aiter_bytes(ref(), chunk_size))

    def consumed() -> bool:
        return getattr(ref(), "is_stream_consumed", False) is True

    # ref() is None when the cycle collector finalises a half-read response
    # (it clears weak references first) and its reader's generator calls
    # close(): the original cannot be called without the response then, and
    # calling it with None raised AttributeError into the program's stderr.

    def tapped_close() -> None:
        response = ref()
        try:
            if response is not None:
                close(response)
        finally:
            body.closed(consumed())

    async def tapped_aclose() -> None:
        response = ref()
        try:
            if response is not None:
                await aclose(response)
        finally:
            body.closed(consumed())

    http.iter_bytes = tapped_iter_bytes
    http.aiter_bytes = tapped_aiter_bytes
    http.close = tapped_close
    http.aclose = tapped_aclose
    # Dropped unread and unclosed: nothing arrived, nothing to record; dropped
    # half-read: the reader's generator finishes the body when it is collected.


_TAPPED_REQUESTS = ("iter_content", "close")


def _tap_requests(http: Any, cls: type, body: _Body) -> None:
    """A ``requests`` response: ``.content``, ``.json()``, ``.text``,
    ``iter_lines()`` all read through ``iter_content``."""
    ref = weakref.ref(http)
    iter_content, close = cls.iter_content, cls.close  # type: ignore[attr-defined]

    def tapped_iter_content(chunk_size: int | None = 1, decode_unicode: bool = False) -> Iterator[Any]:
        response = ref()
        chunks = body.iterate(iter_content(response, chunk_size, False))
        if decode_unicode:
            import requests.utils

            decode: Any = requests.utils.stream_decode_response_unicode
            decoded: Iterator[Any] = decode(chunks, response)
            return decoded
        return chunks

    def tapped_close() -> None:
        response = ref()
        try:
            if response is not None:
                close(response)
        finally:
            body.closed(getattr(response, "_content_consumed", False) is True)

    http.iter_content = tapped_iter_content
    http.close = tapped_close
