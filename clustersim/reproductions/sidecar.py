"""SideCar (SC20, seed 003): Fig. 6 (W1–W4 makespan and mean JCT), Table VIII (overhead ratio),
Fig. 8 (pending jobs at the last arrival), Fig. 11 (adding events), the §II-C case study.
notes/sidecar.md §5 lists every printed result."""

from __future__ import annotations

import json

from clustersim.reproduction import Case, change, value

POLICIES = {"default": "sidecar_default", "termination": "sidecar_termination", "sidecar": "sidecar_sidecar"}
MAKESPAN = {"W1": (-45, -17), "W2": (-34, -20), "W3": (-42, -17), "W4": (-36, -18)}   # Fig. 6(a): vs default, vs termination
MEAN_JCT = {"W1": (-63, -27), "W2": (-58, -37), "W3": (-61, -35), "W4": (-55, -36)}   # Fig. 6(b)
OVERHEAD = {"W1": (29.3, 8.9), "W2": (21.9, 6.7), "W3": (27.1, 7.6), "W4": (28.6, 8.3)}  # Table VIII: termination, ours
SPEEDS = ("The job types train at Table IV's speeds (ResNet-18 at batch 64: 0.18 s per iteration on one V100, "
          "0.14 s on two), every other type the zoo's profile of its model under the same two testbed factors "
          "(simulator/profiles/sidecar.yaml); reshaping and start costs are §II-C's for every model: the paper prints "
          "no per-model cost ([policy page](policies/sidecar.md)).")
OVERHEAD_READING = ("Table VIII's \"total runtime of all jobs\" is read as the workload's run time (the makespan): "
                    "divided by the jobs' summed run times instead (summary overhead_ratio), termination's W1 ratio "
                    "is about 3% against 29.3%, which §II-C's per-event costs (204-242 s) cannot reach with Table "
                    "IV's job lengths; the reading was chosen on termination's rows (the baseline), SideCar's are "
                    "predictions ([policy page](policies/sidecar.md)).")
LAUNCH = ("A job is pending until its container is launched: under SideCar, container_init_s before its first "
          "start (§III-B-2, §III-B-3).")
LOAD = ("W1 is more loaded here than in the paper (default 19.8 and termination 9.2 jobs pending at the last "
        "arrival against 12 and 3; default makespan 36,367 s against a run ending soon after 20,000 s, Fig. 10): "
        "the lengths of the job types Table IV does not print are the input, and with them 0.6x as long both "
        "baselines and SideCar land on the paper's Fig. 8, while Table VIII's ratios double ([policy "
        "page](policies/sidecar.md)).")
W2_IDLE = ("W2 is half W1's jobs in the same 11,000 s: GPUs are idle more often and jobs are reshaped more per "
           "job, so both ratios are the highest of the four workloads here (the paper's W2 is the lowest), under "
           "either reading of the denominator.")
K80 = ("Termination's W3/W4 makespan (about 29,400 s) is set by the K80's speed, the AWS cluster's one "
       "unknown (3.5x the V100's iteration time, a choice): the paper's ratio needs a K80 about as fast as "
       "a V100 (30.3% at 1.0x). Each model's checkpoint, written and read back at every restart (VGG16 "
       "1.1 GB at 0.25 GB/s), adds under 1 point ([policy page](policies/sidecar.md)).")
OVERHEAD_GAPS = {("W2", "termination"): W2_IDLE, ("W2", "sidecar"): W2_IDLE,   # the not-reproduced Table VIII rows
                 ("W3", "termination"): K80, ("W4", "termination"): K80}           # traced (policy page)
RESHAPING = ("scale_out", "scale_in", "rescale", "migrate")   # the changes summary.overhead_ratio counts (metrics.efficiency)


