"""Amazon Bedrock Runtime through botocore (so boto3 too): ``converse``,
``converse_stream``, and ``invoke_model`` / ``invoke_model_with_response_stream``
with an Anthropic Messages body.

botocore builds its client classes at run time from the service model, so the
one place every ``bedrock-runtime`` call passes is
``BaseClient._make_api_call(operation_name, api_params)``; the wrapper steps
aside at once for other services and operations. It is patched when botocore is
imported (the post-import hook), never importing it itself.

The reply comes back as botocore's dict, which the caller gets unchanged
except for the two streaming members: ``response["stream"]`` (``converse_stream``)
and ``response["body"]`` of ``invoke_model_with_response_stream`` become
proxies of their ``EventStream`` that record the reply once it is read, and
``invoke_model``'s ``response["body"]`` is read once here and handed on as an
equal ``StreamingBody`` over those bytes.
"""

from __future__ import annotations

import io
import json
from typing import Any, Callable

from .. import _registry
from .._adapters.bedrock import converse_request, invoke_request
from .._context import current, in_llm_call
from .._unrecorded import note_missed
from .._decorators import _begin_llm, _LlmCall
from .._errors import internal_error

LIBRARY = "botocore"
MIN_VERSION = (1, 34)

TARGETS = [("botocore.client", "BaseClient._make_api_call")]

_SERVICE = "bedrock-runtime"
_CONVERSE = frozenset({"Converse", "ConverseStream"})
_INVOKE = frozenset({"InvokeModel", "InvokeModelWithResponseStream"})

_Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _operation(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any] | None:
    """``(operation, params)`` of a Bedrock Runtime model call, else ``None``."""
    operation = args[0] if args else kwargs.get("operation_name")
    if operation not in _CONVERSE and operation not in _INVOKE:
        return None
    try:
        if instance.meta.service_model.service_name != _SERVICE:
            return None
    except AttributeError:
        return None
    params = args[1] if len(args) > 1 else kwargs.get("api_params")
    return (operation, params) if isinstance(params, dict) else None


def _begin(session: Any, operation: str, params: dict[str, Any]) -> _LlmCall | None:
    try:
        named = converse_request(params) if operation in _CONVERSE else invoke_request(params)
    except Exception as exc:
        internal_error(exc, "bedrock request")
        named = None
    if named is None:
        model = params.get("modelId")
        named = {"model": model} if isinstance(model, str) else {}
    return _begin_llm(session, None, True, (), named)


def _settle(call: _LlmCall, operation: str, response: Any) -> Any:
    if not isinstance(response, dict):
        return response
    try:
        if operation == "Converse":
            call.record_result(response)
        elif operation == "ConverseStream":
            if response.get("stream") is not None:
                response["stream"] = call.record_stream(response["stream"])
        elif operation == "InvokeModelWithResponseStream":
            if response.get("body") is not None:
                response["body"] = call.record_stream(response["body"])
        else:
            _settle_invoke(call, response)
    except Exception as exc:
        internal_error(exc, "bedrock response")
    return response


def _settle_invoke(call: _LlmCall, response: dict[str, Any]) -> None:
    body = response.get("body")
    read = getattr(body, "read", None)
    if read is None:
        return
    from botocore.response import StreamingBody  # type: ignore[import-untyped]

    # Read here, and handed on as an equal body: a StreamingBody is read once.
    # A failed read is the caller's error, raised by the read they would make.
    try:
        data = read()
    except Exception as exc:
        response["body"] = _FailedBody(body, exc)
        return
    response["body"] = StreamingBody(io.BytesIO(data), len(data))
    try:
        reply = json.loads(data)
    except ValueError:
        return
    if isinstance(reply, dict) and reply.get("type") == "message":
        call.record_result(reply)  # an Anthropic Messages reply


class _FailedBody:
    """The body whose read failed here: the caller's read raises that error."""

    def __init__(self, body: Any, exc: Exception) -> None:
        self._body, self._exc = body, exc

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        raise self._exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._body, name)


def make_wrapper(path: str, patch: Any) -> _Wrapper:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        session = current.get()
        if session is None or in_llm_call.get() or not patch.active:
            if session is None and _registry._open and _operation(instance, args, kwargs) is not None:
                note_missed(patch, session)
            return wrapped(*args, **kwargs)
        found = _operation(instance, args, kwargs)
        if found is None:
            return wrapped(*args, **kwargs)
        operation, params = found
        call = _begin(session, operation, params)
        if call is None:
            return wrapped(*args, **kwargs)
        token = in_llm_call.set(True)
        try:
            response = wrapped(*args, **kwargs)
        finally:
            in_llm_call.reset(token)
        return _settle(call, operation, response)

    return wrapper
