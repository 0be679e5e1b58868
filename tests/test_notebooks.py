"""Every notebook in notebooks/ runs from top to bottom (a failing cell fails the suite); the
comparison notebook takes a sweep directory as a parameter, papermill-style."""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def execute(path: Path, cwd: Path, **params) -> str:
    """Run the notebook with ``params`` injected after its ``parameters`` cell (as papermill does);
    returns the text it printed. Raises on the first failing cell."""
    nb = nbformat.read(path, as_version=4)
    if params:
        i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
        nb.cells.insert(i + 1, nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in params.items())))
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    return "".join(o.get("text", "") for o in outputs if o.output_type == "stream")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path):
    text = execute(path, tmp_path)
    if path.name == "compare_policies.ipynb":   # its own sweep on the contended default cluster
        assert "8 runs: 8 complete" in text
        assert "lowest mean JCT: " in text and "lowest mean JCT: fifo" not in text
    if path.name == "explore_trace.ipynb":
        assert "offered load               1.02" in text
    if path.name == "model_zoo.ipynb":
        assert "profiles with measured tables plotted" in text


def test_the_comparison_notebook_reads_a_sweep_made_by_the_command(tmp_path):
    sweep = tmp_path / "sweep"
    p = subprocess.run([sys.executable, "-m", "clustersim.cli", "-m", "policy=fifo,srtf", f"hydra.sweep.dir={sweep}"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    text = execute(NOTEBOOKS[[n.name for n in NOTEBOOKS].index("compare_policies.ipynb")], tmp_path,
                   SWEEP_DIR=str(sweep))
    assert "2 runs: 2 complete" in text and "lowest mean JCT: srtf" in text


def test_there_are_the_three_notebooks():
    assert {p.name for p in NOTEBOOKS} >= {"compare_policies.ipynb", "explore_trace.ipynb", "model_zoo.ipynb"}
