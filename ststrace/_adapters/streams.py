"""Streams: detect them, proxy them, merge their chunks into one message.

A proxy (``wrapt.BaseObjectProxy``) stands in for the provider's stream object,
so attributes, ``isinstance``, ``with`` and the provider's helpers keep working;
it feeds every chunk that passes through to a :class:`StreamState` and calls the
caller's ``on_done`` once, when the stream is exhausted, closed, fails, leaves
its ``with`` block, or is garbage-collected unfinished (see :func:`wrap_stream`).
"""

from __future__ import annotations

import inspect
import io
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import wrapt

from ststrace._context import in_llm_call

from ._common import Message, assistant_message, get, internal_error
from .anthropic import EVENT_TYPES as _ANTHROPIC_EVENTS
from .anthropic import AnthropicAccumulator
from .bedrock import ConverseAccumulator, invoke_stream_event
from .bedrock import is_stream_event as is_converse_event
from .cohere import EVENT_TYPES as _COHERE_EVENTS
from .cohere import CohereAccumulator, CohereV1Accumulator
from .cohere import is_v1_event as is_cohere_v1_event
from .convert import convert
from .gemini import GeminiAccumulator
from .gemini import is_response as _is_gemini
from .ollama import OllamaAccumulator
from .ollama import is_chat_response as is_ollama_chunk
from .openai_chat import ChatAccumulator
from .openai_responses import ResponsesAccumulator
from .usage import UsageAccumulator, usage_from_response

OnDone = Callable[[Message], None]


class Accumulator:
    """Merges the chunks of one stream, whatever the provider."""

    def __init__(self) -> None:
        self.chat = ChatAccumulator()
        self.responses = ResponsesAccumulator()
        self.anthropic = AnthropicAccumulator()
        self.gemini = GeminiAccumulator()
        self.ollama = OllamaAccumulator()
        self.cohere = CohereAccumulator()
        self.cohere_v1 = CohereV1Accumulator()
        self.converse = ConverseAccumulator()
        self.usage = UsageAccumulator()  # token counts, from the chunks that carry them
        self._text: list[str] = []

    def add(self, chunk: Any) -> None:
        if isinstance(chunk, str):
            self._text.append(chunk)  # a user generator yielding text deltas
            return
        kind = get(chunk, "type")
        if isinstance(kind, str):
            if kind == "chunk":  # openai ChatCompletionStream wraps each raw chunk
                inner = get(chunk, "chunk")
                if inner is not None:
                    self.chat.add(inner)
                    self.usage.add_chat(inner)
            elif kind.startswith("response."):
                self.responses.add_event(kind, chunk)
                self.usage.add_event(kind, chunk)
            elif kind in _ANTHROPIC_EVENTS:
                self.anthropic.add_event(kind, chunk)
                self.usage.add_event(kind, chunk)
            elif kind in _COHERE_EVENTS:
                self.cohere.add_event(kind, chunk)
                self.usage.add_event(kind, chunk)
            # Other typed events (anthropic "text", openai "content.delta", ...)
            # repeat what the raw events carry.
            return
        choices = get(chunk, "choices")
        if choices is not None:
            self.chat.add_choices(chunk, choices)
            self.usage.add_chat(chunk)
        elif _is_gemini(chunk):
            self.gemini.add(chunk)
            self.usage.add_gemini(chunk)
        elif is_ollama_chunk(chunk):
            self.ollama.add(chunk)
            self.usage.add_counts(chunk)
        elif is_converse_event(chunk):
            self.converse.add_event(chunk)
            if "metadata" in chunk:
                self.usage.add_chat(chunk["metadata"])
        elif is_cohere_v1_event(chunk):
            self.cohere_v1.add_event(chunk)
        else:
            # mistralai's stream events carry the chunk in ``data``.
            data = get(chunk, "data")
            choices = get(data, "choices") if data is not None else None
            if choices is not None:
                self.chat.add_choices(data, choices)
                self.usage.add_chat(data)
                return
            # Bedrock's invoke_model_with_response_stream: the model's own event in ``bytes``.
            inner = invoke_stream_event(chunk)
            if inner is not None:
                self.add(inner)

    def result(self, usage: bool = False) -> Message:
        message = self._message()
        if usage:
            found = self.usage.result()
            if found is not None:
                message["usage"] = found
        return message

    def _message(self) -> Message:
        for acc in (
            self.anthropic,
            self.responses,
            self.chat,
            self.gemini,
            self.ollama,
            self.cohere,
            self.converse,
            self.cohere_v1,
        ):
            if acc.seen_anything:
                return acc.result()
        model = self.anthropic.model or self.responses.model or self.chat.model or self.gemini.model or self.ollama.model
        return assistant_message("".join(self._text), model=model)