def runs(workload: str) -> dict[str, tuple[str, ...]]:
    """The three policies' runs of one workload (W3 on the AWS cluster; W4 has its own presets)."""
    if workload == "W4":
        return {k: (f"+experiment={v.replace('sidecar_', 'sidecar_w4_')}",) for k, v in POLICIES.items()}
    cluster = ("cluster=sidecar_aws",) if workload == "W3" else ()
    return {k: (f"+experiment={v}", f"trace.options.workload={workload}", *cluster) for k, v in POLICIES.items()}


def _fig6(workload: str) -> list[Case]:
    out = []
    for stat, word, table in (("makespan", "makespan", MAKESPAN), ("jct_mean", "mean JCT", MEAN_JCT)):
        for i, base in enumerate(("default", "termination")):
            out.append(Case(f"fig6_{workload}_{stat}_vs_{base}", "sidecar", f"§VI-A, Fig. 6({'ab'[stat != 'makespan']})",
                            f"{workload} {word} of SideCar relative to {base}", float(table[workload][i]),
                            runs=runs(workload), metric=change(stat, "sidecar", base), departures=SPEEDS))
    for i, who in enumerate(("termination", "sidecar")):
        out.append(Case(f"table8_{workload}_overhead_{who}", "sidecar", "§VI-C, Table VIII",
                        f"{workload} overhead ratio of {who} (reshaping time / makespan)", OVERHEAD[workload][i],
                        unit="% of makespan", neutral=None, runs=runs(workload),
                        metric=_reshaping_share(who),
                        departures=" ".join(filter(None, (OVERHEAD_GAPS.get((workload, who), ""), OVERHEAD_READING, SPEEDS)))))
    return out


def _reshaping_share(label: str):
    """Table VIII: "the ratio of the total time spent on removing and adding GPUs to the total
    runtime of all jobs": the seconds jobs lost to reshaping (every scale or migration's
    overhead_s in events.parquet) over the workload's run time, the makespan, in percent."""
    def metric(r) -> float:
        ev = r[label].events
        return 100.0 * float(ev.loc[ev["kind"].isin(RESHAPING), "overhead_s"].sum()) / r[label].summary["makespan"]
    return metric


def _pending_at_last_arrival(label: str):
    """Fig. 8 at the last submission: the jobs that arrived by then and were not yet scheduled. A
    job is scheduled when its container is launched: the Job Launcher submits it to Kubernetes on
    the scheduler's decision (§III-B-2). Under the baselines that is its first start (the pod's
    start-up is overhead after it); under SideCar the container then initialises early for
    ``container_init_s`` before the training process starts (§III-B-3), so it was launched that
    long before its first start."""
    def metric(r) -> float:
        run = r[label]
        jobs = run.jobs
        last = jobs["submit_time"].max()
        policy = json.loads((run.dir / "run.json").read_text())["config"]["policy"]
        launched = jobs["first_start"].fillna(float("inf")) - float(policy.get("container_init_s", 0.0))
        return float(((jobs["submit_time"] <= last) & (launched > last)).sum())
    return metric


def _adding(label: str):
    return value("scale_out_events", label)


# §II-C, Table I: J1 (4 GPUs, may run on 2) alone on a 4-GPU host, J2 (2 GPUs) 180 s after J1 starts
# training; J1 trains 633 s on 4 GPUs, J2 442 s on 2 (the default run's timeline: 633 s, then
# 807 -> 1249 s). ResNet's speed-up over one GPU, §I: 1.7x on 2 GPUs, 2.4x on 4.
RESNET = {1: 1.0, 2: 1.7, 4: 2.4, 8: 2.5}
POD = dict(pod_kill_s=30.0, pod_start_base_s=136.0, pod_start_per_gpu_s=19.0)   # §II-C's pod costs (Fig. 3)
CASE_STUDY = {"default": 1249.0, "termination": 1143.0, "sidecar": 845.0}        # Fig. 3 makespans (s)


class CountSpeed:
    """A job's rate from its GPU count alone."""

    def __init__(self, table):
        self.table = table

    def rate(self, spec, alloc, cluster=None):
        return self.table[sum(sum(t.values()) for t in alloc.values())]


