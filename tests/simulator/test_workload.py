"""Workload assignment: profiles by model name or a seeded rule; durations preserved exactly."""

import collections

import pytest

from clustersim import traces
from clustersim.policies.fifo import Fifo
from clustersim.simulator.cluster import Cluster, NodeGroup
from clustersim.simulator.engine import Engine
from clustersim.simulator.errors import ConfigError
from clustersim.simulator.workload import Assignment, build_jobs, packed
from clustersim.traces.schema import Role, TraceError, build_table

ZOO_CFG = {"zoo": True, "unknown": "warn"}
ASSIGN = Assignment.from_config(ZOO_CFG)


def run_alone(specs, cluster):
    rec = Engine(specs, cluster, Fifo(), speed=ASSIGN.zoo.speed, progress=False).run()
    return rec.states


@pytest.mark.parametrize("fmt, path, gpus_per_node", [
    ("tiresias", "bundled:tiresias/60_job.csv", 4),
    ("elasticflow", "bundled:elasticflow/ef/195job.csv", 8),
])
def test_every_job_run_alone_takes_exactly_its_recorded_duration(fmt, path, gpus_per_node):
    table = traces.read(fmt, path)
    cl = Cluster([NodeGroup(16, gpus_per_node, 64, 512)])
    for spec in build_jobs(table, path, ASSIGN, cl, seed=0):
        (st,) = run_alone([spec], cl)                       # each job alone: first-fit packs it
        assert st.first_start == spec.submit_time
        assert st.end_time - spec.submit_time == pytest.approx(spec.duration, rel=1e-9)


def test_a_job_spanning_nodes_keeps_its_duration_with_a_placement_aware_model():
    table = build_table({"job_id": ["a"], "submit_time": [0.0], "duration": [500.0], "model": ["vgg16"],
                         "roles": [[Role("worker", 16, 1.0)]]})
    cl = Cluster([NodeGroup(4, 8, 64, 512)])
    (spec,) = build_jobs(table, "t", ASSIGN, cl)
    assert len(packed(spec, cl)["worker"]) == 2
    (st,) = run_alone([spec], cl)
    assert st.end_time == pytest.approx(500.0, rel=1e-12)


def test_profiles_come_from_the_trace_model_names():
    specs = build_jobs(traces.read("elasticflow", "bundled:elasticflow/ef/195job.csv"), "ef", ASSIGN)
    assert all(s.profile == s.model for s in specs)
    specs = build_jobs(traces.read("tiresias", "bundled:tiresias/60_job.csv"), "t", ASSIGN)
    assert all(s.profile == s.model for s in specs)


def test_jobs_without_a_model_get_a_seeded_uniform_draw_from_the_pool():
    table = traces.read("elasticflow", "bundled:elasticflow/raw/cluster10.csv")
    a = [s.profile for s in build_jobs(table, "raw", ASSIGN, seed=1)]
    b = [s.profile for s in build_jobs(table, "raw", ASSIGN, seed=1)]
    c = [s.profile for s in build_jobs(table, "raw", ASSIGN, seed=2)]
    assert a == b and a != c
    counts = collections.Counter(a)
    assert set(counts) == set(ASSIGN.pool["gpu"])
    assert max(counts.values()) < 3 * min(counts.values())          # roughly uniform over 9 models, 260 jobs


def test_unknown_model_names_are_drawn_or_rejected_by_config():
    table = build_table({"job_id": ["a", "b"], "submit_time": [0.0, 1.0], "duration": [10.0, 10.0],
                         "model": ["vgg16", "mystery-net"], "roles": [[Role("worker", 1, 1.0)]] * 2})
    specs = build_jobs(table, "t", ASSIGN)
    assert specs[0].profile == "vgg16" and specs[1].profile in ASSIGN.pool["gpu"]
    strict = Assignment.from_config({**ZOO_CFG, "unknown": "error"})
    with pytest.raises(TraceError, match=r"t: row 1 \(job 'b'\): model 'mystery-net' has no gpu profile"):
        build_jobs(table, "t", strict)


