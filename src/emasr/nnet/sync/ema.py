"""The exponential moving average of the global model (Tian et al. 2017).

After every sync: W_ema <- alpha * W_ema + (1 - alpha) * W_g, started at the first synchronized
W_g. It is computed identically on every rank from W_g (which every rank has), written by rank 0
and never sent to the workers, so it changes nothing they compute and costs no communication.
"""
from __future__ import annotations

import torch

from emasr.nnet.sync.state import copy_or_none as _copy


def decay_from_half_life(frames_per_sync: float, half_life_frames: float) -> float:
    """alpha such that the weight of a model halves after `half_life_frames` training frames:
    alpha = 0.5 ** (frames_per_sync / half_life_frames), frames counted over all workers."""
    if half_life_frames <= 0 or frames_per_sync <= 0:
        raise ValueError(f"half life ({half_life_frames}) and frames per sync ({frames_per_sync}) "
                         "must be positive")
    return 0.5 ** (frames_per_sync / half_life_frames)


class ExponentialMovingAverage:
    def __init__(self, decay: float) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.average: torch.Tensor | None = None
        self.updates = 0

    def update(self, global_model: torch.Tensor) -> None:
        if self.average is None:
            self.average = global_model.detach().clone()
        else:
            # alpha * average + (1 - alpha) * W_g in one pass over the vector
            self.average.lerp_(global_model, 1.0 - self.decay)
        self.updates += 1

    def state_dict(self) -> dict:
        return {"decay": self.decay, "average": _copy(self.average), "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.decay = state["decay"]
        self.average = _copy(state["average"])
        self.updates = state["updates"]
