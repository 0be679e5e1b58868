"""The models a calibration trains, with synthetic data generated locally (nothing is downloaded).

A ``Workload`` is a model, a fixed synthetic dataset and its loss. Labels come from a fixed random
"teacher" of the same input, so the problem is learnable and a run to convergence has a loss
curve. Built-in workloads (sizes are config parameters, configs/calibrate/model/*.yaml):
- ``mlp``: fully connected classifier;
- ``cnn``: two conv layers and a linear head on small images;
- ``recommendation``: embedding tables over categorical features plus dense features and an MLP
  (the parameter-server case: the embedding tables are most of the parameters).
A user's own model: ``model.import_path: "package.module:function"``; the function gets the
config's ``params`` as keyword arguments and returns a ``Workload``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


@dataclass
class Workload:
    model: nn.Module
    inputs: tuple[torch.Tensor, ...]     # the dataset, first dimension = samples
    targets: torch.Tensor
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

    @property
    def size(self) -> int:
        return int(self.targets.shape[0])

    def batch(self, step: int, size: int, offset: int = 0, device="cpu") -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """Samples ``[start, start + size)`` of the dataset (wrapping), ``start = (step·size + offset)``."""
        n = self.size
        idx = (torch.arange(size) + step * size + offset) % n
        return tuple(x[idx].to(device) for x in self.inputs), self.targets[idx].to(device)

    def to(self, device) -> "Workload":
        self.model.to(device)
        return self

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def mlp(samples: int = 4096, features: int = 256, hidden: tuple[int, ...] = (512, 512), classes: int = 10,
        seed: int = 0) -> Workload:
    g = _generator(seed)
    x = torch.randn(samples, features, generator=g)
    y = (x @ torch.randn(features, classes, generator=g)).argmax(1)
    torch.manual_seed(seed)          # before any layer: every process builds the same initial model
    layers, width = [], features
    for h in hidden:
        layers += [nn.Linear(width, int(h)), nn.ReLU()]
        width = int(h)
    return Workload(nn.Sequential(*layers, nn.Linear(width, classes)), (x,), y, nn.functional.cross_entropy)


def cnn(samples: int = 2048, image: int = 32, channels: tuple[int, ...] = (16, 32), classes: int = 10,
        seed: int = 0) -> Workload:
    g = _generator(seed)
    x = torch.randn(samples, 3, image, image, generator=g)
    pooled = nn.functional.avg_pool2d(x, 4).flatten(1)
    y = (pooled @ torch.randn(pooled.shape[1], classes, generator=g)).argmax(1)
    c1, c2 = (int(c) for c in channels)
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(3, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(c2 * (image // 4) ** 2, classes))
    return Workload(model, (x,), y, nn.functional.cross_entropy)


class RecModel(nn.Module):
    """Embedding tables (one per categorical feature) + dense features -> MLP -> click logit."""

    def __init__(self, tables: int, rows: int, dim: int, dense: int, hidden: tuple):
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(rows, dim) for _ in range(tables))
        layers, width = [], tables * dim + dense
        for h in hidden:
            layers += [nn.Linear(width, int(h)), nn.ReLU()]
            width = int(h)
        self.mlp = nn.Sequential(*layers, nn.Linear(width, 1))

    def forward(self, sparse: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
        emb = [e(sparse[:, i]) for i, e in enumerate(self.embeddings)]
        return self.mlp(torch.cat([*emb, dense], dim=1)).squeeze(1)


def recommendation(samples: int = 8192, tables: int = 8, rows: int = 5000, dim: int = 16, dense: int = 13,
                   hidden: tuple[int, ...] = (128, 64), seed: int = 0) -> Workload:
    g = _generator(seed)
    sparse = torch.randint(0, rows, (samples, tables), generator=g)
    dense_x = torch.randn(samples, dense, generator=g)
    weight = torch.randn(tables, rows, generator=g)   # teacher: a score per category, plus a dense term
    score = weight.gather(1, sparse.T).sum(0) / tables ** 0.5 + dense_x @ torch.randn(dense, generator=g)
    y = (score > 0).float()
    torch.manual_seed(seed)
    return Workload(RecModel(tables, rows, dim, dense, tuple(hidden)), (sparse, dense_x), y,
                    nn.functional.binary_cross_entropy_with_logits)


BUILTIN = {"mlp": mlp, "cnn": cnn, "recommendation": recommendation}


def build(model_cfg: dict) -> Workload:
    """The workload a ``model`` config names: a built-in ``name`` or a user ``import_path``."""
    params = dict(model_cfg.get("params") or {})
    path = model_cfg.get("import_path")
    if path:
        module, _, attr = str(path).partition(":")
        if not attr:
            raise ValueError(f"model.import_path must be 'package.module:function', got {path!r}")
        fn = getattr(importlib.import_module(module), attr)
        w = fn(**params)
        if not isinstance(w, Workload):
            raise TypeError(f"{path} must return clustersim.simulator.calibration.workloads.Workload, "
                            f"got {type(w).__name__}")
        return w
    name = model_cfg.get("name")
    if name not in BUILTIN:
        raise ValueError(f"unknown calibration model {name!r}; built in: {', '.join(BUILTIN)}; "
                         f"or set model.import_path")
    return BUILTIN[name](**params)
