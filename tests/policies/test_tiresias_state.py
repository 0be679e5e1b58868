"""The incremental state Tiresias admits on (each FIFO queue's running part and its totals, the GPUs
requested past it, the running jobs outside any running part, the running jobs per queue) must
equal what a pass over every job finds, at every decision; the queues stay sorted by key."""

import math
import random
from collections import Counter

import pytest

from clustersim.policies.admission import admit
from clustersim.policies.tiresias import Tiresias
from clustersim.simulator.engine import Engine
from tests.factories import cluster, gpu_job, jobs


class CheckedTiresias(Tiresias):
    """Tiresias that checks its kept state against a full pass after every decision."""

    def __init__(self, **params):
        super().__init__(**params)
        self.checks = self.part_moves = self.admissions = 0

    def _join_running_part(self, admitted) -> None:
        self.part_moves += sum(1 for j in admitted if j.running and j.key and j.key[0] == 1)
        super()._join_running_part(admitted)

    def _admit(self, view):
        """The kept scan (running parts admitted as blocks, parts skipped, the scan cut short) admits
        the jobs a plain scan admits: every job of every queue in order, each whose request fits
        what is left. The block admitted at once is each queue's first ``prefix`` jobs."""
        admitted = super()._admit(view)
        left, plain = list(self.budget), []
        for queue in self.queues:
            for _, _, job in queue:
                if admit(left, job.demand):
                    plain.append(job.jid)
        blocks = [e[2].jid for q, queue in enumerate(self.queues) for e in queue[:self.prefix[q]]]
        assert sorted(blocks + [j.jid for j in admitted]) == sorted(plain)
        ranked = [(j.queue, j.key, j.index) for j in admitted]
        assert ranked == sorted(ranked)   # listed in scan order
        self.admissions += 1
        return admitted

    def decide(self, view):
        decision = super().decide(view)
        self._check()
        return decision

    def _check(self) -> None:
        fifo = self.gittins is None
        seen = {}
        for q, queue in enumerate(self.queues):
            # sorted by (key, trace index); the entry names the job's own key and index
            assert queue == sorted(queue, key=lambda e: (e[0], e[1]))
            for key, index, job in queue:
                assert (key, index, job.queue) == (job.key, job.index, q)
                seen[job.jid] = job
            part = [j for k, _, j in queue if fifo and k[0] == 0]
            past = [j for k, _, j in queue if not (fifo and k[0] == 0)]
            assert self.count0[q] == len(part)
            assert all(j.running for j in part)   # a running part holds only running jobs
            for r in range(3):   # the kept totals are running sums: equal up to rounding
                assert math.isclose(self.sum0[q][r], sum(j.demand[r] for j in part), rel_tol=1e-9, abs_tol=1e-6)
            if fifo:
                assert self.tail_sizes[q]._count == dict(Counter(j.demand[0] for j in past))
            assert self.running[q] == {j.jid: j for _, _, j in queue if j.running}
        assert seen == self.jobs
        assert self.loose == {j for j in self.jobs.values() if j.running and not (fifo and j.key[0] == 0)}
        assert self.gpu_sizes._count == dict(Counter(j.demand[0] for j in self.jobs.values()))
        self.checks += 1


def overloaded(seed: int, n: int = 80) -> list:
    """Jobs of 1-8 GPUs arriving faster than three 4-GPU machines finish them."""
    rng = random.Random(seed)
    specs = [gpu_job(f"j{i}", rng.uniform(0, 900), rng.choice([1, 1, 2, 3, 4, 8]), rng.uniform(20, 900))
             for i in range(n)]
    return jobs(*sorted(specs, key=lambda s: s.submit_time))


@pytest.mark.parametrize("params", [
    {},
    {"queue_order": "tiresias"},
    {"queue_order": "pollux"},
    {"starvation_knob": 1.0},
    {"starvation_knob": 2.0, "queue_order": "tiresias"},
    {"gittins": True, "gittins_delta": 100.0},
], ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default")
@pytest.mark.parametrize("seed", range(2))
def test_kept_queues_match_a_full_pass(params, seed):
    """Random overloaded runs with demotions after 60 and 600 GPU-s: every job finishes, after
    every decision the kept state equals a pass over every job, and every plan admits the jobs a
    plain scan of every queue admits."""
    pol = CheckedTiresias(thresholds=[60.0, 600.0], **params)
    rec = Engine(overloaded(seed), cluster(nodes=3, gpus=4), pol, progress=False).run()
    s = rec.summary()
    assert s["jobs_finished"] == 80 and s["preemptions"] > 0
    assert pol.checks > 100 and pol.admissions > 100
    if not params.get("gittins") and params.get("queue_order") != "pollux":
        assert pol.part_moves > 0   # started and demoted running jobs joined a running part


def test_a_started_job_joins_its_running_part_behind_the_jobs_already_there():
    """One 4-GPU machine. a (2 GPUs) arrives at 0 and starts; b (1 GPU) at 1 and starts; c (1 GPU)
    at 2 and starts. Queue 0's running part is then a, b, c in that order (keys (0, n) with n
    growing), every one counted: 3 jobs, 2 + 1 + 1 = 4 GPUs, nothing past the part."""
    specs = jobs(gpu_job("a", 0.0, 2, 1000.0), gpu_job("b", 1.0, 1, 1000.0), gpu_job("c", 2.0, 1, 1000.0))
    pol = CheckedTiresias(thresholds=[1e9])
    seen = []

    def note(view, decide=pol.decide):
        d = decide(view)
        seen.append([e[2].jid for e in pol.queues[0]])
        return d

    pol.decide = note
    Engine(specs, cluster(nodes=1, gpus=4), pol, progress=False).run()
    assert ["a", "b", "c"] in seen
    at = seen.index(["a", "b", "c"])
    assert at >= 2   # after c's arrival
