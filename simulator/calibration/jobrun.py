"""One task of a testbed job: a data-parallel worker, or a parameter server or worker of a PS job,
that trains until its job's work is done or the scheduler tells it to stop or rescale
(``clustersim-testbed``, clustersim/testbed/).

A data-parallel worker is the calibration's rescale ``Trainer`` (model, SGD, one all-reduce of
the flat gradient per iteration). A PS job (``spec["ps"]`` = p > 0) runs the calibration's PS
sweep iteration (simulator/calibration/ps.py ``Server`` and ``Worker``, synchronous, Optimus
Eq. 4): ranks 0..p-1 hold the parameter shards, the workers push gradients and pull parameters.
One piece of training code for calibrating and for the testbed. A job keeps its global batch
fixed, so each of its n workers computes ``batch / n`` samples.

A job runs in *generations*: the group of one size between two changes. Each task is a fresh
spawned Python (its start is part of what a start, resume or stop-resume costs), pinned to one
CPU core (``os.sched_setaffinity``, one torch thread), and joins its generation's gloo group
through the testbed's ``TCPStore`` (key prefix ``<job>/g<gen>/``). After every iteration rank 0
reads the scheduler's commands and broadcasts one flag to the group, so that every rank acts
after the same iteration (EDL §4.2's agreed switch point). It does so every ``check_every``
iterations (about every 50 ms at the job's speed: a check per iteration would slow a fast model's
millisecond iterations by the store's round trip):

- ``stop``: rank 0 saves a checkpoint (model, optimizer, iteration; written whole, then renamed;
  a PS job's rank 0, PS 0, first gathers the other shards), every task exits; a later generation
  restores it (a resume, or a stop-resume rescale, which may change a PS job's p);
- ``resize`` to n' (stop-free, EDL §4.2): for a scale-out the scheduler has launched the
  newcomers, which build model and data and report ready while the old ranks keep training;
  rank 0 switches once all are ready. For a scale-in the leaving ranks exit at once (a graceful
  exit). The remaining and new ranks form generation g+1 and rank 0 broadcasts the parameters
  (a PS job's PS send their shards to every worker, the pull that also starts every generation;
  its stop-free rescales change the workers only: ranks 0..p-1 stay);
- the job's work is done: rank 0 reports it and every task exits.

Rank 0 reports to the store ``<job>/it`` (iterations done and when, at most every ``report_s``),
``<job>/g<gen>/first`` (when the generation's first iteration began) and, when it stops,
``<job>/g<gen>/exit``. Times are ``time.monotonic()``: one clock for every process on this host.
"""

from __future__ import annotations

import json
import os
import time

RUN, STOP, RESIZE, DONE = 0.0, 1.0, 2.0, 3.0


def task(job: str, gen: int, rank: int, world: int, spec: dict, newcomer: bool, store_port: int,
         timeout: float) -> None:
    """Run one task of ``job`` (rank ``rank`` of ``world`` in generation ``gen``)."""
    from clustersim.simulator.calibration.rescale import client, join_group

    os.sched_setaffinity(0, {int(spec["core"])})
    st = client(store_port, timeout)
    p = int(spec.get("ps", 0))
    tr = PSTask(spec, rank, p) if p else _trainer(spec, rank)   # model and data: a newcomer's preparation
    if newcomer:
        st.add(f"{job}/g{gen}/ready", 1)
    join_group(st, f"{job}/g{gen}/", "gloo", rank, world, timeout)
    if newcomer:
        _receive(tr)                                     # the running ranks' parameters and iteration
    else:
        if os.path.exists(spec["ckpt"]):                # a resume or a stop-resume rescale: restore
            tr.restore(spec["ckpt"])
        if p:
            _receive(tr)                                 # the workers pull the PS's parameters
    _train(tr, st, job, gen, rank, world, spec, timeout)


def _trainer(spec: dict, rank: int):
    from clustersim.simulator.calibration.rescale import Trainer

    return Trainer({"overhead": {"threads": 1, "batch": 1}, "model": spec["model"], "lr": spec["lr"]}, rank, "cpu")


