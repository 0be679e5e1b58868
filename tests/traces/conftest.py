import pytest

from clustersim import traces


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path, monkeypatch):
    """Loads in these tests cache under a temporary directory, never in the user's cache."""
    monkeypatch.setenv("CLUSTERSIM_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def sample():
    """Path of a bundled file: sample('helios/cluster_log.csv') -> traces/data/samples/helios/..."""
    return lambda rel: traces.DATA / "samples" / rel


def rows_by_id(table):
    return {r["job_id"]: r for r in table.to_pylist()}
