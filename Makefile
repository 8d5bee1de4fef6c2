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

# The suite in parallel (pytest-xdist): every test has its own namespace and database, and most
# of them wait on I/O, so 3 workers beat 2 even on 2 cores. The fault tests are one group that
# one worker runs test after test (tests/conftest.py); at 3 workers that group is the longest
# path, so more workers gain nothing. TEST_WORKERS=0 runs serially (for --pdb); ARGS passes
# pytest options (make test ARGS="tests/unit -k pacing").
TEST_WORKERS ?= 3

test: $(STAMP)  ## the whole suite, in parallel: unit, integration, end to end, faults
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup $(ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests (exit 5)" >&2; fi; \
	exit $$status

test-fast: $(STAMP)  ## the unit tests only
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
