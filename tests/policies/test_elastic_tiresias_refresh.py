"""R1's kept node states dropped by what changed (Elastic-Tiresias ``_refresh``): after a compaction
only the nodes its job took are compared, at a decision's start the whole matrix (one byte
comparison when nothing moved). At every refresh of random overloaded runs the nodes found moved,
the answer, and the free resources kept must equal a recount over every node (the outputs stay
byte-identical)."""

import numpy as np
import pytest

from clustersim.policies.elastic_tiresias import ElasticTiresias
from clustersim.simulator.engine import Engine
from clustersim.simulator.overhead import ConstantOverhead
from tests.factories import cluster
from tests.policies.overloaded import Curves, overloaded


class CheckedRefresh(ElasticTiresias):
    """Elastic-Tiresias that checks each ``_refresh`` against the whole-matrix comparison it replaced."""

    def __init__(self, **params):
        super().__init__(**params)
        self.by_nodes = self.whole = self.unmoved = 0

    def _refresh(self, free, nodes=None):
        seen = None if self._free_seen is None else self._free_seen.copy()
        stale = set(self._stale)
        tick = self._node_tick.copy()
        changed = super()._refresh(free, nodes)
        if seen is None or seen.shape != free.shape:
            return changed
        moved = set(np.flatnonzero((free != seen).any(axis=1)).tolist())   # every node compared
        if nodes is not None:
            self.by_nodes += 1
            assert moved <= set(nodes)   # a compaction's take changes no other node
        else:
            self.whole += 1
            self.unmoved += not moved
        assert changed == bool(moved or stale)
        assert set(np.flatnonzero(self._node_tick != tick).tolist()) == moved | stale   # dropped: those, no other
        assert np.array_equal(self._free_seen, free)   # the free resources the next refresh compares against
        for (n, _), state in self._node_states.items():   # every kept state was read on the node as it is
            assert state[0] == tuple(free[n].tolist())
        return changed


@pytest.mark.parametrize("seed", range(4))
def test_refresh_by_changed_nodes_equals_a_whole_recount(seed):
    """Random overloaded runs (elastic and rigid jobs of 1-8 GPUs, some with CPU demands that bind, on
    three 4-GPU machines of 16 cores): every refresh finds the moved nodes a comparison of every node
    finds, and keeps the free resources bit for bit; both kinds of refresh, and decisions where
    nothing moved, are met."""
    pol = CheckedRefresh(thresholds=[50.0, 400.0], compaction_threshold=2, migrate_to_fewer_machines=seed % 2 == 1)
    rec = Engine(overloaded(seed), cluster(nodes=3, gpus=4, cpus=16), pol,
                 speed=Curves(), overhead=ConstantOverhead(start_s=5.0, resume_s=5.0, rescale_s=8.0,
                                                           stop_free=seed >= 2, pause_s=2.0)).run()
    assert rec.summary()["jobs_finished"] == 80
    assert pol.by_nodes > 50 and pol.whole > 200 and pol.unmoved > 50
