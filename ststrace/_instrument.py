"""``instrument()`` / ``uninstrument()``: patch the official client libraries so
their model calls record like ``@llm`` does.

Patching uses wrapt. A library that is not imported yet is patched lazily by a
post-import hook, so ``instrument()`` costs nothing for libraries the program
never uses. Every patch re-checks for a current session on each call and steps
aside when there is none, or when the call happens inside an ``@llm`` function
(or another instrumented call, e.g. litellm's own openai client) that records
it already.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import threading
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import wrapt

from ._context import current, in_llm_call
from ._decorators import _ASYNC, _begin_llm, _kind, _LlmCall
from ._errors import InstrumentationError, logger

#: Public name -> integration module (one per client library).
INTEGRATIONS = {
    "openai": "ststrace.integrations.openai",
    "anthropic": "ststrace.integrations.anthropic",
    "huggingface_hub": "ststrace.integrations.huggingface_hub",
    "litellm": "ststrace.integrations.litellm",
}
_ALIASES = {"hf": "huggingface_hub", "huggingface-hub": "huggingface_hub", "huggingface": "huggingface_hub"}
_EXTRAS = {"openai": "openai", "anthropic": "anthropic", "huggingface_hub": "hf", "litellm": "litellm"}

#: Header the openai / anthropic ``with_raw_response`` / ``with_streaming_response``
#: wrappers add; such calls return the HTTP response for the caller to parse.
_RAW_HEADER = "X-Stainless-Raw-Response"

_Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


class _UnsupportedVersion(InstrumentationError):
    pass


class _Patch:
    """One patched attribute. ``active`` is read by the wrapper on every call, so
    a patch another library has wrapped on top of can still be switched off."""

    __slots__ = ("owner", "attr", "original", "wrapper", "active")

    def __init__(self, owner: Any, attr: str, original: Any) -> None:
        self.owner = owner
        self.attr = attr
        self.original = original
        self.wrapper: Any = None
        self.active = True


_lock = threading.RLock()
#: name -> every patch in place for that library.
_patched: dict[str, list[_Patch]] = {}
#: Libraries waiting for their import (lazy patching).
_wanted: set[str] = set()
_hooked: set[str] = set()


def _canonical(name: str) -> str:
    key = _ALIASES.get(name, name) if isinstance(name, str) else name
    if key not in INTEGRATIONS:
        raise InstrumentationError(
            f"ststrace cannot instrument {name!r}; supported: {', '.join(sorted(INTEGRATIONS))}"
        )
    return key


def _version_tuple(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _library_version(library: str, module: ModuleType) -> str:
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    try:
        from importlib.metadata import version as dist_version

        return dist_version(library.replace("_", "-"))
    except Exception:
        return "0"


def _installed(library: str) -> bool:
    if library in sys.modules:
        # ``sys.modules[name] = None`` is how Python marks a module as blocked.
        return sys.modules[library] is not None
    try:
        return importlib.util.find_spec(library) is not None
    except (ImportError, ValueError):
        return False


def instrument(*names: str) -> list[str]:
    """Patch the named client libraries (all supported ones when no name is given).

    Names: ``"openai"``, ``"anthropic"``, ``"huggingface_hub"`` (or ``"hf"``),
    ``"litellm"``. Asked by name, a library is imported and patched now; one
    that is missing, of an unsupported version or whose methods moved raises
    :class:`ststrace.InstrumentationError`. With no names, libraries already
    imported are patched now, installed ones when the program imports them, and
    the rest are skipped silently. Idempotent. Returns the names instrumented
    or waiting for their import.
    """
    explicit = bool(names)
    keys = [_canonical(n) for n in names] if explicit else list(INTEGRATIONS)
    specs = {key: importlib.import_module(INTEGRATIONS[key]) for key in keys}
    if explicit:
        # Every named library must be there before any is patched.
        for key in keys:
            needed: str = specs[key].LIBRARY
            if not _installed(needed):
                raise InstrumentationError(
                    f"cannot instrument {key}: the {needed!r} package is not installed "
                    f"(pip install 'ststrace[{_EXTRAS[key]}]')"
                )
    done: list[str] = []
    for key in keys:
        spec = specs[key]
        library: str = spec.LIBRARY
        if not explicit and not _installed(library):
            continue
        if not explicit and library not in sys.modules:
            with _lock:
                if key not in _patched:
                    _wanted.add(key)
                    if key not in _hooked:
                        _hooked.add(key)
                        # Calls the hook at once if the import finished meanwhile.
                        wrapt.register_post_import_hook(_on_import(key), library)
            done.append(key)
            continue
        try:
            # Outside our lock: a post-import hook running in another thread's
            # import of this library takes the lock while holding the import lock.
            module = importlib.import_module(library)
            with _lock:
                if key not in _patched:
                    _apply(key, spec, module)
        except Exception as exc:
            if explicit:
                if isinstance(exc, InstrumentationError):
                    raise
                raise InstrumentationError(f"cannot instrument {key}: {exc}") from exc
            _skipped(key, exc)
            continue
        done.append(key)
    return done


def _skipped(key: str, exc: Exception) -> None:
    """A library ``instrument()`` was not asked for by name cannot be patched."""
    if isinstance(exc, _UnsupportedVersion):
        logger.debug("ststrace: not instrumenting %s: %s", key, exc)
    else:
        # A supported version whose methods are not where we expect them.
        logger.warning("ststrace: could not instrument %s: %s", key, exc)


def _on_import(key: str) -> Callable[[ModuleType], None]:
    def hook(module: ModuleType) -> None:
        # Runs inside the user's `import`: it must never raise.
        try:
            with _lock:
                if key in _wanted and key not in _patched:
                    _apply(key, importlib.import_module(INTEGRATIONS[key]), module)
        except Exception as exc:
            _skipped(key, exc)

    return hook


def _apply(key: str, spec: Any, module: ModuleType) -> None:
    version = _library_version(spec.LIBRARY, module)
    if _version_tuple(version) < spec.MIN_VERSION:
        need = ".".join(map(str, spec.MIN_VERSION))
        raise _UnsupportedVersion(f"cannot instrument {key} {version}: ststrace needs {key} >= {need}")
    # Resolve every target before touching any, so a moved method leaves
    # nothing half-patched.
    patches: list[_Patch] = []
    for module_name, path in spec.TARGETS:
        try:
            owner: Any = importlib.import_module(module_name)
            *parents, attr = path.split(".")
            for part in parents:
                owner = getattr(owner, part)
            original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        except (ImportError, AttributeError, KeyError) as exc:
            raise InstrumentationError(
                f"cannot instrument {key} {version}: {module_name}.{path} not found ({exc})"
            ) from exc
        if not callable(original):
            raise InstrumentationError(f"cannot instrument {key} {version}: {module_name}.{path} is not callable")
        patches.append(_Patch(owner, attr, original))
    for patch in patches:
        patch.wrapper = wrapt.FunctionWrapper(patch.original, _llm_patch(patch))
        setattr(patch.owner, patch.attr, patch.wrapper)
    _patched[key] = patches
    _wanted.discard(key)


def uninstrument(*names: str) -> None:
    """Undo :func:`instrument` for the named libraries (all when none given).

    The original methods are put back. If another library has since wrapped a
    patched method, its wrapper is left in place and ours only stops recording.
    """
    keys = [_canonical(n) for n in names] if names else list(INTEGRATIONS)
    with _lock:
        for key in keys:
            _wanted.discard(key)
            for patch in reversed(_patched.pop(key, [])):
                patch.active = False
                current_attr = patch.owner.__dict__.get(patch.attr) if isinstance(patch.owner, type) else getattr(
                    patch.owner, patch.attr, None
                )
                if current_attr is patch.wrapper:
                    setattr(patch.owner, patch.attr, patch.original)
                else:
                    logger.warning(
                        "ststrace: %s.%s was wrapped again after ststrace patched it; "
                        "leaving that wrapper in place (ststrace no longer records through it)",
                        getattr(patch.owner, "__qualname__", patch.owner),
                        patch.attr,
                    )


def instrumented() -> list[str]:
    """Names of the libraries patched right now."""
    with _lock:
        return sorted(_patched)


def _raw_requested(kwargs: Mapping[str, Any]) -> bool:
    headers = kwargs.get("extra_headers")
    if not headers or not isinstance(headers, Mapping):
        return False
    return _RAW_HEADER in headers or _RAW_HEADER.lower() in headers


def _is_raw_response(result: Any) -> bool:
    # openai / anthropic LegacyAPIResponse, APIResponse, AsyncAPIResponse.
    return type(result).__name__.endswith("APIResponse")


def _settle(call: _LlmCall, result: Any) -> Any:
    if _is_raw_response(result):
        return result  # the body is the caller's to read
    return call.record_result(result)


def _is_async(original: Any) -> bool:
    # openai / anthropic decorate their async ``create`` with a plain-function
    # wrapper (``required_args``) that hides the coroutine function beneath.
    if _kind(original) is _ASYNC:
        return True
    try:
        return inspect.iscoroutinefunction(inspect.unwrap(original))
    except Exception:
        return False


def _llm_patch(patch: _Patch) -> _Wrapper:
    """The wrapper of one client method: like ``@llm``, but it steps aside inside
    a call that already records (an ``@llm`` function or another patch) and for
    raw-response calls."""
    if _is_async(patch.original):

        def async_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            session = current.get()
            if session is None or in_llm_call.get() or not patch.active or _raw_requested(kwargs):
                return wrapped(*args, **kwargs)
            coro = wrapped(*args, **kwargs)  # wrong arguments raise here, before anything is recorded
            call = _begin_llm(session, None, True, args, kwargs)
            if call is None:
                return coro
            return _run_async(coro, call)

        return async_wrapper

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        session = current.get()
        if session is None or in_llm_call.get() or not patch.active or _raw_requested(kwargs):
            return wrapped(*args, **kwargs)
        call = _begin_llm(session, None, True, args, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        token = in_llm_call.set(True)
        try:
            result = wrapped(*args, **kwargs)
        finally:
            in_llm_call.reset(token)
        if inspect.iscoroutine(result):
            # An async method the static check missed: record when awaited.
            return _run_async(result, call)
        return _settle(call, result)

    return wrapper


async def _run_async(coro: Any, call: _LlmCall) -> Any:
    # The flag is set in the awaiting task for the await, so a client awaited
    # inside (litellm's openai client) does not record the reply a second time.
    token = in_llm_call.set(True)
    try:
        result = await coro
    finally:
        in_llm_call.reset(token)
    return _settle(call, result)


def _after_fork_in_child() -> None:
    # A thread of the parent (un)instrumenting at fork() would leave it held.
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