class PSTask:
    """A task of a synchronous PS job: PS k (rank k < p) or worker i (rank p + i), the PS sweep's
    own ``Server``/``Worker`` iterations (simulator/calibration/ps.py) with the interface of the
    data-parallel ``Trainer`` that ``_train`` drives (``step``, ``broadcast``, ``it``, ``batch``)."""

    def __init__(self, spec: dict, rank: int, p: int):
        import torch

        from clustersim.simulator.calibration import ps, workloads

        torch.set_num_threads(1)
        wl = workloads.build(spec["model"])
        self.rank, self.p, self.it, self.batch = rank, p, 0, 1
        self.server = ps.Server(wl, rank, p, float(spec["lr"])) if rank < p else None
        self.worker = None if self.server else ps.Worker(wl, p)

    def step(self, world: int) -> None:
        if self.server:
            self.server.sync_step(world - self.p)
        else:
            self.worker.step(self.it, self.batch, (self.rank - self.p) * self.batch)
        self.it += 1

    def broadcast(self) -> None:
        """The parameters to every worker: each PS sends its shard, each worker pulls them all."""
        import torch.distributed as dist

        if self.server:
            self.server.send(dist.get_world_size() - self.p)
        else:
            self.worker.pull()

    def save(self, path: str) -> None:
        """Every PS: its shard to PS 0, which writes the whole parameters and the iteration."""
        import torch
        import torch.distributed as dist

        if not self.server:
            return
        if self.rank:
            dist.send(self.server.theta, dst=0)
            return
        from clustersim.simulator.calibration.ps import shards

        bounds = shards(self.server.total, self.p)
        flat = torch.empty(self.server.total)
        flat[bounds[0][0]:bounds[0][1]] = self.server.theta
        for k in range(1, self.p):
            lo, hi = bounds[k]
            dist.recv(flat[lo:hi], src=k)
        from clustersim.simulator.calibration.rescale import write_checkpoint
        write_checkpoint(path, {"params": flat, "iteration": self.it})

    def restore(self, path: str) -> None:
        """The iteration and, on a PS, its shard of the saved parameters (p may have changed)."""
        import torch

        state = torch.load(path)
        self.it = int(state["iteration"])
        if self.server:
            s = self.server
            s.theta = state["params"][s.lo:s.hi].clone()


def _train(tr, st, job: str, gen: int, rank: int, world: int, spec: dict, timeout: float) -> None:
    import torch
    import torch.distributed as dist

    from clustersim.simulator.calibration.rescale import join_group

    target, report_s, seen = int(spec["target"]), float(spec["report_s"]), int(spec["commands_seen"])
    every, p = int(spec["check_every"]), int(spec.get("ps", 0))
    flag = torch.zeros(3, dtype=torch.float64)
    last_report = 0.0
    if rank == 0:                                        # rank 0 is never a newcomer
        st.set(f"{job}/g{gen}/first", json.dumps({"t": time.monotonic(), "it": tr.it}))
    while True:
        tr.batch = max(1, int(spec["batch"]) // (world - p))     # the workers share the global batch
        tr.step(world)
        if tr.it % every and tr.it < target:
            continue                                     # every rank knows when the next check is
        if rank == 0:
            now = time.monotonic()
            if now - last_report >= report_s or tr.it >= target:
                st.set(f"{job}/it", json.dumps({"it": tr.it, "t": now}))
                last_report = now
            flag.copy_(torch.tensor(_command(st, job, tr.it, target, seen), dtype=torch.float64))
        dist.broadcast(flag, src=0)
        op, new_world, new_gen = float(flag[0]), int(flag[1]), int(flag[2])
        if op == RUN:
            continue
        t_stop = time.monotonic()
        if op == DONE:
            if rank == 0:
                st.set(f"{job}/done", json.dumps({"it": tr.it, "t": t_stop}))
            return
        if op == STOP:
            tr.save(spec["ckpt"])                        # every rank: a PS job gathers its shards
            if rank == 0:
                st.set(f"{job}/g{gen}/exit", json.dumps({"it": tr.it, "t_stop": t_stop, "t_saved": time.monotonic()}))
            dist.barrier()
            return
        # RESIZE (stop-free): leave the group; the leaving ranks exit, the others join the next one
        seen += 1
        dist.destroy_process_group()
        if rank == 0:
            st.set(f"{job}/g{gen}/exit", json.dumps({"it": tr.it, "t_stop": t_stop}))
        if rank >= new_world:
            return
        gen, world = new_gen, new_world
        join_group(st, f"{job}/g{gen}/", "gloo", rank, world, timeout)
        _receive(tr)
        if rank == 0:
            st.set(f"{job}/g{gen}/first", json.dumps({"t": time.monotonic(), "it": tr.it}))


def _receive(tr) -> None:
    """Rank 0's parameters and iteration count to every rank of a re-formed group (EDL §4.2)."""
    import torch
    import torch.distributed as dist

    tr.broadcast()
    it = torch.tensor([tr.it], dtype=torch.int64)
    dist.broadcast(it, src=0)
    tr.it = int(it[0])


def _command(st, job: str, it: int, target: int, seen: int) -> list[float]:
    """Rank 0's flag after an iteration: done, or the scheduler's next command once it can act."""
    if it >= target:
        return [DONE, 0, 0]
    if int(st.add(f"{job}/commands", 0)) <= seen:
        return [RUN, 0, 0]
    cmd = json.loads(st.get(f"{job}/command/{seen + 1}").decode())
    if cmd["op"] == "stop":
        return [STOP, 0, 0]
    joining = int(cmd["world"]) - int(cmd["old_world"])
    if joining > 0 and int(st.add(f"{job}/g{cmd['gen']}/ready", 0)) < joining:
        return [RUN, 0, 0]                               # newcomers still preparing: keep training
    return [RESIZE, int(cmd["world"]), int(cmd["gen"])]
