# make run: set up .venv and replay the default experiment; make test: the test suite (what CI runs)
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: run test bench dev package clean

# the dependencies, once (re-run when pyproject.toml changes)
$(VENV)/.deps: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q ".[dev,calibrate]"   # calibrate: torch==2.13.0, a local CPU build
	touch $@

# the package itself, installed as users install it (not editable), so the CLI finds its configs that way
package: $(VENV)/.deps
	$(BIN)/python -m pip install -q --no-deps --force-reinstall .

run: package
	$(BIN)/clustersim $(ARGS)

test: package
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: package
	$(BIN)/python benchmarks/elasticflow_fifo.py

dev: $(VENV)/.deps
	$(BIN)/python -m pip install -q --no-deps -e .

clean:
	rm -rf $(VENV) build *.egg-info runs
