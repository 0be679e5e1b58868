"""R1's search kept across decisions (Elastic-Tiresias ``_search``): at every decision it must
answer exactly what searching every node set afresh answers (the outputs stay byte-identical)."""

import pytest

from clustersim.policies.elastic_tiresias import NO_DONORS, ElasticTiresias
from clustersim.simulator.engine import Engine
from clustersim.simulator.overhead import ConstantOverhead
from tests.factories import cluster
from tests.policies.overloaded import Curves, overloaded


class CheckedSearch(ElasticTiresias):
    """Elastic-Tiresias that checks each search against ``_best_take`` run on every node set with
    no kept plan and no kept donor facts (the code the kept plans replaced)."""

    def __init__(self, **params):
        super().__init__(**params)
        self.searches = self.sets = self.searched = self.narrowed = self.narrowed_sets = self.passed = 0

    def _best_take(self, *args):
        self.searched += 1
        return super()._best_take(*args)

    def _search(self, view, jv, role, shape, k, idle, per_node, free, planned):
        before = self.searched
        # a shape that found no plan on one machine: searched on the machines changed since only
        self.narrowed += k == 1 and (shape, per_node is not NO_DONORS) in self._gave_none
        # on k > 1 machines: one that found no plan on the node set ranked first now, unchanged since,
        # is answered none without a look at the set
        got = self._none_on.get(shape) if k > 1 else None
        self.narrowed_sets += (got is not None and got[0] == self._full_options(view, free, k, idle, per_node)[0]
                               and all(self._node_tick[n] <= got[1] for n in got[0]))
        kept = super()._search(view, jv, role, shape, k, idle, per_node, free, planned)
        self.sets -= self.searched - before     # the sets the kept plans answered
        facts, self._facts = self._facts, {}    # read every donor afresh
        full = None
        options = self._options(view, free, role.demand, k, idle, per_node, planned)
        assert options == self._full_options(view, free, k, idle, per_node)
        for nodes in options:
            plan = ElasticTiresias._best_take(self, view, jv, role, nodes, idle, per_node, free, planned)
            if plan is not None and (full is None or plan[0] > full[0] + 1e-9):
                full = plan
            self.sets += 1
        for vid, (alloc, got) in self._facts.items():   # the facts kept equal the facts read afresh
            if vid in facts and facts[vid][0] is alloc:
                assert facts[vid][1] == got
        self._facts = facts
        assert kept == full
        self.searches += 1
        return kept

    def _walk(self, view, allocs, free, planned):
        self._at = (view, free, planned)   # what the walk's searches read, for _kept_none's check
        super()._walk(view, allocs, free, planned)

    def _kept_none(self, job, shape):
        """A k > 1 shape the walk passes over on its kept failure: a fresh search finds no plan."""
        kept = super()._kept_none(job, shape)
        if kept:
            view, free, planned = self._at
            role, k, demand, _ = self._job_facts[job.jid]
            idle = self._idle_room[demand][0]
            assert k > 1 and self._donor_cache is not None
            facts, self._facts = self._facts, {}
            for nodes in self._full_options(view, free, k, idle, self._donor_cache):
                assert ElasticTiresias._best_take(self, view, job.view, role, nodes, idle, self._donor_cache, free,
                                                  planned) is None
            self._facts = facts
            self.passed += 1
        return kept


    @staticmethod
    def _full_options(view, free, k, idle, per_node) -> list:
        """Each up node with an idle GPU or a donor when k = 1, else the k up nodes with the most
        GPUs to give (idle plus the donors' tasks there), ties to the lower index."""
        up = view.cluster.up
        if k == 1:
            return [[n] for n in range(len(free)) if up[n] and (idle[n] > 0 or per_node.get(n))]
        avail = {n: int(idle[n]) + sum(per_node.get(n, {}).values()) for n in range(len(free)) if up[n]}
        return [sorted(avail, key=lambda n: (-avail[n], n))[:k]]


@pytest.mark.parametrize("seed", range(4))
def test_kept_search_matches_a_fresh_search(seed):
    """Random overloaded runs (elastic and rigid jobs of 1-8 GPUs, some with CPU demands that bind,
    two role names, on three 4-GPU machines of 16 cores; demotions after 50 and 400 GPU-s): every
    R1 search equals the search of every node set afresh, and most node sets are answered by a
    kept plan or left out as unchanged since the shape found no plan on any (on one machine) or on
    the same set (on more)."""
    pol = CheckedSearch(thresholds=[50.0, 400.0], compaction_threshold=2, migrate_to_fewer_machines=seed % 2 == 1)
    rec = Engine(overloaded(seed), cluster(nodes=3, gpus=4, cpus=16), pol,
                 speed=Curves(), overhead=ConstantOverhead(start_s=5.0, resume_s=5.0, rescale_s=8.0,
                                                           stop_free=seed >= 2, pause_s=2.0)).run()
    assert rec.summary()["jobs_finished"] == 80
    assert pol.searches > 100 and pol.compactions > 0
    assert pol.sets > 100   # node sets answered by a kept plan: the check covers them
    assert pol.narrowed > 20   # searches narrowed to the machines changed since a failure: covered too
    assert pol.narrowed_sets > 10   # k > 1 searches answered by a kept failure on an unchanged set: covered too
    assert pol.passed > 40   # k > 1 shapes the walk passed over on that kept failure: covered too
