"""Start-up stays light: the heavy libraries load only where a run needs them.

Each check runs in a fresh interpreter and reads ``sys.modules``: deterministic, no timing.
(scipy, pandas and matplotlib each take longer to import than `clustersim --help` takes in all.)
"""

import json
import subprocess
import sys

HEAVY = ("scipy", "pandas", "matplotlib")
HELP_NEEDS_NONE_OF = (*HEAVY, "hydra", "omegaconf", "numpy", "pyarrow", "simpy")


def loaded(code: str, cwd=None) -> set[str]:
    """The top-level packages in ``sys.modules`` once ``code`` has run (reported at exit, so a
    ``SystemExit`` from the code still reports)."""
    probe = ("import atexit, json, sys\n"
             "atexit.register(lambda: print('MODULES=' + json.dumps(sorted({m.split('.')[0] for m in sys.modules}))))\n")
    p = subprocess.run([sys.executable, "-c", probe + code], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert p.returncode == 0, p.stderr
    line = [x for x in p.stdout.splitlines() if x.startswith("MODULES=")][-1]
    return set(json.loads(line[len("MODULES="):]))


def test_importing_the_cli_loads_no_heavy_library():
    assert loaded("import clustersim.cli").isdisjoint(HELP_NEEDS_NONE_OF)


def test_help_answers_without_hydra_or_the_simulator():
    mods = loaded("sys.argv = ['clustersim', '--help']\nfrom clustersim.cli import entry\nentry()")
    assert mods.isdisjoint(HELP_NEEDS_NONE_OF), sorted(mods & set(HELP_NEEDS_NONE_OF))
    assert "clustersim" in mods


def test_importing_the_experiment_and_engine_loads_no_heavy_library():
    mods = loaded("import clustersim.experiment, clustersim.simulator.engine, clustersim.simulator.speed")
    assert mods.isdisjoint(HEAVY), sorted(mods & set(HEAVY))


def test_a_run_of_the_command_imports_neither_pandas_nor_scipy(tmp_path):
    """pyarrow imports pandas (~0.3 s) at its first conversion of Python objects or to numpy;
    the run's outputs are built and read from buffers instead (simulator/arrow.py). scipy
    (0.3-0.9 s) fits the zoo's speed models: their coefficients are kept across processes
    (simulator/profiles) and the PS grids' interpolators built for the grids a run uses. As in
    every run after the first on a machine, the trace and the coefficients are cached (the first
    conversion of a trace and the first fit of the zoo import them, once)."""
    loaded("from clustersim.experiment import compose, load_trace\nload_trace(compose()['trace'])\n"
           "from clustersim.simulator import profiles\nprofiles.load()", cwd=tmp_path)   # the caches, warm
    code = (f"sys.argv = ['clustersim', 'hydra.run.dir={tmp_path / 'run'}', 'progress=false']\n"
            "from clustersim.cli import entry\nentry()")
    mods = loaded(code, cwd=tmp_path)
    assert (tmp_path / "run" / "jobs.parquet").is_file()
    assert "pyarrow" in mods and "pandas" not in mods and "scipy" not in mods


def test_a_default_run_does_not_import_pyarrow_compute(tmp_path):
    """pyarrow.compute builds a wrapper per Arrow kernel at import (~0.07 s): only traces that
    are converted, transformed or sized into an ``auto`` cluster use it."""
    code = (f"sys.argv = ['clustersim', 'hydra.run.dir={tmp_path / 'run'}', 'progress=false']\n"
            "from clustersim.cli import entry\nentry()\n"
            "print('MODULES=' + json.dumps(sorted(m for m in sys.modules if m.startswith('pyarrow'))))\n")
    loaded("from clustersim.experiment import compose, load_trace\nload_trace(compose()['trace'])", cwd=tmp_path)
    p = subprocess.run([sys.executable, "-c", "import json, sys\n" + code], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    mods = json.loads([x for x in p.stdout.splitlines() if x.startswith("MODULES=")][-1][len("MODULES="):])
    assert "pyarrow.parquet" in mods and "pyarrow.compute" not in mods


def test_help_lists_the_groups_the_experiment_checks():
    from clustersim.cli import defaults
    from clustersim.experiment import GROUPS

    assert tuple(defaults()) == GROUPS


def test_pyarrow_still_knows_pandas_after_a_run(tmp_path):
    """A plugin in the same process (a trace format, say) may hand pyarrow a DataFrame after a run."""
    code = (f"sys.argv = ['clustersim', 'hydra.run.dir={tmp_path / 'run'}', 'progress=false']\n"
            "from clustersim.cli import entry\nentry()\n"
            "import pandas as pd, pyarrow as pa\n"
            "df = pd.DataFrame({'a': [1.0, None]})\n"
            "assert pa.table(df).equals(pa.Table.from_pandas(df, preserve_index=False))\n"
            "assert pa.table(df)['a'].null_count == 1\n")
    assert "pandas" in loaded(code, cwd=tmp_path)
