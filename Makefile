# rlverify — set-up, demo and tests. `make demo` and `make test` each create/refresh .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup compile demo test test-all lint bench clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python 3.11) on PATH, or run: make PYTHON=/path/to/python3.11"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,torch,sb3,ray]'
	@touch $(STAMP)

## Bytecode written once (an editable install compiles nothing, and PYTHONDONTWRITEBYTECODE=1 environments would
## recompile every module on every run: ~0.25 s of each command's start-up).
compile: $(STAMP)
	@$(BIN)/python -m compileall -q src

setup: $(STAMP)

## The main job on bundled benchmarks: the paper's running example (stochastic, deterministic estimate,
## monolithic), then the shipped PPO network on Avoid 4x4 (15,625 states) checked exactly by Storm.
demo: compile
	$(BIN)/rlverify verify running-example-v1 --property steps-to-goal
	$(BIN)/rlverify verify running-example-v1 --property reach-goal --mode deterministic
	$(BIN)/rlverify verify running-example-v1 --property reach-goal-2 --mode monolithic
	$(BIN)/rlverify verify avoid-v1 --property collision-100

## The default test suite (slow tests excluded; a few minutes on 2 cores).
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n 2

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

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
