"""One task of a testbed job: a data-parallel worker that trains until its job's work is done or
the scheduler tells it to stop or rescale (``clustersim-testbed``, clustersim/testbed/).

The worker is the calibration's rescale ``Trainer`` (model, SGD, one all-reduce of the flat
gradient per iteration): one piece of training code for calibrating and for the testbed. The
job keeps its global batch fixed, so a worker of a job of n computes ``batch / n`` samples.

A job runs in *generations*: the group of one size between two changes. Each task is a fresh
spawned Python (its start is part of what a start, resume or stop-resume costs), pinned to one
CPU core (``os.sched_setaffinity``, one torch thread), and joins its generation's gloo group
through the testbed's ``TCPStore`` (key prefix ``<job>/g<gen>/``). After every iteration rank 0
reads the scheduler's commands and broadcasts one flag to the group, so that every rank acts
after the same iteration (EDL §4.2's agreed switch point). It does so every ``check_every``
iterations (about every 50 ms at the job's speed: a check per iteration would slow a fast model's
millisecond iterations by the store's round trip):

- ``stop``: rank 0 saves a checkpoint (model, optimizer, iteration; written whole, then renamed),
  every task exits; a later generation restores it (a resume, or a stop-resume rescale);
- ``resize`` to n' (stop-free, EDL §4.2): for a scale-out the scheduler has launched the
  newcomers, which build model and data and report ready while the old ranks keep training;
  rank 0 switches once all are ready. For a scale-in the leaving ranks exit at once (a graceful
  exit). The remaining and new ranks form generation g+1 and rank 0 broadcasts the parameters;
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
    import torch

    from clustersim.simulator.calibration.rescale import Trainer, client, join_group

    os.sched_setaffinity(0, {int(spec["core"])})
    st = client(store_port, timeout)
    cfg = {"overhead": {"threads": 1, "batch": 1}, "model": spec["model"], "lr": spec["lr"]}
    tr = Trainer(cfg, rank, "cpu")                       # model and data: a newcomer's preparation
    if newcomer:
        st.add(f"{job}/g{gen}/ready", 1)
    join_group(st, f"{job}/g{gen}/", "gloo", rank, world, timeout)
    if newcomer:
        _receive(tr)                                     # the running ranks' parameters and iteration
    elif os.path.exists(spec["ckpt"]):                  # a resume or a stop-resume rescale: restore
        state = torch.load(spec["ckpt"])
        tr.wl.model.load_state_dict(state["model"])
        tr.opt.load_state_dict(state["optimizer"])
        tr.it = int(state["iteration"])
    _train(tr, st, job, gen, rank, world, spec, timeout)


def _train(tr, st, job: str, gen: int, rank: int, world: int, spec: dict, timeout: float) -> None:
    import torch
    import torch.distributed as dist

    from clustersim.simulator.calibration.rescale import join_group

    target, report_s, seen = int(spec["target"]), float(spec["report_s"]), int(spec["commands_seen"])
    every = int(spec["check_every"])
    flag = torch.zeros(3, dtype=torch.float64)
    last_report = 0.0
    if rank == 0:                                        # rank 0 is never a newcomer
        st.set(f"{job}/g{gen}/first", json.dumps({"t": time.monotonic(), "it": tr.it}))
    while True:
        tr.batch = max(1, int(spec["batch"]) // world)
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
            if rank == 0:
                tmp = spec["ckpt"] + ".tmp"
                torch.save({"model": tr.wl.model.state_dict(), "optimizer": tr.opt.state_dict(),
                            "iteration": tr.it}, tmp)
                os.replace(tmp, spec["ckpt"])
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
