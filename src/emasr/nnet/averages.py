"""Averaged models kept beside training: the paper's EMA and its two controls.

Each follows the global model W_g on every rank (every rank has W_g after a sync), is never sent
to the workers, so it changes nothing they compute and costs no communication, and is written by
rank 0 as its own model file, decodable like final.pt:

- ``ema`` (Tian et al. 2017): W_ema <- alpha * W_ema + (1 - alpha) * W_g after every sync, started
  at the first synchronized W_g (`average.ema_decay`, or `average.ema_half_life_frames`, from
  which alpha per sync is derived). A list of half-lives keeps one EMA each, `ema_<frames>.pt`
  (one value keeps `ema.pt`): they are free beside training, and the recipe picks the half-life
  on dev as it picks the LM weight;
- ``ema-warm``: the same EMAs (`ema-warm.pt`, `ema-warm_<frames>.pt`) started at the first sync
  after BMUF's warm-up (`average.ema_after_warmup`; `sync.warmup_blocks` syncs with block momentum
  0), beside the ones from the first sync: one run measures when the EMA should start;
- ``avg``: the cumulative (uniform) average of W_g over the syncs after a start point
  (`average.cumulative_start`, a fraction of the run's planned frames; icefall's
  `--use-averaged-model`);
- ``lastk``: the average of the global models of the last k accepted epochs (`average.last_k`;
  ESPnet/WeNet checkpoint averaging).

The controls answer how much of the EMA's gain is averaging at all. AVERAGED_MODELS is the one
registry: an averaged model is a class here plus one entry, and the entry carries its keys in the
`average` section and their check, the model files it keeps (<name>.pt), the decode dirs
(decode_<set>_<name>), the metrics (dev_acc_<name>), whether regime.json lists its decays, the
recipe's `<strategy>+<family>` rows (for the sync rules it applies to, asked of their entries in
emasr.nnet.sync.RULES), the model the report compares it with, and the report's label and plot
style.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable

import torch

from emasr.nnet.sections import ConfigError, Section
from emasr.nnet.sync import RULES, warmup_syncs
from emasr.nnet.sync.state import copy_or_none


def decay_from_half_life(frames_per_sync: float, half_life_frames: float) -> float:
    """alpha such that the weight of a model halves after `half_life_frames` training frames:
    alpha = 0.5 ** (frames_per_sync / half_life_frames), frames counted over all workers."""
    if half_life_frames <= 0 or frames_per_sync <= 0:
        raise ValueError(f"half life ({half_life_frames}) and frames per sync ({frames_per_sync}) "
                         "must be positive")
    decay = 0.5 ** (frames_per_sync / half_life_frames)
    if decay == 0.0:
        raise ConfigError(f"an EMA half-life of {half_life_frames:g} frames against "
                          f"{frames_per_sync:g} frames per sync gives a decay of 0: the EMA would "
                          "be the synchronized model itself; expected a half-life of at least "
                          "a small fraction of one sync's frames")
    return decay


class ExponentialMovingAverage:
    """W_ema <- alpha * W_ema + (1 - alpha) * W_g after every sync from the `start`-th on (0: the
    first), started at that sync's W_g. alpha is per full sync (tau minibatches of every
    worker); a shorter block at an epoch's end decays by its own frames, alpha ** share, share
    being its frames over a full sync's, so that the half-life stays a number of frames."""

    def __init__(self, decay: float, start: int = 0) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA decay must be in [0, 1), got {decay}")
        self.decay, self.start = decay, start
        self.average: torch.Tensor | None = None
        self.updates = 0
        self.syncs = 0      # syncs seen, the skipped ones included

    def update(self, global_model: torch.Tensor, progress: float = 0.0,
               share: float = 1.0) -> None:
        self.syncs += 1
        if self.syncs <= self.start:
            return
        if self.average is None:
            self.average = global_model.detach().clone()
        else:
            decay = self.decay if share >= 1.0 else self.decay ** share
            # alpha * average + (1 - alpha) * W_g in one pass over the vector
            self.average.lerp_(global_model, 1.0 - decay)
        self.updates += 1

    def seed(self, model: torch.Tensor, progress: float) -> None:
        """Start at `model` (a warm start's), as if it were the W_g of a sync before this run; a
        twin started after BMUF's warm-up (start > 0) keeps its own start."""
        if self.start == 0:
            self.average = model.detach().clone()

    def end_epoch(self, global_model: torch.Tensor) -> None:
        pass

    def state_dict(self) -> dict:
        return {"decay": self.decay, "start": self.start, "average": copy_or_none(self.average),
                "updates": self.updates, "syncs": self.syncs}

    def load_state_dict(self, state: dict) -> None:
        self.decay, self.start = state["decay"], state["start"]
        self.average = copy_or_none(state["average"])
        self.updates, self.syncs = state["updates"], state["syncs"]