def test_ps_jobs_get_ps_profiles():
    roles = [Role("ps", 2, 0.0, 4, 8), Role("worker", 4, 1.0, 2, 8)]
    table = build_table({"job_id": ["a", "b"], "submit_time": [0.0, 0.0], "duration": [100.0, 100.0],
                         "model": ["ResNet-50", None], "roles": [roles, roles]})
    a, b = build_jobs(table, "t", ASSIGN)
    assert a.profile == "resnet50_ps"
    assert b.profile in ASSIGN.pool["ps"]
    prof = ASSIGN.zoo.profile("resnet50_ps")
    spread = prof.rate(a, {"ps": 2, "worker": 4}, 6) * 32   # samples/s at p=2, w=4, every task alone
    assert spread == pytest.approx(prof.testbed.rate(2, 4) * 32)   # the testbed model (1GbE, Table 1 size)
    # the duration is at the request packed on one node, where part of the PS traffic stays local
    assert a.total_work / 100.0 == pytest.approx(prof.rate(a, {"ps": 2, "worker": 4}, 1))
    assert a.total_work / 100.0 * 32 > spread


def test_iterations_without_duration_get_the_duration_of_their_profile():
    table = build_table({"job_id": ["a"], "submit_time": [0.0], "iterations": [1000.0], "model": ["ncf"],
                         "batch_size": [32768], "roles": [[Role("worker", 4, 1.0)]]})
    (spec,) = build_jobs(table, "g", ASSIGN)
    assert spec.total_work == 1000.0
    assert spec.duration == pytest.approx(1000.0 / 56.34158886973979)
    with pytest.raises(TraceError, match="no duration, and no speed profile"):
        build_jobs(table, "g")


def test_without_a_zoo_work_is_the_trace_iterations_or_duration():
    specs = build_jobs(traces.read("tiresias", "bundled:tiresias/60_job.csv"))
    assert specs[0].total_work == 606 and specs[0].duration == 164 and specs[0].profile == "vgg19"
    assert Assignment.from_config({"name": "linear", "zoo": False}) is None


def test_pool_entries_must_belong_to_their_family():
    with pytest.raises(ValueError, match="profile.pool.gpu: 'wide_deep' is a ps profile"):
        Assignment.from_config({**ZOO_CFG, "pool": {"gpu": ["wide_deep"]}})


def test_jobs_without_duration_or_iterations_are_sized_by_their_loss_curve():
    roles = [Role("ps", 1, 0.0, 3, 9), Role("worker", 1, 1.0, 2, 8)]
    table = build_table({"job_id": ["a", "b"], "submit_time": [0.0, 5.0], "model": ["Sequence-to-Sequence", "dssm"],
                         "roles": [roles, roles]})
    cl = Cluster([NodeGroup(2, 4, 32, 256)])
    a, b = build_jobs(table, "opt", ASSIGN, cl, seed=4)
    assert a.profile == "seq2seq" and a.curve is not None
    assert a.curve.iters_per_epoch == pytest.approx(1_000_000 / 64)             # Optimus Table 1 / batch
    assert a.total_work == pytest.approx(a.curve.epochs * a.curve.iters_per_epoch)
    one_node = ASSIGN.zoo.profile("seq2seq").rate(a, {"ps": 1, "worker": 1}, 1)
    assert one_node > 276.7 / 64                  # measured (1 PS, 1 worker, spread); faster on one node
    assert a.duration == pytest.approx(a.total_work / one_node)
    (st,) = run_alone([a], cl)
    assert st.end_time == pytest.approx(a.duration, rel=1e-9)                    # done at its convergence epoch
    assert len(a.curve.observations(st.progress)) == a.curve.epochs
    assert [s.total_work for s in build_jobs(table, "opt", ASSIGN, cl, seed=4)] == [a.total_work, b.total_work]
    half = Assignment.from_config({**ZOO_CFG, "convergence": {"dataset_fraction": 0.5}})
    (a2, _) = build_jobs(table, "opt", half, cl, seed=4)
    assert a2.total_work == pytest.approx(a.total_work / 2)
    # a fraction of its own for one profile (Optimus §6.1 downscaled two models' datasets only)
    own = Assignment.from_config({**ZOO_CFG, "convergence": {"dataset_fraction": 0.5, "dataset_fractions": {"dssm": 0.25}}})
    (a3, b3) = build_jobs(table, "opt", own, cl, seed=4)
    assert (a3.total_work, b3.total_work) == pytest.approx((a.total_work / 2, b.total_work / 4))
    with pytest.raises(ConfigError, match=r"profile.convergence.dataset_fractions.dssm: must be <= 1, got 1.5"):
        Assignment.from_config({**ZOO_CFG, "convergence": {"dataset_fractions": {"dssm": 1.5}}})
    with pytest.raises(ConfigError, match="dataset_fractions: 'nosuch' is not a profile of the zoo"):
        Assignment.from_config({**ZOO_CFG, "convergence": {"dataset_fractions": {"nosuch": 0.5}}})


