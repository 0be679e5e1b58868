"""The installed package holds every subpackage of the repository's mapped folders."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed_for_installation():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, mapped = set(cfg["packages"]), cfg["package-dir"]
    found = set()
    for name, folder in {**mapped, "hydra_plugins": "hydra_plugins"}.items():   # Hydra's namespace package, as is
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *rel)))
    found |= data_folders()
    assert found - listed == set(), "add these packages to pyproject's packages list"
    assert listed - found == set(), "these listed packages have no folder"


def data_folders() -> set[str]:
    """The bundled traces' folders that hold files and have importable names: setuptools warns
    (a "Package would be ignored" banner per folder, on every install) unless they are listed."""
    out = set()
    for d in [ROOT / "traces" / "data", *(ROOT / "traces" / "data").rglob("*")]:
        rel = d.relative_to(ROOT / "traces").parts
        if d.is_dir() and all(p.isidentifier() for p in rel) and any(f.is_file() for f in d.iterdir()):
            out.add(".".join(("clustersim", "traces", *rel)))
    return out


def test_the_installed_extras_resolve_together():
    # CI installs dev, calibrate and ray into one environment (.ci/run): pip finds no conflict there
    # (the README's `pip install '.[dev,ray,notebooks]'` passes `pip check` too, with cloudpickle 2.2.1)
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
