"""Data-parallel speed: N workers, gradients averaged by all-reduce every iteration.

One pool of processes (as many as the largest N) measures every pending point of the sweep:
for a point (N, per-worker batch b) ranks 0..N-1 form a group, train ``warmup`` iterations,
then time ``steps`` iterations (the slowest rank's time counts). Each iteration computes the
gradient on b samples, all-reduces the flattened gradient (one bucket, no overlap with the
backward pass: the all-reduce model of simulator/speed.py has compute and exchange in sequence)
and applies SGD. NCCL on GPUs (one GPU per process), gloo on CPU.
A point: iteration time, iterations/s, samples/s (N·b per iteration) and cores per worker. The
grid is measured ``repeats`` times in rounds, each round in a fresh seeded random order (as the
PS sweep does): load from elsewhere on the host that comes and goes then spreads over all points
instead of hitting one point's windows in a row. Each round of a point is one window of ``steps``
iterations after ``warmup``; the point takes the median window's time, and every round is stored
as it is measured. With ``pin`` (CPU) rank r runs on one core, the r-th this process may use
(modulo their count), as the testbed pins its tasks.
"""

from __future__ import annotations

import statistics
import time

from clustersim.simulator.calibration.store import PointStore, point_key, shuffled_rounds

KIND = "dataparallel"


def key(cfg: dict, n: int, batch: int, round_: int) -> str:
    d = cfg["dataparallel"]
    return point_key(KIND, n=n, batch=batch, round=round_, steps=d["steps"], warmup=d["warmup"],
                     threads=d["threads"], pin=bool(cfg.get("pin")), device=cfg["device"], model=cfg["model"])


def points(cfg: dict) -> list[tuple[int, int]]:
    d = cfg["dataparallel"]
    return [(int(n), int(b)) for n in d["workers"] for b in d["batch"]]


def rounds(cfg: dict) -> list[tuple[int, int, int]]:
    """Every (N, b, round), each round's points in a seeded random order."""
    return shuffled_rounds(points(cfg), cfg["dataparallel"]["repeats"])


def measure(cfg: dict, store_path: str, progress: bool = False) -> list[dict]:
    """Measure every round of the sweep not yet in the store; return all the sweep's points."""
    from clustersim.simulator.calibration.launch import device_for, rendezvous, start_pool

    store = PointStore(store_path)
    todo = [pt for pt in rounds(cfg) if key(cfg, *pt) not in store]
    if todo:
        world = max(n for n, _, _ in todo)
        kind, backend = device_for(cfg["device"], world)
        with rendezvous() as init:
            start_pool(_rank, (world, todo, cfg, kind, backend, init, store_path, progress), world, kind,
                       cfg.get("start_method", "auto"))
        store = PointStore(store_path)
    reps = range(int(cfg["dataparallel"]["repeats"]))
    return [aggregate([store.get(key(cfg, n, b, r)) for r in reps]) for n, b in points(cfg)]


def aggregate(measured: list[dict]) -> dict:
    """One (N, b) point from its rounds: the median window, the mean CPU use, every window."""
    windows = [m["iter_s"] for m in measured]
    t = float(statistics.median(windows))
    first = measured[0]
    return {**{k: v for k, v in first.items() if k not in ("round", "key")},
            "iter_s": t, "iters_per_s": 1.0 / t, "samples_per_s": first["global_batch"] / t,
            "worker_cores": float(statistics.mean(m["worker_cores"] for m in measured)), "windows_iter_s": windows}


def _rank(rank: int, world: int, todo: list, cfg: dict, kind: str, backend: str, init: str,
          store_path: str, progress: bool) -> None:
    import torch
    import torch.distributed as dist

    from clustersim.simulator.calibration import launch, workloads

    d = cfg["dataparallel"]
    if cfg.get("pin") and kind == "cpu":
        launch.pin(rank)
    launch.init_group(backend, init, rank, world, cfg["timeout_s"], d["threads"])
    device = launch.local_device(kind, rank)
    wl = workloads.build(cfg["model"]).to(device)
    opt = torch.optim.SGD(wl.model.parameters(), lr=float(cfg["lr"]))
    groups = {n: dist.new_group(list(range(n))) for n in sorted({n for n, _, _ in todo})}   # every rank, same order
    store = PointStore(store_path) if rank == 0 else None
    bar = _bar(len(todo), "data-parallel", progress) if rank == 0 else None
    for n, b, round_ in todo:
        if rank < n:
            stats = _train(wl, opt, groups[n], n, rank, b, int(d["warmup"]), int(d["steps"]), 1, device)
            if rank == 0:
                store.add(key(cfg, n, b, round_), {"kind": KIND, "n": n, "batch": b, "global_batch": n * b, **stats,
                                                   "device": kind, "backend": backend, "threads": d["threads"],
                                                   "round": round_})
        dist.barrier()
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    dist.destroy_process_group()


def _train(wl, opt, group, n: int, rank: int, b: int, warmup: int, steps: int, repeats: int, device) -> dict:
    import torch
    import torch.distributed as dist

    from clustersim.simulator.calibration.launch import CpuMeter, flat_grad, set_flat, sync

    def step(i: int) -> None:
        x, y = wl.batch(i, b, offset=rank * b, device=device)
        opt.zero_grad(set_to_none=False)
        wl.loss(wl.model(*x), y).backward()
        g = flat_grad(wl.model)
        dist.all_reduce(g, group=group)
        set_flat(wl.model, g / n, "grad")
        opt.step()

    for i in range(warmup):
        step(i)
    sync(device)
    dist.barrier(group=group)
    meter, windows = CpuMeter(), []
    for r in range(repeats):
        t0 = time.perf_counter()
        for i in range(steps):
            step(warmup + r * steps + i)
        sync(device)
        windows.append(time.perf_counter() - t0)
    cores = torch.tensor([meter.cores()], dtype=torch.float64, device=device)
    slowest = torch.tensor(windows, dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    dist.all_reduce(cores, group=group)
    per_iter = [float(x) / steps for x in slowest]
    t = float(statistics.median(per_iter))
    return {"iter_s": t, "iters_per_s": 1.0 / t, "samples_per_s": n * b / t, "worker_cores": float(cores[0]) / n,
            "windows_iter_s": per_iter}


def _bar(total: int, what: str, enabled):
    from tqdm import tqdm
    return tqdm(total=total, desc=f"calibrate {what}", unit="point", disable=not enabled)
