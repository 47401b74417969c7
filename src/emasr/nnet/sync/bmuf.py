"""Blockwise model-update filtering (BMUF, Chen and Huo 2016) with classic or Nesterov momentum.

    S   = W_g (classic) or W_g + eta * D (Nesterov): where the workers started the block
    G   = W̄ - S                   the block's aggregated update (the workers' progress)
    D   <- eta * D + zeta * G      block momentum eta, block learning rate zeta
    W_g <- W_g + D
    workers restart from the new S

G is measured from the point the workers started from, as in Chen and Huo's G(t) = W̄(t) -
W_g(t-1) where their W_g is that starting point: measured from the global model instead, a Nesterov
G would count eta * D a second time, the momentum would act as eta * (1 + zeta) (1.0 at the
defaults for 2 workers) and D would never decay (the global model drifted while the LR fell).
With eta = 0 and zeta = 1 this is model averaging. A warm-up of K blocks (fairseq's
`--warmup-iterations`) runs the first K syncs with eta = 0, then starts the momentum from D = 0.
"""
from __future__ import annotations

import torch

from emasr.nnet.sync.state import copy_or_none as _copy


class BlockMomentum:
    name = "bmuf"
    communicates = True

    def __init__(self, block_momentum: float, block_lr: float = 1.0, nesterov: bool = True,
                 warmup_blocks: int = 0) -> None:
        if not 0.0 <= block_momentum < 1.0:
            raise ValueError(f"block momentum must be in [0, 1), got {block_momentum}")
        if block_lr <= 0.0:
            raise ValueError(f"block learning rate must be positive, got {block_lr}")
        self.eta = block_momentum
        self.zeta = block_lr
        self.nesterov = nesterov
        self.warmup_blocks = warmup_blocks
        self.steps = 0
        self.global_model: torch.Tensor | None = None
        self.delta: torch.Tensor | None = None   # D, the block momentum buffer

    @property
    def momentum(self) -> float:
        """The block momentum of the next sync (0 during the warm-up)."""
        return 0.0 if self.steps < self.warmup_blocks else self.eta

    def start(self, initial: torch.Tensor) -> None:
        self.global_model = initial.detach().clone()
        self.delta = torch.zeros_like(self.global_model)

    def start_point(self) -> torch.Tensor:
        """Where the workers start a block from."""
        if self.nesterov:
            return self.global_model + self.momentum * self.delta
        return self.global_model.clone()

    def step(self, average: torch.Tensor) -> torch.Tensor:
        update = average - self.start_point()
        self.delta.mul_(self.momentum).add_(update, alpha=self.zeta)
        self.global_model.add_(self.delta)
        self.steps += 1
        if self.steps == self.warmup_blocks:   # the momentum starts afresh after the warm-up
            self.delta.zero_()
        return self.start_point()

    def state_dict(self) -> dict:
        return {"global_model": _copy(self.global_model), "delta": _copy(self.delta),
                "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.global_model = _copy(state["global_model"])
        self.delta = _copy(state["delta"])
        self.steps = state.get("steps", 0)