def accumulate(chunks: Iterable[Any], *, usage: bool = False) -> Message:
    """The assistant message made of already-received ``chunks`` (with their token
    ``usage`` if asked and reported); never raises."""
    acc = Accumulator()
    try:
        for chunk in chunks:
            acc.add(chunk)
        return acc.result(usage)
    except Exception:
        internal_error("accumulate")
        return assistant_message("")


def _helper_snapshot(source: Any) -> Any:
    """What a provider stream helper has accumulated itself, if anything.

    ``messages.stream()`` / ``chat.completions.stream()`` / ``responses.stream()``
    helpers can be drained without passing chunks through the proxy
    (``text_stream``, ``until_done()``, ``get_final_*()``); their own snapshot
    then holds the whole reply.
    """
    module = type(source).__module__
    if not module.startswith(("anthropic.", "openai.")):
        return None
    try:
        snapshot_or_none = getattr(source, "_current_snapshot_or_none", None)
        if callable(snapshot_or_none):  # anthropic MessageStream
            return snapshot_or_none()
        state = getattr(source, "_state", None)
        if state is None:
            return None
        completed = getattr(state, "_completed_response", None)  # openai ResponseStream
        if completed is not None:
            return completed
        partial = getattr(state, "_ResponseStreamState__current_snapshot", None)
        if partial is not None:
            return partial
        return state.current_completion_snapshot  # openai ChatCompletionStream
    except Exception:
        return None  # nothing accumulated yet (the helpers assert on that)


class StreamState:
    """Accumulation and the at-most-once finish shared by a stream's proxies."""

    def __init__(self, on_done: OnDone, source: Any, started: bool, usage: bool = False) -> None:
        self._on_done: OnDone | None = on_done
        self.usage = usage  # add the stream's token usage to the message
        self._acc: Accumulator | None = Accumulator()
        # The at-most-once finish without a lock: list.pop is one atomic C
        # call, and a lock held by another thread at fork() would stay held
        # in the child forever.
        self._once = [True]
        self.source = source
        self.final: Any = None
        self.started = started
        self.done = False
        self.received = 0

    def start(self, source: Any) -> None:
        self.source = source
        self.started = True

    def add(self, chunk: Any) -> None:
        acc = self._acc
        if acc is None:
            return  # chunks read after the message was recorded
        self.received += 1
        try:
            acc.add(chunk)
        except Exception:
            internal_error("stream accumulation")

    def set_final(self, obj: Any) -> None:
        if obj is not None and not self.done:
            self.final = obj

    def abandon(self) -> None:
        if self.started:
            self.finish(ended=False)

    def finish(self, ended: bool) -> None:
        """Record the message, once; ``ended`` says the stream ran to its end."""
        try:
            self._once.pop()
        except IndexError:
            return
        self.done = True
        on_done, self._on_done = self._on_done, None
        try:
            message = self._build(ended)
        except Exception:
            internal_error("stream finish")
            message = assistant_message("") if ended or self.received else None
        finally:
            self._acc = None
            self.source = self.final = None
        if on_done is None or message is None:
            return
        try:
            on_done(message)
        except Exception:
            internal_error("stream on_done callback")

    def _build(self, ended: bool) -> Message | None:
        acc = self._acc
        merged = acc.result(self.usage) if acc is not None else assistant_message("")
        complete = self.final if self.final is not None else _helper_snapshot(self.source)
        message = convert(complete) if complete is not None else None
        if message is None:
            if not ended and not self.received:
                # Failed, closed or dropped before any output: a failed call,
                # not an empty reply.
                return None
            return merged
        for key in ("reasoningContent", "model"):
            if key not in message and key in merged:
                message[key] = merged[key]
        if self.usage:
            # The complete reply's own report, else what the chunks carried.
            usage = usage_from_response(complete) or merged.get("usage")
            if usage is not None:
                message["usage"] = usage
        return message


