"""Real rescales of a data-parallel job from n to n' > n workers and back, with both mechanisms.

Timestamps are wall-clock (``time.time()``, one host); the driver (this process) hosts a
``TCPStore`` the tasks report through and rendezvous on (one key prefix per group, so no port
has to stay free between a group's planning and its start).

stop-resume (EDL §2, Optimus §5.4): the n workers train ``pre_steps`` iterations; at the end of
the last one (``t_stop``) rank 0 saves a checkpoint (model and optimizer state, ``torch.save``),
all leave the group and exit; the driver then launches n' fresh processes, which start
Python and torch, join a new group, build the model and data, load the checkpoint and train.
pause = first iteration start after the restart - t_stop (what the running workers lose).

stop-free (EDL §4.2): the n workers train; after ``pre_steps`` the driver launches the n'-n
newcomers, which start, build model and data (their preparation) and report ready; the
running workers keep training meanwhile, and rank 0 checks for "all ready" after every
iteration and tells the others through the iteration's collective, so that all switch after
the same iteration (EDL's future timestamp). Then the group re-forms with n' members and rank
0 broadcasts the parameters (one worker broadcasts, EDL §4.2). pause = first iteration start
in the new group - end of the last iteration in the old one; prepare = newcomers' launch to
ready. Measured too: the running workers' iteration time before and during the preparation.

Each size [n, n'] is also measured as a scale-in n' -> n. stop-resume: the same run with the
sizes swapped. stop-free (EDL §4.2's graceful exit): the driver tells the n' running workers to
shrink; all switch after the same iteration, the leaving n' - n exit at once and the remaining n
re-form the group and rank 0 broadcasts. scale_in_s = the command to the later of the remaining
group's first iteration and the last leaving worker's exit (EDL Table 3's "graceful exit, end to
end"); pause = as for a scale-out.

The processes whose start is measured (the stop-resume relaunch, the stop-free newcomers) are
spawned: a fresh Python that imports torch, as a relaunched task is. The workers running before
the rescale start with the pool's start method (``start_method``, fork on CPU), since their own
start is not measured. The relaunch is recorded in parts: ``launch_s`` from the driver's launch
to the model and data built, ``restore_s`` the checkpoint's load; ``fit.fit_overhead`` turns them
into ModelCosts' ``launch_s`` (a fresh start) and ``resume_s`` (a restart from the checkpoint).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from clustersim.simulator.calibration.store import PointStore, point_key

MECHANISMS = ("stop_resume", "stop_free")
KIND = "rescale"


def key(cfg: dict, mechanism: str, n_old: int, n_new: int, repeat: int) -> str:
    o = cfg["overhead"]
    return point_key(KIND, mechanism=mechanism, n_old=n_old, n_new=n_new, repeat=repeat, batch=o["batch"],
                     pre_steps=o["pre_steps"], post_steps=o["post_steps"], threads=o["threads"],
                     device=cfg["device"], model=cfg["model"])


def points(cfg: dict) -> list[tuple[str, int, int, int]]:
    """(mechanism, n_old, n_new, repeat): each size [n, n'] as a scale-out n -> n' and a scale-in
    n' -> n, with both mechanisms."""
    o = cfg["overhead"]
    out = []
    for n_old, n_new in o["sizes"]:
        if not 1 <= int(n_old) < int(n_new):
            raise ValueError(f"overhead.sizes: need 1 <= n < n' (a scale-out), got {[n_old, n_new]}")
        for a, b in ((int(n_old), int(n_new)), (int(n_new), int(n_old))):
            out += [(m, a, b, r) for r in range(int(o["repeats"])) for m in MECHANISMS]
    return out


def measure(cfg: dict, store_path: str, progress: bool = False) -> list[dict]:
    """Measure every rescale of the sweep not yet in the store; return all the sweep's points."""
    from tqdm import tqdm

    from clustersim.simulator.calibration.launch import device_for

    store = PointStore(store_path)
    todo = [pt for pt in points(cfg) if key(cfg, *pt) not in store]
    for mech, n_old, n_new, rep in tqdm(todo, desc="calibrate rescale", unit="rescale", disable=not progress):
        kind, backend = device_for(cfg["device"], n_new)
        run = stop_resume if mech == "stop_resume" else stop_free if n_new > n_old else stop_free_in
        rec = run(cfg, n_old, n_new, kind, backend, Path(store_path).parent)
        store.add(key(cfg, mech, n_old, n_new, rep), {"kind": KIND, "mechanism": mech, "n_old": n_old,
                                                       "n_new": n_new, "repeat": rep, "device": kind, **rec})
    return [store.get(key(cfg, *pt)) for pt in points(cfg)]


# ---------------------------------------------------------------------------- the driver
class _Driver:
    def __init__(self, cfg: dict, kind: str):
        import torch.multiprocessing as mp

        from clustersim.simulator.calibration.launch import free_port

        method = cfg.get("start_method", "auto")
        if method == "auto":
            method = "fork" if kind == "cpu" and "fork" in mp.get_all_start_methods() else "spawn"
        self.cfg, self.first, self.fresh = cfg, mp.get_context(method), mp.get_context("spawn")
        self.timeout = float(cfg["timeout_s"])
        self.store_port = free_port()
        self.store = None             # started after the first processes: never fork a store's threads
        self.procs = []

    def launch(self, fn, *args, fresh: bool = True) -> float:
        """Start ``fn(*args, store_port, cfg)``; ``fresh``: a spawned Python (its start is measured)."""
        from clustersim.simulator.calibration.launch import exit_after

        t = time.time()
        proc = (self.fresh if fresh else self.first).Process(target=exit_after, daemon=True,
                                                             args=(fn, *args, self.store_port, self.cfg))
        proc.start()
        self.procs.append(proc)
        return t

    def serve(self) -> None:
        import torch.distributed as dist
        self.store = dist.TCPStore("127.0.0.1", self.store_port, is_master=True, wait_for_workers=False,
                                   timeout=_td(self.timeout))

    def counter(self, name: str) -> int:
        return int(self.store.add(name, 0))

    def wait_counter(self, name: str, value: int) -> None:
        deadline = time.time() + self.timeout
        while self.counter(name) < value:
            self._check()
            if time.time() > deadline:
                raise TimeoutError(f"rescale: {name} did not reach {value} within {self.timeout} s")
            time.sleep(0.005)

    def join(self) -> None:
        for proc in self.procs:
            proc.join(self.timeout)
        self._check(all_done=True)
        self.procs = []

    def result(self, name: str) -> dict:
        return json.loads(self.store.get(name).decode())

    def _check(self, all_done: bool = False) -> None:
        for proc in self.procs:
            if proc.exitcode not in (None, 0) or (all_done and proc.exitcode is None):
                for q in self.procs:
                    if q.is_alive():
                        q.kill()
                raise RuntimeError(f"rescale: a task failed (exit code {proc.exitcode})")


def stop_resume(cfg: dict, n_old: int, n_new: int, kind: str, backend: str, workdir: Path) -> dict:
    drv = _Driver(cfg, kind)
    ckpt = workdir / f"rescale_checkpoint_{os.getpid()}.pt"
    for r in range(n_old):
        drv.launch(_resume_old, r, n_old, kind, backend, str(ckpt), fresh=False)
    drv.serve()
    drv.join()
    t_exited = time.time()
    old = drv.result("old/0")
    for r in range(n_new):
        drv.launch(_resume_new, r, n_new, kind, backend, str(ckpt))
    drv.join()
    new = [drv.result(f"new/{r}") for r in range(n_new)]
    size = ckpt.stat().st_size
    ckpt.unlink()
    t_resume = max(x["t_first"] for x in new)
    return {"pause_s": t_resume - old["t_stop"], "save_s": old["t_saved"] - old["t_stop"],
            "exit_s": t_exited - old["t_saved"], "restart_s": max(x["t_loaded"] for x in new) - t_exited,
            "restore_s": max(x["t_loaded"] - x["t_built"] for x in new), "checkpoint_gb": size / 1e9,
            "launch_s": max(x["t_built"] for x in new) - t_exited, "step_s": old["step_s"]}


def _trained(cfg: dict, task, n_old: int, n_new: int, kind: str, backend: str) -> _Driver:
    """A stop-free run's driver once its n_old running workers (``task``) have trained
    ``pre_steps`` iterations: the moment the rescale begins."""
    drv = _Driver(cfg, kind)
    for r in range(n_old):
        drv.launch(task, r, n_old, n_new, kind, backend, fresh=False)
    drv.serve()
    drv.wait_counter("steps", int(cfg["overhead"]["pre_steps"]))
    return drv


def stop_free(cfg: dict, n_old: int, n_new: int, kind: str, backend: str, workdir: Path) -> dict:
    drv = _trained(cfg, _free_old, n_old, n_new, kind, backend)
    t_launch = [drv.launch(_free_new, r, n_new, kind, backend) for r in range(n_old, n_new)][0]
    drv.join()
    old = [drv.result(f"old/{r}") for r in range(n_old)]
    new = [drv.result(f"new/{r}") for r in range(n_old, n_new)]
    t_stop = min(x["t_stop"] for x in old)
    return {"pause_s": max(x["t_resume"] for x in old) - t_stop,
            "prepare_s": max(x["t_ready"] for x in new) - t_launch,
            "scale_out_s": max(x["t_resume"] for x in new) - t_launch,
            "step_s": old[0]["step_s"], "step_s_during_prepare": old[0]["step_s_prepare"],
            "steps_during_prepare": old[0]["steps_prepare"]}


def stop_free_in(cfg: dict, n_old: int, n_new: int, kind: str, backend: str, workdir: Path) -> dict:
    """A graceful scale-in n_old -> n_new < n_old (see the module's docstring)."""
    drv = _trained(cfg, _in_old, n_old, n_new, kind, backend)
    t_command = time.time()
    drv.store.add("leave", 1)
    drv.join()
    old = [drv.result(f"old/{r}") for r in range(n_old)]
    stay, leave = old[:n_new], old[n_new:]
    t_stop = min(x["t_stop"] for x in old)
    return {"pause_s": max(x["t_resume"] for x in stay) - t_stop,
            "scale_in_s": max([x["t_resume"] for x in stay] + [x["t_left"] for x in leave]) - t_command,
            "step_s": old[0]["step_s"]}


# ---------------------------------------------------------------------------- the tasks
def _td(seconds: float):
    from datetime import timedelta
    return timedelta(seconds=seconds)


def client(port: int, timeout: float):
    import torch.distributed as dist
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=_td(timeout))


