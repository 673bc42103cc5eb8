# rlverify — set-up, demo and tests. `make demo` and `make test` each create/refresh .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BASE_STAMP := $(VENV)/.installed-base
DOCS_STAMP := $(VENV)/.installed-docs
WHEEL_DIR := build/wheel-test

.PHONY: setup setup-base compile demo test test-all test-wheel docs lint bench clean

## The base package only (what `make demo` needs: no torch, SB3 or Ray) ...
$(BASE_STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python 3.11) on PATH, or run: make PYTHON=/path/to/python3.11"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	@touch $(BASE_STAMP)

## ... and what the tests need: the test tools and the extras whose code they test.
$(STAMP): $(BASE_STAMP)
	$(BIN)/pip install --quiet -e '.[test,torch,sb3,ray,explain]'
	@touch $(STAMP)

## Bytecode written once (an editable install compiles nothing, and PYTHONDONTWRITEBYTECODE=1 environments would
## recompile every module on every run: ~0.25 s of each command's start-up).
compile: $(BASE_STAMP)
	@$(BIN)/python -m compileall -q src

setup: $(STAMP)

setup-base: $(BASE_STAMP)

## The main job on bundled benchmarks: the paper's running example (stochastic, deterministic estimate,
## monolithic), then the shipped PPO network on Avoid 4x4 (15,625 states) checked exactly by Storm.
demo: compile
	$(BIN)/rlverify verify running-example-v1 --property steps-to-goal
	$(BIN)/rlverify verify running-example-v1 --property reach-goal --mode deterministic
	$(BIN)/rlverify verify running-example-v1 --property reach-goal-2 --mode monolithic
	$(BIN)/rlverify verify avoid-v1 --property collision-100

## The default test suite (slow tests excluded; about 11 minutes on 2 busy cores, 2026-11).
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n 2

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

## The command blocks of the README and of every page of the documentation site, docs/**/*.md (not the slow ones),
## and the figures they quote, against the built wheel: `pip wheel`, a fresh venv with the wheel and its base
## dependencies only (pip's cache and registry; no --system-site-packages), each block from an empty directory
## (tests/test_readme.py reads the pages from this checkout; blocks that need an extra are skipped, saying so:
## `make test-wheel WHEEL_EXTRAS=sb3` installs the wheel with that extra and runs them too).
test-wheel: $(STAMP)
	rm -rf $(WHEEL_DIR)
	$(BIN)/pip wheel --quiet . --no-deps -w $(WHEEL_DIR)/dist
	$(PYTHON) -m venv $(WHEEL_DIR)/venv
	$(WHEEL_DIR)/venv/bin/pip install --quiet --upgrade pip
	$(WHEEL_DIR)/venv/bin/pip install --quiet "$$(ls $(WHEEL_DIR)/dist/rlverify-*.whl)$(if $(WHEEL_EXTRAS),[$(WHEEL_EXTRAS)])"
	RLVERIFY_README_VENV=$(abspath $(WHEEL_DIR)/venv) $(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow" \
	    tests/test_readme.py -k "block_runs or figure_is"

## The documentation site (mkdocs.yml, docs/) built strictly into site/: a broken link, a missing page or a docstring
## the API reference cannot read fails the build; the command-line reference is generated from the parsers, and each
## notebook of docs/notebooks/ becomes a page (docs/hooks/: offline, nothing executed).
$(DOCS_STAMP): $(BASE_STAMP)
	$(BIN)/pip install --quiet -e '.[docs]'
	@touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet -d site

## Lint, format check and type check (configuration in pyproject.toml: [tool.ruff], [tool.mypy]).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/exact.py
	$(BIN)/python benchmarks/statistical.py --out out/barto_small_heatmap.png
	$(BIN)/python benchmarks/abstraction.py --quick
	$(BIN)/python benchmarks/scaleout.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
