"""DLRover-RM §7's quantities for runs of the DLRM workload (docs/policies/dlrover.md).

``measure(overrides, run_dir)`` runs one experiment with a probe on the engine and returns:
JCT median and p90, completion rate (jobs finished by the end over jobs submitted; and the
draft's §6.1 definition, where a failed and re-run job counts as a failure: ``paper_completion``), CPU and
memory utilisation of the PS and of the workers (what the tasks use, from the profiles' usage
model at each job's rate and progress, as ``JobView.usage`` shows it, over what they are granted,
integrated over time), the cores granted over the arrivals' window (``held_cores``), and stops
by cause. The probe reads
the engine's state after every decision (the recorder's sample hook, as the conformance suite
does) and changes nothing. ``job_throughput(run_dir, job_id)`` gives a job's throughput over time
(the single-job experiment's plot). ``python -m clustersim.dlrm_report`` runs the comparison.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from clustersim.experiment import build_engine, compose
from clustersim.simulator.job import Status, task_demand
from clustersim.simulator.metrics import atomic_write

ROLES = ("ps", "worker")


class UsageProbe:
    """Time-integrated use and grant of CPU and memory per role, and stops by cause."""

    def __init__(self, engine, track: tuple[str, ...] = ()):
        self.engine = engine
        self.usage = engine.clock.usage
        self.rates: dict[str, list] = {j: [] for j in track}   # job -> [(time, steps/s)] at every rate change
        self.area = {(r, k): [0.0, 0.0] for r in ROLES for k in ("cpu", "mem")}   # [used, granted] x seconds
        self.last_t, self.last = None, {}
        self.stops: Counter = Counter()
        engine.recorder.watch(self._sample)
        engine.subscribe("stop", self._stopped)
        engine.subscribe("rate", self._rate)   # use follows the rate: sample at its every change

    def _stopped(self, now: float, st, reason) -> None:
        self.stops[reason.value] += 1

    def _rate(self, now: float, st) -> None:
        if st.spec.job_id in self.rates:
            self.rates[st.spec.job_id].append((now, st.rate))
        self._sample(now)

    def _sample(self, now: float) -> None:
        if self.last_t is not None and now > self.last_t:
            dt = now - self.last_t
            for key, (u, g) in self.last.items():
                self.area[key][0] += u * dt
                self.area[key][1] += g * dt
        self.last_t = now
        cur = {key: [0.0, 0.0] for key in self.area}
        for st in self.engine.states.values():
            if st.status is not Status.RUNNING or not st.allocation:
                continue
            used = self.usage(st.spec, st.allocation) if self.usage else {}
            for role, tasks in st.allocation.items():
                if role not in ROLES:
                    continue
                n = sum(tasks.values())
                _, cpu, mem = task_demand(st.spec.role(role), tasks)
                u_cpu, u_mem = used.get(role, (cpu, mem))
                cur[(role, "cpu")][0] += n * min(u_cpu, cpu)
                cur[(role, "cpu")][1] += n * cpu
                cur[(role, "mem")][0] += n * min(u_mem, mem)
                cur[(role, "mem")][1] += n * mem
        self.last = cur

    def utilisation(self) -> dict:
        return {f"{r}_{k}_util": (u / g if g > 0 else None) for (r, k), (u, g) in self.area.items()}

    def granted_core_s(self) -> float:
        """Cores granted to PSes and workers, integrated over the run (core-seconds)."""
        return sum(self.area[(r, "cpu")][1] for r in ROLES)


def measure(overrides: list[str], run_dir: str | Path, track: tuple[str, ...] = ()) -> dict:
    """Run the experiment ``overrides`` describe (``until`` may cut it) and return its quantities;
    ``throughput`` holds the (time, steps/s) steps of the jobs in ``track``."""
    cfg = compose(overrides)
    engine = build_engine(cfg)
    probe = UsageProbe(engine, track)
    recorder = engine.run()
    run_dir = Path(run_dir)
    summary = recorder.write(run_dir, {"config": overrides})
    jobs = recorder.jobs().to_pydict()
    jct = np.array([j for j, s in zip(jobs["jct"], jobs["status"]) if s == "finished" and j is not None])
    out = {
        "policy": cfg.policy.name,
        "jobs": len(jobs["job_id"]),
        "finished": int(len(jct)),
        "completion_rate": len(jct) / max(len(jobs["job_id"]), 1),
        **paper_completion(jobs),
        "jct_median": float(np.median(jct)) if len(jct) else None,
        "jct_p90": float(np.percentile(jct, 90)) if len(jct) else None,
        "jct_mean": float(jct.mean()) if len(jct) else None,
        "jct_median_by_model": median_by_model(jobs),
        **probe.utilisation(),
        # the cores the jobs hold on average while they arrive: the load [D] §1 and §2.1 compare
        # with the cluster (configs/experiment/dlrover_cluster.yaml)
        "held_cores": probe.granted_core_s() / max(max(jobs["submit_time"], default=0.0), 1.0),
        "stops_by_cause": dict(sorted(probe.stops.items())),
        "overhead_s": summary.get("overhead_s"),
        "rescales": summary.get("rescales"),
        "throughput": probe.rates,
    }
    atomic_write(run_dir / "dlrm_report.json", lambda p: Path(p).write_text(json.dumps(out, indent=1)))
    return out


def median_by_model(jobs: dict) -> dict[str, float]:
    """Median JCT of each model's finished jobs. The workload's JCTs are bimodal (W&D and DeepFM
    jobs end in ~15 minutes, xDeepFM and DCN in ~70 at Table 2's configurations), so the median of
    all jobs falls in the gap between the two modes and swings with a job or two crossing it; a
    comparison with [RM] Fig. 7's per-model JCTs takes each model's own median."""
    by: dict[str, list] = {}
    for m, j, s in zip(jobs["model"], jobs["jct"], jobs["status"]):
        if s == "finished" and j is not None:
            by.setdefault(m, []).append(j)
    return {m: float(np.median(v)) for m, v in sorted(by.items())}


def paper_completion(jobs: dict) -> dict:
    """The draft's §6.1 job completion rate beside ours: "a job that fails and is re-run counts as a
    failure, and the re-run counts as a new job", so every failure (a pod's, a node's, an OOM) that
    restarted the job is one more job that did not complete: finished / (submitted + failures).
    ``oom_job_rate``: the share of jobs an OOM failed at least once ([RM] Table 4's "Job Failure,
    OOM Errors": 4.7 % before DLRover, 0.23 % after)."""
    n = len(jobs["job_id"])
    finished = sum(1 for s in jobs["status"] if s == "finished")
    failures = sum(jobs["failures"])
    oom = sum(1 for k in jobs.get("failures_oom", ()) if k)   # the column exists with a fault model
    return {"completion_rate_paper": finished / max(n + failures, 1), "failures": int(failures),
            "oom_job_rate": oom / max(n, 1)}


def plot_throughput(series: dict[str, list], path: str | Path, title: str = "") -> None:
    """Steps/s over time, one line per label (the single-job experiment's figure)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for label, pts in series.items():
        if pts:
            t, r = zip(*pts)
            ax.step(np.array(t) / 60.0, r, where="post", label=label)
    ax.set_xlabel("minutes")
    ax.set_ylabel("steps/s")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def compare(policies: list[str], common: list[str], root: str | Path) -> dict[str, dict]:
    """Each policy on the same experiment; DLRover's history starts empty, in ``root/history.sqlite``."""
    history = Path(root) / "history.sqlite"
    history.parent.mkdir(parents=True, exist_ok=True)
    history.unlink(missing_ok=True)
    own = {"dlrover": [f"policy.history={history}"]}
    return {p: measure([f"policy={p}", *common, *own.get(p, [])], Path(root) / p) for p in policies}


def relative(a: dict, b: dict) -> dict:
    """a vs b: JCT change (fraction), completion and utilisation differences (points)."""
    out = {}
    for k in ("jct_median", "jct_p90"):
        if a.get(k) and b.get(k):
            out[k] = a[k] / b[k] - 1.0
    for k in ("completion_rate", "completion_rate_paper", "oom_job_rate", "ps_cpu_util", "worker_cpu_util", "ps_mem_util", "worker_mem_util"):
        if a.get(k) is not None and b.get(k) is not None:
            out[k] = a[k] - b[k]
    return out


def single(root: str | Path, extra: tuple[str, ...] = ()) -> dict:
    """The single-job experiment: the job at its owner's configuration (manual), under ES, under
    DLRover from an empty history (cold start, then stages 2 and 3), and under DLRover again
    with the history the first DLRover run wrote (warm start)."""
    root = Path(root)
    history = root / "history.sqlite"
    if history.exists():
        history.unlink()
    common = ["+experiment=dlrover_single", *extra]
    runs = {"manual": ["policy=manual"], "es": ["policy=es"],
            "dlrover (cold start)": ["policy=dlrover", f"policy.history={history}"],
            "dlrover (warm start)": ["policy=dlrover", f"policy.history={history}"]}
    out = {}
    for label, o in runs.items():
        out[label] = measure([*common, *o], root / label.split()[0] / str(len(out)), track=("dlrm-0",))
    plot_throughput({k: v["throughput"]["dlrm-0"] for k, v in out.items()}, root / "throughput.png",
                    "One Wide&Deep job: throughput as the stages act")
    return out


def main(argv: list[str]) -> None:
    """``python -m clustersim.dlrm_report OUT [overrides]``: the cluster comparison;
    ``--single OUT [overrides]``: the single-job experiment and its plot (OUT/throughput.png)."""
    if argv and argv[0] == "--single":
        res = single(argv[1], tuple(argv[2:]))
        for k, v in res.items():
            v = {**v, "throughput": len(v["throughput"]["dlrm-0"])}
            print(k, json.dumps({x: v[x] for x in ("jct_median", "worker_cpu_util", "ps_cpu_util", "rescales")}))
        return
    root, extra = argv[0], argv[1:]
    res = compare(["dlrover", "es", "optimus", "drf", "manual"], ["+experiment=dlrover_cluster", *extra], root)
    for v in res.values():
        v.pop("throughput")
    print(json.dumps({**res, "dlrover_vs_manual": relative(res["dlrover"], res["manual"])}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
