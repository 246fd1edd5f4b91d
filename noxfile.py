"""The compatibility matrix: each integration at its declared minimum and at a
widely pinned middle release, and the core and the main clients on Python 3.10.
The newest releases are the ones ``make test`` runs (the ``test*`` extras).

``make matrix`` runs every session (``nox -db uv``: uv builds each environment
in seconds from its cache; without uv, nox falls back to virtualenv and pip).
One session: ``nox -db uv -s "clients(integration='openai', tier='min')"``;
the list: ``nox -l``. The table of versions is :data:`MATRIX`; the README of
the range is ``docs/compatibility.md`` (keep both in step).
"""

from __future__ import annotations

import glob
import os
import shutil

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

#: What every session's tests need besides the packages under test.
TEST_TOOLS = ["pytest>=8", "pytest-asyncio>=0.23", "hypothesis>=6.100"]

#: integration -> tier -> the pins installed beside ``ststrace`` (``min`` is the
#: floor in pyproject.toml and the integration's MIN_VERSION; ``middle`` a
#: release many projects pin).
MATRIX: dict[str, dict[str, list[str]]] = {
    # openai < 1.55 passes httpx's ``proxies=``, which httpx 0.28 removed.
    "openai": {"min": ["openai==1.40.0", "httpx<0.28"], "middle": ["openai==1.109.1"]},
    "anthropic": {"min": ["anthropic==0.40.0", "httpx<0.28"], "middle": ["anthropic==0.69.0"]},
    # huggingface_hub < 1 runs AsyncInferenceClient on aiohttp.
    "huggingface_hub": {"min": ["huggingface_hub==0.24.0", "aiohttp"], "middle": ["huggingface_hub==0.35.3", "aiohttp"]},
    "litellm": {"min": ["litellm==1.53.1"], "middle": ["litellm==1.77.7"]},
    "groq": {"min": ["groq==0.9.0", "httpx<0.28"]},
    "cerebras": {"min": ["cerebras-cloud-sdk==1.0.0", "httpx<0.28"]},
    "together": {"min": ["together==2.0.0"]},
    "ollama": {"min": ["ollama==0.4.0"]},
    "mistralai": {"min": ["mistralai==3.0.0"]},
    "cohere": {"min": ["cohere==5.13.0"]},
    "bedrock": {"min": ["boto3==1.34.0", "botocore==1.34.0"]},
    "google_genai": {"min": ["google-genai==1.0.0"], "middle": ["google-genai==1.40.0"]},
}

#: The frameworks: their own test files, at the tiers given, with a ``-k``
#: selection where an older release lacks what a test needs (the rest of the
#: file is tested at the newest only; docs/compatibility.md says what).
FRAMEWORKS: dict[str, tuple[list[str], dict[str, list[str]]]] = {
    "openai_agents": (
        ["tests/frameworks/test_agents_sdk.py"],
        {"min": ["openai-agents==0.2.0"], "middle": ["openai-agents==0.3.3"]},
    ),
    "smolagents": (
        ["tests/frameworks/test_smolagents.py"],
        {"min": ["smolagents==1.20.0", "litellm==1.77.7"], "middle": ["smolagents==1.22.0", "litellm==1.77.7"]},
    ),
    "llama_index": (
        ["tests/frameworks/test_llamaindex.py"],
        {"min": ["llama-index-core==0.14.0", "llama-index-llms-litellm", "litellm==1.77.7"]},
    ),
    # google-adk < 1.30 runs an AgentTool's streamed child outside its
    # session (1.10, 1.20) and 1.0 cannot read string annotations.
    "google_adk": (["tests/frameworks/test_google_adk.py"], {"min": ["google-adk==1.30.0"]}),
    # claude-agent-sdk before 0.2.170 bundles a CLI that sends other requests
    # (a <system-reminder> block in the first user message, cache_control),
    # and before 0.2 one that needs mcp<2.
    "claude_agent_sdk": (["tests/frameworks/test_claude_agent_sdk.py"], {"min": ["claude-agent-sdk==0.2.170"]}),
    "dspy": (["tests/frameworks/test_dspy.py"], {"min": ["dspy==3.4.0"]}),
    "langgraph": (
        ["tests/frameworks/test_langchain.py"],
        {"middle": ["langchain-core>=0.3,<0.4", "langchain-openai>=0.3,<0.4", "langgraph>=0.6,<0.7"]},
    ),
}

