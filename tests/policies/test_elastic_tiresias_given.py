"""R1's ranking of machines for a job on k > 1 machines reads the donors' tasks per node
(Elastic-Tiresias ``_given_now``), kept across decisions and read again only on the nodes whose
kept state was dropped since. At every read on random overloaded runs the kept counts must equal a
recount over every up node, and every kept node state's total must equal its node's count (the
outputs stay byte-identical)."""

import pytest

from clustersim.policies.elastic_tiresias import ElasticTiresias
from clustersim.simulator.engine import Engine
from clustersim.simulator.overhead import ConstantOverhead
from tests.factories import cluster
from tests.policies.overloaded import Curves, overloaded


class CheckedGiven(ElasticTiresias):
    """Elastic-Tiresias that checks each ``_given_now`` against a count over every up node."""

    def __init__(self, **params):
        super().__init__(**params)
        self.reads = self.partial = self.nonzero = 0

    def _given_now(self, view, per_node, nodes):
        stale = len(self._given_stale)
        given = super()._given_now(view, per_node, nodes)
        self.reads += 1
        self.partial += 0 < stale < nodes   # some nodes read again, the others kept
        for n in range(nodes):
            if not view.cluster.up[n]:
                continue
            on = per_node.get(n) or {}
            assert given[n] == sum(on.values()), (n, given[n], on)   # the recount of every up node
            self.nonzero += given[n] > 0
            state = self._node_states.get((n, True))
            if state is not None:   # a kept state's total is the same count
                assert state[2] == given[n]
        return given


@pytest.mark.parametrize("seed", range(4))
def test_kept_donor_counts_equal_a_recount(seed):
    """Random overloaded runs (elastic and rigid jobs of 1-8 GPUs on three 4-GPU machines: a job of
    5-8 GPUs spans k = 2 machines): every ranking reads the donors' tasks a recount of every up node
    gives; reads that re-count only some nodes, and nodes with donors, are met."""
    pol = CheckedGiven(thresholds=[50.0, 400.0], compaction_threshold=2, migrate_to_fewer_machines=seed % 2 == 1)
    rec = Engine(overloaded(seed), cluster(nodes=3, gpus=4, cpus=16), pol,
                 speed=Curves(), overhead=ConstantOverhead(start_s=5.0, resume_s=5.0, rescale_s=8.0,
                                                           stop_free=seed >= 2, pause_s=2.0)).run()
    assert rec.summary()["jobs_finished"] == 80
    print(seed, pol.reads, pol.partial, pol.nonzero)
    assert pol.reads > 20 and pol.partial > 5 and pol.nonzero > 20
