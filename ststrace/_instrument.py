"""``instrument()`` / ``uninstrument()``: patch the official client libraries so
their model calls record like ``@llm`` does.

Patching uses wrapt. A library that is not imported yet is patched lazily by a
post-import hook, so ``instrument()`` costs nothing for libraries the program
never uses. Every patch re-checks for a current session on each call and steps
aside when there is none, or when the call happens inside an ``@llm`` function
(or another instrumented call) that records it already.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

import wrapt

from ._context import current, in_llm_call
from ._decorators import _ASYNC, _begin_llm, _kind, _run_llm_async
from ._errors import InstrumentationError, internal_error, logger

#: Public name -> integration module (one per client library).
INTEGRATIONS = {
    "openai": "ststrace.integrations.openai",
    "anthropic": "ststrace.integrations.anthropic",
    "huggingface_hub": "ststrace.integrations.huggingface_hub",
    "litellm": "ststrace.integrations.litellm",
}
_ALIASES = {"hf": "huggingface_hub", "huggingface-hub": "huggingface_hub", "huggingface": "huggingface_hub"}
_EXTRAS = {"openai": "openai", "anthropic": "anthropic", "huggingface_hub": "hf", "litellm": "litellm"}

_lock = threading.RLock()
#: name -> [(owner, attribute, original)] for every patch in place.
_patched: dict[str, list[tuple[Any, str, Any]]] = {}
#: Libraries waiting for their import (lazy patching).
_wanted: set[str] = set()
_hooked: set[str] = set()


def _canonical(name: str) -> str:
    key = _ALIASES.get(name, name)
    if key not in INTEGRATIONS:
        raise InstrumentationError(
            f"ststrace cannot instrument {name!r}; supported: {', '.join(sorted(INTEGRATIONS))}"
        )
    return key


def _version_tuple(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
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


def instrument(*names: str) -> list[str]:
    """Patch the named client libraries (all supported ones when no name is given).

    Asked by name, a library that is missing or of an unsupported version raises
    :class:`ststrace.InstrumentationError`; with no names such libraries are
    skipped silently. Idempotent. Returns the names instrumented (or waiting
    for their import).
    """
    explicit = bool(names)
    keys = [_canonical(n) for n in names] if explicit else list(INTEGRATIONS)
    done: list[str] = []
    with _lock:
        for key in keys:
            if key in _patched:
                done.append(key)
                continue
            spec = importlib.import_module(INTEGRATIONS[key])
            library: str = spec.LIBRARY
            if library in sys.modules or explicit:
                if library not in sys.modules and importlib.util.find_spec(library) is None:
                    raise InstrumentationError(
                        f"cannot instrument {key}: the {library!r} package is not installed "
                        f"(pip install 'ststrace[{_EXTRAS[key]}]')"
                    )
                try:
                    module = importlib.import_module(library)
                    _apply(key, spec, module)
                except InstrumentationError:
                    if explicit:
                        raise
                    logger.debug("ststrace: skipping %s", key, exc_info=True)
                    continue
                except Exception as exc:
                    if explicit:
                        raise InstrumentationError(f"cannot instrument {key}: {exc}") from exc
                    logger.debug("ststrace: skipping %s", key, exc_info=True)
                    continue
                done.append(key)
            elif importlib.util.find_spec(library) is not None:
                _wanted.add(key)
                if key not in _hooked:
                    _hooked.add(key)
                    wrapt.register_post_import_hook(_on_import(key), library)
                done.append(key)
    return done


def _on_import(key: str) -> Any:
    def hook(module: ModuleType) -> None:
        # Runs inside the user's `import`: it must never raise.
        try:
            with _lock:
                if key in _wanted and key not in _patched:
                    _apply(key, importlib.import_module(INTEGRATIONS[key]), module)
        except Exception as exc:
            logger.warning("ststrace: could not instrument %s: %s", key, exc)

    return hook


def _apply(key: str, spec: Any, module: ModuleType) -> None:
    version = _library_version(spec.LIBRARY, module)
    if _version_tuple(version) < spec.MIN_VERSION:
        need = ".".join(map(str, spec.MIN_VERSION))
        raise InstrumentationError(f"cannot instrument {key} {version}: ststrace needs {key} >= {need}")
    resolved: list[tuple[Any, str, Any]] = []
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
        resolved.append((owner, attr, original))
    patches = []
    for owner, attr, original in resolved:
        setattr(owner, attr, wrapt.FunctionWrapper(original, _llm_patch(original)))
        patches.append((owner, attr, original))
    _patched[key] = patches
    _wanted.discard(key)


def uninstrument(*names: str) -> None:
    """Undo :func:`instrument` for the named libraries (all when none given)."""
    keys = [_canonical(n) for n in names] if names else list(INTEGRATIONS)
    with _lock:
        for key in keys:
            _wanted.discard(key)
            for owner, attr, original in reversed(_patched.pop(key, [])):
                setattr(owner, attr, original)


def instrumented() -> list[str]:
    """Names of the libraries patched right now."""
    with _lock:
        return sorted(_patched)


def _llm_patch(original: Any) -> Any:
    """The wrapper of one client method: like ``@llm``, but it steps aside inside
    a call that already records (an ``@llm`` function or another patch)."""
    if _kind(original) is _ASYNC:

        def async_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            session = current.get()
            if session is None or in_llm_call.get():
                return wrapped(*args, **kwargs)
            call = _begin_llm(session, None, True, args, kwargs)
            if call is None:
                return wrapped(*args, **kwargs)
            return _run_llm_async(wrapped, args, kwargs, call)

        return async_wrapper

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        session = current.get()
        if session is None or in_llm_call.get():
            return wrapped(*args, **kwargs)
        call = _begin_llm(session, None, True, args, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        token = in_llm_call.set(True)
        try:
            result = wrapped(*args, **kwargs)
        finally:
            in_llm_call.reset(token)
        if _is_raw_response(result):
            # with_raw_response / with_streaming_response: the body is the
            # caller's to read; parsing it here would change what they see.
            return result
        return call.record_result(result)

    return wrapper


def _is_raw_response(result: Any) -> bool:
    try:
        return type(result).__name__.endswith("APIResponse")
    except Exception as exc:  # pragma: no cover
        internal_error(exc, "instrument")
        return False
