# Two commands do all the set-up on a fresh machine with Python and pip:
#   make demo   - runs examples/quickstart.py (writes, validates and renders a trace);
#                 installs only ststrace and its two dependencies (wrapt, orjson)
#   make test   - runs the whole test suite; installs the test extras; lists the
#                 reasons of skipped tests. Measured on a fresh clone with a warm uv
#                 cache, 2 cores (AMD EPYC), on a machine shared with other jobs
#                 (load average 4.5-14.6, median 9): 19 min in all, ~1 min of it
#                 building the five environments (2.2 GB as du counts; uv hard-links packages
#                 from its cache, so they share one copy), 11 min 21 s for the main
#                 suite on two xdist workers, 3 min for the serial pass's collection
#                 (since cut to one file). At load 1.5-6: `make test` 7 min 32 s with
#                 the environments reinstalled, the main suite 3 min 45 s.
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
GOOGLE_TESTS := tests/integrations/test_integration_google_genai.py tests/replay/test_replay_google.py tests/frameworks/test_google_adk.py tests/frameworks/test_langchain_google_genai.py tests/integrations/test_http_seam.py
# google-genai 3 (the latest major) and together 3.x (its rich and filelock
# pins are below the main environment's) in .venv-side (the test-side extra).
SIDE := .venv-side
SIDE_STAMP := $(SIDE)/.ststrace-installed
SIDE_TESTS := tests/integrations/test_integration_google_genai.py tests/replay/test_replay_google.py tests/integrations/test_integration_together.py tests/integrations/test_http_seam.py
# Arize Phoenix pins anthropic<2: its test (ststrace otlp into a real Phoenix
# server on 127.0.0.1) runs in .venv-phoenix (the test-phoenix extra), also first.
PHX    := .venv-phoenix
PHX_STAMP := $(PHX)/.ststrace-installed
PHX_TESTS := tests/otel/test_otel_phoenix.py
# The npm coding agents the hook tests run (tests/hooks/test_hooks_gemini.py), pinned
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

# Environments are built with uv where it is on PATH (decided once, here): it
# installs from its cache by hard links, so the five environments share one
# copy of each package on disk and a warm rebuild takes seconds, not minutes.
# Without uv, `make test` first installs it into .venv with pip (one package,
# no dependencies, pinned: UV_PIN) and builds everything with that copy;
# `make demo` never needs it and falls back to plain venv + pip.
UV_PIN := uv==0.13.9
SYS_UV := $(shell command -v uv 2>/dev/null)
ifneq ($(SYS_UV),)
UV     := $(SYS_UV)
UV_DEP :=
else
UV     := $(abspath $(BIN))/uv
UV_DEP := $(BIN)/uv
endif
# $(call venv,DIR): create DIR when it has no python; $(call pip,DIR,ARGS): install into it.
venv = test -x $(1)/bin/python || $(UV) venv --quiet --python $(PYTHON) $(1)
pip  = $(UV) pip install --quiet --python $(1)/bin/python $(2)

$(BIN)/uv:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check '$(UV_PIN)'

$(STAMP): pyproject.toml | $(UV_DEP)
	$(call venv,$(VENV))
	$(call pip,$(VENV),-e '.[dev]')
	touch $(STAMP)

# The demo needs nothing but the package itself; a venv that already has the
# test extras (make test ran first) has it too.
$(CORE): pyproject.toml
ifneq ($(SYS_UV),)
	$(call venv,$(VENV))
	test -f $(STAMP) -a $(STAMP) -nt pyproject.toml || $(call pip,$(VENV),-e .)
else
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -f $(STAMP) -a $(STAMP) -nt pyproject.toml || $(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
endif
	touch $(CORE)

demo: $(CORE)
	$(BIN)/python examples/quickstart.py

# Every side environment .venv-NAME is built from the extra test-NAME.
.venv-%/.ststrace-installed: pyproject.toml | $(UV_DEP)
	$(call venv,.venv-$*)
	$(call pip,.venv-$*,-e '.[test-$*]')
	touch $@

$(AGENTS_STAMP): tests/agents_npm.py
	if command -v npm >/dev/null; then $(PYTHON) -c 'import sys; sys.path.insert(0, "tests"); import agents_npm as a; [a.agent_bin(n) for n in a.PINS]' && touch $@; \
	else echo "npm is missing: the tests that run npm coding agents will skip"; fi

agents: $(AGENTS_STAMP)

# -rs: the reason of every skipped test (a missing browser is also said in one line).
# The main suite runs on every core (pytest-xdist, -n auto, whole files per
# worker); the tests marked `serial` (they measure time or load, or need the
# machine to themselves) run after it in one process. See the top for time and disk.
PYTEST := -m pytest -q -rs -p no:cacheprovider
# Only the files that hold serial tests: collecting the whole suite again costs minutes.
SERIAL_FILES = $(shell grep -rl --include='test_*.py' 'pytest.mark.serial' tests)
test: $(STAMP) $(OAI2_STAMP) $(GOOGLE_STAMP) $(SIDE_STAMP) $(PHX_STAMP) $(AGENTS_STAMP)
	$(OAI2)/bin/python $(PYTEST) $(OAI2_TESTS)
	$(GOOGLE)/bin/python $(PYTEST) $(GOOGLE_TESTS)
	$(SIDE)/bin/python $(PYTEST) $(SIDE_TESTS)
	$(PHX)/bin/python $(PYTEST) $(PHX_TESTS)
	$(BIN)/python $(PYTEST) -m serial $(SERIAL_FILES)
	$(BIN)/python $(PYTEST) -m 'not serial' -n auto --dist loadfile

# The documentation site (MkDocs, mkdocs-material, mkdocstrings) from the `docs`
# extra in .venv-docs, built with uv like the others; --strict:
# a broken link or anchor, a page left out of the nav or an unreadable docstring
# fails the build. Output in site/.
DOCS := .venv-docs
$(DOCS)/.ststrace-installed: pyproject.toml | $(UV_DEP)
	$(call venv,$(DOCS))
	$(call pip,$(DOCS),-e '.[docs]')
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
# installed (seconds from its cache): the uv `make test` uses, on PATH for nox.
matrix: $(STAMP) | $(UV_DEP)
	PATH="$(dir $(UV)):$$PATH" $(BIN)/python -m nox -db uv

typecheck: $(STAMP)
	$(BIN)/python -m mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(OAI2) $(GOOGLE) $(SIDE) $(PHX) $(TRAIN) $(DOCS) site .venv-crewai .agents .nox traces .pytest_cache .mypy_cache
