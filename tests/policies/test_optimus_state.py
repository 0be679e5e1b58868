"""What Optimus keeps between rounds (the active jobs in arrival order, a rigid job's plan made once
at arrival, a running job's task counts per allocation) must give every round the decision a pass
over every job gives: the eligible jobs sorted afresh, each plan's minimums summed afresh, and the
placement worked out with every running job's counts recounted and the free nodes always built."""

import random
from collections import Counter

import pytest

from clustersim.policies.base import arrival
from clustersim.policies.optimus import NodeSet, Optimus, Strategy, _same
from clustersim.simulator.cluster import EPS
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import JobSpec, RoleSpec, task_counts
from clustersim.simulator.overhead import ConstantOverhead
from tests.factories import cluster, gpu_job

PS = RoleSpec("ps", 1, 0.0, 3.0, 9.0, 1, 4)
WORKER = RoleSpec("worker", 1, 1.0, 2.0, 8.0, 1, 4)


class CheckedOptimus(Optimus):
    """Optimus that checks each round's kept state and placement against a plain pass."""

    def reset(self, view):
        super().reset(view)
        self.rounds = self.kept_rounds = self.cut_rounds = 0

    def _eligible(self, view):
        """The plans as Optimus reads them; ``read`` stays None when the pass stops before the end."""
        read = 0
        for plan in super()._eligible(view):
            read += 1
            yield plan
        self.read = read

    def schedule(self, view):
        now = view.now
        plain = sorted((j for j in self.active.values() if j.submit_time + self.delay <= now + 1e-9), key=arrival)
        assert [e[3].job_id for e in self.queue[:len(plain)]] == [j.job_id for j in plain]
        assert sorted(e[3].job_id for e in self.queue) == sorted(self.active)   # the queue holds the active jobs
        assert self.queue == sorted(self.queue, key=lambda e: e[:3])
        for _, _, _, job, plan in self.queue:
            rigid = not any(r.elastic for r in job.roles)
            assert (plan is not None) == rigid
            if rigid:   # the plan made at arrival: the gang request, its demand summed per resource
                assert plan.counts == {r.name: r.min_count for r in job.roles}
                assert plan.need == tuple(sum(r.min_count * r.demand[k] for r in job.roles) for k in range(3))
                assert plan.placed == {r.name: r.min_count for r in job.roles if r.min_count}
        rigid_needs = [e[4].need for e in self.queue if e[4] is not None]
        assert self.needs == Counter(rigid_needs) and self.elastic == len(self.queue) - len(rigid_needs)
        self.plain, self.read = plain, None
        self.rounds += 1
        out = super().schedule(view)
        self.cut_rounds += self.read is None   # the generator was left unfinished: the pass ended early
        return out

    def place_all(self, view, plans):
        # Algorithm 1's minimums as a plain pass: the eligible jobs in arrival order, each whose gang
        # minimum (no job here has a growth step) fits what the ones before it left
        left, admitted = [float(x) + EPS for x in view.cluster.up_capacity()], []
        for job in self.plain:
            need = [sum(r.min_count * r.demand[k] for r in job.roles) for k in range(3)]
            if all(n <= x for n, x in zip(need, left)):
                left = [x - n for n, x in zip(need, left)]
                admitted.append(job.job_id)
        assert [p.jid for p in plans] == admitted
        expected = self._plain_place_all(view, plans)
        got = super().place_all(view, plans)
        assert list(got) == list(expected)   # the same jobs changed, in the same order
        assert all(_same(got[j], expected[j]) if got[j] else expected[j] is None for j in got)
        self.kept_rounds += not got
        return got

    def _plain_place_all(self, view, plans):
        """place_all as a pass over every running job: task counts recounted, free nodes built."""
        cl = view.cluster
        nodes = (NodeSet(cl.free_copy(), cl.up, cl.capacity) if self.placement == "theorem1"
                 else Strategy(cl.free_copy(), self.placement))
        wanted = {p.job.job_id: p for p in plans}
        changes, moved = {}, []
        for job in view.running.values():
            plan = wanted.get(job.job_id)
            if plan is not None and self.keep_placement and task_counts(job.allocation) == {
                    r: c for r, c in plan.counts.items() if c}:
                del wanted[job.job_id]
                continue
            nodes.add(job, job.allocation)
            moved.append(job)
        nodes.reheap()
        for plan in sorted(wanted.values(), key=lambda p: (sum(p.counts.values()), p.job.submit_time, p.job.index)):
            job = plan.job
            alloc = nodes.place(job, plan.counts)
            if alloc is None and not job.allocation:
                counts = self._packable(view, job, plan.counts)
                if counts != plan.counts:
                    alloc = nodes.place(job, counts)
            if alloc is not None:
                if not _same(alloc, job.allocation):
                    changes[job.job_id] = alloc
                continue
            if job.allocation and nodes.add(job, job.allocation, -1.0):
                nodes.reheap()
                continue
            if job.allocation:
                changes[job.job_id] = None
        planned = {p.job.job_id for p in plans}
        for job in moved:
            if job.job_id not in planned:
                changes[job.job_id] = None
        return changes


