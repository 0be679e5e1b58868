"""The ElasticFlow simulator's mechanisms: rounds whose slot runs from the last decision, its
elastic EDF, the elastic bounds of its jobs, and what each of its policies is charged."""

from __future__ import annotations

import pytest

from clustersim import traces
from clustersim.experiment import build_engine, compose, report
from clustersim.conformance import check_policy
from clustersim.policies.edf import Edf
from clustersim.policies.fifo import Fifo
from clustersim.simulator.engine import Engine
from clustersim.simulator.errors import ConfigError
from tests.factories import cluster, gpu_job, jobs


def _jcts(engine) -> dict[str, float]:
    t = engine.run().jobs()
    return dict(zip(t.column("job_id").to_pylist(), t.column("jct").to_pylist()))


def _slot_jobs():
    # one-GPU jobs on a 4-GPU node, so each starts at the first decision after it arrives
    return jobs(gpu_job("a", 30.0, 1, 100.0), gpu_job("b", 50.0, 1, 40.0), gpu_job("c", 200.0, 1, 10.0))


def test_a_slot_runs_from_the_last_decision_as_elasticflows_does():
    # from_last: a decides at 30 (the first decision) and runs 30..130; b arrives at 50, within 60 s
    # of that decision, so waits for 30 + 60 = 90 and runs 90..130 (JCT 80); the completions at 130
    # wait for 90 + 60 = 150; c arrives at 200, within 60 s of 150, so starts at 210 (JCT 20)
    engine = Engine(_slot_jobs(), cluster(), Fifo(), progress=False, decision_interval=60, slot_from_last=True)
    assert _jcts(engine) == pytest.approx({"a": 100.0, "b": 80.0, "c": 20.0})
    # aligned rounds: a and b start at 60 (a ends 160, b 100), c arrives 200 and starts at 240
    engine = Engine(_slot_jobs(), cluster(), Fifo(), progress=False, decision_interval=60)
    assert _jcts(engine) == pytest.approx({"a": 130.0, "b": 50.0, "c": 50.0})


def test_elastic_edf_gives_each_job_by_deadline_its_maximum_or_the_largest_free_power_of_two():
    # 8 GPUs; every job asks 1 GPU and alone would take its duration on it (work = duration, rate
    # proportional to GPUs). t=0, deadline order a, b, c: a takes its maximum 8, none left.
    # a ends at 80/8 = 10. Then b takes its maximum 2 (6 left) and c, maximum 8 > 6, the largest
    # power of two within 6: 4. c ends at 10 + 30/4 = 17.5; b keeps 2 and ends at 10 + 60/2 = 40.
    specs = jobs(gpu_job("a", 0.0, 1, 80.0, min_gpus=1, max_gpus=8, deadline=100.0),
                 gpu_job("b", 0.0, 1, 60.0, min_gpus=1, max_gpus=2, deadline=200.0),
                 gpu_job("c", 0.0, 1, 30.0, min_gpus=1, max_gpus=8, deadline=300.0))
    engine = Engine(specs, cluster(nodes=2, gpus=4), Edf(elastic=True), progress=False)
    assert _jcts(engine) == pytest.approx({"a": 10.0, "b": 40.0, "c": 17.5})
    # the rigid EDF runs each at its 1 GPU: all three at once
    engine = Engine(specs, cluster(nodes=2, gpus=4), Edf(), progress=False)
    assert _jcts(engine) == pytest.approx({"a": 80.0, "b": 60.0, "c": 30.0})


def test_elastic_edf_conforms():
    check_policy(Edf, params={"elastic": True}, tags=frozenset({"elastic"}))


def test_elasticflow_jobs_get_the_gpu_bounds_of_their_throughput_tables():
    t = traces.read("elasticflow", "bundled:elasticflow_peer/elasticVpollux_e.csv", elastic=True).to_pydict()
    bounds = {(m, b): (r[0]["min_count"], r[0]["max_count"]) for m, b, r in zip(t["model"], t["batch_size"], t["roles"])}
    # throughputs_T4: deepspeech2 at 320 has no 64-GPU figure (nan): 32; yolov3 at 64 none past 16
    assert bounds[("deepspeech2", 320)] == (1, 32) and bounds[("deepspeech2", 640)] == (1, 64)
    assert bounds[("yolov3", 64)] == (1, 16) and bounds[("bert", 384)] == (1, 64)


