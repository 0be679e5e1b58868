# make run: set up .venv and replay the default experiment; make test: the test suite (what CI runs)
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
# the extras each target installs, unless EXTRAS=... is given: a run needs none (torch comes only
# with calibrate), the tests and the golden and benchmark runs need dev and calibrate
EXTRAS ?= $(DEFAULT_EXTRAS)
run: DEFAULT_EXTRAS =
calibrate: DEFAULT_EXTRAS = calibrate
test golden bench dev: DEFAULT_EXTRAS = dev,calibrate
docs: DEFAULT_EXTRAS = dev
PIP = $(BIN)/python -m pip install -q --disable-pip-version-check
TARGET = .$(if $(EXTRAS),[$(EXTRAS)])
SOURCES = clustersim simulator policies traces configs hydra_plugins pyproject.toml
comma := ,
# true when a stamp .deps-<extras> newer than pyproject.toml covers every extra of EXTRAS (so
# `make run` after `make test` installs nothing)
have_deps = for s in $(VENV)/.deps-*; do test -f "$$s" -a ! pyproject.toml -nt "$$s" || continue; ok=1; \
	for e in $(subst $(comma), ,$(EXTRAS)); do case ",$${s\#\#*.deps-}," in *",$$e,"*) ;; *) ok=0;; esac; done; \
	test $$ok = 1 && exit 0; done; exit 1
say = @printf 'make: %s\n'

.PHONY: run calibrate test bench golden reproduce dev docs package clean

# the package and its dependencies with EXTRAS, installed as users install it (not editable), so
# the CLI finds its configs that way; pip runs only when something changed (EXTRAS, pyproject.toml,
# a source file). An editable install (make dev) is kept: replacing it would run stale code.
package:
	@test -x $(BIN)/python || { printf 'make: creating %s\n' "$(VENV)"; $(PYTHON) -m venv $(VENV); }
	@if $(BIN)/python -m pip show -f clustersim 2>/dev/null | grep -q __editable__; then \
		printf 'make: clustersim is installed editable (make dev): the CLI runs this tree\n'; \
		( $(have_deps) ) || { \
			printf 'make: installing the dependencies%s (editable)\n' "$(if $(EXTRAS), with extras [$(EXTRAS)])"; \
			$(PIP) -e "$(TARGET)" && touch $(VENV)/.deps-$(EXTRAS); }; \
	elif ! ( $(have_deps) ); then \
		printf 'make: installing clustersim and its dependencies%s into %s (a minute the first time)\n' \
			"$(if $(EXTRAS), with extras [$(EXTRAS)])" "$(VENV)"; \
		$(PIP) "$(TARGET)" && touch $(VENV)/.deps-$(EXTRAS) $(VENV)/.installed; \
	elif ! test -f $(VENV)/.installed || test -n "$$(find $(SOURCES) -newer $(VENV)/.installed -print -quit)"; then \
		printf 'make: reinstalling clustersim (the tree changed)\n'; \
		$(PIP) --no-deps --force-reinstall . && touch $(VENV)/.installed; \
	fi

run: package
	$(say) "running: clustersim $(ARGS)"
	@$(BIN)/clustersim $(ARGS)

# fit the speed models to measurements (docs/calibration.md): the one target that installs torch
calibrate: package
	$(say) "running: clustersim-calibrate $(ARGS)"
	@$(BIN)/clustersim-calibrate $(ARGS)

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

dev:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e "$(TARGET)"
	@touch $(VENV)/.deps-$(EXTRAS)

# the documentation site (mkdocs.yml) into site/ (tests/test_docs_site.py fails on its warnings)
docs: package
	$(BIN)/python -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build *.egg-info runs site
