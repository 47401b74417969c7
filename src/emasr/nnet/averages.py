"""Averaged models kept beside training: the paper's EMA and its two controls.

Each follows the global model W_g on every rank (every rank has W_g after a sync), is never sent
to the workers, so it changes nothing they compute and costs no communication, and is written by
rank 0 as its own model file, decodable like final.pt:

- ``ema`` (Tian et al. 2017): W_ema <- alpha * W_ema + (1 - alpha) * W_g after every sync
  (`sync.ema_decay`, or `sync.ema_half_life_frames`);
- ``avg``: the cumulative (uniform) average of W_g over the syncs after a start point
  (`average.cumulative_start`, a fraction of the run's planned frames; icefall's
  `--use-averaged-model`);
- ``lastk``: the average of the global models of the last k accepted epochs (`average.last_k`;
  ESPnet/WeNet checkpoint averaging).

The controls answer how much of the EMA's gain is averaging at all. AVERAGED_MODELS is the one
registry: the trainer, the model files (<name>.pt), the decode dirs (decode_<set>_<name>), the
metrics (dev_acc_<name>), the recipe's `<strategy>+<name>` rows and the report read it.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable

import torch

from emasr.nnet.sync.ema import ExponentialMovingAverage, decay_from_half_life
from emasr.nnet.sync.state import copy_or_none


class CumulativeAverage:
    """The uniform average of W_g over every sync at or after `start` (fraction of the run)."""

    def __init__(self, start: float) -> None:
        if not 0.0 <= start < 1.0:
            raise ValueError(f"average.cumulative_start must be in [0, 1), got {start}")
        self.start = start
        self.average: torch.Tensor | None = None
        self.updates = 0

    def update(self, global_model: torch.Tensor, progress: float = 0.0) -> None:
        if progress < self.start:
            return
        self.updates += 1
        if self.average is None:
            self.average = global_model.detach().clone()
        else:
            # in place: a model-sized temporary per sync costs more than the arithmetic
            self.average.lerp_(global_model, 1.0 / self.updates)

    def end_epoch(self, global_model: torch.Tensor) -> None:
        pass

    def state_dict(self) -> dict:
        return {"start": self.start, "average": copy_or_none(self.average),
                "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.start, self.updates = state["start"], state["updates"]
        self.average = copy_or_none(state["average"])


class LastEpochsAverage:
    """The mean of the global models at the ends of the last k accepted epochs."""

    def __init__(self, k: int) -> None:
        if k < 1:
            raise ValueError(f"average.last_k must be >= 1, got {k}")
        self.k = k
        self.models: deque[torch.Tensor] = deque(maxlen=k)

    @property
    def average(self) -> torch.Tensor | None:
        if not self.models:
            return None
        return torch.stack(list(self.models)).mean(0)

    def update(self, global_model: torch.Tensor, progress: float = 0.0) -> None:
        pass

    def end_epoch(self, global_model: torch.Tensor) -> None:
        self.models.append(global_model.detach().clone())

    def state_dict(self) -> dict:
        return {"k": self.k, "models": [m.clone() for m in self.models]}

    def load_state_dict(self, state: dict) -> None:
        self.k = state["k"]
        self.models = deque((m.clone() for m in state["models"]), maxlen=self.k)


class EmaAverager(ExponentialMovingAverage):
    """The EMA with the averagers' interface."""

    def update(self, global_model: torch.Tensor, progress: float = 0.0) -> None:
        super().update(global_model)

    def end_epoch(self, global_model: torch.Tensor) -> None:
        pass


def ema_decay(config: dict, frames_per_sync: int) -> float | None:
    s = config["sync"]
    if s["ema_half_life_frames"] is not None:
        return decay_from_half_life(frames_per_sync, float(s["ema_half_life_frames"]))
    return None if s["ema_decay"] is None else float(s["ema_decay"])


@dataclass(frozen=True)
class AveragedModel:
    name: str            # label suffix (bmuf+ema), model file <name>.pt, decode_<set>_<name>
    label: str           # how the report's rows name it (BMUF+EMA)
    title: str           # how the report's text names it
    enabled: Callable[[dict], bool]
    build: Callable[[dict, int], object]   # (config, frames per sync) -> averager

    @property
    def file(self) -> str:
        return f"{self.name}.pt"


AVERAGED_MODELS: dict[str, AveragedModel] = {m.name: m for m in (
    AveragedModel("ema", "EMA", "EMA",
                  lambda c: c["sync"]["ema_decay"] is not None
                  or c["sync"]["ema_half_life_frames"] is not None,
                  lambda c, fps: EmaAverager(ema_decay(c, fps))),
    AveragedModel("avg", "avg", "cumulative average",
                  lambda c: c["average"]["cumulative_start"] is not None,
                  lambda c, fps: CumulativeAverage(float(c["average"]["cumulative_start"]))),
    AveragedModel("lastk", "lastk", "last-k epochs average",
                  lambda c: int(c["average"]["last_k"]) > 0,
                  lambda c, fps: LastEpochsAverage(int(c["average"]["last_k"]))),
)}


def build_averagers(config: dict, frames_per_sync: int) -> dict[str, object]:
    """name -> averager for every averaged model the config turns on."""
    return {name: model.build(config, frames_per_sync)
            for name, model in AVERAGED_MODELS.items() if model.enabled(config)}


def enabled_names(config: dict) -> list[str]:
    """The averaged models a run with this (saved) config keeps; old configs lack `average`."""
    config = {**config, "sync": {"ema_decay": None, "ema_half_life_frames": None,
                                 **config.get("sync", {})},
              "average": {"cumulative_start": None, "last_k": 0, **config.get("average", {})}}
    return [name for name, model in AVERAGED_MODELS.items() if model.enabled(config)]
