"""Cost of ``ststrace.instrument()`` on a real ``openai`` call, in one process.

Run: ``python benchmarks/bench_instrument.py [--iterations N] [--warmup W] [--check]``

A local fake API server (``ststrace.testing.FakeAPI``, 127.0.0.1) answers
``chat.completions.create``; the official ``openai`` client calls it with a
system prompt, a user turn and two tools offered (the reply carries reasoning,
text and two tool calls). Per call it times, with ``time.perf_counter_ns``:

- inside a ``Session``: the call uninstrumented vs instrumented (the input
  conversation is fingerprinted, the reply converted and one assistant line
  written per call), non-streamed and streamed (``stream=True``, consumed);
- the transport seam (``instrument("httpx2")``, openai 3's HTTP client, with
  the openai integration off): the same calls recorded from the HTTP
  exchange instead, beside the SDK-level rows; a POST to another path
  through the same client (the seam's non-matching path); and the
  SDK-level call with the seam on too (the seam steps aside);
- outside any session: uninstrumented vs instrumented (the patch only checks
  for a session and calls through);
- other providers, inside a ``Session``, when installed: an Amazon Bedrock
  round trip through boto3 (``converse`` and ``converse_stream``, the AWS
  event-stream framing decoded by botocore), instrumented as ``"bedrock"``;
- frameworks, inside a ``Session``, when installed: a LangChain ``ChatOpenAI``
  ``bind_tools(...).invoke`` (which goes through ``with_raw_response``, recorded
  from the body bytes) and a whole OpenAI Agents SDK ``Runner.run_sync`` (two
  Responses calls and two tool runs; instrumented as ``instrument()`` does:
  openai plus the runner integration);
- google-genai, inside a ``Session``, when installed: ``models.generate_content``
  and ``generate_content_stream`` against the fake server's Gemini route, with
  the same system prompt, user turn and two function declarations (the reply
  carries a thought summary, text and two function calls).

The two variants of a pair are interleaved in short blocks, in alternating
order, so drift in machine load hits both alike; the report gives medians, the
added microseconds per call (difference of the medians, the median of the
paired differences, and the difference of the caller thread's CPU time, which a
busy machine disturbs least) and their ratio to the uninstrumented call. The target is an added
cost under 5% of the call. ``--check`` exits with status 1 if an in-session
non-streamed or streamed pair misses it.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import openai  # noqa: E402

import ststrace  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402

TARGET = 0.05

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are a concise assistant. Use the tools for facts."},
    {"role": "user", "content": "What's the weather in Paris, and the time there?"},
]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]},
        },
    }
    for name, arg, description in (
        ("get_weather", "city", "Current weather for a city."),
        ("get_time", "tz", "Local time in an IANA time zone."),
    )
]


class Timings:
    """Per-call wall-clock and caller-thread CPU nanoseconds of one variant."""

    def __init__(self) -> None:
        self.wall: list[int] = []
        self.cpu: list[int] = []


def _time_pair(
    call: Callable[[], Any], iterations: int, warmup: int, block: int, names: tuple[str, ...] = ("openai",)
) -> tuple[Timings, Timings]:
    """Uninstrumented and instrumented timings, interleaved in short blocks.

    Blocks rather than single calls: patching a class clears Python's method
    caches, and re-patching before every call would measure that too. The first
    call of each block is untimed; the order within a round alternates.
    """
    plain, traced = Timings(), Timings()
    wall, cpu = time.perf_counter_ns, time.thread_time_ns
    for _ in range(warmup):
        call()
    rounds = max(1, iterations // block)
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        for instrumented in order:
            if instrumented:
                ststrace.instrument(*names)
            call()
            into = traced if instrumented else plain
            for _ in range(block):
                w0, c0 = wall(), cpu()
                call()
                c1, w1 = cpu(), wall()
                into.wall.append(w1 - w0)
                into.cpu.append(c1 - c0)
            if instrumented:
                ststrace.uninstrument(*names)
    return plain, traced


HEADER = (
    f"{'':<26} {'plain':>9} {'instr.':>9} {'added':>8} {'paired':>8} {'ratio':>8}"
    f" {'added CPU':>10} {'CPU ratio':>10}"
)


def _report(name: str, plain: Timings, traced: Timings) -> float:
    """Print one row (microseconds); return the CPU-based ratio."""
    med = statistics.median
    p, t = med(plain.wall) / 1000, med(traced.wall) / 1000
    added = t - p
    paired = med(b - a for a, b in zip(plain.wall, traced.wall)) / 1000  # i-th call of a block vs i-th
    # CPU time of the calling thread: the work ststrace adds, without the
    # server thread and I/O waits, and far less disturbed by a busy machine.
    added_cpu = (med(traced.cpu) - med(plain.cpu)) / 1000
    cpu_ratio = added_cpu / p
    verdict = "ok" if cpu_ratio < TARGET else "MISSED"
    print(
        f"{name:<26} {p:>9.1f} {t:>9.1f} {added:>+8.1f} {paired:>+8.1f} {added / p * 100:>+7.2f}%"
        f" {added_cpu:>+10.1f} {cpu_ratio * 100:>+9.2f}%  {verdict}"
    )
    return cpu_ratio


def _provider_calls(api: FakeAPI) -> dict[str, tuple[Callable[[], Any], tuple[str, ...], int]]:
    """Like :func:`_framework_calls`, for the other client libraries that are installed."""
    calls: dict[str, tuple[Callable[[], Any], tuple[str, ...], int]] = {}
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    try:
        import boto3
    except ImportError:
        print("(boto3 not installed: Bedrock rows skipped)")
        return calls
    bedrock = boto3.client(
        "bedrock-runtime",
        endpoint_url=api.bedrock_base_url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
    )
    converse: dict[str, Any] = {
        "modelId": "anthropic.claude-bench-v1:0",
        "system": [{"text": MESSAGES[0]["content"]}],
        "messages": [{"role": "user", "content": [{"text": MESSAGES[1]["content"]}]}],
        "toolConfig": {
            "tools": [
                {"toolSpec": {"name": t["function"]["name"], "inputSchema": {"json": t["function"]["parameters"]}}}
                for t in TOOLS
            ]
        },
    }
    calls["Bedrock converse"] = (lambda: bedrock.converse(**converse), ("bedrock",), 2)
    calls["Bedrock converse_stream"] = (
        lambda: list(bedrock.converse_stream(**converse)["stream"]),
        ("bedrock",),
        2,
    )
    return calls


def _framework_calls(api: FakeAPI, stack: ExitStack) -> dict[str, tuple[Callable[[], Any], tuple[str, ...], int]]:
    """name -> (one call, libraries to instrument, fraction of the iterations), for the
    frameworks that are installed."""
    calls: dict[str, tuple[Callable[[], Any], tuple[str, ...], int]] = {}
    try:
        from langchain_core.tools import tool as lc_tool
        from langchain_openai import ChatOpenAI
    except ImportError:
        print("(langchain-openai not installed: LangChain row skipped)")
    else:

        @lc_tool
        def get_weather(city: str) -> str:
            """Current weather for a city."""
            return "Sunny, 21 C"

        @lc_tool
        def get_time(tz: str) -> str:
            """Local time in an IANA time zone."""
            return "15:00"

        llm = ChatOpenAI(model="gpt-bench", base_url=api.openai_base_url, api_key="bench", max_retries=0)
        bound = llm.bind_tools([get_weather, get_time])
        calls["LangChain invoke"] = (lambda: bound.invoke(MESSAGES), ("openai",), 2)
    try:
        os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
        import agents
    except ImportError:
        print("(openai-agents not installed: Agents SDK row skipped)")
    else:
        agents.set_tracing_disabled(True)

        @agents.function_tool(name_override="get_weather")
        def get_weather_tool(city: str) -> str:
            """Current weather for a city."""
            return "Sunny, 21 C"

        @agents.function_tool(name_override="get_time")
        def get_time_tool(tz: str) -> str:
            """Local time in an IANA time zone."""
            return "15:00"

        # run_sync runs on this thread's default event loop every time, so one
        # async client serves every run.
        client = openai.AsyncOpenAI(base_url=api.openai_base_url, api_key="bench", max_retries=0)
        agent = agents.Agent(
            name="weather",
            instructions=MESSAGES[0]["content"],
            tools=[get_weather_tool, get_time_tool],
            model=agents.OpenAIResponsesModel(model="gpt-bench", openai_client=client),
        )
        question = MESSAGES[1]["content"]
        calls["Agents SDK run_sync"] = (
            lambda: agents.Runner.run_sync(agent, question),
            ("openai", "openai_agents"),
            8,
        )
    calls.update(_gemini_calls(api))
    return calls


def _gemini_calls(api: FakeAPI) -> dict[str, tuple[Callable[[], Any], tuple[str, ...], int]]:
    try:
        from google import genai
        from google.genai import types
    except ImportError:
        print("(google-genai not installed: Gemini rows skipped)")
        return {}
    client = genai.Client(api_key="bench", http_options=types.HttpOptions(base_url=api.gemini_base_url))
    declarations = [
        types.FunctionDeclaration(
            name=t["function"]["name"],
            description=t["function"]["description"],
            parameters_json_schema=t["function"]["parameters"],
        )
        for t in TOOLS
    ]
    config = types.GenerateContentConfig(
        system_instruction=MESSAGES[0]["content"],
        tools=[types.Tool(function_declarations=declarations)],
        thinking_config=types.ThinkingConfig(include_thoughts=True),
    )
    question = MESSAGES[1]["content"]

    def generate() -> Any:
        return client.models.generate_content(model="gemini-bench", contents=question, config=config)

    def stream() -> Any:
        return list(client.models.generate_content_stream(model="gemini-bench", contents=question, config=config))

    return {
        "Gemini generate_content": (generate, ("google_genai",), 1),
        "Gemini stream": (stream, ("google_genai",), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000, help="timed calls per variant (default 2000)")
    parser.add_argument("--warmup", type=int, default=100, help="untimed calls first (default 100)")
    parser.add_argument("--block", type=int, default=10, help="calls per variant in a row (default 10)")
    parser.add_argument("--check", action="store_true", help="exit 1 if an in-session pair misses the 5%% target")
    args = parser.parse_args(argv)

    ratios: list[float] = []
    with ExitStack() as stack:
        api = stack.enter_context(FakeAPI())
        client = stack.enter_context(openai.OpenAI(base_url=api.openai_base_url, api_key="bench", max_retries=0))
        directory = stack.enter_context(tempfile.TemporaryDirectory())

        def create() -> Any:
            return client.chat.completions.create(model="gpt-bench", messages=MESSAGES, tools=TOOLS)

        def create_streamed() -> Any:
            return list(client.chat.completions.create(model="gpt-bench", messages=MESSAGES, tools=TOOLS, stream=True))

        def other_post() -> Any:
            # Not a model path: the seam's per-request check, then the call.
            return client._client.post(api.openai_base_url + "/embeddings", json={"model": "e", "input": "x"})

        print(f"openai {openai.__version__}, Python {sys.version.split()[0]}, {args.iterations} calls per variant")
        print("microseconds per call (medians); ratio = added / plain; paired = median of per-pair differences")
        print(HEADER)
        with ststrace.Session(directory, name="bench_instrument") as session:
            gc.collect()
            pair = _time_pair(create, args.iterations, args.warmup, args.block)
            ratios.append(_report("in session, create", *pair))
            gc.collect()
            pair = _time_pair(create_streamed, args.iterations // 2, args.warmup, args.block)
            ratios.append(_report("in session, stream=True", *pair))
            seam = ("httpx2",)
            gc.collect()
            pair = _time_pair(create, args.iterations, args.warmup, args.block, seam)
            ratios.append(_report("seam, create", *pair))
            gc.collect()
            pair = _time_pair(create_streamed, args.iterations // 2, args.warmup, args.block, seam)
            ratios.append(_report("seam, stream=True", *pair))
            gc.collect()
            pair = _time_pair(other_post, args.iterations, args.warmup, args.block, seam)
            _report("seam, other POST", *pair)
            gc.collect()
            pair = _time_pair(create, args.iterations, args.warmup, args.block, ("openai", "httpx2"))
            ratios.append(_report("SDK + seam, create", *pair))
            for name, (call, names, share) in {**_provider_calls(api), **_framework_calls(api, stack)}.items():
                gc.collect()
                pair = _time_pair(call, max(args.block, args.iterations // share), args.warmup // share, args.block, names)
                ratios.append(_report(name, *pair))
        gc.collect()
        _report("no session, create", *_time_pair(create, args.iterations, args.warmup, args.block))
        lines = sum(1 for _ in open(session.path, "rb"))
        print(f"trace lines written: {lines} (1 header + inputs once + one assistant line per instrumented call)")
    missed = any(r >= TARGET for r in ratios)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