_FINAL_RESULTS = frozenset({"get_final_message", "get_final_completion", "get_final_response"})
_CLOSERS = frozenset({"close", "aclose"})
_STOPS = (StopIteration, StopAsyncIteration)


if TYPE_CHECKING:
    _ProxyBase = wrapt.BaseObjectProxy[Any]
else:
    # wrapt 2 has BaseObjectProxy (ObjectProxy there also proxies iteration,
    # which _Proxy does itself); wrapt 1.x, which imports faster, has only
    # ObjectProxy. Either works as the base.
    _ProxyBase = getattr(wrapt, "BaseObjectProxy", None) or wrapt.ObjectProxy


class _Proxy(_ProxyBase):
    _self_state: StreamState

    def __init__(self, wrapped: Any, state: StreamState) -> None:
        super().__init__(wrapped)
        self._self_state = state

    def __repr__(self) -> str:
        return repr(self.__wrapped__)

    def __del__(self) -> None:
        try:
            state = self._self_state
        except Exception:
            return  # never fully initialised
        try:
            state.abandon()
        except Exception:
            internal_error("stream garbage collection")


def _finishing(proxy: _Proxy, name: str) -> Callable[..., Any]:
    """``proxy.<name>`` whose completion finishes the stream (close, get_final_*...)."""
    method = getattr(proxy.__wrapped__, name)  # AttributeError -> hasattr() is False
    state = proxy._self_state

    def settle(result: Any) -> Any:
        if name in _FINAL_RESULTS:
            state.set_final(result)
        state.finish(ended=name not in _CLOSERS)
        return proxy if result is proxy.__wrapped__ else result

    async def settle_later(awaitable: Awaitable[Any]) -> Any:
        try:
            result = await awaitable
        except BaseException:
            state.finish(ended=False)
            raise
        return settle(result)

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = method(*args, **kwargs)
        except BaseException:
            state.finish(ended=False)
            raise
        if inspect.isawaitable(result):
            return settle_later(result)
        return settle(result)

    return call


def _stepping(proxy: _Proxy, name: str) -> Callable[..., Any]:
    """``proxy.send`` / ``throw`` / ``asend`` / ``athrow``: the result is a chunk."""
    method = getattr(proxy.__wrapped__, name)
    state = proxy._self_state

    async def step_later(awaitable: Awaitable[Any]) -> Any:
        try:
            chunk = await awaitable
        except BaseException as exc:
            state.finish(ended=isinstance(exc, _STOPS))
            raise
        state.add(chunk)
        return chunk

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            chunk = method(*args, **kwargs)
        except BaseException as exc:
            state.finish(ended=isinstance(exc, _STOPS))
            raise
        if name in ("asend", "athrow"):
            return step_later(chunk)
        state.add(chunk)
        return chunk

    return call


class _StreamProxy(_Proxy):
    # Properties, so that hasattr() on the proxy answers as on the stream.
    @property
    def close(self) -> Callable[..., Any]:
        return _finishing(self, "close")

    @property
    def aclose(self) -> Callable[..., Any]:
        return _finishing(self, "aclose")

    @property
    def until_done(self) -> Callable[..., Any]:
        return _finishing(self, "until_done")

    @property
    def get_final_message(self) -> Callable[..., Any]:
        return _finishing(self, "get_final_message")

    @property
    def get_final_text(self) -> Callable[..., Any]:
        return _finishing(self, "get_final_text")

    @property
    def get_final_completion(self) -> Callable[..., Any]:
        return _finishing(self, "get_final_completion")

    @property
    def get_final_response(self) -> Callable[..., Any]:
        return _finishing(self, "get_final_response")

    @property
    def send(self) -> Callable[..., Any]:
        return _stepping(self, "send")

    @property
    def throw(self) -> Callable[..., Any]:
        return _stepping(self, "throw")

    @property
    def asend(self) -> Callable[..., Any]:
        return _stepping(self, "asend")

    @property
    def athrow(self) -> Callable[..., Any]:
        return _stepping(self, "athrow")

    @property
    def text_stream(self) -> Any:
        inner = self.__wrapped__.text_stream
        if hasattr(inner, "__anext__"):
            return self._self_watch_async(inner)
        return self._self_watch(inner)

    def _self_watch(self, inner: Iterable[Any]) -> Iterator[Any]:
        # The helper's own snapshot holds what text_stream consumed; this only
        # notices the end.
        state = self._self_state
        try:
            yield from inner
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                state.finish(ended=False)
            raise
        state.finish(ended=True)

    async def _self_watch_async(self, inner: AsyncIterator[Any]) -> AsyncIterator[Any]:
        state = self._self_state
        try:
            async for item in inner:
                yield item
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                state.finish(ended=False)
            raise
        state.finish(ended=True)


