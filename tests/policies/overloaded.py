"""An overloaded small cluster for Elastic-Tiresias's state checks (tests/policies/
test_elastic_tiresias_search.py and test_elastic_tiresias_walk.py): random elastic and rigid jobs
arriving faster than three 4-GPU machines finish them, and three speed-up curves."""

import math
import random
from dataclasses import replace

from clustersim.simulator.job import RoleSpec
from tests.factories import gpu_job, jobs


class Curves:
    """Three speed-up curves, by job index: linear, square root, saturating at 3 GPUs."""

    def rate(self, spec, alloc, cluster=None):
        n = sum(sum(t.values()) for t in alloc.values())
        return (n, math.sqrt(n), min(n, 3) + 0.01 * n)[spec.index % 3]


def overloaded(seed: int, n: int = 80, two_role: bool = False) -> list:
    """Elastic and rigid jobs of 1-8 GPUs, some with CPU demands that bind, two role names; with
    ``two_role``, every 17th job (from the 6th) a parameter server beside 2 workers, which R1
    cannot start."""
    rng = random.Random(seed)
    specs = []
    for i in range(n):
        if two_role and i % 17 == 5:   # not one GPU role, so never grouped
            s = gpu_job(f"j{i}", rng.uniform(0, 900), 2, rng.uniform(20, 300))
            specs.append(replace(s, roles=(RoleSpec("ps", 1, 0.0, 2.0, 0.0, 1, 1), s.roles[0])))
            continue
        g = rng.choice([1, 1, 2, 3, 4, 6, 8])
        lo = rng.choice([None, 1, 1, max(1, g // 2)])
        s = gpu_job(f"j{i}", rng.uniform(0, 900), g, rng.uniform(20, 900), work=rng.uniform(20, 900),
                    min_gpus=lo, max_gpus=None if lo is None else min(g * 2, 12))
        role = replace(s.roles[0], cpu=rng.choice([0.0, 0.0, 3.0, 5.0]), name=rng.choice(["worker", "trainer"]))
        specs.append(replace(s, roles=(role,)))
    return jobs(*sorted(specs, key=lambda s: s.submit_time))
