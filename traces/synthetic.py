"""Synthetic workloads, seeded: arrivals (Poisson, diurnal bursts, uniform windows) and the
job mixes of the papers this project reproduces.

``generate(rng, generator=..., **params)`` returns a canonical job table; ``rng`` comes from
``component_rng(seed, "trace.synthetic")`` so the same seed gives the same jobs.

* ``philly``: sizes and durations fitted on the Philly jobs of the Pollux artifact
  (traces/data/philly_pollux/philly.csv, 82,247 jobs; tests/traces/test_synthetic.py refits
  and checks the constants below).
* ``dlrover``: parameter-server recommendation jobs (Wide&Deep, DeepFM, xDeepFM) with the
  well-tuned PS/worker configurations of DLRover [D] Table 2 (seed 000).
* ``dlrm``: the DLRover-RM workload: Wide&Deep, DeepFM, xDeepFM and DCN jobs of many users, each
  at the user's own (often poor) configuration, within the per-job CPU cap.
* ``optimus``: the Optimus testbed workload, arrivals uniform in [0, 12000] s over the
  models of Table 1, sync or async at random (seed 004 §6.1).
* ``sidecar``: SideCar workloads W1–W4 (seed 003 §V-A, Tables VI and VII).

See docs/traces/synthetic.md for every constant's source and the choices made where the
papers are silent.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np

from clustersim.simulator.params import Range
from clustersim.traces.schema import MAX_TASKS, Role, TraceError, build_table, gpu_worker_role, validate

DAY_S = 86400.0
# A generator's job count, bounded before anything is drawn (choice: the largest replay
# benchmarked, the 10M-job synthetic Philly FIFO run of docs/performance.md's --full suite;
# more would run out of memory after minutes instead of failing at once)
MAX_JOBS = 10_000_000
Jobs = Annotated[int, Range(ge=1, le=MAX_JOBS)]

# --- arrivals


def poisson_arrivals(rng: np.random.Generator, n: int, rate_per_hour: float) -> np.ndarray:
    """``n`` arrivals of a Poisson process (exponential gaps), the first at 0."""
    if rate_per_hour <= 0:
        raise TraceError(f"synthetic: rate_per_hour must be > 0, got {rate_per_hour}")
    gaps = rng.exponential(3600.0 / rate_per_hour, size=n)
    return np.concatenate([[0.0], np.cumsum(gaps[:-1])]) if n else np.zeros(0)


def diurnal_arrivals(rng: np.random.Generator, n: int, rate_per_hour: float, amplitude: float = 0.5,
                     peak_hour: float = 14.0) -> np.ndarray:
    """``n`` arrivals of a Poisson process whose rate follows the day, from t = 0 (midnight):
    rate(t) = rate_per_hour × (1 + amplitude × cos(2π (t − peak) / 1 day)), by thinning."""
    if not 0 <= amplitude <= 1:
        raise TraceError(f"synthetic: amplitude must be in [0, 1], got {amplitude}")
    peak_rate = rate_per_hour * (1 + amplitude) / 3600.0
    if peak_rate <= 0:
        raise TraceError(f"synthetic: rate_per_hour must be > 0, got {rate_per_hour}")
    out, t = [], 0.0
    while len(out) < n:
        t += rng.exponential(1.0 / peak_rate)
        rate = rate_per_hour / 3600.0 * (1 + amplitude * math.cos(2 * math.pi * (t - peak_hour * 3600) / DAY_S))
        if rng.random() * peak_rate <= rate:
            out.append(t)
    return np.array(out)  # not shifted to 0: the peak stays at peak_hour of every simulated day


def arrivals(rng: np.random.Generator, n: int, process: str = "poisson", **params) -> np.ndarray:
    if n < 1:
        raise TraceError(f"synthetic: jobs must be >= 1, got {n}")
    if process == "poisson":
        return poisson_arrivals(rng, n, **params)
    if process == "diurnal":
        return diurnal_arrivals(rng, n, **params)
    if process == "uniform":
        start, end = params.get("start", 0.0), params.get("end")
        if end is None or not end > start:
            raise TraceError(f"synthetic: uniform arrivals need an end after start ({start}), got {end!r}")
        return np.sort(rng.uniform(start, end, size=n))
    raise TraceError(f"synthetic: unknown arrival process {process!r} (poisson, diurnal, uniform)")


def mix_shares(mix: dict | None, known: dict, who: str) -> tuple[list[str], np.ndarray]:
    """A model mix's names and shares (weights over their sum); no mix: every known model alike.
    Weights are finite numbers >= 0, at least one > 0."""
    mix = mix or {m: 1.0 for m in known}
    unknown = set(mix) - set(known)
    if unknown:
        raise TraceError(f"{who}: trace.options.mix: unknown model(s) {sorted(unknown)}; known: {sorted(known)}")
    names = list(mix)
    try:
        p = np.array([float(mix[m]) for m in names])
    except (TypeError, ValueError):
        raise TraceError(f"{who}: trace.options.mix: weights must be numbers, got {mix}") from None
    if not (np.isfinite(p).all() and (p >= 0).all() and p.sum() > 0):
        raise TraceError(f"{who}: trace.options.mix: weights must be finite numbers >= 0, at least one > 0, got {mix}")
    return names, p / p.sum()


# --- Philly sizes and durations, fitted on philly_pollux/philly.csv (82,247 jobs)
# GPU-count shares (exact frequencies) and, per size class, a log-normal of the duration
# (maximum likelihood: mean and standard deviation of ln(duration in s)).
PHILLY_GPUS = {1: 0.931669, 2: 0.022104, 4: 0.022736, 8: 0.019976, 12: 8.5e-05, 16: 0.00242, 24: 8.5e-05,
               32: 0.000815, 64: 7.3e-05, 128: 3.6e-05}
PHILLY_LOG_DURATION = {1: (6.7187, 1.9718), 2: (4.522, 3.2681), 4: (9.1061, 2.7812), 8: (9.6538, 2.7915),
                       "larger": (8.9429, 3.2023)}
PHILLY_RATE_PER_HOUR = 31.47  # 82,247 jobs over 2,613.5 h
DURATION_BOUNDS_S = (1.0, 4_628_226.0)  # shortest and longest job of the fitted data


def philly_jobs(rng: np.random.Generator, jobs: Jobs = 1000, arrival: dict | None = None) -> dict:
    sizes = np.array(list(PHILLY_GPUS))
    p = np.array(list(PHILLY_GPUS.values()))
    gpus = rng.choice(sizes, size=jobs, p=p / p.sum())
    durations = np.empty(jobs)
    for k, (mu, sigma) in PHILLY_LOG_DURATION.items():
        mask = gpus > 8 if k == "larger" else gpus == k
        durations[mask] = rng.lognormal(mu, sigma, size=int(mask.sum()))
    durations = np.clip(np.round(durations), *DURATION_BOUNDS_S)
    submit = arrivals(rng, jobs, **(arrival or {"process": "poisson", "rate_per_hour": PHILLY_RATE_PER_HOUR}))
    role_of = {g: [gpu_worker_role(float(g))] for g in PHILLY_GPUS}   # one role list per size, shared
    return {"submit": submit, "roles": [role_of[g] for g in gpus.tolist()], "duration": durations,
            "model": [None] * jobs}


# --- DLRover recommendation jobs. [D] = DLRover (seed 000), [RM] = DLRover-RM (seed 002).
# Well-tuned PS/worker configurations, [D] Table 2: (PS count, PS cores, PS GB, workers, worker cores, worker GB).
# Work: 200,000 steps per job, batch 512 ([RM] §6 workloads). Speed at that configuration:
# [D] Table 1 "optimize" rows (W&D 210 steps/s, xDeepFM 47.8 steps/s).
DLROVER_MODELS = {
    "wide_deep": dict(ps=(8, 16.0, 8.0), worker=(24, 3.0, 4.0), steps_per_s=210.0),
    "xdeepfm": dict(ps=(2, 16.0, 8.0), worker=(8, 20.0, 8.0), steps_per_s=47.8),
    # DeepFM has no configuration in either paper: W&D's, and W&D's speed scaled by the
    # CPU-mode training times of the [RM] cost table (DeepFM 1.53 h vs W&D 1.41 h).
    "deepfm": dict(ps=(8, 16.0, 8.0), worker=(24, 3.0, 4.0), steps_per_s=210.0 * 1.41 / 1.53),
}
DLROVER_STEPS = 200_000
DLROVER_BATCH = 512
DLROVER_JOB_CORES = 200  # a job may use at most 200 cores ([D] §6.1): the elastic upper bound of each role


def dlrover_jobs(rng: np.random.Generator, jobs: Jobs = 100, mix: dict | None = None,
                 arrival: dict | None = None) -> dict:
    names, p = mix_shares(mix, DLROVER_MODELS, "synthetic dlrover")
    models = rng.choice(names, size=jobs, p=p)
    roles, durations = [], []
    for m in models:
        c = DLROVER_MODELS[m]
        roles.append([_elastic("ps", *c["ps"]), _elastic("worker", *c["worker"])])
        durations.append(DLROVER_STEPS / c["steps_per_s"])
    submit = arrivals(rng, jobs, **(arrival or {"process": "poisson", "rate_per_hour": 20.0}))
    return {"submit": submit, "roles": roles, "duration": durations, "iterations": [float(DLROVER_STEPS)] * jobs,
            "model": list(models), "batch_size": [DLROVER_BATCH] * jobs}


# --- The DLRover-RM workload ([RM] §6, [D] §6.4): users' own configurations of PS/worker jobs.
# Well-tuned configurations ([D] Table 2; DCN as xDeepFM, DeepFM as W&D, as the profiles do):
# (PS count, PS cores, PS GB, workers, worker cores, worker GB).
DLRM_TUNED = {"wide_deep": (8, 16.0, 8.0, 24, 3.0, 4.0), "deepfm": (8, 16.0, 8.0, 24, 3.0, 4.0),
              "xdeepfm": (2, 16.0, 8.0, 8, 20.0, 8.0), "dcn": (2, 16.0, 8.0, 8, 20.0, 8.0)}
# How users configure: per task, "more-than-needed" ([RM] §2.2, Fig. 3; [D] §1, Fig. 2). Each user
# keeps one habit, a factor per role and resource on the tuned per-task figure (task counts stay
# the tuned ones: the papers report over-provisioning of each task, not of counts). A factor is
# log-normal with its two parameters fixed by two published numbers: the utilisation of that role
# and resource under users' configurations ([RM] §6.3, Fig. 14, before DLRover: worker CPU 19 %,
# PS CPU 13 %, worker memory 15.2 %, PS memory 13.8 %) is 1 / E[factor] (use over grant, summed
# over jobs), and over 80 % of jobs use under 50 % ([RM] §2.2 Fig. 3, [D] Fig. 2): P(factor > 2) = 0.8.
# Users ask for no less than the need ("to avoid job failures", [RM] §2.2): a factor under 1 is 1,
# except the ~6 % of jobs with too little PS CPU ([D] §6.4, [RM] Fig. 15: PS CPU > 80 %; × 0.25–0.6,
# a choice) and the jobs whose owners gave too little memory: "an under-provision problem observed in
# about 5 % of the jobs. Those jobs usually run into OOM failure with insufficient memory" ([D] §2),
# 4.7 % in [RM] Table 4 (OOM job failures without DLRover). It is the owners' configuration, not the
# jobs' need, so it is drawn here (after every other draw: the other jobs stay as they were): one
# role of the job, PS or worker alike (a choice), gets half the memory it needs by its end (Table 2's
# figure): DLRover's remedy doubles it ([D] §4.2), so half is what that remedy is sized for.
DLRM_UTIL = {("worker", "cpu"): 0.19, ("ps", "cpu"): 0.13, ("worker", "mem"): 0.152, ("ps", "mem"): 0.138}
DLRM_UNDER_HALF = 0.8                         # share of jobs using under 50 % ([RM] Fig. 3, [D] Fig. 2)
DLRM_PS_CPU_SHORT = (0.06, (0.25, 0.6))       # share of jobs, factor on the tuned PS cores
DLRM_MEM_SHORT = (0.047, 0.5)                 # share of jobs, factor on one role's needed GB ([D] §2, [RM] Table 4)
DLRM_POD_CORES = 32                           # cores one pod may hold ([D] §6.1)
DLRM_POD_GB = 192.0                           # memory one pod may hold: one machine's ([D] §6.1, [RM] §6)
DLRM_MAX_TASKS = {"worker": 60, "ps": 15}     # task bounds (DLRover's code: MAX_WORKER_NUM, MAX_PS_NUM)


def habit_lognormal(util: float, under_half: float = DLRM_UNDER_HALF) -> tuple[float, float]:
    """(μ, σ) of a log-normal factor f with 1/E[f] = ``util`` and P(f > 2) = ``under_half``:
    μ + σ²/2 = ln(1/util) and (μ − ln 2)/σ = z, so σ²/2 + zσ − (ln(1/util) − ln 2) = 0."""
    from statistics import NormalDist

    z, big = NormalDist().inv_cdf(under_half), math.log(1.0 / util)
    sigma = -z + math.sqrt(z * z + 2.0 * (big - math.log(2.0)))
    return big - sigma * sigma / 2.0, sigma


def dlrm_jobs(rng: np.random.Generator, jobs: Jobs = 200, users: Annotated[int, Range(ge=1, le=MAX_JOBS)] = 20,
              tables_per_user: Annotated[int, Range(ge=1, le=MAX_TASKS)] = 2, mix: dict | None = None,
              arrival: dict | None = None, steps: Annotated[int, Range(ge=1)] = DLROVER_STEPS,
              job_cores: Annotated[float, Range(gt=0)] | None = None,
              habit: Literal["users", "tuned", "scratch"] = "users") -> dict:
    """Jobs of ``users`` users, each training a few models on their own tables (the table is the
    job's ``tenant``: the data source DLRover's warm start matches, [D] §4.3), ``steps`` steps of
    batch 512, at the user's configuration (``habit: users``) or the well-tuned one of [D] Table 2
    (``tuned``: DLRover-RM §6.1's "w/o DLRover-RM" baseline), or that one with a single worker
    (``scratch``: the auto-scaling baselines of [RM] Figs. 7 and 10 train "from scratch", with each
    PS's and worker's CPU "according to Table 2", [RM] §6.2, [D] §6.3). ``job_cores``: a cap on a request
    (None: none; a larger request keeps its tasks, each with proportionally fewer cores)."""
    names, p = mix_shares(mix, DLRM_TUNED, "synthetic dlrm")
    if users < 1 or tables_per_user < 1:
        raise TraceError("synthetic dlrm: trace.options.users and trace.options.tables_per_user must be >= 1")
    if habit not in ("users", "tuned", "scratch"):
        raise TraceError(f"synthetic dlrm: trace.options.habit must be 'users', 'tuned' or 'scratch', got {habit!r}")
    keys = list(DLRM_UTIL)
    params = [habit_lognormal(DLRM_UTIL[k]) for k in keys]
    # each user's habit: a factor per (role, resource), and which models they train
    habits = [{k: max(1.0, float(rng.lognormal(mu, sigma))) for k, (mu, sigma) in zip(keys, params)}
              for _ in range(users)]
    raw, models, user_of, table_of = [], [], [], []
    for _ in range(jobs):
        u = int(rng.integers(users))
        m = str(rng.choice(names, p=p))
        t = int(rng.integers(tables_per_user))
        h = dict(habits[u])
        if rng.random() < DLRM_PS_CPU_SHORT[0]:
            h["ps", "cpu"] = rng.uniform(*DLRM_PS_CPU_SHORT[1])
        if habit != "users":
            h = dict.fromkeys(keys, 1.0)
        n_ps, c_ps, m_ps, n_w, c_w, m_w = DLRM_TUNED[m]
        if habit == "scratch":
            n_w = 1   # the schedulers add workers from one (the start is not given: DLRover's sampling start, [D] §4.2)
        ps = [n_ps, min(DLRM_POD_CORES, max(1.0, round(c_ps * h["ps", "cpu"]))), min(DLRM_POD_GB, m_ps * h["ps", "mem"])]
        w = [n_w, min(DLRM_POD_CORES, max(1.0, round(c_w * h["worker", "cpu"]))), min(DLRM_POD_GB, m_w * h["worker", "mem"])]
        total = ps[0] * ps[1] + w[0] * w[1]
        if job_cores is not None and total > job_cores:   # a quota: the same tasks, smaller
            ps[1], w[1] = (max(1.0, math.floor(r[1] * job_cores / total)) for r in (ps, w))
        raw.append((ps, w))
        models.append(m)
        user_of.append(f"user{u}")
        table_of.append(f"user{u}/table{t}")
    submit = arrivals(rng, jobs, **(arrival or {"process": "poisson", "rate_per_hour": 20.0}))
    short, short_role = rng.random(jobs) < DLRM_MEM_SHORT[0], rng.integers(2, size=jobs)
    roles = []
    for i, (ps, w) in enumerate(raw):
        if habit == "users" and short[i]:   # the owner under-provisioned one role's memory ([D] §2)
            r, need = (ps, DLRM_TUNED[models[i]][2]) if short_role[i] == 0 else (w, DLRM_TUNED[models[i]][5])
            r[2] = need * DLRM_MEM_SHORT[1]
        roles.append([_dlrm_role("ps", ps), _dlrm_role("worker", w)])
    return {"submit": submit, "roles": roles, "duration": [None] * jobs, "iterations": [float(steps)] * jobs,
            "model": models, "batch_size": [DLROVER_BATCH] * jobs, "user": user_of, "tenant": table_of}


def _dlrm_role(name: str, r: list) -> Role:
    count, cores, mem = int(r[0]), float(r[1]), round(float(r[2]), 3)
    return Role(name, count, 0.0, cores, mem, min_count=1, max_count=max(count, DLRM_MAX_TASKS[name]))


def _elastic(name: str, count: int, cores: float, mem: float) -> Role:
    return Role(name, count, 0.0, cores, mem, min_count=1, max_count=max(count, int(DLROVER_JOB_CORES // cores)))


# --- Optimus testbed (seed 004): Table 1 models; arrivals uniform in [0, 12000] s (§6.1);
# 60 jobs and 1 PS + 1 worker to start ([C] params.py). Task demands ([C] jobrepo.py):
# (PS cores, PS GB), (worker cores, worker GB, worker GPUs); models the code does not list
# take ResNet-50's, and CNN-rand and DSSM workers are CPU-only as in DL2's trace.py.
OPTIMUS_MODELS = {
    "ResNext-110": ((3, 10), (2, 10, 1)), "ResNet-50": ((3, 9), (2, 8, 1)), "Inception-BN": ((3, 9), (2, 8, 1)),
    "KAGGLE": ((3, 9), (2, 8, 1)), "CNN-rand": ((3, 9), (2, 8, 0)), "DSSM": ((3, 9), (2, 8, 0)),
    "RNN-LSTM-Dropout": ((3, 9), (2, 8, 1)), "Sequence-to-Sequence": ((3, 9), (2, 8, 1)),
    "DeepSpeech2": ((3, 9), (2, 8, 1)),
}
OPTIMUS_WINDOW_S = 12000.0
OPTIMUS_POISSON_PER_HOUR = 3 * 3600.0 / 1200.0   # §6.3.2 (Fig. 16): "3 arrivals per scheduling interval" (20 min)


def optimus_jobs(rng: np.random.Generator, jobs: Jobs = 60, max_tasks: Annotated[int, Range(ge=1, le=MAX_TASKS)] = 12,
                 async_share: Annotated[float, Range(ge=0, le=1)] = 0.5,
                 arrival: Literal["uniform", "poisson"] = "uniform") -> dict:
    """Work is convergence-driven (no iterations in the paper): duration and iterations stay
    null for the convergence model. ``max_tasks`` bounds PS and workers (the testbed's 12 GPUs).
    Each job trains async with probability ``async_share`` (§6.1: "async or sync is chosen at
    random"; 0.5 as an even coin), its model then named ``<model>/async`` (the zoo's
    ``<profile>_async``); the draws come after the arrivals, so that share 0 gives the jobs a
    share-free generator gave. ``arrival``: ``uniform`` in [0, 12000] s (§6.1) or ``poisson``, 3
    arrivals per 20-minute interval (§6.3.2, Fig. 16)."""
    if not 0 <= async_share <= 1:
        raise TraceError(f"synthetic optimus: async_share must be in [0, 1], got {async_share!r}")
    names = list(OPTIMUS_MODELS)
    models = rng.choice(names, size=jobs)
    roles = []
    for m in models:
        (ps_cpu, ps_mem), (w_cpu, w_mem, w_gpu) = OPTIMUS_MODELS[m]
        roles.append([Role("ps", 1, 0.0, ps_cpu, ps_mem, 1, max_tasks), Role("worker", 1, w_gpu, w_cpu, w_mem, 1, max_tasks)])
    if arrival == "uniform":
        submit = arrivals(rng, jobs, process="uniform", start=0.0, end=OPTIMUS_WINDOW_S)
    elif arrival == "poisson":
        submit = arrivals(rng, jobs, process="poisson", rate_per_hour=OPTIMUS_POISSON_PER_HOUR)
    else:
        raise TraceError(f"synthetic optimus: arrival must be 'uniform' or 'poisson', got {arrival!r}")
    if async_share > 0:
        models = [f"{m}/async" if a else str(m) for m, a in zip(models, rng.random(jobs) < async_share)]
    return {"submit": submit, "roles": roles, "duration": [None] * jobs, "model": list(models)}


# --- SideCar (seed 003): job sets of Tables VI and VII; W1–W4 of §V-A. Iterations = epochs ×
# ceil(train set / global batch) (notes A15; ImageNet-1k 1,281,167, CIFAR-10 50,000, MNIST 60,000).
DATASETS = {"ImageNet": 1_281_167, "Cifar10": 50_000, "MNIST": 60_000}
EPOCHS = {"ImageNet": 1, "Cifar10": 10, "MNIST": 10}
JOB_SET_ONE = [("ResNet-18", 64, "ImageNet"), ("ResNet-18", 128, "ImageNet"), ("ResNet-18", 256, "ImageNet"),
               ("ResNet-34", 64, "ImageNet"), ("ResNet-34", 128, "ImageNet"), ("ResNet-50", 64, "ImageNet"),
               ("ResNet-8", 1024, "Cifar10")]
JOB_SET_TWO = [("ResNet-18", 256, "ImageNet"), ("ResNet-34", 128, "ImageNet"), ("InceptionV3", 128, "ImageNet"),
               ("VGG16", 64, "ImageNet"), ("GoogLeNet", 512, "ImageNet"), ("AlexNet", 256, "ImageNet"),
               ("LeNet", 1024, "MNIST")]
SIDECAR_WORKLOADS = {"W1": (JOB_SET_ONE, 40), "W2": (JOB_SET_ONE, 20), "W3": (JOB_SET_TWO, 40), "W4": (JOB_SET_TWO, 40)}
SIDECAR_WINDOW_S = 11000.0
SIDECAR_GPU_OPTIONS = (1, 2, 4, 8)  # notes A16
# each job type's profile at SideCar's testbed speeds (simulator/profiles/sidecar.yaml: Table IV's
# ResNet-18 on V100, P100, 1080Ti, K80, the other types scaled alike), by (model, dataset)
SIDECAR_PROFILES = {("ResNet-18", "ImageNet"): "sidecar_resnet18", ("ResNet-34", "ImageNet"): "sidecar_resnet34",
                    ("ResNet-50", "ImageNet"): "sidecar_resnet50", ("ResNet-8", "Cifar10"): "sidecar_resnet8_cifar10",
                    ("InceptionV3", "ImageNet"): "sidecar_inception3", ("VGG16", "ImageNet"): "sidecar_vgg16",
                    ("GoogLeNet", "ImageNet"): "sidecar_googlenet", ("AlexNet", "ImageNet"): "sidecar_alexnet",
                    ("LeNet", "MNIST"): "sidecar_lenet_mnist"}


def sidecar_jobs(rng: np.random.Generator, workload: str = "W1") -> dict:
    """One container per job (synchronous MirroredStrategy); the requested GPU count is
    drawn from the options {1, 2, 4, 8} (the default baseline's rule, notes A18), elastic
    over them. W4 ends at a target accuracy whose true iterations equal W3's (notes §4.3)."""
    if workload not in SIDECAR_WORKLOADS:
        raise TraceError(f"synthetic sidecar: workload must be one of {sorted(SIDECAR_WORKLOADS)}, got {workload!r}")
    job_set, n = SIDECAR_WORKLOADS[workload]
    types = rng.integers(len(job_set), size=n)
    gpus = rng.choice(SIDECAR_GPU_OPTIONS, size=n)
    models, batches, iterations, roles = [], [], [], []
    for t, g in zip(types, gpus):
        model, batch, data = job_set[t]
        models.append(SIDECAR_PROFILES[model, data])
        batches.append(batch)
        iterations.append(float(EPOCHS[data] * math.ceil(DATASETS[data] / batch)))
        roles.append([Role("worker", int(g), 1.0, 0.0, 0.0, 1, max(SIDECAR_GPU_OPTIONS))])
    return {"submit": sidecar_arrivals(rng, n), "roles": roles, "duration": [None] * n, "iterations": iterations,
            "model": models, "batch_size": batches}


def sidecar_arrivals(rng: np.random.Generator, n: int) -> np.ndarray:
    """Notes A14: first job at 0, n−1 exponential gaps of mean 11000/(n−1), rescaled into
    the window when the last arrival falls beyond 11000 s."""
    t = np.concatenate([[0.0], np.cumsum(rng.exponential(SIDECAR_WINDOW_S / max(n - 1, 1), size=n - 1))])
    return t * (SIDECAR_WINDOW_S / t[-1]) if t[-1] > SIDECAR_WINDOW_S else t


GENERATORS = {"philly": philly_jobs, "dlrover": dlrover_jobs, "dlrm": dlrm_jobs, "optimus": optimus_jobs,
              "sidecar": sidecar_jobs}


def generate(rng: np.random.Generator, generator: str | None = None, **params):
    """The job table of generator ``generator`` with ``params``."""
    if generator not in GENERATORS:
        raise TraceError(f"synthetic: unknown generator {generator!r}; known: {', '.join(GENERATORS)}")
    try:
        cols = GENERATORS[generator](rng, **params)
    except TypeError as e:
        raise TraceError(f"synthetic {generator}: bad parameters {params} ({e})") from None
    n = len(cols["submit"])
    none = [None] * n
    duration = [None if d is None else float(d) for d in cols["duration"]]
    table = build_table({"job_id": [f"{generator}-{i}" for i in range(n)],
                         "submit_time": [float(t) for t in cols["submit"]], "roles": cols["roles"],
                         "duration": duration, "iterations": cols.get("iterations", none), "model": cols["model"],
                         "batch_size": cols.get("batch_size", none), "user": cols.get("user", none),
                         "tenant": cols.get("tenant", none)})
    # the rows are checked as a trace's are, at once: a generator's parameters can still make bad ones
    return validate(table, f"synthetic:{generator}")
