"""The per-start and per-end steps' shortcuts give the bits the step by step rules give.

Each shortcut here is a speed-up that must decide nothing differently: a take and a release move a
node's free row and the cluster's totals in use by one helper, a release as a take of ``-n`` tasks;
the recorder sums a job's GPUs per GPU type without reading each node's type when the cluster has
one; a plain dict allocation skips the grant checks that only a ``Tasks`` can need. Random,
overloaded sequences with fractional demands (where float rounding shows) are checked against the
rules written out resource by resource, bit for bit (``float.hex``).
"""

import random

from clustersim.simulator.cluster import EPS, Cluster, NodeGroup
from clustersim.simulator.job import EMPTY, JobSpec, JobState, RoleSpec, Tasks
from clustersim.simulator.metrics import Recorder
from clustersim.simulator.reconcile import validated


def _snap(v: float, cap: float) -> float:
    """The snap rule as docs/ARCHITECTURE.md states it: within EPS of 0 or of the capacity, exactly that."""
    if -EPS < v < EPS:
        return 0.0
    if -EPS < v - cap < EPS:
        return cap
    return v


def _hex(xs) -> list[str]:
    return [float(x).hex() for x in xs]


def _random_jobs(rng: random.Random, n: int) -> list[JobSpec]:
    jobs = []
    for i in range(n):
        # fractional demands (0.1 GPU, 1.7 cores...) make every sum round; some need no CPU or memory
        worker = RoleSpec("worker", rng.randint(1, 4), rng.choice([0.1, 0.3, 0.5, 1.0]),
                          rng.choice([0.0, 1.7, 2.9]), rng.choice([0.0, 3.3, 7.1]), 1, 4)
        ps = RoleSpec("ps", 1, 0.0, rng.choice([0.7, 1.3]), rng.choice([0.0, 2.2]), 0, 1)
        jobs.append(JobSpec(i, f"j{i}", 0.0, (worker, ps) if rng.random() < 0.3 else (worker,), 1.0))
    return jobs


def _random_alloc(rng: random.Random, spec: JobSpec, nodes: int) -> dict:
    alloc = {}
    for r in spec.roles:
        n = rng.randint(max(r.min_count, 1), r.max_count)
        placed: dict[int, int] = {}
        for _ in range(n):
            node = rng.randrange(nodes)
            placed[node] = placed.get(node, 0) + 1
        alloc[r.name] = placed
    return alloc


def test_takes_and_releases_move_rows_and_totals_as_the_per_resource_rule_does():
    rng = random.Random(7)
    cl = Cluster([NodeGroup(6, 8, 64, 256)])
    rows = [list(c) for c in cl._caps]   # the reference, moved resource by resource
    used = [0.0, 0.0, 0.0]
    holding: list[tuple[JobSpec, object]] = []
    for spec in _random_jobs(rng, 400):
        while holding and (rng.random() < 0.45 or len(holding) > 25):   # release some, in random order
            s, alloc = holding.pop(rng.randrange(len(holding)))
            cl.release(s, alloc)
            for role, nodes in alloc.items():
                for node, count in nodes.items():
                    for k, x in s.role(role).needs:
                        rows[node][k] = _snap(rows[node][k] + count * x, cl._caps[node][k])
                        used[k] -= count * x
            used = [0.0 if -EPS < u < EPS else u for u in used]
        alloc, _ = validated(spec, _random_alloc(rng, spec, 6), "test")
        fits = all(count * x - rows[node][k] <= EPS for role, nodes in alloc.items()
                   for node, count in nodes.items() for k, x in spec.role(role).needs)
        if not fits:
            continue   # (a take that does not fit is refused and leaves the rows: test_cluster.py)
        cl.take(spec, alloc, "test")
        holding.append((spec, alloc))
        for role, nodes in alloc.items():
            for node, count in nodes.items():
                for k, x in spec.role(role).needs:
                    rows[node][k] = _snap(rows[node][k] - count * x, cl._caps[node][k])
                    used[k] += count * x
        used = [0.0 if -EPS < u < EPS else u for u in used]
        assert [_hex(r) for r in cl._rows] == [_hex(r) for r in rows]
        assert _hex(cl.used) == _hex(used)
    assert len(holding) > 5   # the sequence was overloaded: jobs held while others came and went


def test_the_gpu_seconds_per_type_of_a_one_type_cluster_are_the_per_node_sums():
    rng = random.Random(11)
    jobs = _random_jobs(rng, 300)
    fast = Recorder(Cluster([NodeGroup(6, 8, 64, 256)]), jobs)
    general = Recorder(Cluster([NodeGroup(6, 8, 64, 256)]), jobs)
    assert fast._one_type == "generic"
    general._one_type = None   # every node's type read, as on a cluster of several types
    now = 0.0
    for spec in jobs:
        # the same sequence for both: one to three allocations (a start, then reshapes), then the end
        allocs = [validated(spec, _random_alloc(rng, spec, 6), "test")[0] for _ in range(rng.randint(1, 3))]
        times = sorted(rng.uniform(now, now + 1000.0) for _ in range(len(allocs) + 1))
        for rec in (fast, general):
            st = JobState(spec)
            for alloc, t in zip(allocs, times):
                st.allocation = alloc
                rec.event(t, st, "start", 0.0, 0.0)
            st.allocation, st.end_time = EMPTY, times[-1]
            rec.event(times[-1], st, "finish", 0.0)
            rec.ended(st)
        now += 10.0
    col_fast, col_general = fast._gpu_s["generic"], general._gpu_s["generic"]
    assert _hex(col_fast) == _hex(col_general)
    assert sum(col_fast) > 0


def test_a_plain_dict_and_a_tasks_without_grants_validate_to_the_same_allocation():
    worker = RoleSpec("worker", 2, 1.0, 4.0, 16.0, 1, 4)
    spec = JobSpec(0, "j", 0.0, (worker,), 1.0)
    plain, gpus = validated(spec, {"worker": {3: 2, 5: 1}}, "test")
    tasks, gpus_t = validated(spec, {"worker": Tasks({3: 2, 5: 1})}, "test")
    granted, _ = validated(spec, {"worker": Tasks({3: 2, 5: 1}, cpu=4.0)}, "test")   # the request: left implicit
    assert plain == tasks == granted and gpus == gpus_t == 3.0
    assert plain["worker"].cpu is None and plain["worker"].mem is None
    assert granted["worker"].cpu is None
    more, _ = validated(spec, {"worker": Tasks({3: 2}, cpu=6.0)}, "test")
    assert more["worker"].cpu == 6.0
