"""The submitit launcher (Slurm's, here its local variant) runs a sweep to completion, also from
the folder that holds a clone named ``clustersim`` (its jobs then see that folder first on the path)."""

import json
import subprocess
import sys
from pathlib import Path

import clustersim
from clustersim import experiment


def test_a_submitit_local_sweep_completes_beside_a_folder_named_clustersim(tmp_path):
    (tmp_path / "clustersim" / "simulator").mkdir(parents=True)   # as a clone's folder seen from its parent
    clustersim_bin = Path(sys.executable).parent / "clustersim"
    p = subprocess.run([str(clustersim_bin), "-m", "policy=fifo", "seed=0,1", "hydra/launcher=submitit_local",
                        f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "2 runs: 2 complete, 0 failed" in p.stdout + p.stderr
    metas = [json.loads(f.read_text()) for f in (tmp_path / "sweep").glob("*/run.json")]
    assert [m["status"] for m in metas] == ["complete", "complete"]
    assert {m["version"] for m in metas} == {clustersim.__version__}


def test_provenance_without_the_package_file_or_version(monkeypatch):
    # a namespace package (the case above under an editable install) has neither
    monkeypatch.setattr(clustersim, "__file__", None)
    monkeypatch.delattr(clustersim, "__version__")
    experiment.provenance.cache_clear()
    try:
        assert experiment.provenance()["version"] == "0.1.0"
    finally:
        experiment.provenance.cache_clear()
