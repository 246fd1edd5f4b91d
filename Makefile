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
# CrewAI needs openai<3 while the main test environment pins openai 3: its
# tests run again in an environment of their own.
CREW   := .venv-crewai
CREW_STAMP := $(CREW)/.ststrace-installed

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

$(CREW_STAMP): pyproject.toml
	test -x $(CREW)/bin/python || $(PYTHON) -m venv $(CREW)
	$(CREW)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test-crewai]'
	touch $(CREW_STAMP)

test: $(STAMP) $(CREW_STAMP)
	$(CREW)/bin/python -m pytest -q -p no:cacheprovider tests/frameworks/test_crewai.py
	$(BIN)/python -m pytest -q

typecheck: $(STAMP)
	$(BIN)/python -m mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(CREW) traces .pytest_cache .mypy_cache