def join_group(st, group: str, backend: str, rank: int, world: int, timeout: float) -> None:
    """Join the process group ``group`` through the driver's store."""
    import torch.distributed as dist

    from clustersim.simulator.calibration.launch import init_group
    init_group(backend, None, rank, world, timeout, store=dist.PrefixStore(group, st))


def write_checkpoint(path: str, state: dict) -> None:
    """A checkpoint written whole: to a temporary file, then renamed over the old one."""
    import torch

    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


class Trainer:
    """A data-parallel worker: model, SGD, one all-reduce of the flat gradient per iteration."""

    def __init__(self, cfg: dict, rank: int, kind: str):
        import torch

        from clustersim.simulator.calibration import launch, workloads

        o = cfg["overhead"]
        torch.set_num_threads(int(o["threads"]))
        self.device = launch.local_device(kind, rank)
        self.wl = workloads.build(cfg["model"]).to(self.device)
        self.opt = torch.optim.SGD(self.wl.model.parameters(), lr=float(cfg["lr"]))
        self.rank, self.batch, self.it = rank, int(o["batch"]), 0

    def step(self, world: int) -> None:
        import torch.distributed as dist

        from clustersim.simulator.calibration.launch import flat_grad, set_flat

        x, y = self.wl.batch(self.it, self.batch, offset=self.rank * self.batch, device=self.device)
        self.opt.zero_grad(set_to_none=False)
        self.wl.loss(self.wl.model(*x), y).backward()
        g = flat_grad(self.wl.model)
        dist.all_reduce(g)
        set_flat(self.wl.model, g / world, "grad")
        self.opt.step()
        self.it += 1

    def save(self, path: str) -> None:
        """Rank 0 writes model, optimizer and iteration (a testbed job's checkpoint, jobrun.py)."""
        if self.rank == 0:
            write_checkpoint(path, {"model": self.wl.model.state_dict(), "optimizer": self.opt.state_dict(), "iteration": self.it})

    def restore(self, path: str) -> None:
        import torch

        state = torch.load(path, map_location=self.device)
        self.wl.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.it = int(state["iteration"])

    def broadcast(self) -> None:
        import torch
        import torch.distributed as dist

        from clustersim.simulator.calibration.launch import set_flat, sync

        flat = torch.cat([q.detach().reshape(-1) for q in self.wl.model.parameters()])
        dist.broadcast(flat, src=0)
        set_flat(self.wl.model, flat)
        sync(self.device)

    def train(self, world: int, steps: int) -> float:
        from clustersim.simulator.calibration.launch import sync
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step(world)
        sync(self.device)
        return (time.perf_counter() - t0) / max(steps, 1)