def test_a_job_without_size_needs_a_profile_with_a_dataset_size():
    # gpt2 has neither a dataset size nor Pollux gradient statistics (bert has the latter now)
    table = build_table({"job_id": ["a"], "submit_time": [0.0], "model": ["gpt2"],
                         "roles": [[Role("worker", 1, 1.0)]]})
    with pytest.raises(TraceError, match=r"t: row 0 \(job 'a'\): no duration or iterations, and profile 'gpt2' "
                                         "has no dataset_size"):
        build_jobs(table, "t", ASSIGN)


def test_the_synthetic_optimus_workload_is_sized_by_convergence_and_keeps_its_duration_alone():
    from clustersim.simulator.rng import component_rng
    from clustersim.traces import synthetic
    table = synthetic.generate(component_rng(0, "trace.synthetic"), generator="optimus", jobs=20)
    cl = Cluster([NodeGroup(6, 2, 16, 48)])                     # Optimus's GPU servers (§6.1)
    frac = Assignment.from_config({**ZOO_CFG, "convergence": {"dataset_fraction": 0.01}})
    for spec in build_jobs(table, "optimus", frac, cl, seed=0):
        assert spec.curve is not None and spec.total_work > 0 and spec.profile in frac.pool["ps"]
        (st,) = Engine([spec], cl, Fifo(), speed=frac.zoo.speed, progress=False).run().states
        # alone on the empty cluster Fifo's first fit spans as few servers as workload.packed,
        # and a PS job's speed depends on that number (profile speed.locality)
        assert st.end_time - spec.submit_time == pytest.approx(spec.duration, rel=1e-9)


def test_a_model_without_a_profile_warns_once_naming_it_and_draws(caplog):
    from clustersim.simulator.workload import build_jobs
    from clustersim.traces.schema import Role, build_table
    table = build_table({"job_id": ["a", "b", "c"], "submit_time": [0.0, 1.0, 2.0], "duration": [10.0] * 3,
                         "roles": [[Role("worker", 1, 1.0)]] * 3, "model": ["LM", "LM", "resnet50"]})
    with caplog.at_level("WARNING", logger="clustersim"):
        specs = build_jobs(table, "trace t", Assignment.from_config(ZOO_CFG))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "2 job(s)" in lines[0] and "'LM' x2" in lines[0]
    assert specs[2].profile == "resnet50"


