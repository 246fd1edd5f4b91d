"""A tool-using agent on Amazon Bedrock's Converse API through boto3, traced by ststrace.

Tracing adds one line, ``ststrace.instrument()``, and a ``Session`` around the
run: botocore is patched when it is imported, each ``converse`` call records
the new input messages and the reply (text, reasoning, ``toolUseId``\\ s, usage),
and each tool result is recorded from the next call's input, paired by id.
The tools are not decorated.

Run it with::

    pip install 'ststrace[bedrock]'
    python examples/bedrock_agent.py

With AWS credentials in the environment (``AWS_ACCESS_KEY_ID``) it talks to
Bedrock (model from ``BEDROCK_MODEL_ID``, region from ``AWS_REGION``, default
us-east-1). Without them it starts ststrace's local fake server on 127.0.0.1,
which speaks Bedrock Runtime, so the example runs offline. Either way it prints
the answer and the path of the trace file.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from typing import Any

import ststrace

ststrace.instrument()

import boto3  # noqa: E402  (imported after instrument() on purpose: it needs no special order)

QUESTION = "What's the weather in Paris right now, and what time is it there?"


def get_weather(city: str) -> str:
    return {"paris": "Sunny, 21 C", "london": "Light rain, 14 C"}.get(city.strip().lower(), "Cloudy, 16 C")


def get_time(tz: str) -> str:
    return "15:00" if tz == "Europe/Paris" else "unknown"


TOOLS = {"get_weather": get_weather, "get_time": get_time}
TOOL_CONFIG = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
            }
        },
        {
            "toolSpec": {
                "name": "get_time",
                "description": "Local time in an IANA time zone.",
                "inputSchema": {"json": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}},
            }
        },
    ]
}


def run_agent(client: Any, model_id: str, question: str, max_turns: int = 6) -> str:
    """Call the model, run the tools it asks for, repeat until it answers."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": question}]}]
    for _ in range(max_turns):
        reply = client.converse(
            modelId=model_id,
            system=[{"text": "You are a concise assistant. Use the tools for facts."}],
            messages=messages,
            toolConfig=TOOL_CONFIG,
        )
        content = reply["output"]["message"]["content"]
        messages.append({"role": "assistant", "content": content})
        uses = [block["toolUse"] for block in content if "toolUse" in block]
        if not uses:
            return "".join(block.get("text", "") for block in content)
        results = []
        for use in uses:
            output = TOOLS[use["name"]](**use["input"])
            results.append({"toolResult": {"toolUseId": use["toolUseId"], "content": [{"text": output}]}})
        messages.append({"role": "user", "content": results})
    return "(no answer after the maximum number of turns)"


def main() -> None:
    with ExitStack() as stack:
        if os.environ.get("AWS_ACCESS_KEY_ID"):
            client = boto3.client("bedrock-runtime", region_name=os.environ.get("AWS_REGION", "us-east-1"))
            model_id = os.environ.get("BEDROCK_MODEL_ID", "anthropic.claude-3-5-haiku-20241022-v1:0")
        else:
            from ststrace.testing import FakeAPI

            api = stack.enter_context(FakeAPI())
            print(f"AWS_ACCESS_KEY_ID is not set: using the local fake Bedrock Runtime at {api.bedrock_base_url}")
            os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
            client = boto3.client(
                "bedrock-runtime",
                endpoint_url=api.bedrock_base_url,
                region_name="us-east-1",
                aws_access_key_id="fake",
                aws_secret_access_key="fake",
            )
            model_id = "fake.model-v1:0"

        with ststrace.Session(name="bedrock weather agent") as s:
            answer = run_agent(client, model_id, QUESTION)

    print(answer)
    print(f"trace: {s.path}")


if __name__ == "__main__":
    main()
