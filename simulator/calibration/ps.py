"""Parameter-server speed on CPU: p PS processes hold the parameters in p contiguous shards of
the flattened parameter vector; w workers push gradients and pull parameters (gloo, point to
point).

One worker iteration: forward and backward on its batch, send shard k of the gradient to PS k
for every k, receive every shard of the new parameters (receives are posted before the sends).
- sync (Optimus Eq. 4): every PS waits for the gradients of all w workers, applies their mean,
  sends the new shard to all; the global batch M is fixed, each worker computes M/w samples.
- async (Optimus Eq. 3): a PS applies each gradient as it arrives (from any worker) and sends
  the new shard back to that worker; each worker computes a fixed batch m.
Each task runs ``threads`` CPU threads (``torch.set_num_threads``, per role). One pool of p+w
processes (the largest point) measures every pending (p, w): ranks 0..p-1 are the PS, p..p+w-1
the workers, the others wait. A point: samples/s over all workers (the measured window is the
slowest worker's), steps/s, and the cores each PS and each worker used (CPU time / wall time).
The grid is measured ``repeats`` times in rounds, each round in a fresh seeded random order and
each measurement a window of ``steps`` iterations after ``warmup``: load from elsewhere on the host
that comes and goes then spreads over all points instead of hitting a few consecutive ones. A
point's speed is the median of its rounds; every round is stored as it is measured. With ``pin``
rank r runs on one core (launch.pin: the r-th this process may use, modulo their count).
"""

from __future__ import annotations

import statistics
import time

from clustersim.simulator.calibration.store import PointStore, point_key, shuffled_rounds

KIND = "ps"


def key(cfg: dict, p: int, w: int, round_: int) -> str:
    s = cfg["ps"]
    return point_key(KIND, p=p, w=w, round=round_, mode=s["mode"], batch=s["batch"], steps=s["steps"],
                     warmup=s["warmup"], threads=s["threads"], model=cfg["model"], **({"pin": True} if cfg.get("pin") else {}))


def points(cfg: dict) -> list[tuple[int, int]]:
    s = cfg["ps"]
    return [(int(p), int(w)) for p in s["p"] for w in s["w"]]


def rounds(cfg: dict) -> list[tuple[int, int, int]]:
    """Every (p, w, round), each round's points in a seeded random order."""
    return shuffled_rounds(points(cfg), cfg["ps"]["repeats"])


def worker_batch(cfg: dict, w: int) -> int:
    """sync: the global batch M split over w workers (Eq. 4: M fixed); async: m per worker."""
    s = cfg["ps"]
    b = int(s["batch"])
    return max(1, round(b / w)) if s["mode"] == "sync" else b


def measure(cfg: dict, store_path: str, progress: bool = False) -> list[dict]:
    """Measure every (p, w) of the sweep not yet in the store; return all the sweep's points."""
    from clustersim.simulator.calibration.launch import rendezvous, start_pool

    if cfg["ps"]["mode"] not in ("sync", "async"):
        raise ValueError(f"ps.mode must be sync or async, got {cfg['ps']['mode']!r}")
    store = PointStore(store_path)
    todo = [pt for pt in rounds(cfg) if key(cfg, *pt) not in store]
    if todo:
        world = max(p + w for p, w, _ in todo)
        with rendezvous() as init:
            start_pool(_rank, (world, todo, cfg, init, store_path, progress), world, "cpu",
                       cfg.get("start_method", "auto"))
        store = PointStore(store_path)
    reps = range(int(cfg["ps"]["repeats"]))
    return [aggregate([store.get(key(cfg, p, w, r)) for r in reps]) for p, w in points(cfg)]


def aggregate(measured: list[dict]) -> dict:
    """One (p, w) point from its rounds: the median speed, the mean CPU use, every round's speed."""
    first = measured[0]
    rate = float(statistics.median(m["samples_per_s"] for m in measured))
    return {**{k: first[k] for k in ("kind", "p", "w", "mode", "worker_batch", "global_batch", "threads")},
            "samples_per_s": rate, "steps_per_s": rate / first["global_batch"],
            "windows_samples_per_s": [m["samples_per_s"] for m in measured],
            "ps_cores": float(statistics.mean(m["ps_cores"] for m in measured)),
            "worker_cores": float(statistics.mean(m["worker_cores"] for m in measured))}