def test_an_explicit_model_mapping_gives_the_named_profile_without_a_warning(caplog):
    from clustersim.simulator.workload import build_jobs
    from clustersim.traces.schema import Role, build_table
    table = build_table({"job_id": ["a"], "submit_time": [0.0], "duration": [10.0],
                         "roles": [[Role("worker", 1, 1.0)]], "model": ["LM (batch size 20)"]})
    with caplog.at_level("WARNING", logger="clustersim"):
        specs = build_jobs(table, "trace t", Assignment.from_config({**ZOO_CFG, "models": {"LM": "gpt2"}}))
    assert specs[0].profile == "gpt2" and not caplog.records
    with pytest.raises(Exception, match="profile.models.LM: no profile 'gpt9'"):
        Assignment.from_config({**ZOO_CFG, "models": {"LM": "gpt9"}})
    with pytest.raises(Exception, match="unknown"):
        Assignment.from_config({**ZOO_CFG, "unknown": "random"})


def test_jobs_built_a_slice_of_rows_at_a_time_are_those_built_at_once(monkeypatch):
    # 7 jobs with one- and two-role shapes, models known, unknown and missing (drawn), built with
    # slices of 3 rows (3 + 3 + 1, the roles column sliced too) and in one slice: the same specs
    ps = [Role("ps", 2, 0.0, 4, 8), Role("worker", 4, 1.0, 2, 8)]
    gpu = [Role("worker", 2, 1.0, 4, 8)]
    table = build_table({"job_id": list("abcdefg"), "submit_time": [float(i) for i in range(7)],
                         "duration": [100.0 + i for i in range(7)],
                         "model": ["ResNet-50", None, "vgg16", None, "unheard-of", None, "vgg16"],
                         "roles": [ps, gpu, gpu, ps, gpu, gpu, ps]})
    from clustersim.simulator import workload
    whole = build_jobs(table, "t", ASSIGN, seed=3)
    monkeypatch.setattr(workload, "ROWS_AT_ONCE", 3)
    assert build_jobs(table, "t", ASSIGN, seed=3) == whole
    assert [s.roles[0].name for s in whole] == ["ps", "worker", "worker", "ps", "worker", "worker", "ps"]


def _roles_table(roles):
    n = len(roles)
    return build_table({"job_id": [f"j{i}" for i in range(n)], "submit_time": [0.0] * n, "duration": [1.0] * n,
                        "roles": roles})


def test_role_kinds_are_the_distinct_role_rows_in_order_of_first_appearance():
    from clustersim.simulator.arrow import role_rows
    from clustersim.simulator.workload import role_kinds

    ps, worker = Role("ps", 2, 0.0, 4, 8), Role("worker", 4, 1.0, 4, 8)
    roles = [[worker], [ps, worker], [Role("ps", 2, -0.0, 4, 8), worker],   # -0.0 == 0.0: the same kind
             [worker, ps],                                                    # another order: another kind
             [Role("wörker", 1, 0.5)], [worker], [Role("worker", 4, 1.0, 4, 8, max_count=8)]]
    table = _roles_table(roles)
    for column in (table["roles"], table.slice(2, 4)["roles"], table.slice(7)["roles"]):
        rows = role_rows(column)
        first: dict = {}   # what interning role_rows' tuples in a dict gives: equal rows, the first one's
        expected = [first.setdefault(r, len(first)) for r in rows]
        codes, kinds = role_kinds(column)
        assert codes.tolist() == expected and kinds == list(first)
    codes, kinds = role_kinds(table["roles"])
    assert codes.tolist() == [0, 1, 1, 2, 3, 0, 4]
    assert kinds[1] == (("ps", 2, 0.0, 4.0, 8.0, 2, 2), ("worker", 4, 1.0, 4.0, 8.0, 4, 4))
    assert kinds[4] == (("worker", 4, 1.0, 4.0, 8.0, 4, 8),)


def test_jobs_of_one_kind_share_their_role_specs():
    table = _roles_table([[Role("worker", 2, 1.0)], [Role("worker", 2, 1.0)], [Role("worker", 1, 1.0)]])
    a, b, c = build_jobs(table)
    assert a.roles is b.roles and a.roles != c.roles and a.roles[0].count == 2 and c.roles[0].count == 1
