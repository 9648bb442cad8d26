# berth developer commands. `make test` is what CI runs (see .ci/run and README).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint typecheck unit demo bench clean tools

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

# Debian's packages the tests drive: chromium for the dashboard's browser test (through
# Playwright), kubectl (package kubernetes-client) for the Kubernetes-mode wire cross-check,
# promtool (package prometheus) to unit-test the chart's alerts (tests/deploy/test_chart_alerts.py).
TOOLS := chromium:chromium kubectl:kubernetes-client promtool:prometheus
tools:
	@missing=""; for t in $(TOOLS); do command -v $${t%%:*} >/dev/null || missing="$$missing $${t#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

unit: install tools
	$(BIN)/pytest

test: lint typecheck unit

demo: install
	$(BIN)/berth demo

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
