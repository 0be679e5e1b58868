"""Every notebook in notebooks/ runs from top to bottom."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    if path.name == "compare_policies.ipynb":
        text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
        assert "lowest mean JCT: " in text and "lowest mean JCT: fifo" not in text


def test_there_is_a_notebook():
    assert NOTEBOOKS
