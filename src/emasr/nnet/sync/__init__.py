"""Synchronization rules for block-synchronous data-parallel training (docs/design.md, "The steps").

Each rule is a small object that knows nothing about processes: the trainer hands it the mean of
the workers' local models (one flat vector, W̄) after every block of tau minibatches; the rule
updates the global model W_g and returns the vector every worker restarts from. The EMA
(`ema.ExponentialMovingAverage`) is kept beside any rule and never feeds back into it.
"""
from __future__ import annotations

from emasr.nnet.sync.bmuf import BlockMomentum
from emasr.nnet.sync.ema import ExponentialMovingAverage, decay_from_half_life
from emasr.nnet.sync.ma import ModelAveraging
from emasr.nnet.sync.single import NoSync

# The sync rules by name (the one registry: config checks, train.sh, the recipe's rows and the
# report read it).
STRATEGIES = ("single", "ma", "bmuf")


def make_rule(strategy: str, world_size: int, block_lr: float = 1.0,
              block_momentum: float | None = None, nesterov: bool = True,
              warmup_blocks: int = 0):
    """The sync rule for `strategy`; BMUF's block momentum defaults to 1 - 1/N."""
    if strategy == "single":
        if world_size != 1:
            raise ValueError(f"strategy 'single' trains one worker, got {world_size} workers; "
                             "use --strategy ma or bmuf for several")
        return NoSync()
    if strategy == "ma":
        return ModelAveraging()
    if strategy == "bmuf":
        eta = 1.0 - 1.0 / world_size if block_momentum is None else block_momentum
        return BlockMomentum(block_momentum=eta, block_lr=block_lr, nesterov=nesterov,
                             warmup_blocks=warmup_blocks)
    raise ValueError(f"unknown sync strategy '{strategy}'; expected one of {', '.join(STRATEGIES)}")


__all__ = ["BlockMomentum", "ExponentialMovingAverage", "ModelAveraging", "NoSync", "STRATEGIES",
           "decay_from_half_life", "make_rule"]
