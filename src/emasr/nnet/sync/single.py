"""`single`: one worker, no communication. The "sync" every tau minibatches only marks the point
where the global model is read (for the EMA and for evaluation): W_g <- the local model."""
from __future__ import annotations

import torch

from emasr.nnet.sync.state import copy_or_none as _copy


class NoSync:
    name = "single"
    communicates = False

    def __init__(self) -> None:
        self.global_model: torch.Tensor | None = None

    def start(self, initial: torch.Tensor) -> None:
        self.global_model = initial.detach().clone()

    def step(self, average: torch.Tensor) -> torch.Tensor:
        """`average` is the one worker's model; the worker carries on from it unchanged."""
        self.global_model = average.detach().clone()
        return average

    def state_dict(self) -> dict:
        return {"global_model": _copy(self.global_model)}

    def load_state_dict(self, state: dict) -> None:
        self.global_model = _copy(state["global_model"])
