# One command file: CI and the README call these targets.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo run test test-fast lint format bench schemas clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -qq --upgrade pip
	$(BIN)/pip install -qq -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)  ## venv, dependencies, database and migrations
	$(BIN)/trawl migrate

demo: setup  ## run the stack, crawl the demo shop end to end, show the products
	$(BIN)/trawl demo

run: setup  ## run the stack with the demo shop until Ctrl-C
	$(BIN)/trawl up --demo

test: $(STAMP)  ## the whole suite: unit, integration, end to end
	$(BIN)/pytest

test-fast: $(STAMP)
	$(BIN)/pytest tests/unit

lint: $(STAMP)  ## ruff, the layer contracts (import-linter) and the types (mypy)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)  ## benchmarks that print figures (one: make bench BENCH=static_bench)
	$(BIN)/pip install -qq -e '.[dev,bench]'
	$(BIN)/python -m bench $(BENCH)

schemas: $(STAMP)  ## regenerate the JSON Schema files from the Structs
	$(BIN)/python -m schemas.generate

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .trawl
