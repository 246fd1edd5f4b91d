# Two commands do all the set-up on a fresh machine with Python and pip:
#   make demo   - runs examples/quickstart.py (writes, validates and renders a trace);
#                 installs only ststrace and its two dependencies (wrapt, orjson)
#   make test   - runs the whole test suite (10-15 min on 2 cores, ~3 GB for two venvs);
#                 installs the test extras; lists the reasons of skipped tests
# Both create .venv when it is missing and reinstall when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ststrace-installed
CORE   := $(VENV)/.ststrace-core
# CrewAI and LlamaIndex's OpenAI LLM need openai<3 while the main test
# environment pins openai 3: their tests run in .venv-openai2 (the
# test-openai2 extra), first, so the main suite's summary is the last line.
OAI2   := .venv-openai2
OAI2_STAMP := $(OAI2)/.ststrace-installed
OAI2_TESTS := tests/frameworks/test_crewai.py tests/frameworks/test_llamaindex.py
# google-genai pins tenacity below the main environment's and google-adk needs
# google-genai<3: their tests run in .venv-google (the test-google extra).
GOOGLE := .venv-google
GOOGLE_STAMP := $(GOOGLE)/.ststrace-installed
GOOGLE_TESTS := tests/test_integration_google_genai.py tests/test_replay_google.py tests/frameworks/test_google_adk.py tests/frameworks/test_langchain_google_genai.py tests/test_http_seam.py
# google-genai 3 (the latest major) and together 3.x (its rich and filelock
# pins are below the main environment's) in .venv-side (the test-side extra).
SIDE := .venv-side
SIDE_STAMP := $(SIDE)/.ststrace-installed
SIDE_TESTS := tests/test_integration_google_genai.py tests/test_replay_google.py tests/test_integration_together.py tests/test_http_seam.py
# Arize Phoenix pins anthropic<2: its test (ststrace otlp into a real Phoenix
# server on 127.0.0.1) runs in .venv-phoenix (the test-phoenix extra), also first.
PHX    := .venv-phoenix
PHX_STAMP := $(PHX)/.ststrace-installed
PHX_TESTS := tests/test_otel_phoenix.py
# The npm coding agents the hook tests run (tests/test_hooks_gemini.py), pinned
# in tests/agents_npm.py, installed once into .agents/ (the tests install them
# there themselves when missing; without npm they skip and say so).
AGENTS_STAMP := .agents/.installed

# TRL's trainers (DPO, KTO, SFT) on exported rows, one step each on CPU on a tiny
# random model, nothing downloaded: .venv-train (the test-train extra, ~1.5 GB with
# torch's CPU build; pip takes it from /opt/wheels where this machine keeps it).
TRAIN  := .venv-train
TRAIN_STAMP := $(TRAIN)/.ststrace-installed
TRAIN_FIND := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)

.PHONY: demo test test-train docs matrix agents bench typecheck clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

# The demo needs nothing but the package itself; a venv that already has the
# test extras (make test ran first) has it too.
$(CORE): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -f $(STAMP) -a $(STAMP) -nt pyproject.toml || $(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $(CORE)

demo: $(CORE)
	$(BIN)/python examples/quickstart.py

# Every side environment .venv-NAME is built from the extra test-NAME.
.venv-%/.ststrace-installed: pyproject.toml
	test -x .venv-$*/bin/python || $(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test-$*]'
	touch $@

$(AGENTS_STAMP): tests/agents_npm.py
	if command -v npm >/dev/null; then $(PYTHON) -c 'import sys; sys.path.insert(0, "tests"); import agents_npm as a; [a.agent_bin(n) for n in a.PINS]' && touch $@; \
	else echo "npm is missing: the tests that run npm coding agents will skip"; fi

agents: $(AGENTS_STAMP)

# -rs: the reason of every skipped test (a missing browser is also said in one line).
# About 10-15 minutes on 2 cores; see README "Set-up" for time and disk.
test: $(STAMP) $(OAI2_STAMP) $(GOOGLE_STAMP) $(SIDE_STAMP) $(PHX_STAMP) $(AGENTS_STAMP)
	$(OAI2)/bin/python -m pytest -q -rs -p no:cacheprovider $(OAI2_TESTS)
	$(GOOGLE)/bin/python -m pytest -q -rs -p no:cacheprovider $(GOOGLE_TESTS)
	$(SIDE)/bin/python -m pytest -q -rs -p no:cacheprovider $(SIDE_TESTS)
	$(PHX)/bin/python -m pytest -q -rs -p no:cacheprovider $(PHX_TESTS)
	$(BIN)/python -m pytest -q -rs

# The documentation site (MkDocs, mkdocs-material, mkdocstrings) from the `docs`
# extra in .venv-docs, with uv where it is installed (pip otherwise); --strict:
# a broken link or anchor, a page left out of the nav or an unreadable docstring
# fails the build. Output in site/.
DOCS := .venv-docs
$(DOCS)/.ststrace-installed: pyproject.toml
	if command -v uv >/dev/null 2>&1; then \
	  { test -x $(DOCS)/bin/python || uv venv -q $(DOCS) --python $(PYTHON); } && \
	  uv pip install -q --python $(DOCS)/bin/python -e '.[docs]'; \
	else \
	  { test -x $(DOCS)/bin/python || $(PYTHON) -m venv $(DOCS); } && \
	  $(DOCS)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[docs]'; \
	fi
	touch $@

docs: $(DOCS)/.ststrace-installed
	NO_MKDOCS_2_WARNING=1 $(DOCS)/bin/python -m mkdocs build --strict --site-dir site

$(TRAIN_STAMP): pyproject.toml
	test -x $(TRAIN)/bin/python || $(PYTHON) -m venv $(TRAIN)
	$(TRAIN)/bin/python -m pip install --quiet --disable-pip-version-check $(TRAIN_FIND) -e '.[test-train]'
	$(TRAIN)/bin/python -c "import torch, sys; sys.exit(0 if torch.version.cuda is None else 'torch in $(TRAIN) is a CUDA build: expected the CPU one')"
	touch $@

test-train: $(TRAIN_STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(TRAIN)/bin/python -m pytest -q -rs -p no:cacheprovider tests/train
# The compatibility matrix (noxfile.py, docs/compatibility.md): each integration
# at its declared minimum and a widely pinned middle release, and Python 3.10;
# `make test` runs the newest. nox builds each environment with uv when it is
# installed (seconds from its cache), else with virtualenv and pip.
matrix: $(STAMP)
	$(BIN)/python -m nox -db $$(command -v uv >/dev/null && echo uv || echo virtualenv)

typecheck: $(STAMP)
	$(BIN)/python -m mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(OAI2) $(GOOGLE) $(SIDE) $(PHX) $(TRAIN) $(DOCS) site .venv-crewai .agents .nox traces .pytest_cache .mypy_cache