def mixed(seed: int, rigid: float, n: int = 60) -> list:
    """Rigid GPU jobs of 1-4 GPUs (a share ``rigid``) and elastic PS jobs arriving faster than three
    4-GPU machines finish them; some submitted at the same instant (ties broken by trace index)."""
    rng = random.Random(seed)
    specs = []
    for i in range(n):
        t = float(rng.choice([rng.uniform(0, 1500), 300.0]))
        if rng.random() < rigid:
            specs.append(gpu_job(f"r{i}", t, rng.choice([1, 1, 2, 3, 4]), rng.uniform(100, 900), index=i))
        else:
            work = rng.uniform(500, 3000)
            specs.append(JobSpec(index=i, job_id=f"e{i}", submit_time=t, roles=(PS, WORKER), total_work=work,
                                 duration=work))
    return sorted(specs, key=lambda s: (s.submit_time, s.index))


@pytest.mark.parametrize("params", [
    {},
    {"keep_placement": False},
    {"placement": "spread"},
    {"event_driven": True, "on_no_fit": "skip"},
], ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default")
@pytest.mark.parametrize("seed", range(2))
def test_kept_state_gives_the_decisions_of_a_full_pass(params, seed):
    """Random overloaded runs of rigid and elastic jobs: every job finishes, and at every round the
    kept queue, the rigid plans and the placement equal a pass over every job."""
    pol = CheckedOptimus(interval=120.0, prerun_s=10.0, **params)
    specs = mixed(seed, rigid=0.6)
    rec = Engine(specs, cluster(nodes=3, gpus=4, cpus=24, mem=96), pol, overhead=ConstantOverhead(resume_s=5.0),
                 progress=False).run()
    s = rec.summary()
    assert s["jobs_finished"] == len(specs)
    assert pol.rounds > 20 and 0 < pol.kept_rounds < pol.rounds   # rounds that changed nothing, and others
    assert pol.cut_rounds == 0   # with elastic jobs queued, every eligible job is read (and estimated)
    assert max(st.rescales for st in rec.states) > 0   # elastic jobs were resized


@pytest.mark.parametrize("seed", range(3))
def test_rigid_rounds_that_stop_reading_once_nothing_fits_admit_what_a_full_pass_admits(seed):
    """Only rigid jobs: the minimums' pass stops reading the queue once less is left of a resource
    than any queued job needs, and admits the jobs a pass over every eligible job admits."""
    pol = CheckedOptimus(interval=120.0, prerun_s=10.0)
    specs = mixed(seed, rigid=1.0)
    rec = Engine(specs, cluster(nodes=3, gpus=4, cpus=24, mem=96), pol, progress=False).run()
    assert rec.summary()["jobs_finished"] == len(specs)
    assert 0 < pol.cut_rounds < pol.rounds
