"""Every test, and every `clustersim` process a test starts, caches traces in a temporary folder."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _trace_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("CLUSTERSIM_CACHE", str(tmp_path_factory.mktemp("trace-cache")))
    yield
    mp.undo()
