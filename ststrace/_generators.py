"""Generator plumbing shared by ``@tool`` and ``@llm``: a generator (or
async generator) that behaves exactly like the decorated one while reporting
its items and how it ended to an observer."""

from __future__ import annotations

from typing import Any, Callable

from ._context import in_llm_call
from ._errors import internal_error

class _Observer:
    """What a traced generator reports to: each item, then exactly one ending."""

    __slots__ = ()

    def item(self, value: Any) -> None:
        raise NotImplementedError

    def done(self) -> None:
        raise NotImplementedError

    def failed(self, exc: BaseException) -> None:
        raise NotImplementedError



def _safe(fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except Exception as exc:
        internal_error(exc, "generator tracing")


def _begin_safely(begin: Callable[[], _Observer | None]) -> _Observer | None:
    try:
        return begin()
    except Exception as exc:
        internal_error(exc, "generator tracing")
        return None


def _flagged(method: Callable[[Any], Any], arg: Any) -> Any:
    # An instrumented client stepped by an @llm generator sees the flag and
    # does not record the reply a second time; set per step, never across a yield.
    token = in_llm_call.set(True)
    try:
        return method(arg)
    finally:
        in_llm_call.reset(token)


async def _aflagged(method: Callable[[Any], Any], arg: Any) -> Any:
    token = in_llm_call.set(True)
    try:
        return await method(arg)
    finally:
        in_llm_call.reset(token)


def _trace_gen(gen: Any, begin: Callable[[], _Observer | None], flag: bool) -> Any:
    """A generator that behaves exactly like *gen* (send/throw/close, return
    value) while reporting its items and how it ended to the observer *begin*
    makes when the generator first runs. No context is held across a yield."""
    obs = _begin_safely(begin)
    if obs is None:
        return (yield from gen)
    try:
        value = _flagged(gen.send, None) if flag else gen.send(None)
    except StopIteration as stop:
        _safe(obs.done)
        return stop.value
    except BaseException as exc:
        _safe(obs.failed, exc)
        raise
    while True:
        _safe(obs.item, value)
        try:
            sent = yield value
        except GeneratorExit:
            try:
                gen.close()
            finally:
                _safe(obs.done)
            raise
        except BaseException as thrown:
            try:
                value = _flagged(gen.throw, thrown) if flag else gen.throw(thrown)
            except StopIteration as stop:
                _safe(obs.done)
                return stop.value
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise
        else:
            try:
                value = _flagged(gen.send, sent) if flag else gen.send(sent)
            except StopIteration as stop:
                _safe(obs.done)
                return stop.value
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise


async def _trace_agen(agen: Any, begin: Callable[[], _Observer | None], flag: bool) -> Any:
    """The async-generator twin of :func:`_trace_gen` (asend/athrow/aclose)."""
    obs = _begin_safely(begin)
    if obs is None:
        # Not ``async for``: asend/athrow must reach *agen* unchanged.
        obs = _Passthrough()
    try:
        value = await (_aflagged(agen.asend, None) if flag else agen.asend(None))
    except StopAsyncIteration:
        _safe(obs.done)
        return
    except BaseException as exc:
        _safe(obs.failed, exc)
        raise
    while True:
        _safe(obs.item, value)
        try:
            sent = yield value
        except GeneratorExit:
            try:
                await agen.aclose()
            finally:
                _safe(obs.done)
            raise
        except BaseException as thrown:
            try:
                value = await (_aflagged(agen.athrow, thrown) if flag else agen.athrow(thrown))
            except StopAsyncIteration:
                _safe(obs.done)
                return
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise
        else:
            try:
                value = await (_aflagged(agen.asend, sent) if flag else agen.asend(sent))
            except StopAsyncIteration:
                _safe(obs.done)
                return
            except BaseException as exc:
                _safe(obs.failed, exc)
                raise


class _Passthrough(_Observer):
    """Records nothing: tracing could not start, the generator still runs."""

    __slots__ = ()

    def item(self, value: Any) -> None:
        pass

    def done(self) -> None:
        pass

    def failed(self, exc: BaseException) -> None:
        pass