class _SyncStreamProxy(_StreamProxy):
    def __iter__(self) -> Iterator[Any]:
        inner = iter(self.__wrapped__)
        if inner is self.__wrapped__:
            return self  # an iterator: chunks arrive through __next__
        return self._self_iterate(inner)

    def _self_iterate(self, inner: Iterator[Any]) -> Iterator[Any]:
        # A method, so the generator keeps the proxy (and its __del__) alive.
        state = self._self_state
        try:
            while True:
                # Flagged per step, never across a yield: a stream whose
                # request goes out on its first step (ollama's, cohere's and
                # google-genai's generators) is not recorded again below.
                token = in_llm_call.set(True)
                try:
                    chunk = next(inner)
                except StopIteration:
                    break
                finally:
                    in_llm_call.reset(token)
                state.add(chunk)
                yield chunk
        except BaseException as exc:
            # Leaving a for loop early closes this generator but not the
            # stream, which may still be read on; GC or close() finishes it.
            if not isinstance(exc, GeneratorExit):
                state.finish(ended=False)
            raise
        state.finish(ended=True)

    def __next__(self) -> Any:
        state = self._self_state
        token = in_llm_call.set(True)
        try:
            chunk = self.__wrapped__.__next__()
        except BaseException as exc:
            state.finish(ended=isinstance(exc, StopIteration))
            raise
        finally:
            in_llm_call.reset(token)
        state.add(chunk)
        return chunk

    def __enter__(self) -> Any:
        entered = self.__wrapped__.__enter__()
        return self if entered is self.__wrapped__ else entered

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_state.finish(ended=False)


class _AsyncStreamProxy(_StreamProxy):
    def __aiter__(self) -> AsyncIterator[Any]:
        inner = self.__wrapped__.__aiter__()
        if inner is self.__wrapped__:
            return self  # type: ignore[no-any-return]
        return self._self_aiterate(inner)

    async def _self_aiterate(self, inner: AsyncIterator[Any]) -> AsyncIterator[Any]:
        state = self._self_state
        try:
            while True:
                token = in_llm_call.set(True)
                try:
                    chunk = await inner.__anext__()
                except StopAsyncIteration:
                    break
                finally:
                    in_llm_call.reset(token)
                state.add(chunk)
                yield chunk
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                state.finish(ended=False)
            raise
        state.finish(ended=True)

    async def __anext__(self) -> Any:
        state = self._self_state
        token = in_llm_call.set(True)
        try:
            chunk = await self.__wrapped__.__anext__()
        except BaseException as exc:
            state.finish(ended=isinstance(exc, StopAsyncIteration))
            raise
        finally:
            in_llm_call.reset(token)
        state.add(chunk)
        return chunk

    async def __aenter__(self) -> Any:
        entered = await self.__wrapped__.__aenter__()
        return self if entered is self.__wrapped__ else entered

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_state.finish(ended=False)


class _DualStreamProxy(_SyncStreamProxy, _AsyncStreamProxy):
    """For objects iterable both ways (LiteLLM's ``CustomStreamWrapper``)."""


