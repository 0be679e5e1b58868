"""The documentation site (mkdocs.yml: docs/ and the API reference from the docstrings) builds
without a warning (`mkdocs build --strict`): a broken link or an API entry that does not resolve
fails here."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_docs_site_builds_without_warnings(tmp_path):
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert [line for line in out.splitlines() if line.startswith(("WARNING -", "ERROR -"))] == []
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("clustersim.experiment.compose", "clustersim.analysis.metric_bars", "clustersim.tracking.log_run"):
        assert name in api, name   # the reference is generated, not empty
    assert (tmp_path / "site" / "traces" / "csv" / "index.html").is_file()
