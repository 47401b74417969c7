"""Blockwise model-update filtering (BMUF, Chen and Huo 2016) with classic or Nesterov momentum.

    G   = W̄ - W_g                 the block's aggregated update
    D   <- eta * D + zeta * G      block momentum eta, block learning rate zeta
    W_g <- W_g + D
    workers restart from W_g (classic) or from W_g + eta * D (Nesterov)

With eta = 0 and zeta = 1 this is model averaging.
"""
from __future__ import annotations

import torch

from emasr.nnet.sync.state import copy_or_none as _copy


class BlockMomentum:
    name = "bmuf"
    communicates = True

    def __init__(self, block_momentum: float, block_lr: float = 1.0, nesterov: bool = True) -> None:
        if not 0.0 <= block_momentum < 1.0:
            raise ValueError(f"block momentum must be in [0, 1), got {block_momentum}")
        if block_lr <= 0.0:
            raise ValueError(f"block learning rate must be positive, got {block_lr}")
        self.eta = block_momentum
        self.zeta = block_lr
        self.nesterov = nesterov
        self.global_model: torch.Tensor | None = None
        self.delta: torch.Tensor | None = None   # D, the block momentum buffer

    def start(self, initial: torch.Tensor) -> None:
        self.global_model = initial.detach().clone()
        self.delta = torch.zeros_like(self.global_model)

    def step(self, average: torch.Tensor) -> torch.Tensor:
        update = average - self.global_model
        self.delta.mul_(self.eta).add_(update, alpha=self.zeta)
        self.global_model.add_(self.delta)
        if self.nesterov:
            return self.global_model + self.eta * self.delta
        return self.global_model.clone()

    def state_dict(self) -> dict:
        return {"global_model": _copy(self.global_model), "delta": _copy(self.delta)}

    def load_state_dict(self, state: dict) -> None:
        self.global_model = _copy(state["global_model"])
        self.delta = _copy(state["delta"])
