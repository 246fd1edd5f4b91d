"""Non-streamed model replies -> one STS assistant message."""

from __future__ import annotations

from typing import Any

from . import gemini
from ._common import Message, get, internal_error
from .messages import message_from_message_like
from .bedrock import is_converse_response, message_from_converse
from .cohere import is_chat_response as is_cohere_response
from .cohere import is_v1_response as is_cohere_v1_response
from .cohere import message_from_v1_response as message_from_cohere_v1
from .cohere import message_from_chat_response as message_from_cohere
from .ollama import is_chat_response as is_ollama_response
from .ollama import message_from_chat_response as message_from_ollama
from .openai_chat import message_from_completion
from .openai_responses import message_from_response
from .tokens import add_tokens
from .usage import attach as attach_usage


def convert(obj: Any) -> Message | None:
    """Like :func:`response_to_message`, but lets internal errors propagate."""
    if obj is None or isinstance(obj, (bytes, bytearray, int, float, bool)):
        return None
    if isinstance(obj, str):
        return {"role": "assistant", "content": obj}
    if type(obj).__name__ == "GenerateContentResponse":
        # google-genai's reply, told by name (the fields the checks below
        # read are all missing on it, and a missing pydantic field is slow).
        return gemini.message_from_response(obj)
    if isinstance(get(obj, "choices"), (list, tuple)):
        return message_from_completion(obj)
    role = get(obj, "role")
    if get(obj, "object") == "response" or (role is None and isinstance(get(obj, "output"), (list, tuple))):
        return message_from_response(obj)
    if role == "assistant" or (role is None and get(obj, "type") == "message"):
        return message_from_message_like(obj)
    if gemini.is_response(obj):
        return gemini.message_from_response(obj)
    if role is None and is_ollama_response(obj):
        return message_from_ollama(obj)
    if role is None and is_cohere_response(obj):
        return message_from_cohere(obj)
    if role is None and is_converse_response(obj):
        return message_from_converse(obj)
    text = get(obj, "generated_text")
    if role is None and isinstance(text, str):
        # Hugging Face TGI's /generate (InferenceClient.text_generation(details=True)).
        msg: Message = {"role": "assistant", "content": text}
        add_tokens(msg, obj, None)
        return msg
    if role is None and is_cohere_v1_response(obj):
        return message_from_cohere_v1(obj)
    return None


def response_to_message(obj: object, *, usage: bool = False) -> Message | None:
    """The STS assistant message for a model reply, or ``None`` if not understood.

    Understands OpenAI ``ChatCompletion`` (and LiteLLM / HF shapes), OpenAI
    Responses ``Response``, Anthropic ``Message``, Gemini ``GenerateContentResponse``,
    Ollama ``ChatResponse``, Cohere ``V2ChatResponse``, Bedrock Converse replies, assistant-message objects and
    dicts (OpenAI or STS shape) and plain strings, as objects or plain dicts.
    With ``usage=True`` the reply's token usage is added as ``usage`` (see
    :mod:`.usage`). Never raises: an internal failure is logged and gives ``None``.
    """
    try:
        message = convert(obj)
        return attach_usage(message, obj) if usage else message
    except Exception:
        internal_error("response_to_message")
        return None