def test_each_elasticflow_preset_charges_what_the_elasticflow_simulator_charges_its_policy():
    fifo, edf, tiresias = (compose([f"+experiment={e}"]) for e in
                           ("peer_elasticflow_fifo", "peer_elasticflow_edf", "peer_elasticflow"))
    assert fifo.overhead.name == edf.overhead.name == "none"
    assert tiresias.overhead.name == "elasticflow"
    assert edf.policy.elastic and edf.policy.decision_slot == "from_last"
    # speeds from ElasticFlow's own T4 tables; its FIFO and Tiresias loops run a job for its trace
    # duration (scheduler.py dlas_sim_jobs: remaining = duration - executed), its EDF and
    # ElasticFlow end one at ceil(t + iterations left / rate) (edf_sim_allocation, ef_sim_allocation)
    assert {c.profile.name for c in (fifo, edf, tiresias)} == {"elasticflow_t4"}
    assert fifo.profile.work == tiresias.profile.work == "duration" and edf.profile.work == "iterations"


def test_the_summary_line_names_the_policy_config_so_a_swapped_preset_policy_shows():
    cfg = compose(["policy=tiresias_pollux"])
    summary = build_engine(cfg).run().summary()
    assert "policy=tiresias_pollux (tiresias) " in report(cfg, summary, "x").splitlines()[0]
    assert "policy=tiresias " in report(compose(["policy=tiresias"]), summary, "x").splitlines()[0]
    assert compose(["+experiment=peer_pollux", "policy=tiresias"]).policy.config == "tiresias"


def test_a_bad_decision_slot_is_a_config_error():
    with pytest.raises(ConfigError, match="decision_slot"):
        build_engine(compose(["policy.decision_slot=sometimes"]))


def test_elasticflow_admits_by_minimum_satisfactory_shares_and_gives_the_rest_by_marginal_return():
    from clustersim.policies.elasticflow import ElasticFlow
    from clustersim.simulator.engine import Observe
    # 4 GPUs; each job asks 1 GPU (bounds 1..4), declares work = duration at 1 GPU, rate
    # proportional to GPUs. Minimum satisfactory shares at t=0: a (100 by 60): 1 GPU takes 100 s,
    # 2 take 50 <= 60: 2. c (200 by 100): 2 GPUs take 100 <= 100: 2. b (100 by 120): 1 GPU.
    # Admission in deadline order: a 2 <= 4, c 2 + 2 <= 4, b 2 + 2 + 1 > 4: b not admitted.
    # t=0: a 2, c 2, b (best-effort) nothing left. a ends at 50. t=50: c has 100 left by 100: 2;
    # b its least level 1, then the GPU left goes to b (1 -> 2 saves half its time per GPU;
    # c's next level needs 2): b runs 100 on 2 from 50, ends at 100; c ends at 100.
    specs = jobs(gpu_job("a", 0.0, 1, 100.0, min_gpus=1, max_gpus=4, deadline=60.0),
                 gpu_job("b", 0.0, 1, 100.0, min_gpus=1, max_gpus=4, deadline=120.0),
                 gpu_job("c", 0.0, 1, 200.0, min_gpus=1, max_gpus=4, deadline=100.0))
    policy = ElasticFlow()
    engine = Engine(specs, cluster(), policy, progress=False, observe=Observe(declared_iterations=True))
    assert _jcts(engine) == pytest.approx({"a": 50.0, "b": 100.0, "c": 100.0})
    assert policy.not_admitted == ["b"]


def test_elasticflow_conforms():
    from clustersim.policies.elasticflow import ElasticFlow
    check_policy(ElasticFlow)


# ------------------------------------------------ job by job against the ElasticFlow simulator's own code
# Rows of the bundled testbed trace (elasticVpollux_e.csv) run under the EDF preset; the expected JCTs
# are worked by hand from pkusys/ElasticFlow scheduler/scheduler.py (one_queue_edf_sim_jobs: the slot
# rule and the loop; edf_sim_allocation: a job by deadline gets min(max_gpu, 64) GPUs when that many
# are free, else the largest table column that fits, and ends at ceil(t + iterations left / rate));
# jobs.py (add_job: max_gpu; run_all_jobs: progress = seconds x rate at the job's GPUs) and log.py
# (job_complete: JCT = int(end_time - submit_time)), with its T4 tables (throughputs_T4/<model>.csv).
# The peer rounds every planned end up to a whole second at each event: ours is continuous, so each
# of ours is at most a second per event the job lived through below the peer's.
TRACE = traces.resolve("bundled:elasticflow_peer/elasticVpollux_e.csv")


