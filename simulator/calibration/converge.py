"""Loss per epoch of a run to convergence on the workload's synthetic dataset (one process).

An epoch is one pass over the dataset in batches of ``convergence.batch`` (shuffled with a
seeded permutation per epoch); its loss is the mean training loss of its batches, the quantity
Optimus §3.1 fits Eq. 1 to. The run stops at convergence by the simulator's own rule
(simulator/convergence.py: the loss drop, normalised by the first epoch's loss, below
``threshold`` for ``patience`` epochs in a row) or after ``max_epochs``.
"""

from __future__ import annotations

import time

from clustersim.simulator.calibration.store import PointStore, point_key

KIND = "convergence"


def key(cfg: dict) -> str:
    c = cfg["convergence"]
    return point_key(KIND, batch=c["batch"], lr=c["lr"], threshold=c["threshold"], patience=c["patience"],
                     max_epochs=c["max_epochs"], threads=c["threads"], seed=c["seed"], model=cfg["model"])


def measure(cfg: dict, store_path: str, progress: bool = False) -> dict:
    store = PointStore(store_path)
    k = key(cfg)
    if k not in store:
        store.add(k, {"kind": KIND, **run(cfg, progress)})
    return store.get(k)


def run(cfg: dict, progress: bool = False) -> dict:
    import torch
    from tqdm import tqdm

    from clustersim.simulator.calibration import workloads

    c = cfg["convergence"]
    torch.set_num_threads(int(c["threads"]))
    wl = workloads.build(cfg["model"])
    opt = torch.optim.SGD(wl.model.parameters(), lr=float(c["lr"]))
    batch, gen = int(c["batch"]), torch.Generator().manual_seed(int(c["seed"]))
    threshold, patience = float(c["threshold"]), int(c["patience"])
    losses, calm, t0 = [], 0, time.perf_counter()
    bar = tqdm(total=int(c["max_epochs"]), desc="calibrate convergence", unit="epoch", disable=not progress)
    for _ in range(int(c["max_epochs"])):
        order = torch.randperm(wl.size, generator=gen)
        total, count = 0.0, 0
        for lo in range(0, wl.size, batch):
            idx = order[lo:lo + batch]
            opt.zero_grad()
            out = wl.loss(wl.model(*(x[idx] for x in wl.inputs)), wl.targets[idx])
            out.backward()
            opt.step()
            total, count = total + out.item() * len(idx), count + len(idx)
        losses.append(total / count)
        bar.update(1)
        if len(losses) > 1:
            calm = calm + 1 if (losses[-2] - losses[-1]) / losses[0] < threshold else 0
            if calm >= patience:
                break
    bar.close()
    return {"losses": losses, "epochs": len(losses), "converged": calm >= patience, "dataset_size": wl.size,
            "threshold": threshold, "patience": patience,
            "batch": batch, "seconds": time.perf_counter() - t0}