def case_study(policy, ov, start_cost: float) -> tuple[float, dict[str, float]]:
    """The §II-C case study under ``policy`` and overhead ``ov``: the makespan and the JCTs from
    J1's training start (``start_cost``: J1's start-up before it trains)."""
    from clustersim.simulator.cluster import Cluster, NodeGroup
    from clustersim.simulator.engine import Engine, Observe
    from clustersim.simulator.job import JobSpec, RoleSpec

    def job(i, job_id, submit, gpus, seconds, lo, hi):
        role = RoleSpec("worker", gpus, 1.0, 0.0, 0.0, lo, hi)
        return JobSpec(index=i, job_id=job_id, submit_time=submit, roles=(role,),
                       total_work=seconds * RESNET[gpus], duration=seconds)

    specs = [job(0, "j1", 0.0, 4, 633.0, 2, 4), job(1, "j2", start_cost + 180.0, 2, 442.0, 2, 2)]
    rec = Engine(specs, Cluster([NodeGroup(1, 4, 32, 256)]), policy, speed=CountSpeed(RESNET), overhead=ov,
                 observe=Observe(declared_iterations=True)).run()
    ends = {s.spec.job_id: s.end_time for s in rec.states}
    return max(ends.values()) - start_cost, {j: e - (start_cost if j == "j1" else start_cost + 180) for j, e in ends.items()}


def case_study_runs() -> dict[str, tuple[float, dict[str, float]]]:
    """Fig. 3's three approaches: (a) default, (b) reshaping by terminating and restarting pods,
    (c) SideCar with early initialisation."""
    from clustersim import policies
    from clustersim.simulator import overhead

    pod = overhead.make({"kind": "pod_restart", **POD})
    side = overhead.make({"kind": "sidecar", "early_init": True, "sidecar_base_s": 17.0, "sidecar_per_gpu_s": 5.0, **POD})
    return {"default": case_study(policies.make("k8s_default"), pod, 136 + 19 * 4),
            "termination": case_study(policies.make("sidecar", container_init_s=0.0), pod, 136 + 19 * 4),
            "sidecar": case_study(policies.make("sidecar"), side, 83.0 + 17 + 5 * 4)}


def _case_study(who: str):
    def compute(seed: int, quick: bool, workdir) -> float:
        return case_study_runs()[who][0]
    return compute


CASES = [
    *[c for w in ("W1", "W2", "W3", "W4") for c in _fig6(w)],
    *[Case(f"fig8_pending_at_last_arrival_{who}", "sidecar", "§VI-A, Fig. 8",
           f"W1 jobs pending when the last job is submitted, {who}", float(n), unit="jobs", neutral=None,
           runs=runs("W1"), metric=_pending_at_last_arrival(who), departures=f"{LAUNCH} {LOAD} {SPEEDS}")
      for who, n in (("default", 12), ("termination", 3), ("sidecar", 0))],
    *[Case(f"fig11_adding_events_{who}", "sidecar", "§VI-B, Fig. 11", f"W1 adding (scale-out) events, {who}",
           float(n), unit="events", neutral=None, runs=runs("W1"), metric=_adding(who), departures=f"{LOAD} {SPEEDS}")
      for who, n in (("termination", 46), ("sidecar", 16))],
    *[Case(f"case_study_makespan_{who}", "sidecar", "§II-C, Fig. 3", f"case-study makespan, {who}", ms, unit="s",
           neutral=None, compute=_case_study(who), per_seed=False,
           departures="Hand-built two-job case; J1's and J2's speeds from §I's ResNet speed-ups.")
      for who, ms in CASE_STUDY.items()],
]

NOT_REPRODUCIBLE = [
    ("Fig. 7 pending and running jobs over time, Fig. 9 JCT CDFs, Fig. 10 allocated GPUs",
     "printed as curves without numbers; the run's timeline.parquet holds ours"),
    ("Table IV iteration times, Table V reshaping costs", "testbed measurements: the simulator's inputs"),
]