def _edf_preset_on_rows(tmp_path, rows: list[int]) -> dict[str, float]:
    lines = TRACE.read_text().splitlines()
    p = tmp_path / "rows.csv"
    p.write_text("\n".join([lines[0]] + [lines[r + 1] for r in rows]) + "\n")
    cfg = compose(["+experiment=peer_elasticflow_edf", f"trace.path={p}", "trace.cache.enabled=false"])
    return _jcts(build_engine(cfg))


def _agree(ours: dict[str, float], peer: dict[str, int], events: dict[str, int]) -> None:
    for job, jct in peer.items():
        assert 0 <= jct - ours[job] < events[job], (job, ours[job], jct)


def test_elastic_edf_and_the_slot_rule_agree_job_by_job_on_the_traces_first_five_jobs(tmp_path):
    ours = _edf_preset_on_rows(tmp_path, [0, 1, 2, 3, 4])
    # job 0 (cifar10 at 4096, alone): max_gpu 64 (every column measured), 2011 it / 3.31456 it/s =
    #   606.72 s -> 607. Job 1 (ncf at 32768, asks 8, alone 2,065 s later): 64 GPUs, 1548 / 22.47946
    #   = 68.86 -> 69 (slower than on 1 GPU: the peer gives max_gpu regardless).
    # job 2 (yolov3 at 64) arrives at 3721209: max_gpu 16 (no 32- or 64-GPU figure), 16 GPUs.
    # jobs 3, 4 (ncf) arrive at 3721260 and 3721263, within 60 s of the last event: both moved to
    #   3721269 (the slot rule). By deadline job 3 takes all 64 GPUs, job 4 and job 2 get none
    #   (job 2 ran 60 s: 60 x 0.851478 = 51.09 it). Job 3 ends ceil(3721269 + 68.86) = 3721338:
    #   JCT 78. Then job 4 takes 64: ends 3721338 + 69 = 3721407, JCT 144. Then job 2 on 16:
    #   (14577 - 51.09) / 0.851478 = 17059.68 s -> ends ceil(3721407 + 17059.68) = 3738467, JCT 17258.
    _agree(ours, {"0": 607, "1": 69, "2": 17258, "3": 78, "4": 144}, {"0": 1, "1": 1, "2": 2, "3": 1, "4": 2})
    # ours: 606.72, 68.86, 17257.37, 77.86, 143.73
    assert ours["3"] == pytest.approx(3721269 + 1548 / 22.47946282244047 - 3721260)


def test_elastic_edf_gives_the_largest_free_table_column_as_elasticflows_does(tmp_path):
    ours = _edf_preset_on_rows(tmp_path, [5, 6, 7])
    # job 5 (deepspeech2 at 320; no 64-GPU figure: max_gpu 32) arrives at 3721346: 32 GPUs.
    # jobs 6 (imagenet at 6400, max 64) and 7 (ncf) arrive at 3721372: moved to 3721406 (slot).
    # job 5 ran 60 s: 60 x 0.877801 = 52.67 it. By deadline: job 7 takes 64, jobs 5 and 6 none.
    # job 7 ends 3721406 + ceil(68.86) = 3721475: JCT 103. Job 5 (earlier deadline) gets its 32;
    # job 6 finds 32 free, fewer than its 64: the largest column within 32, 32 GPUs (0.914702 it/s).
    # job 5 ends ceil(3721475 + 2211.33 / 0.877801) = 3721475 + 2520 = 3723995: JCT 2649.
    # job 6 ran 2520 s on 32 GPUs (2305.05 it); on 64 (1.270917 it/s) the 21666.95 left take
    # 17048.3 s: ends ceil(3723995 + 17048.3) = 3741044, JCT 19672.
    _agree(ours, {"5": 2649, "6": 19672, "7": 103}, {"5": 2, "6": 3, "7": 1})
