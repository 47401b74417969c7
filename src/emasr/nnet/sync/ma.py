"""Model averaging (MA): W_g <- W̄, and every worker restarts from W_g."""
from __future__ import annotations

import torch

from emasr.nnet.sync.state import copy_or_none as _copy


class ModelAveraging:
    name = "ma"
    communicates = True

    def __init__(self) -> None:
        self.global_model: torch.Tensor | None = None

    @classmethod
    def from_config(cls, sync, workers: int) -> "ModelAveraging":
        return cls()

    def start(self, initial: torch.Tensor) -> None:
        self.global_model = initial.detach().clone()

    def step(self, average: torch.Tensor) -> torch.Tensor:
        """W_g <- average, copied into W_g's own buffer (the trainer reuses `average`'s)."""
        self.global_model.copy_(average)
        return self.global_model

    def state_dict(self) -> dict:
        return {"global_model": _copy(self.global_model)}

    def load_state_dict(self, state: dict) -> None:
        self.global_model = _copy(state["global_model"])