class _ManagerProxy(_Proxy):
    """A ``*StreamManager``: the request and the stream begin at ``__enter__``.

    The request is sent with ``in_llm_call`` set: a manager that sends it
    through an instrumented ``create`` (openai's ``chat.completions.stream()``)
    is already being recorded, by whoever wrapped it.
    """

    _self_handed_out: bool

    def __init__(self, wrapped: Any, state: StreamState) -> None:
        super().__init__(wrapped, state)
        self._self_handed_out = False

    def _self_adopt(self, entered: Any) -> Any:
        state = self._self_state
        state.start(entered)
        if entered is self.__wrapped__:
            return self
        proxy = (_stream_proxy_class(entered) or _SyncStreamProxy)(entered, state)
        # From now on the stream proxy ends the stream (exhausted, closed,
        # exited or collected); the manager only by its own __exit__.
        self._self_handed_out = True
        return proxy

    def __del__(self) -> None:
        # Not once a stream proxy was handed out: ``stream = manager.__enter__()``
        # drops the manager at once, while the stream is still to be read.
        try:
            handed_out = self._self_handed_out
        except Exception:
            handed_out = False
        if not handed_out:
            super().__del__()

    def __enter__(self) -> Any:
        token = in_llm_call.set(True)
        try:
            entered = self.__wrapped__.__enter__()
        finally:
            in_llm_call.reset(token)
        return self._self_adopt(entered)

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_state.abandon()

    async def __aenter__(self) -> Any:
        token = in_llm_call.set(True)
        try:
            entered = await self.__wrapped__.__aenter__()
        finally:
            in_llm_call.reset(token)
        return self._self_adopt(entered)

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_state.abandon()


_NOT_STREAMS = (str, bytes, bytearray, memoryview, Mapping, list, tuple, set, frozenset, io.IOBase)


def _is_manager(tp: type) -> bool:
    return tp.__name__.endswith("StreamManager") and tp.__module__.startswith(("openai.", "anthropic."))


def _stream_proxy_class(obj: Any) -> type[_StreamProxy] | None:
    tp = type(obj)
    sync = hasattr(tp, "__next__") or hasattr(tp, "__iter__")
    asynchronous = hasattr(tp, "__anext__") or hasattr(tp, "__aiter__")
    if sync and asynchronous:
        return _DualStreamProxy
    if asynchronous:
        return _AsyncStreamProxy
    if sync:
        return _SyncStreamProxy
    return None


def is_stream(obj: object) -> bool:
    """Whether ``obj`` is a stream of model output (cheap; consumes nothing).

    True for iterators and async iterators (provider ``Stream`` / ``AsyncStream``
    objects, stream helpers, generators) and the openai / anthropic
    ``*StreamManager`` objects; false for strings, bytes, containers, mappings
    and pydantic models (which are iterable but not streams).
    """
    if isinstance(obj, _NOT_STREAMS):
        return False
    if isinstance(obj, _Proxy):
        return True
    tp = type(obj)
    if hasattr(tp, "model_dump") or hasattr(tp, "__pydantic_fields__"):
        return False
    return hasattr(tp, "__next__") or hasattr(tp, "__anext__") or hasattr(tp, "__aiter__") or _is_manager(tp)


def is_wrapped_stream(obj: object) -> bool:
    """Whether ``obj`` is already a proxy made by :func:`wrap_stream`."""
    return isinstance(obj, _Proxy)


def wrap_stream(obj: Any, on_done: OnDone, *, usage: bool = False) -> Any:
    """A proxy of the stream ``obj`` that records one message through ``on_done``.

    ``on_done(message)`` is called at most once: when the stream is exhausted
    (also through ``until_done()`` / ``get_final_*()`` / ``text_stream``), or
    with what arrived when it is closed, fails (the error is re-raised
    unchanged), leaves its ``with`` block, or is garbage-collected unfinished.
    It is not called when the stream fails, is closed or is dropped before
    delivering anything (like a failed non-streamed call), nor for a stream
    manager that was never entered. It may run from garbage collection, so it
    must not rely on context variables. Objects that cannot be streamed are
    returned unchanged: check :func:`is_stream` first. With ``usage=True`` the
    message carries the stream's token usage, when the stream reports one.
    """
    if _is_manager(type(obj)):
        return _ManagerProxy(obj, StreamState(on_done, None, started=False, usage=usage))
    cls = _stream_proxy_class(obj)
    if cls is None:
        return obj
    return cls(obj, StreamState(on_done, obj, started=True, usage=usage))
