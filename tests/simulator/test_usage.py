"""What DLRM tasks use: CPU with the throughput, PS memory with the samples seen, and the hidden
memory need an observer sees (simulator/usage.py, Zoo.usage)."""

import pytest

from clustersim.policies.base import Decision, Policy
from clustersim.simulator import profiles
from clustersim.simulator.cluster import Cluster, NodeGroup
from clustersim.simulator.engine import Engine
from clustersim.simulator.faults import make as make_faults
from clustersim.simulator.job import JobSpec, RoleSpec, Tasks

ZOO = profiles.load()


def wd_job(ps=8, workers=24, ps_cpu=16.0, w_cpu=3.0, ps_mem=40.0, w_mem=8.0, work=200_000.0):
    roles = (RoleSpec("ps", ps, 0.0, ps_cpu, ps_mem, 1, 15), RoleSpec("worker", workers, 0.0, w_cpu, w_mem, 1, 60))
    return JobSpec(index=0, job_id="wd", submit_time=0.0, roles=roles, total_work=work, profile="wide_deep",
                   model="wide_deep")


def alloc(spec):
    return {r.name: Tasks({0: r.count}, r.cpu, r.mem) for r in spec.roles}


def test_cpu_follows_the_throughput_by_hand():
    spec = wd_job()
    # Table 2's W&D: 24 workers of 3 cores would run 24 x 12 = 288 steps/s and load the PS with
    # 24 x 5.7 = 136.8 cores; the 8 x 16 = 128 they have hold it to 288 x 128 / 136.8 = 269.5.
    # PS busy: 16 cores each; a worker: 2.5 cores x 128 / 136.8 = 2.339
    u = ZOO.usage(spec, alloc(spec))
    assert u["ps"][0] == pytest.approx(16.0) and u["worker"][0] == pytest.approx(2.5 * 128 / 136.8)
    # at 100 steps/s (a pause's end, a straggler): the workers go at 100/288 of their pace;
    # a worker 2.5 x 100/288 = 0.868 cores, a PS 24 x 5.7 x 100/288 / 8 = 5.94 cores
    u = ZOO.usage(spec, alloc(spec), rate=100.0)
    assert u["worker"][0] == pytest.approx(2.5 * 100 / 288) and u["ps"][0] == pytest.approx(24 * 5.7 * 100 / 288 / 8)
    # one worker alone: the PS carries 5.7 cores whatever its 16 (not the profile's 16)
    one = wd_job(workers=1)
    assert ZOO.usage(one, alloc(one))["ps"][0] == pytest.approx(5.7 / 8)


def test_ps_memory_grows_with_the_samples_seen_by_hand():
    spec = wd_job()
    # 8 PS x 8 GB = 64 GB by the end (Table 2), 20 % of it from the start: at half the work
    # 64 x (0.2 + 0.8 x 0.5) / 8 PSes = 4.8 GB each; at the start 1.6 GB, at the end 8 GB
    mem = [ZOO.usage(spec, alloc(spec), progress=f)["ps"][1] for f in (0.0, 0.5, 1.0)]
    assert mem == pytest.approx([1.6, 4.8, 8.0])
    assert ZOO.usage(spec, alloc(spec), progress=0.5)["worker"][1] == pytest.approx(4.0)   # workers: flat
    four = wd_job(ps=4)
    assert ZOO.usage(four, alloc(four))["ps"][1] == pytest.approx(16.0)   # the same tables over 4 PSes
    assert ZOO.usage(spec, alloc(spec), progress=0.5, need=2.0)["ps"][1] == pytest.approx(9.6)


class Start(Policy):
    name = "start"

    def __init__(self):
        self.seen = []

    def decide(self, view):
        for j in view.running.values():
            self.seen.append((view.now, j.usage()))
        return Decision({j.job_id: {r.name: {0: r.count} for r in j.roles} for j in view.pending.values()},
                        wakeup=view.now + 100.0)


@pytest.mark.parametrize("hidden", [0.0, 1.0])
def test_the_observer_sees_growth_and_the_hidden_need(hidden):
    """JobView.usage() reads what a profiler would: PS memory growing as the job trains and, for a
    job of faults.oom's hidden need (underprovisioned 1.0: every job), twice the profile's."""
    spec = wd_job(ps_mem=100.0, work=269.4736842105263 * 1000)   # 1000 s at Table 2's rate
    pol = Start()
    cl = Cluster([NodeGroup(count=1, gpus=0, cpus=400, mem=2000)])
    fm = make_faults({"enabled": True, "oom": {"underprovisioned": hidden, "need_factor": 2.0}})
    Engine([spec], cl, pol, speed=ZOO.speed, usage=ZOO.usage, progress=False, faults=fm).run()
    need = 2.0 if hidden else 1.0
    for t, u in pol.seen:
        # (within 0.5 %: the fault model's default checkpoints cost the job a little time)
        assert u["ps"][1] == pytest.approx(need * 64 * (0.2 + 0.8 * t / 1000) / 8, rel=5e-3)
    assert len(pol.seen) >= 3 and pol.seen[-1][0] >= 700   # watched through its run (wake-ups are kept while
    # a job is pending; the checkpoints and the run's end give decisions too)
