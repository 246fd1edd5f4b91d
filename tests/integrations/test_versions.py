"""Every declared version records: one model call through each client library,
sync and async (streamed where the library streams the same way in every
supported release), with ``ststrace.instrument()`` alone, against the local fake
server. Only what every supported release of the library has is used, so the
compatibility matrix (``make matrix``: ``noxfile.py``) runs this file at each
integration's declared minimum, a widely pinned middle release and the newest;
``make test`` runs it at the newest. A library that is not installed skips.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ststrace
from ststrace import Session
from ststrace.testing import FakeAPI
from test_decorators_helpers import valid_messages
from test_instrument_helpers import instrumented

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")

MODEL = "gpt-test"
PROMPT = "Say hello."
MESSAGES = [{"role": "user", "content": PROMPT}]

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

Call = Callable[[FakeAPI], Any]


def _drain(result: Any) -> Any:
    """Read a stream to its end (what the caller does), or pass a reply through."""
    if hasattr(result, "__iter__") and not isinstance(result, (dict, str, bytes)) and not hasattr(result, "choices"):
        return list(result)
    return result


async def _adrain(result: Any) -> Any:
    if hasattr(result, "__aiter__"):
        return [x async for x in result]
    return result


# --------------------------------------------------------------------------- the calls


def openai_calls() -> dict[str, Call]:
    openai = pytest.importorskip("openai")

    def sync(api: FakeAPI, **kw: Any) -> Any:
        c = openai.OpenAI(base_url=api.openai_base_url, api_key="test", max_retries=0, timeout=5.0)
        return _drain(c.chat.completions.create(model=MODEL, messages=MESSAGES, **kw))

    async def asyn(api: FakeAPI) -> Any:
        c = openai.AsyncOpenAI(base_url=api.openai_base_url, api_key="test", max_retries=0, timeout=5.0)
        return await _adrain(await c.chat.completions.create(model=MODEL, messages=MESSAGES))

    return {"sync": sync, "stream": lambda api: sync(api, stream=True), "async": asyn}


def anthropic_calls() -> dict[str, Call]:
    anthropic = pytest.importorskip("anthropic")
    kw = dict(model=MODEL, max_tokens=64, messages=MESSAGES)

    def sync(api: FakeAPI, **more: Any) -> Any:
        c = anthropic.Anthropic(base_url=api.anthropic_base_url, api_key="test", max_retries=0, timeout=5.0)
        return _drain(c.messages.create(**kw, **more))

    async def asyn(api: FakeAPI) -> Any:
        c = anthropic.AsyncAnthropic(base_url=api.anthropic_base_url, api_key="test", max_retries=0, timeout=5.0)
        return await c.messages.create(**kw)

    return {"sync": sync, "stream": lambda api: sync(api, stream=True), "async": asyn}


def huggingface_hub_calls() -> dict[str, Call]:
    hub = pytest.importorskip("huggingface_hub")

    def sync(api: FakeAPI) -> Any:
        return hub.InferenceClient(base_url=api.hf_base_url, api_key="test", timeout=5).chat_completion(MESSAGES)

    async def asyn(api: FakeAPI) -> Any:
        c = hub.AsyncInferenceClient(base_url=api.hf_base_url, api_key="test", timeout=5)
        return await c.chat_completion(MESSAGES)

    return {"sync": sync, "async": asyn}


def litellm_calls() -> dict[str, Call]:
    litellm = pytest.importorskip("litellm")

    def kw(api: FakeAPI) -> dict[str, Any]:
        return dict(model=f"openai/{MODEL}", messages=MESSAGES, api_base=api.openai_base_url, api_key="test", timeout=5)

    async def asyn(api: FakeAPI) -> Any:
        return await litellm.acompletion(**kw(api))

    return {"sync": lambda api: litellm.completion(**kw(api)), "async": asyn}


def _stainless(module: str, cls: str, base: Callable[[FakeAPI], str], **options: Any) -> dict[str, Call]:
    sdk = pytest.importorskip(module)

    def client(api: FakeAPI, name: str) -> Any:
        return getattr(sdk, name)(base_url=base(api), api_key="test", max_retries=0, timeout=5.0, **options)

    def sync(api: FakeAPI, **kw: Any) -> Any:
        return _drain(client(api, cls).chat.completions.create(model=MODEL, messages=MESSAGES, **kw))

    async def asyn(api: FakeAPI) -> Any:
        return await client(api, "Async" + cls).chat.completions.create(model=MODEL, messages=MESSAGES)

    return {"sync": sync, "stream": lambda api: sync(api, stream=True), "async": asyn}


def groq_calls() -> dict[str, Call]:
    return _stainless("groq", "Groq", lambda api: api.url)


def cerebras_calls() -> dict[str, Call]:
    import inspect

    sdk = pytest.importorskip("cerebras.cloud.sdk")
    # Newer releases open a connection to their API at construction unless told not to.
    warm = "warm_tcp_connection" in inspect.signature(sdk.Cerebras.__init__).parameters
    return _stainless("cerebras.cloud.sdk", "Cerebras", lambda api: api.url, **({"warm_tcp_connection": False} if warm else {}))


def together_calls() -> dict[str, Call]:
    return _stainless("together", "Together", lambda api: api.openai_base_url)


def ollama_calls() -> dict[str, Call]:
    ollama = pytest.importorskip("ollama")

    def sync(api: FakeAPI, **kw: Any) -> Any:
        return _drain(ollama.Client(host=api.ollama_base_url, timeout=5.0).chat(model=MODEL, messages=MESSAGES, **kw))

    async def asyn(api: FakeAPI) -> Any:
        return await ollama.AsyncClient(host=api.ollama_base_url, timeout=5.0).chat(model=MODEL, messages=MESSAGES)

    return {"sync": sync, "stream": lambda api: sync(api, stream=True), "async": asyn}


def mistralai_calls() -> dict[str, Call]:
    pytest.importorskip("mistralai.client")
    from mistralai.client import Mistral

    def client(api: FakeAPI) -> Any:
        return Mistral(api_key="test", server_url=api.mistral_base_url, timeout_ms=5000)

    async def asyn(api: FakeAPI) -> Any:
        return await client(api).chat.complete_async(model=MODEL, messages=MESSAGES)

    return {"sync": lambda api: client(api).chat.complete(model=MODEL, messages=MESSAGES), "async": asyn}


def cohere_calls() -> dict[str, Call]:
    cohere = pytest.importorskip("cohere")

    def client(api: FakeAPI, name: str) -> Any:
        return getattr(cohere, name)(api_key="test", base_url=api.cohere_base_url, timeout=5.0)

    async def asyn(api: FakeAPI) -> Any:
        return await client(api, "AsyncClientV2").chat(model=MODEL, messages=MESSAGES)

    return {"sync": lambda api: client(api, "ClientV2").chat(model=MODEL, messages=MESSAGES), "async": asyn}


def bedrock_calls() -> dict[str, Call]:
    # boto3, as users build the client (the extra's floor is boto3's too); the
    # integration patches botocore underneath it.
    boto3 = pytest.importorskip("boto3")
    from botocore.config import Config

    def client(api: FakeAPI) -> Any:
        return boto3.session.Session().client(
            "bedrock-runtime",
            endpoint_url=api.bedrock_base_url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=5),
        )

    def invoke(api: FakeAPI) -> Any:
        body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64, "messages": MESSAGES}
        return json.loads(client(api).invoke_model(modelId=MODEL, body=json.dumps(body))["body"].read())

    calls: dict[str, Call] = {"invoke_model": invoke}
    probe = boto3.session.Session().client(
        "bedrock-runtime", endpoint_url="http://127.0.0.1:9", region_name="us-east-1",
        aws_access_key_id="test", aws_secret_access_key="test",
    )
    if hasattr(probe, "converse"):  # botocore >= 1.34.116: the Converse API
        calls["converse"] = lambda api: client(api).converse(
            modelId=MODEL, messages=[{"role": "user", "content": [{"text": PROMPT}]}]
        )
    return calls


def google_genai_calls() -> dict[str, Call]:
    pytest.importorskip("google.genai")
    from google import genai
    from google.genai import types

    def client(api: FakeAPI) -> Any:
        return genai.Client(api_key="test", http_options=types.HttpOptions(base_url=api.gemini_base_url, timeout=5000))

    # The client is kept for the call: google-genai >= 1.3x closes its HTTP
    # client when the Client object is collected.
    def sync(api: FakeAPI) -> Any:
        c = client(api)
        return c.models.generate_content(model=MODEL, contents=PROMPT)

    def stream(api: FakeAPI) -> Any:
        c = client(api)
        return list(c.models.generate_content_stream(model=MODEL, contents=PROMPT))

    async def asyn(api: FakeAPI) -> Any:
        c = client(api)
        return await c.aio.models.generate_content(model=MODEL, contents=PROMPT)

    return {"sync": sync, "stream": stream, "async": asyn}


CLIENTS: dict[str, Callable[[], dict[str, Call]]] = {
    "openai": openai_calls,
    "anthropic": anthropic_calls,
    "huggingface_hub": huggingface_hub_calls,
    "litellm": litellm_calls,
    "groq": groq_calls,
    "cerebras": cerebras_calls,
    "together": together_calls,
    "ollama": ollama_calls,
    "mistralai": mistralai_calls,
    "cohere": cohere_calls,
    "bedrock": bedrock_calls,
    "google_genai": google_genai_calls,
}
_CHAT = ("sync", "stream", "async")
#: The calls each library's test makes (checked against CLIENTS in the test),
#: so no case is generated for a call a library has not got.
VARIANTS: dict[str, tuple[str, ...]] = {
    **{name: _CHAT for name in CLIENTS},
    "huggingface_hub": ("sync", "async"),
    "litellm": ("sync", "async"),
    "mistralai": ("sync", "async"),
    "cohere": ("sync", "async"),
    "bedrock": ("invoke_model", "converse"),
}


@pytest.fixture(autouse=True)
def _offline_clients(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(var, raising=False)
    yield


@pytest.mark.parametrize(("name", "variant"), [(n, v) for n in sorted(CLIENTS) for v in VARIANTS[n]])
def test_instrument_alone_records_the_call(name: str, variant: str, fake_api: FakeAPI, tmp_path: Path) -> None:
    """``instrument()`` with no names, one call in a session: the prompt and the
    reply are recorded, once (the installed version of the library)."""
    calls = CLIENTS[name]()
    assert set(calls) <= set(VARIANTS[name]), f"VARIANTS[{name!r}] is missing {set(calls) - set(VARIANTS[name])}"
    if variant not in calls:
        # Only the Converse API, which botocore gained in 1.34.116.
        assert (name, variant) == ("bedrock", "converse")
        pytest.skip("this botocore has no Converse API (1.34.116 and later)")
    path = tmp_path / "trace.jsonl"
    with instrumented():
        assert name in ststrace.instrument()
        with Session(path):
            result = calls[variant](fake_api)
            if asyncio.iscoroutine(result):
                asyncio.run(result)  # the task starts with a copy of this context: the session
    assert len(fake_api.requests) == 1
    messages = valid_messages(path)
    assert [m["role"] for m in messages] == ["user", "assistant"], messages
    assert messages[0]["content"] == PROMPT
    assert isinstance(messages[1]["content"], str) and messages[1]["content"], messages[1]
