"""The decorated function itself: a wrapt proxy that copies and pickles as a
function does, the function's kind (sync, async, generator, async generator)
and its argument binding plan, all decided once, at decoration."""

from __future__ import annotations

import inspect
from typing import Any, Callable, TypeVar

import wrapt

class _BoundWrapper(wrapt.BoundFunctionWrapper):  # type: ignore[misc,type-arg]
    def __copy__(self) -> _BoundWrapper:
        return self

    def __deepcopy__(self, memo: Any) -> _BoundWrapper:
        return self


class _Wrapper(wrapt.FunctionWrapper):  # type: ignore[misc,type-arg]
    """The decorated function. Copied as itself and pickled by name, as a
    function is: SDKs deep-copy the tools they are given (google-genai copies
    its config, tool functions included, on every call), process pools pickle
    what they run, and wrapt's proxies refuse both."""

    __bound_function_wrapper__ = _BoundWrapper

    def __copy__(self) -> _Wrapper:
        return self

    def __deepcopy__(self, memo: Any) -> _Wrapper:
        return self

    def __reduce_ex__(self, protocol: Any) -> str:
        # A global name, looked up in the function's module on unpickling
        # (pickle checks it is this very object, as for a function).
        return str(self.__qualname__)


F = TypeVar("F", bound=Callable[..., Any])

_SYNC, _ASYNC, _GEN, _ASYNCGEN = range(4)


def _kind(func: Any) -> int:
    target = getattr(func, "__func__", func)  # classmethod / staticmethod objects
    if inspect.isasyncgenfunction(target):
        return _ASYNCGEN
    if inspect.iscoroutinefunction(target):
        return _ASYNC
    if inspect.isgeneratorfunction(target):
        return _GEN
    return _SYNC


class _Binder:
    """Turns ``(instance, args, kwargs)`` into the argument dict to record.

    The signature is inspected once. Simple signatures (no ``*args`` /
    ``**kwargs``, no positional-only parameters) are bound with a ``zip``;
    everything else falls back to ``Signature.bind``.
    """

    def __init__(self, func: Any) -> None:
        target = getattr(func, "__func__", func)
        self.is_static = isinstance(func, staticmethod)
        try:
            sig = inspect.signature(target)
        except (TypeError, ValueError):
            sig = None
        self.sig = sig
        params = list(sig.parameters.values()) if sig is not None else []
        self.names = [p.name for p in params]
        # wrapt passes the bound instance (or class) separately, so for methods
        # and classmethods the first parameter is already consumed.
        self.tail = self.names[1:]
        self.sig_tail = sig.replace(parameters=params[1:]) if sig is not None and params else sig
        self.defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        self.simple = sig is not None and all(
            p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) for p in params
        )
        # Since Python 3.13 ``classmethod`` no longer binds through the
        # wrapper's ``__get__``: with @classmethod written above @tool, the
        # wrapper is called unbound with the class as its first argument.
        # A function defined in a class whose first parameter is ``cls``,
        # called that way, is such a classmethod.
        qualname = getattr(target, "__qualname__", "")
        self.cls_first = bool(self.names) and self.names[0] == "cls" and "." in qualname.rsplit("<locals>.", 1)[-1]
        # Calls of a plain function (no instance) with a simple signature:
        # bound without any of the checks below.
        self.plain = self.simple and not self.cls_first
        self.first = self.names[0] if self.names else ""

    def _names(self, instance: Any) -> list[str]:
        return self.names if instance is None or self.is_static else self.tail

    def bind(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if instance is None and self.plain:
            if not args:
                # wrapt's own dict for this call: read here, never changed.
                return kwargs
            if len(args) == 1:
                bound = {self.first: args[0]}
            else:
                bound = dict(zip(self.names, args))
            if kwargs:
                bound.update(kwargs)
            return bound
        if instance is None and self.cls_first and args and isinstance(args[0], type):
            instance, args = args[0], args[1:]
        if self.simple:
            bound = dict(zip(self.names if instance is None or self.is_static else self.tail, args))
            if kwargs:
                bound.update(kwargs)
            return bound
        sig = self.sig if instance is None or self.is_static else self.sig_tail
        if sig is None:
            out: dict[str, Any] = {f"arg{i}": a for i, a in enumerate(args)}
            out.update(kwargs)
            return out
        try:
            ba = sig.bind_partial(*args, **kwargs)
        except TypeError:
            out = {f"arg{i}": a for i, a in enumerate(args)}
            out.update(kwargs)
            return out
        result: dict[str, Any] = {}
        for name, value in ba.arguments.items():
            kind = sig.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                result.update(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                result[name] = list(value)
            else:
                result[name] = value
        return result

    def without_defaults(self, bound: dict[str, Any]) -> dict[str, Any]:
        """*bound* minus the arguments passed with their default value (models
        often leave those out)."""
        defaults = self.defaults
        if not defaults:
            return bound
        out = {k: v for k, v in bound.items() if not (k in defaults and _same(v, defaults[k]))}
        return bound if len(out) == len(bound) else out

    def with_defaults(self, instance: Any, bound: dict[str, Any]) -> dict[str, Any]:
        if not self.defaults:
            return bound
        out = {n: self.defaults[n] for n in self._names(instance) if n in self.defaults and n not in bound}
        if not out:
            return bound
        out.update(bound)
        return out


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # e.g. numpy arrays: no single truth value
        return False
