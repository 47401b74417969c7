"""DiLoCo (Douillard et al. 2023, "DiLoCo: Distributed Low-Communication Training of Language
Models"): each worker takes H inner steps of its own optimizer (the paper's: AdamW,
`train.optimizer=adamw`; its state stays the worker's), then the outer step treats the global
model's lead over the workers' mean as a gradient, the pseudo-gradient, and moves the global model
by Nesterov momentum SGD on it:

    Δ   = W_g - W̄                 the pseudo-gradient (the workers' progress, negated)
    m   <- mu * m + Δ              outer momentum mu
    W_g <- W_g - lr * (Δ + mu * m) outer learning rate lr (Nesterov: PyTorch SGD's rule)
    workers restart from W_g

The paper's defaults: lr 0.7, mu 0.9 (`sync.outer_lr`, `sync.outer_momentum`). With lr 1 and mu 0
this is model averaging. H is `sync.block_size`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from emasr.nnet.sections import ConfigError, Section
from emasr.nnet.sync.state import copy_or_none as _copy


@dataclass
class DilocoOptions(Section):
    """DiLoCo's keys in the `sync` section."""
    outer_lr: float = 0.7
    outer_momentum: float = 0.9


# the keys a tuning grid may search -> the tags of their run dirs (`_olr0.5_omu0.8`)
TUNED = {"sync.outer_lr": "olr", "sync.outer_momentum": "omu"}


def check_options(config) -> None:
    sync = config.sync
    if sync.outer_lr <= 0:
        raise ConfigError(f"sync.outer_lr must be > 0, got {sync.outer_lr}")
    if not 0.0 <= sync.outer_momentum < 1.0:
        raise ConfigError(f"sync.outer_momentum must be in [0, 1), got {sync.outer_momentum}")


class DiLoCo:
    name = "diloco"
    communicates = True

    def __init__(self, outer_lr: float = 0.7, outer_momentum: float = 0.9) -> None:
        self.lr, self.mu = outer_lr, outer_momentum
        self.global_model: torch.Tensor | None = None
        self.momentum: torch.Tensor | None = None   # m, the outer optimizer's buffer
        self.step_buffer: torch.Tensor | None = None

    @classmethod
    def from_config(cls, sync, workers: int) -> "DiLoCo":
        return cls(sync.outer_lr, sync.outer_momentum)

    def start(self, initial: torch.Tensor) -> None:
        self.global_model = initial.detach().clone()
        self.momentum = torch.zeros_like(self.global_model)
        self.step_buffer = torch.empty_like(self.global_model)

    def step(self, average: torch.Tensor) -> torch.Tensor:
        """The outer step from the workers' mean; returns W_g, where every worker restarts."""
        delta = torch.sub(self.global_model, average, out=self.step_buffer)   # Δ
        self.momentum.mul_(self.mu).add_(delta)
        delta.add_(self.momentum, alpha=self.mu)                                # Δ + mu * m
        self.global_model.sub_(delta, alpha=self.lr)
        return self.global_model

    def state_dict(self) -> dict:
        return {"global_model": _copy(self.global_model), "momentum": _copy(self.momentum)}

    def load_state_dict(self, state: dict) -> None:
        self.global_model = _copy(state["global_model"])
        self.momentum = _copy(state["momentum"])
        self.step_buffer = None if self.global_model is None else \
            torch.empty_like(self.global_model)
