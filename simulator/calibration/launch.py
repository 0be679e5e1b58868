"""Process groups, devices and the hardware description shared by the runners.

The speed sweeps start their pool of processes with ``start_method`` (auto: ``fork`` on CPU, where
it saves each process the seconds of starting Python and torch, ``spawn`` with CUDA, which cannot
be forked); the time a process takes to start does not enter a speed measurement. The rescale runs
always spawn: a fresh process's start is part of what they measure. Every process joins a gloo or
NCCL group through a rendezvous on this host (a file, or the rescale driver's store) and sets its CPU threads
(``torch.set_num_threads``) before any work.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist


def free_port() -> int:
    """A TCP port free now (the rescale driver's store binds it before its tasks need it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def device_for(requested: str, world: int) -> tuple[str, str]:
    """(device kind, backend) for ``requested`` = auto | cpu | cuda with ``world`` processes.

    auto: CUDA (NCCL) when this host has a GPU, gloo on CPU otherwise. cuda without a GPU is an
    error rather than a silent CPU run.
    """
    if requested not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {requested!r}")
    cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
    if requested == "cuda" and not cuda:
        raise RuntimeError("device=cuda, but torch sees no CUDA device on this host")
    if requested == "cuda" or (requested == "auto" and cuda):
        return "cuda", "nccl"
    return "cpu", "gloo"


def start_pool(fn, args: tuple, nprocs: int, kind: str, method: str = "auto") -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` processes and wait for all; a failure raises."""
    import torch.multiprocessing as mp

    if method == "auto":
        method = "fork" if kind == "cpu" and "fork" in mp.get_all_start_methods() else "spawn"
    if method not in ("fork", "spawn", "forkserver"):
        raise ValueError(f"start_method must be auto, fork, spawn or forkserver, got {method!r}")
    mp.start_processes(_pool_task, args=(fn, *args), nprocs=nprocs, join=True, start_method=method)


def exit_after(fn, *args) -> None:
    """Run one task, then leave the process at once: exit code 0, or 1 with the traceback printed.

    A task hands its result over before it returns (the driver's store, a file). Skipping the
    interpreter's teardown keeps torch's distributed threads from aborting it (SIGABRT,
    "terminate called without an active exception") after a measurement that succeeded.
    """
    code = 0
    try:
        fn(*args)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _pool_task(rank: int, fn, *args) -> None:
    exit_after(fn, rank, *args)


def pin(rank: int) -> int:
    """Run this process on one core: the ``rank``-th (modulo their count) of the cores it may use,
    as the testbed pins each task (clustersim/testbed/real.py). Returns the core."""
    cores = sorted(os.sched_getaffinity(0))
    core = cores[rank % len(cores)]
    os.sched_setaffinity(0, {core})
    return core


def local_device(kind: str, rank: int) -> torch.device:
    """One GPU per process, round robin over this host's GPUs; the CPU otherwise."""
    if kind == "cuda":
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        return dev
    return torch.device("cpu")


def init_group(backend: str, init_method: str | None, rank: int, world: int, timeout_s: float,
               threads: int | None = None, store=None) -> None:
    """Join a group through ``init_method`` (e.g. ``file://<path>``) or through ``store``."""
    if threads:
        torch.set_num_threads(int(threads))
    how = {"store": store} if store is not None else {"init_method": init_method}
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(seconds=float(timeout_s)), **how)


@contextmanager
def rendezvous():
    """A fresh ``file://`` rendezvous for one pool: no port that another program could take first."""
    d = tempfile.mkdtemp(prefix="clustersim-rdzv-")
    try:
        yield f"file://{d}/store"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class CpuMeter:
    """Cores a process used over a window: CPU seconds of all its threads / wall seconds."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def cores(self) -> float:
        wall = time.perf_counter() - self.wall
        return (time.process_time() - self.cpu) / wall if wall > 0 else 0.0


def flat_grad(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                      for p in model.parameters()])


def set_flat(model: torch.nn.Module, flat: torch.Tensor, attr: str = "data") -> None:
    """Copy ``flat`` into the parameters (``attr='data'``) or their gradients (``'grad'``)."""
    i = 0
    for p in model.parameters():
        n = p.numel()
        chunk = flat[i:i + n].view_as(p)
        if attr == "grad":
            if p.grad is None:
                p.grad = chunk.clone()
            else:
                p.grad.copy_(chunk)
        else:
            p.data.copy_(chunk)
        i += n


def hardware(kind: str, backend: str) -> dict:
    """What the measurements ran on, for the profile's ``hardware`` block."""
    info = {"host": platform.node(), "platform": platform.platform(), "processor": platform.processor() or
            platform.machine(), "cpu_cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "device": kind, "backend": backend}
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        if names:
            info["cpu_model"] = names[0]
    except OSError:
        pass
    if kind == "cuda":
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cuda"] = torch.version.cuda
        info["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    return info
