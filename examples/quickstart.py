"""ststrace quick start: a tiny agent loop with a fake model and two tools.

Run it with ``make demo``, or::

    pip install ststrace
    python examples/quickstart.py

It writes one STS trace into ./traces/, validates it with ststrace's own
validator, renders it to a self-contained HTML page, and prints both paths.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import ststrace
from ststrace import Session, llm, tool


@tool
def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Pretend to look up the weather."""
    return {"city": city, "temperature": 21 if unit == "celsius" else 70, "unit": unit, "sky": "clear"}


@tool
def convert_currency(amount: float, to: str) -> str:
    """Pretend to convert euros."""
    rates = {"USD": 1.08, "GBP": 0.85}
    return f"{amount * rates[to]:.2f} {to}"


@llm(model="fake-model-1")
def call_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A fake model that answers in the OpenAI chat shape: first it asks for
    both tools in parallel, then it answers with their results."""
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return {
            "role": "assistant",
            "content": "Let me check the weather and the exchange rate.",
            "reasoning_content": "The user wants two facts; both tools can run in parallel.",
            "tool_calls": [
                {"id": "call_weather", "type": "function",
                 "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}},
                {"id": "call_fx", "type": "function",
                 "function": {"name": "convert_currency", "arguments": json.dumps({"amount": 100, "to": "USD"})}},
            ],
        }
    weather = json.loads(results[0]["content"])
    return {
        "role": "assistant",
        "content": f"It is {weather['temperature']} degrees and {weather['sky']} in Paris; "
        f"100 EUR is {results[1]['content']}.",
    }


TOOLS = {"get_weather": get_weather, "convert_currency": convert_currency}


def run_agent(question: str) -> str:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful travel assistant."},
        {"role": "user", "content": question},
    ]
    while True:
        reply = call_model(messages)
        messages.append(reply)
        if not reply.get("tool_calls"):
            return str(reply["content"])
        for call in reply["tool_calls"]:
            fn = call["function"]
            result = TOOLS[fn["name"]](**json.loads(fn["arguments"]))
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": result if isinstance(result, str) else json.dumps(result)})


def main() -> int:
    with Session("traces", name="Weather and currency in Paris") as session:
        answer = run_agent("What's the weather in Paris, and what is 100 EUR in USD?")
    print(f"agent answered: {answer}")

    problems = ststrace.validate(session.path)
    for p in problems:
        print(f"{session.path}:{p}")
    if any(p.severity == "error" for p in problems):
        print("trace is NOT valid", file=sys.stderr)
        return 1
    print(f"trace written and valid: {session.path}")

    try:
        from ststrace.cli import main as cli
    except ImportError:  # the viewer is optional in a stripped-down install
        return 0
    html = Path(session.path).with_suffix(".html")
    # `ststrace view` prints the page's path itself; say it once, with a label.
    with contextlib.redirect_stdout(io.StringIO()):
        rendered = cli(["view", str(session.path), "-o", str(html)]) == 0
    if rendered:
        print(f"HTML view: {html}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
