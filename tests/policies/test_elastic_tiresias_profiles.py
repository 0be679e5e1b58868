"""Elastic-Tiresias's E curves and shapes kept per speed profile (``Profiled.key``): a job whose
profile another job already has takes that job's curve and shape; on random overloaded runs with
the zoo's profiles, each must equal the job's own recount (the outputs stay byte-identical)."""

import math
import random
from dataclasses import replace

import pytest

from clustersim.policies.elastic_tiresias import ElasticTiresias
from clustersim.simulator import profiles
from clustersim.simulator.engine import Engine
from clustersim.simulator.overhead import ConstantOverhead
from clustersim.simulator.speed import LinearSpeed
from clustersim.simulator.view import Observer, Profiled
from tests.factories import cluster, gpu_job
from tests.policies.overloaded import Curves, overloaded

ZOO = profiles.load()
POOL = [("cifar10", 128), ("cifar10", 256), ("bert", 32), ("ncf", None)]   # (profile, batch): a few to share


class CheckedCurves(ElasticTiresias):
    """Elastic-Tiresias that recounts every curve and shape it hands out from a job's own estimates."""

    def __init__(self, **params):
        super().__init__(**params)
        self.curves = self.shared = self.shaped = 0

    def _curve(self, jv):
        fresh = jv.job_id not in self.best
        key = jv.profiled.key
        shared = fresh and key is not None and key in self._curves
        got = super()._curve(jv)
        if fresh:
            role = jv.roles[0]
            top = max(role.max_count, role.count)
            rates = [0.0] + [jv.profiled.counts_rate({role.name: p}, max(1, math.ceil(p / self.m)))
                             for p in range(1, top + 1)]
            assert got == (max(rates[p] / p for p in range(1, top + 1)), rates)   # exact: the same estimates
            self.curves += 1
            self.shared += shared
        return got

    def _shape(self, jv, role, lo):
        shape = super()._shape(jv, role, lo)
        best, rates = self._curve(jv)
        effs = tuple((rates[p] / best if best > 0 else 0.0) for p in range(max(lo, 1), role.count + 1))
        assert self._shape_ids[(tuple(role.demand), role.count, lo, effs)] == shape
        self.shaped += 1
        return shape


def zoo_jobs(seed: int) -> list:
    """The overloaded run's jobs, each with a profile and batch drawn from a small pool, and 20 x the
    iterations (the zoo's rates are tens of iterations/s: the machines stay overloaded)."""
    rng = random.Random(seed)
    return [replace(s, profile=p, batch_size=b, total_work=20 * s.total_work)
            for s in overloaded(seed) for p, b in [rng.choice(POOL)]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_curves_and_shapes_kept_per_profile_equal_each_jobs_own(seed):
    pol = CheckedCurves(thresholds=[50.0, 400.0], compaction_threshold=2)
    rec = Engine(zoo_jobs(seed), cluster(3, gpus=4, cpus=16), pol, speed=ZOO.speed, overhead=ConstantOverhead(),
                 progress=False).run()
    assert rec.summary()["jobs_finished"] == 80
    assert pol.compactions > 0 and pol.shaped > 20
    assert pol.shared > 5 and pol.curves > pol.shared   # curves were taken from other jobs, and some made


def test_profiled_key_only_where_the_speed_model_promises_it():
    """Equal keys, equal rates: the zoo's model keys its rates by profile, batch and roles. Another
    speed model (LinearSpeed reads a job's duration) or a per-job profiled error gives no key."""
    a = gpu_job("a", 0, 4, 100.0, min_gpus=1, max_gpus=8, profile="cifar10", batch_size=128)
    b = replace(a, job_id="b", index=1, duration=900.0, total_work=50.0)   # another job, one profile
    c = replace(a, job_id="c", index=2, batch_size=256)
    obs = Observer(speed=ZOO.speed, cluster=cluster(2))
    pa, pb, pc = (Profiled(s, obs) for s in (a, b, c))
    assert pa.key == pb.key and pa.key != pc.key
    for alloc in ({"worker": {0: 1}}, {"worker": {0: 3, 1: 2}}, {"worker": {1: 4}}):
        assert pa.rate(alloc) == pb.rate(alloc)
    assert pa.rate({"worker": {0: 2}}) != pc.rate({"worker": {0: 2}})
    assert Profiled(a, Observer(speed=LinearSpeed())).key is None
    assert Profiled(a, Observer(speed=Curves())).key is None
    assert Profiled(a, Observer(speed=ZOO.speed, profiled_error=0.1)).key is None
