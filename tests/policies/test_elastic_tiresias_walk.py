"""R1's walk by shape (Elastic-Tiresias ``_walk``): the waiting jobs grouped by shape, kept as
Tiresias's queues change, must equal a pass over every queue at every decision, and the walk must
give R1 the jobs the walk over every waiting job gave it (the outputs stay byte-identical)."""

import pytest

from clustersim.policies.elastic_tiresias import ElasticTiresias
from clustersim.simulator.engine import Engine
from clustersim.simulator.overhead import ConstantOverhead
from tests.factories import cluster
from tests.policies.overloaded import Curves, overloaded


class CheckedWalk(ElasticTiresias):
    """Elastic-Tiresias that checks its groups against a full recount before and after every
    decision and counts what the walk looked at."""

    def __init__(self, **params):
        super().__init__(**params)
        self.checks = self.walks = self.compacted = self.waiting = self.remembered = 0
        self.kept: set = set()   # shapes the walk would pass over as failed on unchanged machines
        self.kept_at = -1

    def decide(self, view):
        self._check()
        decision = super().decide(view)
        self._check()
        return decision

    def _walk(self, view, allocs, free, planned):
        self.walks += 1   # the jobs the walk over every waiting job met (each entered R1 or was passed over)
        self.waiting += sum(1 for jid in view.pending if jid not in allocs and jid not in self.reserved)
        super()._walk(view, allocs, free, planned)
        self._check()   # after the moves of the jobs whose shapes the walk worked out

    def _heads(self):
        # the shapes present that failed on the machines as they are now: the walk's heap leaves
        # them out, and R1 tries them here anyway, so that _compact checks that each finds no start
        self.kept = {s for s in self._groups if s is not None and self._failed_then.get(s) == self._epoch}
        self.kept_at = self._epoch
        heap = super()._heads()
        assert {shape for _, _, shape in heap} == set(self._groups) - self.kept
        kept, self._failed_then = self._failed_then, {}
        heap = super()._heads()   # every group's first job
        self._failed_then = kept
        return heap

    def _compact(self, view, job, allocs, free, planned):
        if self.shapes.get(job.jid) in self.kept and self._epoch == self.kept_at:
            done = self.compactions   # a shape kept as failed on these machines: it still finds no start
            super()._compact(view, job, allocs, free, planned)
            assert self.compactions == done and job.jid not in allocs and job.jid not in self.reserved
            self.remembered += 1
            return
        self.compacted += 1
        # R1 looks only at a waiting job whose shape has not failed since the state last changed
        assert job.jid in view.pending and job.jid not in allocs and job.jid not in self.reserved
        assert self.shapes.get(job.jid) not in self._failed
        super()._compact(view, job, allocs, free, planned)

    def _check(self) -> None:
        """Every job that waits (not running) in Tiresias's queues and has one GPU role is in the
        group of its shape (None until worked out) at its rank (queue, key, index); nothing else is."""
        want: dict = {}
        where = {}
        for q, queue in enumerate(self.queues):
            for key, index, job in queue:
                roles = job.view.roles
                if job.running or len(roles) != 1 or roles[0].gpu <= 0:
                    continue
                shape = self.shapes.get(job.jid)
                rank = (q, key, index)
                want.setdefault(shape, {})[rank] = job
                where[job.jid] = (shape, rank)
        assert self._where == where
        assert set(self._groups) == set(want) == set(self._members)
        for shape, members in want.items():
            assert self._groups[shape] == sorted(members)
            assert self._members[shape] == members
        self.checks += 1


@pytest.mark.parametrize("params", [
    {},
    {"queue_order": "tiresias", "starvation_knob": 2.0},
    {"gittins": True, "gittins_delta": 100.0},
    {"migrate_to_fewer_machines": True, "start_floor": True},
], ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default")
@pytest.mark.parametrize("seed", range(2))
def test_shape_groups_match_a_full_recount(params, seed):
    """Random overloaded runs, stop-resume and stop-free, demotions after 50 and 400 GPU-s: every
    job finishes, and before and after every decision the groups equal a recount of the queues."""
    if "queue_order" in params:   # Elastic-Tiresias takes Tiresias's FIFO order: set it after init
        params = dict(params)
        order = params.pop("queue_order")
    else:
        order = None
    pol = CheckedWalk(thresholds=[50.0, 400.0], compaction_threshold=2, **params)
    if order:
        pol.queue_order = order
    rec = Engine(overloaded(seed, two_role=True), cluster(nodes=3, gpus=4, cpus=16), pol, speed=Curves(),
                 overhead=ConstantOverhead(start_s=5.0, resume_s=5.0, rescale_s=8.0, stop_free=seed == 1,
                                           pause_s=2.0)).run()
    s = rec.summary()
    assert s["jobs_finished"] == 80
    assert pol.checks > 200 and pol.walks > 20 and pol.compactions > 0 and s["preemptions"] > 0
    # the walk steps over failed shapes: R1 is entered for far fewer jobs than wait at the walks
    assert 0 < pol.compacted < pol.waiting / 2
    if not params.get("migrate_to_fewer_machines"):   # (migrations change machines at most decisions)
        assert pol.remembered > 0   # shapes kept as failed across decisions were checked

