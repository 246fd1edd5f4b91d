"""``instrument()`` / ``uninstrument()``: patch the official client libraries so
their model calls record like ``@llm`` does.

Calls made through ``with_raw_response`` / ``with_streaming_response`` hand the
caller the HTTP response; their reply is recorded from the body bytes as the
caller reads them (:mod:`ststrace._adapters.raw`). Integrations may also wrap
something that is not a model call (an agent runner) with their own wrapper.

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

from . import _unrecorded as _empty_sessions
from ._context import current, in_llm_call
from ._decorators import _ASYNC, _begin_llm, _kind, _LlmCall
from ._errors import InstrumentationError, internal_error, logger
from .integrations import executors as _executors

#: Public name -> integration module (one per client library).
INTEGRATIONS = {
    "openai": "ststrace.integrations.openai",
    "anthropic": "ststrace.integrations.anthropic",
    "huggingface_hub": "ststrace.integrations.huggingface_hub",
    "litellm": "ststrace.integrations.litellm",
    "openai_agents": "ststrace.integrations.openai_agents",
    "smolagents": "ststrace.integrations.smolagents",
    "llama_index": "ststrace.integrations.llama_index",
    "google_genai": "ststrace.integrations.google_genai",
    "google_adk": "ststrace.integrations.google_adk",
    "groq": "ststrace.integrations.groq",
    "together": "ststrace.integrations.together",
    "cerebras": "ststrace.integrations.cerebras",
    "ollama": "ststrace.integrations.ollama",
    "mistralai": "ststrace.integrations.mistralai",
    "cohere": "ststrace.integrations.cohere",
    "bedrock": "ststrace.integrations.bedrock",
    "claude_agent_sdk": "ststrace.integrations.claude_agent_sdk",
    "dspy": "ststrace.integrations.dspy",
    "httpx": "ststrace.integrations.httpx",
    "httpx2": "ststrace.integrations.httpx2",
    "requests": "ststrace.integrations.requests",
}
#: The transport seam: model calls recorded from the HTTP exchange where no
#: SDK-level integration saw them (``instrument(http=False)`` leaves it out).
HTTP_SEAMS = ("httpx", "httpx2", "requests")
_ALIASES = {
    "hf": "huggingface_hub",
    "huggingface-hub": "huggingface_hub",
    "huggingface": "huggingface_hub",
    "openai-agents": "openai_agents",
    "agents": "openai_agents",
    "llama-index": "llama_index",
    "llamaindex": "llama_index",
    "google-genai": "google_genai",
    "genai": "google_genai",
    "gemini": "google_genai",
    "google-adk": "google_adk",
    "adk": "google_adk",
    "cerebras-cloud-sdk": "cerebras",
    "cerebras_cloud_sdk": "cerebras",
    "mistral": "mistralai",
    "bedrock-runtime": "bedrock",
    "boto3": "bedrock",
    "botocore": "bedrock",
    "claude-agent-sdk": "claude_agent_sdk",
}
_EXTRAS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "huggingface_hub": "hf",
    "litellm": "litellm",
    "openai_agents": "agents",
    "smolagents": "smolagents",
    "llama_index": "llamaindex",
    "google_genai": "google-genai",
    "google_adk": "google-adk",
    "groq": "groq",
    "together": "together",
    "cerebras": "cerebras",
    "ollama": "ollama",
    "mistralai": "mistralai",
    "cohere": "cohere",
    "bedrock": "bedrock",
    "claude_agent_sdk": "claude-agent-sdk",
    "dspy": "dspy",
}

_Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


class _UnsupportedVersion(InstrumentationError):
    pass


class _Patch:
    """One patched attribute. ``active`` is read by the wrapper on every call, so
    a patch another library has wrapped on top of can still be switched off."""

    __slots__ = ("owner", "attr", "original", "wrapper", "active", "inherited", "missed")

    def __init__(self, owner: Any, attr: str, original: Any, inherited: bool = False) -> None:
        self.owner = owner
        self.attr = attr
        self.original = original
        self.wrapper: Any = None
        self.active = True
        #: Why a call through this patch went unrecorded while a session was
        #: open (see :mod:`ststrace._unrecorded`), until reported.
        self.missed: str | None = None
        #: The class only inherited the method: undoing deletes our attribute
        #: rather than pinning the base class's method onto the subclass.
        self.inherited = inherited


_lock = threading.RLock()
#: name -> every patch in place for that library.
_patched: dict[str, list[_Patch]] = {}
#: Libraries waiting for their import (lazy patching).
_wanted: set[str] = set()
_hooked: set[str] = set()
#: Set by the first instrument() call, whatever it patched.
_ever_called = False


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


def _library_version(library: str, module: ModuleType, distribution: str | None = None) -> str:
    from importlib.metadata import version as dist_version

    if distribution is not None:
        # An import name shared by unrelated projects (``agents``): only the
        # named distribution counts.
        try:
            return dist_version(distribution)
        except Exception:
            return "0"
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    try:
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


def instrument(*names: str, http: bool = True) -> list[str]:
    """Patch the named client libraries (all supported ones when no name is given).

    Names: ``"openai"``, ``"anthropic"``, ``"huggingface_hub"`` (or ``"hf"``),
    ``"litellm"``, ``"openai_agents"`` (or ``"openai-agents"``, ``"agents"``: how
    an OpenAI Agents SDK run ends; its model calls are openai's), ``"groq"``,
    ``"cerebras"``, ``"together"``, ``"mistralai"``, ``"cohere"``, ``"ollama"``,
    ``"bedrock"`` (or ``"boto3"``, ``"botocore"``), ``"google_genai"`` (or
    ``"gemini"``: the Gemini API and Vertex AI), ``"google_adk"`` (or ``"adk"``:
    how Google ADK runs agents; its Gemini calls are google_genai's), and the
    agent frameworks ``"smolagents"``, ``"llama_index"``, ``"claude_agent_sdk"``
    (or ``"claude-agent-sdk"``) and ``"dspy"`` (see :mod:`ststrace.integrations`),
    and the transport seam ``"httpx"``, ``"httpx2"`` and ``"requests"``: a model call no
    SDK-level integration saw, recorded from its HTTP exchange (with no names
    it is included unless ``http=False``).
    Whatever the names, work handed to a ``concurrent.futures`` thread pool
    (``loop.run_in_executor``) while a session is open runs in that session
    from then on (:mod:`ststrace.integrations.executors`).
    Asked by name, a library is imported and patched now; one
    that is missing, of an unsupported version or whose methods moved raises
    :class:`ststrace.InstrumentationError`. With no names, libraries already
    imported are patched now, installed ones when the program imports them, and
    the rest are skipped silently. Idempotent. Returns the names instrumented
    or waiting for their import.
    """
    global _ever_called
    _ever_called = True
    explicit = bool(names)
    if explicit:
        keys = [_canonical(n) for n in names]
    else:
        keys = [key for key in INTEGRATIONS if http or key not in HTTP_SEAMS]
    specs = {key: importlib.import_module(INTEGRATIONS[key]) for key in keys}
    if explicit:
        # Every named library must be there before any is patched.
        for key in keys:
            needed: str = specs[key].LIBRARY
            if not _installed(needed):
                raise InstrumentationError(
                    f"cannot instrument {key}: the {needed!r} package is not installed "
                    f"(pip install {_install_hint(key, needed)})"
                )
    _executors.install()
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


def _install_hint(key: str, library: str) -> str:
    extra = _EXTRAS.get(key)
    return f"'ststrace[{extra}]'" if extra is not None else library


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
    version = _library_version(spec.LIBRARY, module, getattr(spec, "DISTRIBUTION", None))
    if _version_tuple(version) < spec.MIN_VERSION:
        need = ".".join(map(str, spec.MIN_VERSION))
        raise _UnsupportedVersion(f"cannot instrument {key} {version}: ststrace needs {key} >= {need}")
    # Resolve every target before touching any, so a moved method leaves
    # nothing half-patched. A target the integration lists in ``OPTIONAL`` (a
    # method only some versions have) is skipped when missing; a required one
    # that is missing stops the whole integration.
    optional: frozenset[str] = getattr(spec, "OPTIONAL", frozenset())
    resolved: list[tuple[tuple[Any, ...], _Patch, Callable[[_Patch], _Wrapper] | None]] = []
    for target in spec.TARGETS:
        modules, path, *custom = target
        try:
            patch = _resolve(modules, path)
        except InstrumentationError as exc:
            if path in optional:
                logger.debug("ststrace: %s %s has no %s; the rest is instrumented", key, version, path)
                continue
            raise InstrumentationError(f"cannot instrument {key} {version}: {exc}") from exc
        # A target may name its own wrapper factory (a runner, not a model call).
        factory = custom[0] if custom else None
        resolved.append((target, patch, _FACTORIES[factory] if isinstance(factory, str) else factory))
    # A framework integration brings its own wrappers; client libraries get _llm_patch.
    make = getattr(spec, "make_wrapper", None)
    patches: list[_Patch] = []
    for target, patch, factory in resolved:
        if factory is not None:
            wrapper = factory(patch)
        elif make is not None:
            wrapper = make(target[1], patch)
        else:
            wrapper = _llm_patch(patch, getattr(spec, "call_arguments", None))
        patch.wrapper = wrapt.FunctionWrapper(patch.original, wrapper)
        setattr(patch.owner, patch.attr, patch.wrapper)
        patches.append(patch)
    _patched[key] = patches
    _wanted.discard(key)
    _NOT_CALL_SITES.add(spec.LIBRARY.split(".", 1)[0])


def _resolve(modules: str | tuple[str, ...], path: str) -> _Patch:
    """The attribute *path* in the first of *modules* that has it: an SDK that
    moved a module between versions names both places, newest first."""
    errors: list[str] = []
    for module_name in (modules,) if isinstance(modules, str) else modules:
        try:
            owner: Any = importlib.import_module(module_name)
            *parents, attr = path.split(".")
            for part in parents:
                owner = getattr(owner, part)
            inherited = isinstance(owner, type) and attr not in owner.__dict__
            original = owner.__dict__[attr] if isinstance(owner, type) and not inherited else getattr(owner, attr)
        except (ImportError, AttributeError, KeyError) as exc:
            errors.append(f"{module_name}.{path} not found ({exc})")
            continue
        if not callable(original):
            errors.append(f"{module_name}.{path} is not callable")
            continue
        return _Patch(owner, attr, original, inherited)
    raise InstrumentationError("; ".join(errors))


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
                    if patch.inherited:
                        delattr(patch.owner, patch.attr)
                    else:
                        setattr(patch.owner, patch.attr, patch.original)
                else:
                    logger.warning(
                        "ststrace: %s.%s was wrapped again after ststrace patched it; "
                        "leaving that wrapper in place (ststrace no longer records through it)",
                        getattr(patch.owner, "__qualname__", patch.owner),
                        patch.attr,
                    )
        # The executor patch came with the first instrument(): it goes with the last.
        if not _patched and not _wanted:
            _executors.uninstall()


def instrumented() -> list[str]:
    """Names of the libraries patched right now."""
    with _lock:
        return sorted(_patched)


def _is_raw_response(result: Any) -> bool:
    # openai / anthropic LegacyAPIResponse, APIResponse, AsyncAPIResponse.
    return type(result).__name__.endswith("APIResponse")


def _settle(call: _LlmCall, result: Any, patch: _Patch) -> Any:
    if _is_raw_response(result):
        # ``with_raw_response`` / ``with_streaming_response``: the caller gets
        # the very object back; the reply is recorded from its body bytes as
        # they are read (however they are read).
        try:
            from ._adapters.raw import watch_raw_response

            reason = watch_raw_response(
                result,
                call.record,
                lambda why: _unrecorded(patch, why),
                usage=call.session._keep_usage,
                track=call.session._track_stream,
            )
        except Exception as exc:
            internal_error(exc, "raw response")
            return result
        if reason is not None:
            _unrecorded(patch, reason)
        return result
    return call.record_result(result)


#: (method, call site) pairs already warned about: each is logged once.
_warned: set[tuple[str, str]] = set()
_MAX_WARNED = 4096
#: Frames of these packages are not the user's call site (each patched
#: library's own package is added when it is patched).
_NOT_CALL_SITES = {"ststrace", "wrapt", "openai", "anthropic", "httpx", "httpx2", "contextlib", "functools", "asyncio"}


def _method_name(patch: _Patch) -> str:
    owner = patch.owner
    if isinstance(owner, ModuleType):
        return f"{owner.__name__}.{patch.attr}"
    module = getattr(owner, "__module__", "") or ""
    return f"{module}.{getattr(owner, '__qualname__', owner)}.{patch.attr}"


def _call_site() -> str:
    try:
        frame = sys._getframe(2)
    except ValueError:
        return "?"
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not isinstance(module, str) or module.split(".", 1)[0] not in _NOT_CALL_SITES:
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def _unrecorded(patch: _Patch, reason: str) -> None:
    """A model call in a session that ststrace saw but cannot record: say so,
    once per method and call site (the rare path, so the stack walk is fine)."""
    try:
        method = _method_name(patch)
        site = _call_site()
        key = (method, site)
        with _lock:
            if key in _warned:
                return
            if len(_warned) >= _MAX_WARNED:
                _warned.clear()
            _warned.add(key)
        logger.warning("ststrace: a call to %s (from %s) was not recorded: %s", method, site, reason)
    except Exception as exc:
        internal_error(exc, "instrumentation warning")


def _is_async(original: Any) -> bool:
    # openai / anthropic decorate their async ``create`` with a plain-function
    # wrapper (``required_args``) that hides the coroutine function beneath.
    if _kind(original) is _ASYNC:
        return True
    try:
        return inspect.iscoroutinefunction(inspect.unwrap(original))
    except Exception:
        return False


_Arguments = Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]


def _llm_patch(patch: _Patch, call_arguments: _Arguments | None = None) -> _Wrapper:
    """The wrapper of one client method: like ``@llm``, but it steps aside inside
    a call that already records (an ``@llm`` function or another patch).

    *call_arguments*, from an integration whose methods take the model or the
    conversation positionally, names them (``(args, kwargs) -> kwargs``) for
    the input reader; the method itself gets the caller's arguments untouched."""

    def begin(session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _LlmCall | None:
        if call_arguments is None:
            return _begin_llm(session, None, True, args, kwargs)
        try:
            named = call_arguments(args, kwargs)
        except Exception as exc:
            internal_error(exc, "instrumented call arguments")
            return _begin_llm(session, None, True, args, kwargs)
        return _begin_llm(session, None, True, (), named)

    if _is_async(patch.original):

        def async_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            session = current.get()
            if session is None or in_llm_call.get() or not patch.active:
                note_missed(patch, session)
                return wrapped(*args, **kwargs)
            coro = wrapped(*args, **kwargs)  # wrong arguments raise here, before anything is recorded
            call = begin(session, args, kwargs)
            if call is None:
                return coro
            return _run_async(coro, call, patch)

        return async_wrapper

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        session = current.get()
        if session is None or in_llm_call.get() or not patch.active:
            note_missed(patch, session)
            return wrapped(*args, **kwargs)
        call = begin(session, args, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        token = in_llm_call.set(True)
        try:
            result = wrapped(*args, **kwargs)
        finally:
            in_llm_call.reset(token)
        if inspect.iscoroutine(result):
            # An async method the static check missed: record when awaited.
            return _run_async(result, call, patch)
        return _settle(call, result, patch)

    return wrapper


#: Request paths of model calls (openai Chat Completions and Responses, anthropic Messages).
_MODEL_PATHS = ("/chat/completions", "/responses", "/messages")


def _model_request_body(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON body of a ``request(cast_to, options, ...)`` that is a model call, else ``None``."""
    options = kwargs["options"] if "options" in kwargs else (args[1] if len(args) > 1 else None)
    method = getattr(options, "method", None)
    url = getattr(options, "url", None)
    if not isinstance(method, str) or method.lower() != "post" or not isinstance(url, str):
        return None
    if not url.split("?", 1)[0].rstrip("/").endswith(_MODEL_PATHS):
        return None
    body = getattr(options, "json_data", None)
    return body if isinstance(body, Mapping) else None


def _request_patch(patch: _Patch) -> _Wrapper:
    """The wrapper of a client's ``request()``, a safety net under the method
    patches: it records a model call they did not see, i.e. one made through a
    reference taken before ``instrument()`` (``with_raw_response`` wrappers,
    which the SDKs cache per client, or a saved ``client.chat.completions.create``).
    A call they record runs with ``in_llm_call`` set, and this steps aside."""
    if _is_async(patch.original):

        def async_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            session = current.get()
            if session is None or in_llm_call.get() or not patch.active:
                return wrapped(*args, **kwargs)
            body = _model_request_body(args, kwargs)
            coro = wrapped(*args, **kwargs)
            if body is None:
                patch.missed = OUTSIDE_METHODS
                return coro
            call = _begin_llm(session, None, True, (), body)
            if call is None:
                return coro
            return _run_async(coro, call, patch)

        return async_wrapper

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        session = current.get()
        if session is None or in_llm_call.get() or not patch.active:
            return wrapped(*args, **kwargs)
        body = _model_request_body(args, kwargs)
        if body is None:
            # A request in a session that no patched method made: not a model
            # call this SDK version makes through the methods we know.
            patch.missed = OUTSIDE_METHODS
            return wrapped(*args, **kwargs)
        call = _begin_llm(session, None, True, (), body)
        if call is None:
            return wrapped(*args, **kwargs)
        token = in_llm_call.set(True)
        try:
            result = wrapped(*args, **kwargs)
        finally:
            in_llm_call.reset(token)
        return _settle(call, result, patch)

    return wrapper


def _unrecorded_patch(patch: _Patch) -> _Wrapper:
    """The wrapper of a model call the SDK-level integration does not record
    (ollama ``generate``, cohere's v1 ``chat``): it only remembers, for an
    empty session's warning, that the call was made and through what."""
    reason = f"through {_method_name(patch)}, which ststrace does not record (wrap that call with @llm)"

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        session = current.get()
        if session is None:
            note_missed(patch, session)
        elif patch.active and not in_llm_call.get():
            patch.missed = reason
        return wrapped(*args, **kwargs)

    return wrapper


_FACTORIES: dict[str, Callable[[_Patch], _Wrapper]] = {"request": _request_patch, "unrecorded": _unrecorded_patch}


async def _run_async(coro: Any, call: _LlmCall, patch: _Patch) -> Any:
    # The flag is set in the awaiting task for the await, so a client awaited
    # inside (litellm's openai client) does not record the reply a second time.
    token = in_llm_call.set(True)
    try:
        result = await coro
    finally:
        in_llm_call.reset(token)
    return _settle(call, result, patch)


note_missed = _empty_sessions.note_missed
OUTSIDE_METHODS = _empty_sessions.OUTSIDE_METHODS


def _report() -> tuple[bool, frozenset[str], frozenset[str], dict[str, str]]:
    with _lock:
        missed: dict[str, str] = {}
        for key, patches in _patched.items():
            for patch in patches:
                if patch.missed is not None:
                    missed.setdefault(key, patch.missed)
                    patch.missed = None
        called = bool(_patched or _wanted or _hooked or _ever_called)
        return called, frozenset(INTEGRATIONS), frozenset(_patched), missed


_empty_sessions.report = _report


def _after_fork_in_child() -> None:
    # A thread of the parent (un)instrumenting at fork() would leave it held.
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