def _rank(rank: int, world: int, todo: list, cfg: dict, init: str, store_path: str, progress: bool) -> None:
    import torch
    import torch.distributed as dist

    from clustersim.simulator.calibration import launch, workloads

    s = cfg["ps"]
    if cfg.get("pin"):
        launch.pin(rank)
    launch.init_group("gloo", init, rank, world, cfg["timeout_s"])
    wl = workloads.build(cfg["model"])
    store = PointStore(store_path) if rank == 0 else None
    bar = None
    if rank == 0:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), desc="calibrate parameter server", unit="point", disable=not progress)
    for p, w, round_ in todo:
        role = "ps" if rank < p else "worker" if rank < p + w else None
        if role:
            torch.set_num_threads(int(s["threads"][role]))
        m = worker_batch(cfg, w)
        if role == "ps":
            out = _serve(wl, rank, p, w, s, float(cfg["lr"]))
        elif role == "worker":
            out = _work(wl, rank - p, p, m, s)
        else:
            out = (0.0, 0.0, 0.0)
        # (role code, cores, samples, seconds) of every rank, to rank 0
        code = {"ps": 1.0, "worker": 2.0, None: 0.0}[role]
        mine = torch.tensor([code, *out], dtype=torch.float64)
        every = [torch.zeros(4, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(every, mine)
        if rank == 0:
            store.add(key(cfg, p, w, round_), {**_point(p, w, m, s, every), "round": round_})
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    dist.destroy_process_group()


def _point(p: int, w: int, m: int, s: dict, every: list) -> dict:
    ps = [t for t in every if t[0] == 1.0]
    workers = [t for t in every if t[0] == 2.0]
    rate = sum(float(t[2]) for t in workers) / max(float(t[3]) for t in workers)
    return {"kind": KIND, "p": p, "w": w, "mode": s["mode"], "worker_batch": m,
            "global_batch": m * w if s["mode"] == "sync" else m, "samples_per_s": rate,
            "steps_per_s": rate / (m * w if s["mode"] == "sync" else m),
            "ps_cores": sum(float(t[1]) for t in ps) / len(ps),
            "worker_cores": sum(float(t[1]) for t in workers) / len(workers),
            "threads": dict(s["threads"])}


def shards(total: int, p: int) -> list[tuple[int, int]]:
    """p contiguous shards of ``total`` parameters, sizes differing by at most one."""
    base, extra = divmod(total, p)
    bounds, lo = [], 0
    for k in range(p):
        hi = lo + base + (1 if k < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def _serve(wl, k: int, p: int, w: int, s: dict, lr: float) -> tuple[float, float, float]:
    """PS k: serve ``warmup + steps`` iterations of w workers; cores used in the measured part."""
    from clustersim.simulator.calibration.launch import CpuMeter

    server = Server(wl, k, p, lr)
    warmup, steps = int(s["warmup"]), int(s["steps"])
    meter = CpuMeter()
    if s["mode"] == "sync":
        for it in range(warmup + steps):
            if it == warmup:
                meter = CpuMeter()
            server.sync_step(w)
    else:
        for it in range(w * (warmup + steps)):
            if it == w * warmup:
                meter = CpuMeter()
            server.async_step()
    return meter.cores(), 0.0, 0.0


def _work(wl, i: int, p: int, m: int, s: dict) -> tuple[float, float, float]:
    """Worker i: ``warmup + steps`` iterations; (cores, samples, seconds) of the measured part."""
    from clustersim.simulator.calibration.launch import CpuMeter

    worker = Worker(wl, p)
    warmup, steps = int(s["warmup"]), int(s["steps"])
    meter, t0 = CpuMeter(), time.perf_counter()
    for it in range(warmup + steps):
        if it == warmup:
            meter, t0 = CpuMeter(), time.perf_counter()
        worker.step(it, m, i * m)
    return meter.cores(), float(steps * m), time.perf_counter() - t0


class Server:
    """PS k of p: shard k of the flattened parameters (``shards``), updated by plain SGD. In a
    group the PS are ranks 0..p-1 and the workers ranks p, p+1, ... (the sweep and the testbed
    job, simulator/calibration/jobrun.py, run these same iterations)."""

    def __init__(self, wl, k: int, p: int, lr: float):
        import torch

        flat = torch.cat([q.detach().reshape(-1) for q in wl.model.parameters()])
        self.k, self.p, self.lr, self.total = k, p, lr, flat.numel()
        self.lo, self.hi = shards(self.total, p)[k]
        self.theta = flat[self.lo:self.hi].clone()

    def sync_step(self, w: int) -> None:
        """Optimus Eq. 4: wait for the gradients of all w workers, apply their mean, send the
        new shard to every worker."""
        import torch
        import torch.distributed as dist

        bufs = [torch.empty_like(self.theta) for _ in range(w)]
        for r in [dist.irecv(bufs[i], src=self.p + i) for i in range(w)]:
            r.wait()
        self.theta -= self.lr * torch.stack(bufs).mean(0)
        self.send(w)

    def async_step(self) -> None:
        """Optimus Eq. 3: apply one gradient as it arrives (any worker), send the shard back."""
        import torch
        import torch.distributed as dist

        buf = torch.empty_like(self.theta)
        src = dist.recv(buf)
        self.theta -= self.lr * buf
        dist.isend(self.theta.clone(), dst=src).wait()

    def send(self, w: int) -> None:
        """The shard to each of the w workers (what their pull receives)."""
        import torch.distributed as dist

        out = self.theta.clone()
        for r in [dist.isend(out, dst=self.p + i) for i in range(w)]:
            r.wait()


class Worker:
    """A worker of p PS: forward and backward on its batch, push shard k of the gradient to PS k
    for every k, pull every shard of the new parameters (receives posted before the sends)."""

    def __init__(self, wl, p: int):
        import torch

        self.wl, self.p = wl, p
        self.bounds = shards(wl.parameter_count(), p)
        self.params = torch.empty(wl.parameter_count())

    def step(self, it: int, m: int, offset: int) -> None:
        """One iteration on samples ``offset + it·m`` onwards (``m`` of them)."""
        import torch.distributed as dist

        from clustersim.simulator.calibration.launch import flat_grad

        wl = self.wl
        x, y = wl.batch(it, m, offset=offset)
        wl.model.zero_grad(set_to_none=False)
        wl.loss(wl.model(*x), y).backward()
        g = flat_grad(wl.model)
        reqs = [dist.irecv(self.params[lo:hi], src=k) for k, (lo, hi) in enumerate(self.bounds)]
        reqs += [dist.isend(g[lo:hi], dst=k) for k, (lo, hi) in enumerate(self.bounds)]
        for r in reqs:
            r.wait()
        self._apply()

    def pull(self) -> None:
        """Every shard of the parameters, without a push (a generation's start)."""
        import torch.distributed as dist

        for r in [dist.irecv(self.params[lo:hi], src=k) for k, (lo, hi) in enumerate(self.bounds)]:
            r.wait()
        self._apply()

    def _apply(self) -> None:
        from clustersim.simulator.calibration.launch import set_flat
        set_flat(self.wl.model, self.params)
