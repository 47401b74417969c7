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

from dataclasses import dataclass

import torch

from emasr.nnet.sections import ConfigError, Section
from emasr.nnet.sync.state import copy_or_none as _copy


@dataclass
class BmufOptions(Section):
    """BMUF's keys in the `sync` section."""
    block_lr: float = 1.0                 # zeta
    block_momentum: float | None = None   # eta; null: 1 - 1/N
    nesterov: bool = True
    warmup_blocks: int = 0                # the first K syncs with block momentum 0


def check_options(config) -> None:
    sync = config.sync
    if sync.block_lr <= 0:
        raise ConfigError(f"sync.block_lr must be > 0, got {sync.block_lr}")
    if sync.block_momentum is not None and not 0.0 <= sync.block_momentum < 1.0:
        raise ConfigError(f"sync.block_momentum must be in [0, 1) or null (1 - 1/N), got "
                          f"{sync.block_momentum}")
    if sync.warmup_blocks < 0:
        raise ConfigError(f"sync.warmup_blocks must be >= 0, got {sync.warmup_blocks}")


def block_momentum(sync, workers: int) -> float:
    """eta as the rule uses it: sync.block_momentum, or 1 - 1/N."""
    return 1.0 - 1.0 / workers if sync.block_momentum is None else sync.block_momentum


def warmup_syncs(sync) -> int:
    """The syncs of the warm-up (block momentum 0)."""
    return sync.warmup_blocks


# the keys a tuning grid may search -> the tags of their run dirs (`_eta0.75_warmup12`)
TUNED = {"sync.block_momentum": "eta", "sync.block_lr": "zeta", "sync.warmup_blocks": "warmup",
         "sync.nesterov": "nesterov"}
# what a BMUF run adds to regime.json: eta (1 - 1/N resolved), zeta and the warm-up
REGIME = {"block_momentum": block_momentum,
          "block_lr": lambda sync, workers: sync.block_lr,
          "warmup_blocks": lambda sync, workers: warmup_syncs(sync)}


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
        self.delta: torch.Tensor | None = None     # D, the block momentum buffer
        self.restart: torch.Tensor | None = None   # S, and G while a step computes it

    @property
    def momentum(self) -> float:
        """The block momentum of the next sync (0 during the warm-up)."""
        return 0.0 if self.steps < self.warmup_blocks else self.eta

    def start(self, initial: torch.Tensor) -> None:
        self.global_model = initial.detach().clone()
        self.delta = torch.zeros_like(self.global_model)
        self.restart = torch.empty_like(self.global_model)

    def start_point(self) -> torch.Tensor:
        """Where the workers start a block from: the rule's own buffer, rewritten at every step
        (the trainer loads it into the workers at once). Computed in place: a model-sized
        allocation per sync costs more than the arithmetic (page faults; bench/train.py (b))."""
        if self.nesterov:
            return torch.add(self.global_model, self.delta, alpha=self.momentum, out=self.restart)
        return self.restart.copy_(self.global_model)

    def step(self, average: torch.Tensor) -> torch.Tensor:
        """W_g and D from the workers' mean; returns the next start point (`average` must not be
        the buffer the last one was returned in: it is overwritten first)."""
        update = torch.sub(average, self.start_point(), out=self.restart)   # G = W̄ - S
        self.delta.mul_(self.momentum).add_(update, alpha=self.zeta)
        self.global_model.add_(self.delta)
        self.steps += 1
        if self.steps == self.warmup_blocks:   # the momentum starts afresh after the warm-up
            self.delta.zero_()
        return self.start_point()

    @classmethod
    def from_config(cls, sync, workers: int) -> "BlockMomentum":
        return cls(block_momentum(sync, workers), sync.block_lr, sync.nesterov,
                   sync.warmup_blocks)

    def state_dict(self) -> dict:
        return {"global_model": _copy(self.global_model), "delta": _copy(self.delta),
                "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.global_model = _copy(state["global_model"])
        self.delta = _copy(state["delta"])
        self.restart = None if self.global_model is None else torch.empty_like(self.global_model)
        self.steps = state.get("steps", 0)
