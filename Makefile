# berth developer commands. `make test` is what CI runs (see .ci/run and README).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint typecheck unit demo bench clean chromium

$(BIN)/berth: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/berth

install: $(BIN)/berth

lint: install
	$(BIN)/ruff check cli scheduling services shared tests
	$(BIN)/ruff format --check cli scheduling services shared tests

typecheck: install
	$(BIN)/mypy

# The dashboard's browser test (tests/dashboard) drives Debian's chromium through Playwright.
chromium:
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

unit: install chromium
	$(BIN)/pytest

test: lint typecheck unit

demo: install
	$(BIN)/berth demo

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
