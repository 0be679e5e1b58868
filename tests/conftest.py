"""Every test, and every `clustersim` process a test starts, caches traces in a temporary folder;
``torch_one_thread`` keeps a test's own torch computing from breaking later forked processes."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _trace_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("CLUSTERSIM_CACHE", str(tmp_path_factory.mktemp("trace-cache")))
    yield
    mp.undo()


@pytest.fixture
def torch_one_thread():
    """torch computes in the test process on one thread. A multi-threaded computation starts an
    OpenMP thread pool, and a process forked afterwards (a calibration's speed sweep, started by
    a later test) inherits it broken and hangs in a futex before its first point."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