def _resume_old(rank, n, kind, backend, ckpt, store_port, cfg) -> None:
    import torch
    import torch.distributed as dist

    o, st = cfg["overhead"], client(store_port, cfg["timeout_s"])
    join_group(st, "old/", backend, rank, n, cfg["timeout_s"])
    tr = Trainer(cfg, rank, kind)
    step_s = tr.train(n, int(o["pre_steps"]))
    t_stop = time.time()
    if rank == 0:
        torch.save({"model": tr.wl.model.state_dict(), "optimizer": tr.opt.state_dict(), "iteration": tr.it}, ckpt)
    t_saved = time.time()
    dist.barrier()
    dist.destroy_process_group()
    st.set(f"old/{rank}", json.dumps({"t_stop": t_stop, "t_saved": t_saved, "step_s": step_s}))


def _resume_new(rank, n, kind, backend, ckpt, store_port, cfg) -> None:
    import torch
    import torch.distributed as dist

    st = client(store_port, cfg["timeout_s"])
    join_group(st, "new/", backend, rank, n, cfg["timeout_s"])
    tr = Trainer(cfg, rank, kind)
    t_built = time.time()
    state = torch.load(ckpt, map_location=tr.device)
    tr.wl.model.load_state_dict(state["model"])
    tr.opt.load_state_dict(state["optimizer"])
    tr.it = int(state["iteration"])
    t_loaded = time.time()
    dist.barrier()
    t_first = time.time()
    tr.train(n, int(cfg["overhead"]["post_steps"]))
    dist.destroy_process_group()
    st.set(f"new/{rank}", json.dumps({"t_built": t_built, "t_loaded": t_loaded, "t_first": t_first}))


