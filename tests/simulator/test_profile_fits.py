"""The zoo's fitted speed coefficients are kept across processes (simulator/profiles: _kept_fits):
a load that finds them fits nothing and imports no scipy, and its models are bit-identical."""

import json
import subprocess
import sys

import pytest

from clustersim.simulator import profiles


def coefficients(zoo) -> dict:
    """Every fitted coefficient of the zoo, as exact float reprs."""
    out = {}
    for name, p in zoo.profiles.items():
        for where, q in (("", p), *((f"@{t}", sub) for t, sub in p.by_type.items())):
            theta = getattr(q.model, "theta", None)
            if theta is not None:
                out[name + where] = [repr(float(t)) for t in theta]
    return out


def fresh(monkeypatch, fits: str | None = None):
    if fits is not None:
        monkeypatch.setenv(profiles.FITS_ENV, fits)
    profiles._BUILT.clear()   # the zoo is built once per process
    return profiles.load()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERSIM_CACHE", str(tmp_path))
    profiles._BUILT.clear()
    yield tmp_path / "profile-fits"
    profiles._BUILT.clear()


def test_kept_coefficients_equal_a_fresh_fit(cache, monkeypatch):
    fitted = coefficients(fresh(monkeypatch, "off"))
    assert not cache.exists()                          # off: nothing kept
    assert len(fitted) >= 8                            # the all-reduce, Optimus and DLRover-RM fits
    monkeypatch.delenv(profiles.FITS_ENV)
    assert coefficients(fresh(monkeypatch)) == fitted  # fits, and keeps them
    (kept,) = cache.glob("*.json")
    assert json.loads(kept.read_text())["version"] == profiles.FITS_VERSION
    zoo = fresh(monkeypatch)                           # from the file
    assert coefficients(zoo) == fitted
    r50 = zoo.profile("resnet50") if "resnet50" in zoo.profiles else next(
        p for p in zoo.profiles.values() if p.speed_kind == "allreduce" and p.tables)
    assert r50.model.theta.dtype.name == "float64" and r50.model.theta.shape == (5,)


def test_a_load_from_kept_fits_imports_no_scipy(cache):
    code = ("import sys\nfrom clustersim.simulator import profiles\nprofiles.load()\n"
            "print('scipy' in sys.modules)")
    env_run = lambda: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,  # noqa: E731
                                     check=True).stdout.strip()
    assert env_run() == "True"     # the first load fits
    assert env_run() == "False"    # the next finds the coefficients


def test_a_damaged_or_foreign_file_is_fitted_again(cache, monkeypatch):
    fitted = coefficients(fresh(monkeypatch))
    (kept,) = cache.glob("*.json")
    for damage in ("{not json", json.dumps({"version": profiles.FITS_VERSION + 1, "fits": {}}), "[]"):
        kept.write_text(damage)
        assert coefficients(fresh(monkeypatch)) == fitted
        assert json.loads(kept.read_text())["version"] == profiles.FITS_VERSION   # rewritten


def test_other_profile_text_gets_its_own_file(cache, monkeypatch, tmp_path):
    fresh(monkeypatch)
    src = next(e.obj for e in profiles.PROFILE_FILES.entries() if e.obj.name == "tf_cnn.yaml")
    mine = tmp_path / "tf_cnn.yaml"
    mine.write_text(src.read_text() + "\n# edited\n")
    profiles._BUILT.clear()
    profiles.load([mine])
    assert len(list(cache.glob("*.json"))) == 2


def test_an_unwritable_folder_costs_only_the_fit(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CLUSTERSIM_CACHE", str(blocker))   # profile-fits cannot be made under a file
    profiles._BUILT.clear()
    try:
        assert coefficients(profiles.load())
    finally:
        profiles._BUILT.clear()
