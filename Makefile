# make run: set up .venv and replay the default experiment; make test: the test suite (what CI runs)
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
EXTRAS ?= dev,calibrate

.PHONY: run test bench golden reproduce dev package clean

# the dependencies, once (re-run when pyproject.toml or EXTRAS change)
$(VENV)/.deps-$(EXTRAS): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q ".[$(EXTRAS)]"
	touch $@

# the package itself, installed as users install it (not editable), so the CLI finds its configs
# that way; an editable install (make dev) is kept: replacing it would run stale code
package: $(VENV)/.deps-$(EXTRAS)
	@if $(BIN)/python -m pip show -f clustersim 2>/dev/null | grep -q __editable__; then \
		echo "clustersim is installed editable (make dev): the CLI runs this tree"; \
	else $(BIN)/python -m pip install -q --no-deps --force-reinstall .; fi

run: package
	$(BIN)/clustersim $(ARGS)

test: package
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# the performance suite (docs/performance.md): BENCH_ARGS="--full" adds the 1M-job points (minutes)
bench: package
	$(BIN)/python benchmarks/suite.py $(BENCH_ARGS)

# every paper's reproduction cases over 5 seeds (docs/reproductions.md, regenerated with its figures);
# REPRODUCE_ARGS="-- hydra/launcher=joblib" runs each sweep on all local cores
reproduce: package
	$(BIN)/clustersim-reproduce --publish $(REPRODUCE_ARGS)

# rerun the golden cases (tests/golden), print every figure that moved, rewrite summaries.json
golden: package
	$(BIN)/python -m tests.golden

dev: $(VENV)/.deps-$(EXTRAS)
	$(BIN)/python -m pip install -q --no-deps -e .

clean:
	rm -rf $(VENV) build *.egg-info runs