def _free_old(rank, n_old, n_new, kind, backend, store_port, cfg) -> None:
    import torch
    import torch.distributed as dist

    o, st = cfg["overhead"], client(store_port, cfg["timeout_s"])
    join_group(st, "a/", backend, rank, n_old, cfg["timeout_s"])
    tr = Trainer(cfg, rank, kind)
    pre, joining = int(o["pre_steps"]), n_new - n_old
    step_s = tr.train(n_old, pre)
    if rank == 0:
        st.add("steps", pre)                      # the driver launches the newcomers now
    t0, steps, flag = time.perf_counter(), 0, torch.zeros(1, device=tr.device)
    while True:
        tr.step(n_old)
        steps += 1
        if rank == 0:
            flag.fill_(1.0 if int(st.add("ready", 0)) >= joining else 0.0)
        dist.broadcast(flag, src=0)               # everyone switches after the same iteration
        if flag.item() > 0:
            break
    t_stop = time.time()
    prepare_step_s = (time.perf_counter() - t0) / steps
    dist.destroy_process_group()
    join_group(st, "b/", backend, rank, n_new, cfg["timeout_s"])
    tr.broadcast()
    t_resume = time.time()
    tr.train(n_new, int(o["post_steps"]))
    dist.destroy_process_group()
    st.set(f"old/{rank}", json.dumps({"t_stop": t_stop, "t_resume": t_resume, "step_s": step_s,
                                      "step_s_prepare": prepare_step_s, "steps_prepare": steps}))


def _in_old(rank, n_old, n_new, kind, backend, store_port, cfg) -> None:
    import torch
    import torch.distributed as dist

    o, st = cfg["overhead"], client(store_port, cfg["timeout_s"])
    join_group(st, "a/", backend, rank, n_old, cfg["timeout_s"])
    tr = Trainer(cfg, rank, kind)
    step_s = tr.train(n_old, int(o["pre_steps"]))
    if rank == 0:
        st.add("steps", int(o["pre_steps"]))      # the driver sends the scale-in now
    flag = torch.zeros(1, device=tr.device)
    while True:
        tr.step(n_old)
        if rank == 0:
            flag.fill_(1.0 if int(st.add("leave", 0)) else 0.0)
        dist.broadcast(flag, src=0)               # everyone switches after the same iteration
        if flag.item() > 0:
            break
    t_stop = time.time()
    dist.destroy_process_group()
    if rank >= n_new:                             # a leaving worker: exits at once
        st.set(f"old/{rank}", json.dumps({"t_stop": t_stop, "t_left": time.time(), "step_s": step_s}))
        return
    join_group(st, "b/", backend, rank, n_new, cfg["timeout_s"])
    tr.broadcast()
    t_resume = time.time()
    tr.train(n_new, int(o["post_steps"]))
    dist.destroy_process_group()
    st.set(f"old/{rank}", json.dumps({"t_stop": t_stop, "t_resume": t_resume, "step_s": step_s}))


def _free_new(rank, n_new, kind, backend, store_port, cfg) -> None:
    st = client(store_port, cfg["timeout_s"])
    tr = Trainer(cfg, rank, kind)               # preparation: model, data, device
    t_ready = time.time()
    st.add("ready", 1)
    join_group(st, "b/", backend, rank, n_new, cfg["timeout_s"])
    tr.broadcast()
    t_resume = time.time()
    tr.train(n_new, int(cfg["overhead"]["post_steps"]))
    import torch.distributed as dist
    dist.destroy_process_group()
    st.set(f"new/{rank}", json.dumps({"t_ready": t_ready, "t_resume": t_resume}))