#: (framework, tier) -> the ``-k`` expression of the tests that run there.
SELECT: dict[tuple[str, str], str] = {
    # Before 0.4: no blocking guardrails, agents-as-tools without the run
    # context ststrace links child sessions by, Runner.run_sync needing an
    # event loop in the main thread, and (0.2) no reasoning items on the
    # Chat Completions model.
    ("openai_agents", "min"): "(test_runner_run and not sync) or test_traced_tool or test_handoff"
    " or max_turns_exceeded_streamed or test_a_run_inside",
    ("openai_agents", "middle"): "(test_runner_run and not sync) or test_traced_tool or test_handoff"
    " or max_turns_exceeded_streamed or test_a_run_inside or test_chat_completions_model",
    # Managed agents as linked child sessions, and a CodeAgent's code run with
    # ststrace's @tool, are recorded as tested from smolagents 1.23 on.
    ("smolagents", "min"): "not managed_agent and not child_session_hook and not code_agent_with_ststrace_tool",
    ("smolagents", "middle"): "not managed_agent and not child_session_hook and not code_agent_with_ststrace_tool",
    # llama-index-core 0.14.0's FunctionAgent answers with the first of two
    # parallel tool results only, and its ReActAgent puts the system prompt
    # elsewhere: those two tests pin the newest release's behaviour.
    ("llama_index", "min"): "not test_react_agent_records_actions_as_tool_calls"
    " and not (test_function_agent and litellm and not stream and not follow and not ststrace)",
    # google-adk 2.6 and older (2.13 is right; between, untested) run the sync
    # Runner.run's event loop in a plain thread, outside the session (nothing
    # recorded; the empty-session warning), and answer parallel calls in
    # another order when one raises.
    ("google_adk", "min"): "not test_the_sync_runner and not test_a_tool_that_raises",
    # LangGraph 0.6's ToolNode turns a tool's exception into an error message by default.
    ("langgraph", "middle"): "not raises_out_of_the_graph",
}


def _tests(integration: str) -> list[str]:
    return ["tests/integrations/test_versions.py", "-k", integration]


def _pytest(session: nox.Session, *args: str) -> None:
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *args)


@nox.session
@nox.parametrize(
    ("integration", "tier"),
    [(name, tier) for name, tiers in MATRIX.items() for tier in tiers],
    ids=[f"{name}-{tier}" for name, tiers in MATRIX.items() for tier in tiers],
)
def clients(session: nox.Session, integration: str, tier: str) -> None:
    """One client library at one version: one call each way, recorded."""
    session.install("-e", ".", *TEST_TOOLS, *MATRIX[integration][tier])
    _pytest(session, *_tests(integration))


@nox.session
@nox.parametrize(
    ("framework", "tier"),
    [(name, tier) for name, (_, tiers) in FRAMEWORKS.items() for tier in tiers],
    ids=[f"{name}-{tier}" for name, (_, tiers) in FRAMEWORKS.items() for tier in tiers],
)
def frameworks(session: nox.Session, framework: str, tier: str) -> None:
    """One agent framework at one version: its own test file."""
    files, tiers = FRAMEWORKS[framework]
    session.install("-e", ".", *TEST_TOOLS, *tiers[tier])
    select = SELECT.get((framework, tier))
    _pytest(session, *files, *(["-k", select] if select else []))


def _python310() -> str:
    """A Python 3.10 interpreter: ``$STSTRACE_PY310``, ``python3.10`` on PATH, or pyenv's."""
    found = os.environ.get("STSTRACE_PY310") or shutil.which("python3.10")
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.10*/bin/python3.10")))
    if pyenv and (found is None or "/shims/" in found):
        return pyenv[-1]  # pyenv's shim fails unless 3.10 is selected
    return found or "3.10"


#: The core's own tests (no client library needed).
CORE_TESTS = [
    "tests/core/test_session.py",
    "tests/core/test_writer.py",
    "tests/core/test_encode.py",
    "tests/core/test_context_propagation.py",
    "tests/reader/test_reader.py",
    "tests/core/test_tool_kinds.py",
    "tests/test_import.py",
]


@nox.session(python=_python310())
def py310(session: nox.Session) -> None:
    """Python 3.10 at the runtime floors (wrapt 1.17, orjson 3.9): the core,
    and the main clients at their newest."""
    session.install(
        "-e", ".", *TEST_TOOLS, "wrapt==1.17.0", "orjson==3.9.0", "openai==3.57.0", "anthropic==2.14.0",
        "attrs", "pydantic>=2", "numpy",
    )
    _pytest(session, *CORE_TESTS, "tests/integrations/test_versions.py")
