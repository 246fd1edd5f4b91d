# Two commands do all the set-up on a fresh machine with Python and pip:
#   make demo   - runs examples/quickstart.py (writes, validates and renders a trace);
#                 installs only ststrace and its two dependencies (wrapt, orjson)
#   make test   - runs the whole test suite; installs the test extras
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
# Arize Phoenix pins anthropic<2: its test (ststrace otlp into a real Phoenix
# server on 127.0.0.1) runs in .venv-phoenix (the test-phoenix extra), also first.
PHX    := .venv-phoenix
PHX_STAMP := $(PHX)/.ststrace-installed
PHX_TESTS := tests/test_otel_phoenix.py

.PHONY: demo test bench typecheck clean

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

$(OAI2_STAMP): pyproject.toml
	test -x $(OAI2)/bin/python || $(PYTHON) -m venv $(OAI2)
	$(OAI2)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test-openai2]'
	touch $(OAI2_STAMP)

$(PHX_STAMP): pyproject.toml
	test -x $(PHX)/bin/python || $(PYTHON) -m venv $(PHX)
	$(PHX)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test-phoenix]'
	touch $(PHX_STAMP)

test: $(STAMP) $(OAI2_STAMP) $(PHX_STAMP)
	$(OAI2)/bin/python -m pytest -q -p no:cacheprovider $(OAI2_TESTS)
	$(PHX)/bin/python -m pytest -q -p no:cacheprovider $(PHX_TESTS)
	$(BIN)/python -m pytest -q

typecheck: $(STAMP)
	$(BIN)/python -m mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(OAI2) $(PHX) .venv-crewai traces .pytest_cache .mypy_cache