class CumulativeAverage:
    """The uniform average of W_g over every sync at or after `start` (fraction of the run)."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.average: torch.Tensor | None = None
        self.updates = 0

    def update(self, global_model: torch.Tensor, progress: float = 0.0,
               share: float = 1.0) -> None:
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

    def seed(self, model: torch.Tensor, progress: float) -> None:
        """Start at `model` (a warm start's, at `progress` of the run) when the average has begun
        by then: it stands for the syncs before this run."""
        if progress >= self.start:
            self.average, self.updates = model.detach().clone(), 1

    def state_dict(self) -> dict:
        return {"start": self.start, "average": copy_or_none(self.average),
                "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.start, self.updates = state["start"], state["updates"]
        self.average = copy_or_none(state["average"])


class LastEpochsAverage:
    """The mean of the global models at the ends of the last k accepted epochs."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.models: deque[torch.Tensor] = deque(maxlen=k)

    @property
    def average(self) -> torch.Tensor | None:
        if not self.models:
            return None
        return torch.stack(list(self.models)).mean(0)

    def update(self, global_model: torch.Tensor, progress: float = 0.0,
               share: float = 1.0) -> None:
        pass

    def end_epoch(self, global_model: torch.Tensor) -> None:
        self.models.append(global_model.detach().clone())

    def seed(self, model: torch.Tensor, progress: float) -> None:
        """Start with `model` (a warm start's: the global model at the end of its last epoch)."""
        self.models.append(model.detach().clone())

    def state_dict(self) -> dict:
        return {"k": self.k, "models": [m.clone() for m in self.models]}

    def load_state_dict(self, state: dict) -> None:
        self.k = state["k"]
        self.models = deque((m.clone() for m in state["models"]), maxlen=self.k)


# -- the EMA's keys, variants and check -------------------------------------------------------

@dataclass
class EmaOptions(Section):
    ema_decay: float | None = None                        # alpha per sync; null: off
    ema_half_life_frames: float | list[float] | None = None   # or half-lives in frames (all
                                                          # workers): one EMA each


def half_lives(average) -> list[float]:
    value = average.ema_half_life_frames
    return [] if value is None else list(value) if isinstance(value, list) else [value]


def ema_variants(average) -> dict[str, float | None]:
    """EMA model name -> its half-life in frames (None: set by its decay): `ema` for one EMA,
    `ema_<frames>` for each of several half-lives."""
    if average.ema_decay is not None:
        return {"ema": None}
    lives = half_lives(average)
    if len(lives) == 1:
        return {"ema": lives[0]}
    return {f"ema_{round(h)}": h for h in lives}


def check_ema(config) -> None:
    average = config.average
    lives = half_lives(average)
    if average.ema_decay is not None and lives:
        raise ConfigError("set average.ema_decay or average.ema_half_life_frames, not both")
    if average.ema_decay is not None and not 0.0 <= average.ema_decay < 1.0:
        raise ConfigError(f"average.ema_decay must be in [0, 1), got {average.ema_decay}")
    if any(h < 1 for h in lives):
        # a fraction of a frame gives a decay per sync of 0 (0.5 ** (frames per sync / h)): an
        # "EMA" that is the synchronized model itself, reported as if it were an average
        raise ConfigError(f"average.ema_half_life_frames must be at least 1 frame (training "
                          f"frames over all workers; the paper's are 10^4-10^6), got {lives}")
    if len({round(h) for h in lives}) != len(lives):
        raise ConfigError(f"average.ema_half_life_frames has half-lives that name the same model "
                          f"(ema_<frames>, rounded): {lives}")


def build_ema(config, name: str, frames_per_sync: int) -> ExponentialMovingAverage:
    half_life = ema_variants(config.average)[name]
    decay = config.average.ema_decay if half_life is None else \
        decay_from_half_life(frames_per_sync, half_life)
    return ExponentialMovingAverage(decay)


# -- the EMAs started after BMUF's warm-up -------------------------------------------------------

EMA = "ema"   # the paper's averaged model
WARM = "ema-warm"


@dataclass
class WarmEmaOptions(Section):
    ema_after_warmup: bool = False   # also keep each EMA started after BMUF's warm-up (ema-warm)


def warm_twin(ema_name: str) -> str:
    """ema -> ema-warm, ema_<frames> -> ema-warm_<frames>: the EMA's twin started after the
    warm-up."""
    return WARM + ema_name[len("ema"):]


def warm_variants(average) -> list[str]:
    """Each EMA's twin started after the warm-up ([] when off)."""
    if not average.ema_after_warmup:
        return []
    return [warm_twin(name) for name in ema_variants(average)]


def check_warm_ema(config) -> None:
    if not config.average.ema_after_warmup:
        return
    if not ema_variants(config.average):
        raise ConfigError("average.ema_after_warmup keeps a twin of each EMA started after BMUF's "
                          "warm-up: set the EMA too (average.ema_half_life_frames or "
                          "average.ema_decay)")
    sync = config.sync
    if warmup_syncs(sync) <= 0:
        rules = [r for r in RULES.values() if has_warmup(r)]
        raise ConfigError(f"average.ema_after_warmup needs {' or '.join(r.label for r in rules)} "
                          f"with a warm-up (sync.strategy={'|'.join(r.name for r in rules)} and "
                          f"warm-up syncs > 0; got {sync.strategy} with {warmup_syncs(sync)} "
                          "warm-up syncs): without one it is the EMA")


def build_warm_ema(config, name: str, frames_per_sync: int) -> ExponentialMovingAverage:
    """The EMA of the same half-life as `ema<suffix>`, skipping the warm-up's syncs."""
    ema = build_ema(config, "ema" + name[len(WARM):], frames_per_sync)
    return ExponentialMovingAverage(ema.decay, start=warmup_syncs(config.sync))


def has_warmup(rule) -> bool:
    """Whether a sync rule (an entry of RULES) has a warm-up, after which ema-warm starts."""
    return rule.warmup is not None


# -- the controls' keys and checks --------------------------------------------------------------

@dataclass
class CumulativeOptions(Section):
    cumulative_start: float | None = None   # avg.pt from this fraction of the run (null: off)


def check_cumulative(config) -> None:
    start = config.average.cumulative_start
    if start is not None and not 0.0 <= start < 1.0:
        raise ConfigError(f"average.cumulative_start must be in [0, 1) (a fraction of the run) "
                          f"or null (off), got {start}")


@dataclass
class LastEpochsOptions(Section):
    last_k: int = 0                          # lastk.pt: mean of the last k epochs' W_g (0: off)


def check_last_epochs(config) -> None:
    if config.average.last_k < 0:
        raise ConfigError(f"average.last_k must be >= 0 (0: off), got {config.average.last_k}")


# -- the registry -------------------------------------------------------------------------------

@dataclass(frozen=True)
class AveragedModel:
    """An averaged model's registry entry."""
    name: str            # the family: the label suffix (bmuf+ema), its model files and decodes
    label: str           # how the report's rows name it (BMUF+EMA)
    title: str           # how the report's text names it
    style: str           # its plot line style (matplotlib format string)
    options: type        # its keys in the `average` section (a Section dataclass)
    check: Callable      # (config) -> None, or a ConfigError
    variants: Callable   # (average section) -> the model names it keeps ([]: off)
    build: Callable      # (config, model name, frames per sync) -> averager
    key: str             # the key that turns it on, set to the recipe's value for it
    default: str | None  # that value when the recipe gives none (None: it must give one)
    compared_with: str | None = None   # the model of the same runs the report compares it
                         # with: "final" (the global model) or another averaged model's name
    control: bool = False   # it is a control of that model: compared as A (that model B);
                         # otherwise that model is A and this one B (the one proposed)
    in_regime: bool = False   # regime.json lists each of its models' decay per sync and
                         # half-life (`emas`)
    applies: Callable | None = None   # (sync rule entry) -> whether a run of that rule keeps
                         # it (None: every rule)

    def applies_to(self, rule: str) -> bool:
        return self.applies is None or self.applies(RULES[rule])

    @property
    def rules(self) -> list[str]:
        """The registered sync rules whose runs keep it."""
        return [name for name in RULES if self.applies_to(name)]


AVERAGED_MODELS: dict[str, AveragedModel] = {m.name: m for m in (
    AveragedModel(EMA, "EMA", "EMA", "--s", EmaOptions, check_ema,
                  lambda a: list(ema_variants(a)), build_ema, "ema_half_life_frames", None,
                  compared_with="final", in_regime=True),
    AveragedModel(WARM, "EMA after warm-up", "EMA started after BMUF's warm-up", "--x",
                  WarmEmaOptions, check_warm_ema, warm_variants, build_warm_ema,
                  "ema_after_warmup", "true", compared_with=EMA, in_regime=True,
                  applies=has_warmup),
    AveragedModel("avg", "avg", "cumulative average", ":^", CumulativeOptions, check_cumulative,
                  lambda a: ["avg"] if a.cumulative_start is not None else [],
                  lambda c, name, fps: CumulativeAverage(c.average.cumulative_start),
                  "cumulative_start", "0.5", compared_with=EMA, control=True),
    AveragedModel("lastk", "lastk", "last-k epochs average", "-.v", LastEpochsOptions,
                  check_last_epochs, lambda a: ["lastk"] if a.last_k > 0 else [],
                  lambda c, name, fps: LastEpochsAverage(c.average.last_k), "last_k", "2",
                  compared_with=EMA, control=True),
)}


def family(name: str) -> str:
    """The averaged model a kept model belongs to: 'ema_90000' -> 'ema', 'ema-warm_90000' ->
    'ema-warm', 'avg' -> 'avg'."""
    return name if name in AVERAGED_MODELS else name.partition("_")[0]


def kept_models(average) -> list[str]:
    """The model names a run with this `average` section keeps (ema, ema_90000, avg, ...)."""
    return [name for model in AVERAGED_MODELS.values() for name in model.variants(average)]


def build_averagers(config, frames_per_sync: int) -> dict[str, object]:
    """model name -> averager for every averaged model the config turns on."""
    return {name: AVERAGED_MODELS[family(name)].build(config, name, frames_per_sync)
            for name in kept_models(config.average)}


def ema_decays(averagers: dict[str, object]) -> dict[str, float]:
    """The EMAs' decays per sync, by model name (the regime records them)."""
    return {name: a.decay for name, a in averagers.items()
            if AVERAGED_MODELS[family(name)].in_regime}
