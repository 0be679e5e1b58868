"""The suite every registered policy passes: on random multi-resource traces and on bundled
GPU traces, no node is over-allocated, rigid jobs run whole (gang), elastic jobs stay within
their bounds, every job of a feasible trace finishes, two runs are identical, and only an
oracle reads ground truth (through its view, or around it: a non-oracle decides the same on
traces that differ only in the jobs' true sizes)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from clustersim import policies
from clustersim import traces
from clustersim.policies.base import Decision, OracleError
from clustersim.simulator.cluster import EPS
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import JobSpec, RoleSpec, task_counts
from clustersim.simulator.overhead import ConstantOverhead
from clustersim.simulator.rng import component_rng
from clustersim.simulator.workload import build_jobs
from tests.factories import cluster

ALL = policies.names()
ORACLES = {"sjf", "srtf", "tetris", "optimus_oracle"}
# the periodic policies replan every 20 min by default; the suite also runs them on events
PARAMS = {"drf": {"event_driven": True, "interval": 300.0}, "tetris": {"event_driven": True, "interval": 300.0}}


class Checked:
    """Wraps a policy; before and after every decision checks what the cluster holds."""

    def __init__(self, inner, specs: dict[str, JobSpec]):
        self.inner, self.specs = inner, specs
        self.name, self.oracle = inner.name, inner.oracle
        self.decisions = 0
        self.log: list = []  # (time, repr of the decision)

    def reset(self, view):
        self.inner.reset(view)

    def decide(self, view) -> Decision:
        self._check(view)
        decision = self.inner.decide(view)
        self.decisions += 1
        self.log.append((view.now, repr(sorted(decision.allocations.items())), decision.wakeup))
        for job_id, alloc in decision.allocations.items():
            if alloc:
                _check_bounds(self.specs[job_id], alloc)
        return decision

    def _check(self, view):
        cl = view.cluster
        held = np.zeros_like(cl.capacity)
        for job in view.running.values():
            spec = self.specs[job.job_id]
            _check_bounds(spec, job.allocation)
            for role, nodes in job.allocation.items():
                d = np.asarray(spec.role(role).demand)
                for node, c in nodes.items():
                    assert cl.up[node], f"{job.job_id} runs on down node {node}"
                    held[node] += c * d
        assert (held <= cl.capacity + EPS).all(), "a node is over-allocated"
        assert np.allclose(cl.capacity - held, cl.free, atol=1e-6), "free resources disagree with allocations"


def _check_bounds(spec: JobSpec, alloc) -> None:
    counts = task_counts(alloc)
    for r in spec.roles:
        n = counts.get(r.name, 0)
        if r.elastic:
            assert r.min_count <= n <= r.max_count, f"{spec.job_id} role {r.name}: {n} outside its bounds"
        else:
            assert n == r.count, f"rigid {spec.job_id} role {r.name} runs {n} of {r.count} tasks (gang)"


def random_trace(seed: int, n: int = 40) -> list[JobSpec]:
    """GPU-only rigid jobs, elastic GPU jobs and PS/worker jobs with CPU and memory."""
    rng = component_rng(seed, "conformance")
    specs, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(40.0))
        kind = rng.integers(3)
        duration = float(rng.uniform(20, 600))
        if kind == 0:
            g = int(rng.choice([1, 2, 4, 8]))
            roles = (RoleSpec("worker", g, 1.0, 2.0, 8.0, g, g),)
        elif kind == 1:
            g = int(rng.choice([2, 4]))
            roles = (RoleSpec("worker", g, 1.0, 2.0, 8.0, 1, 2 * g),)
        else:
            w = int(rng.integers(1, 5))
            roles = (RoleSpec("ps", w, 0.0, 4.0, 10.0, 1, 2 * w), RoleSpec("worker", w, 1.0, 2.0, 8.0, 1, 2 * w))
        specs.append(JobSpec(index=i, job_id=f"j{i}", submit_time=round(t, 3), roles=roles,
                             total_work=duration, duration=duration, tenant=f"t{i % 3}",
                             model=str(rng.choice(["vgg16", "resnet50"]))))
    return specs


def run(name: str, specs: list[JobSpec], cl, resume_s: float = 30.0):
    policy = Checked(policies.make(name, **PARAMS.get(name, {})), {s.job_id: s for s in specs})
    engine = Engine(specs, cl, policy, overhead=ConstantOverhead(resume_s=resume_s, rescale_s=10.0), progress=False)
    return engine.run(), policy


def bundled(fmt: str, path: str) -> list[JobSpec]:
    return build_jobs(traces.read(fmt, path), path)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("seed", [1, 2])
def test_random_multi_resource_trace(name, seed):
    specs = random_trace(seed)
    rec, policy = run(name, specs, cluster(nodes=4, gpus=4, cpus=24, mem=96))
    s = rec.summary()
    assert s["jobs_finished"] == len(specs), f"{name} left jobs unfinished"
    assert policy.decisions > 0
    for st in rec.states:  # a job never does more or less work than it has
        assert st.progress == pytest.approx(st.spec.total_work)
        assert st.end_time >= st.spec.submit_time + st.spec.duration * 0.5 - 1e-6  # at most 2x its request


@pytest.mark.parametrize("name", ALL)
def test_bundled_tiresias_trace(name):
    specs = bundled("tiresias", "bundled:tiresias/60_job.csv")
    rec, _ = run(name, specs, cluster(nodes=3, gpus=4))
    assert rec.summary()["jobs_finished"] == 60


@pytest.mark.parametrize("name", ALL)
def test_bundled_elasticflow_trace(name):
    specs = bundled("elasticflow", "bundled:elasticflow/raw/cluster10.csv")
    rec, _ = run(name, specs, cluster(nodes=16, gpus=8, cpus=96, mem=768), resume_s=0.0)
    assert rec.summary()["jobs_finished"] == len(specs)


@pytest.mark.parametrize("name", ALL)
def test_deterministic(name):
    specs = random_trace(7, n=30)
    a, _ = run(name, specs, cluster(nodes=3, gpus=4, cpus=24, mem=96))
    b, _ = run(name, specs, cluster(nodes=3, gpus=4, cpus=24, mem=96))
    assert a.jobs().equals(b.jobs())
    assert a.events().equals(b.events())


@pytest.mark.parametrize("name", ALL)
def test_reads_ground_truth_only_if_oracle(name):
    """A non-oracle policy runs to the end with views that refuse ground truth; the oracles
    are exactly those that declare it."""
    assert policies.make(name, **PARAMS.get(name, {})).oracle == (name in ORACLES)
    specs = random_trace(3, n=20)
    rec, _ = run(name, specs, cluster(nodes=3, gpus=4, cpus=24, mem=96))  # an OracleError would propagate
    assert rec.summary()["jobs_finished"] == 20


@pytest.mark.parametrize("name", [n for n in ALL if n not in ORACLES])
def test_decisions_do_not_depend_on_hidden_truth(name):
    """Two traces that differ only in the jobs' true sizes (work and duration scaled together,
    so every observable, rates included, is the same) look identical to a non-oracle policy
    until the first job finishes: every decision before then must be the same. This catches
    a policy that reads ground truth around its view."""
    rng = component_rng(11, "hidden-truth")
    base = random_trace(5, n=30)
    scaled = []
    for k in (100.0, None):
        specs = []
        for s in base:
            f = k if k is not None else 100.0 * float(rng.uniform(0.5, 2.0))
            specs.append(replace(s, total_work=s.total_work * f, duration=s.duration * f))
        scaled.append(specs)
    runs = [run(name, specs, cluster(nodes=3, gpus=4, cpus=24, mem=96)) for specs in scaled]
    first_end = min(st.end_time or np.inf for rec, _ in runs for st in rec.states)
    a, b = ([d for d in policy.log if d[0] < first_end] for _, policy in runs)
    assert len(a) > 10, "the check needs decisions before the first completion"
    assert a == b


def test_a_view_refuses_ground_truth_to_a_non_oracle():
    from clustersim.simulator.view import JobView, Observer as Clock
    from clustersim.simulator.job import JobState
    spec = random_trace(1, n=1)[0]
    with pytest.raises(OracleError):
        JobView(JobState(spec), Clock(), oracle=False).remaining_work
