"""The training configuration: typed sections, defaults < a YAML file < `--set key=value` overrides.

Resolved once at the start of training into a Config (one dataclass per section, every type
checked at load, emasr.nnet.sections) and saved to <exp>/conf.yaml; a resumed run must resolve to
the same configuration, except for the keys in RESUMABLE_CHANGES (more epochs, say). Unknown keys
are errors, so a typo never silently trains with a default.

The `model` section is the architecture's (emasr.nnet.models.ARCHITECTURES, chosen by
`model.type`); the `sync` section's keys are the common ones below plus each registered sync
rule's options (emasr.nnet.sync.RULES), the `average` section's each averaged model's
(emasr.nnet.averages.AVERAGED_MODELS): a new variant brings its keys with its registration.
"""
from __future__ import annotations

import copy
import functools
import os
from dataclasses import dataclass, fields
from typing import Any, Iterable

import yaml

from emasr.io.atomic import atomic_write
from emasr.nnet.averages import AVERAGED_MODELS
from emasr.nnet.data.loaders import LOADERS
from emasr.nnet.models import ARCHITECTURES, Architecture, architecture, model_config
from emasr.nnet.workers.precision import COMPILE_MODES, OPTIMIZER_IMPLS, PRECISIONS
from emasr.nnet.data.resident import RESIDENT_DTYPES, RESIDENT_MEMORY
from emasr.nnet.training.schedule import SCHEDULES
from emasr.nnet.training.selection import FINAL_EPOCHS
from emasr.nnet.sections import ConfigError, Section, compose
from emasr.nnet.sync import RULES

# The optimizers a worker may run (train.optimizer; the trainer builds them).
OPTIMIZERS = ("sgd", "adam", "adamw")

__all__ = ["Config", "ConfigError", "RESUMABLE_CHANGES", "differences", "load", "resolve", "save"]


@dataclass
class FeaturesConfig(Section):
    """The network feature pipeline (emasr.feats.pipeline.PipelineConfig)."""
    cmvn: str = "speaker"
    norm_vars: bool = False
    stack: int = 3
    splice: int = 2
    dim: int | None = None            # the raw dimension expected in feats.scp (null: any)


@dataclass
class DataConfig(Section):
    seed: int = 777
    minibatch_frames: int = 256       # frame input: frames per minibatch
    shuffle_buffer_frames: int = 50000   # frame input: frames shuffled together (bounds memory)
    chunk_frames: int = 20            # sequence input: frames per truncated-BPTT chunk
    left_context: int = 10            # sequence input: frames before the chunk, to warm the state
    output_delay: int = 2             # sequence input: output t predicts the label of t - delay
    chunks_per_minibatch: int = 32
    shuffle_buffer_chunks: int = 2000
    loader: str = "stream"            # emasr.nnet.data.loaders.LOADERS
    resident_dtype: str = "float32"   # resident: storage of the features, float32 | float16
    resident_memory: str = "auto"     # resident: auto (the GPU if the shard fits in half its
                                      # free memory, else host) | device | host
    resident_part_frames: int = 0     # resident: 0, the whole shard held; N: a shard that fits
                                      # nowhere goes through memory in parts of <= N frames


@dataclass
class TrainConfig(Section):
    epochs: int = 10
    optimizer: str = "sgd"            # sgd | adam | adamw (OPTIMIZERS)
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 0.0
    max_grad_norm: float = 0.0        # clip each minibatch's gradient norm to this (0: off)
    schedule: str = "exponential"     # exponential | linear | newbob | constant
                                      # (emasr.nnet.training.schedule)
    final_lr: float | None = None     # exponential, linear: the rate at the end (null: lr / 10;
                                      # linear may end at 0)
    newbob_start_halving: float = 0.01   # newbob: halve once the relative dev-loss gain is under
    newbob_end_halving: float = 0.001    # newbob: then stop once it is under this
    lr_decay: float = 0.5             # newbob: the halving factor
    min_lr: float = 1.0e-5
    checkpoint_every_blocks: int = 0  # 0: checkpoints only at epoch ends
    final_epoch: str = "last"         # last | best_dev_acc: each model file from the epoch of
                                      # its best dev frame accuracy (emasr.nnet.training.selection)
    init_seed: int = 1
    precision: str = "fp32"           # fp32 | bf16 (autocast, fp32 master weights)
    tf32: bool = False                # CUDA: TF32 tensor-core matmuls for fp32
    optimizer_impl: str = "default"   # default (torch's choice) | foreach | fused
    compile: bool = False             # torch.compile the forward and loss of a step
    compile_mode: str = "default"     # compile: default | reduce-overhead (CUDA graphs)
    init_model: str | None = None     # a warm start: a model file (final.pt, ema.pt) or an
                                      # epoch-end checkpoint dir; the run trains the epochs
                                      # after the ones it trained (emasr.nnet.training.warm_start)
    init_model_epochs: int | None = None   # the epochs init_model trained, for a file that
                                      # does not record them


@dataclass
class SyncCommon(Section):
    strategy: str = "bmuf"            # a sync rule of emasr.nnet.sync.RULES
    block_size: int = 16              # tau: local minibatches between syncs
    lr_times_workers: bool = False    # each worker's LR is N x train.lr (Kaldi's MA rule)


@dataclass
class DistConfig(Section):
    device: str = "auto"              # auto (a GPU when torch sees one) | cpu | cuda
    backend: str = "auto"             # auto: nccl if each worker has a GPU, else gloo
    timeout_s: float = 300
    workers_per_process: int = 1      # K: workers trained side by side in each process


@functools.lru_cache(maxsize=None)
def composed(name: str, parts: tuple[type, ...]) -> type:
    """One section class per set of parts: configs built under the same registries share it."""
    return compose(name, list(parts))


def sections() -> dict[str, type]:
    """The sections, `sync` and `average` composed from what the registries hold now (a rule
    registered after this module was imported brings its keys too)."""
    sync = composed("SyncConfig", (SyncCommon, *(r.options for r in RULES.values() if r.options)))
    average = composed("AverageConfig", tuple(m.options for m in AVERAGED_MODELS.values()))
    return {"features": FeaturesConfig, "data": DataConfig, "train": TrainConfig, "sync": sync,
            "average": average, "dist": DistConfig}


SECTIONS = tuple(sections())
DEFAULT_MODEL = "dnn"

# Keys that moved: a config that still uses one is told where it went.
MOVED = {"sync.ema_decay": "average.ema_decay",
         "sync.ema_half_life_frames": "average.ema_half_life_frames"}

# Keys a resumed run may change without invalidating the checkpoint.
RESUMABLE_CHANGES = {"train.epochs", "train.checkpoint_every_blocks", "train.final_epoch",
                     "dist.timeout_s", "dist.device", "dist.backend", "data.resident_memory"}


@dataclass
class Config:
    model: Any                        # the architecture's section (emasr.nnet.models)
    features: FeaturesConfig
    data: DataConfig
    train: TrainConfig
    sync: Any                         # sections()["sync"]
    average: Any                      # sections()["average"]
    dist: DistConfig

    @property
    def architecture(self) -> Architecture:
        return architecture(self.model)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name).to_dict() for f in fields(self)}


def parse_value(text: str) -> Any:
    """`--set` values are YAML scalars (or flow lists): 3, 0.5, true, null, relu, [1e4, 1e5]."""
    return yaml.safe_load(text) if text != "" else ""


def overrides_to_dict(overrides: Iterable[str]) -> dict:
    """['train.lr=0.2', 'model.type=lstm'] -> {'train': {'lr': 0.2}, 'model': {'type': 'lstm'}}."""
    out: dict = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"bad override '{item}'; expected key.sub=value")
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"bad override '{item}': '{part}' is not a section")
        node[parts[-1]] = parse_value(value)
    return out


def merged(layers: list[dict]) -> dict:
    """The layers' sections merged key by key, later layers winning."""
    out: dict[str, dict] = {}
    for layer in layers:
        for section, values in layer.items():
            if section not in (*SECTIONS, "model"):
                raise ConfigError(f"unknown configuration key '{section}'; known: "
                                  f"{', '.join(sorted((*SECTIONS, 'model')))}")
            if not isinstance(values, dict):
                raise ConfigError(f"'{section}' must be a mapping, got {values!r}")
            out.setdefault(section, {}).update(values)
    for old, new in MOVED.items():
        section, key = old.split(".")
        if key in out.get(section, {}):
            raise ConfigError(f"'{old}' is now '{new}'")
    return out


def build(values: dict) -> Config:
    """A Config from a mapping of sections (missing keys at their defaults), checked."""
    model = {"type": DEFAULT_MODEL, **values.get("model", {})}
    config = Config(model=model_config(model),
                    **{name: cls.build(values.get(name, {}), name)
                       for name, cls in sections().items()})
    validate(config)
    return config


def resolve(path: str | None = None, overrides: Iterable[str] = ()) -> Config:
    """Defaults + YAML file + overrides."""
    layers = []
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                loaded = yaml.safe_load(f) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            raise ConfigError(f"{path}: cannot read the configuration: "
                              f"{' '.join(str(err).split())}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a YAML mapping at the top level")
        layers.append(loaded)
    layers.append(overrides_to_dict(overrides))
    return build(merged(layers))


def check_choice(value: str, key: str, choices) -> None:
    if value not in choices:
        raise ConfigError(f"{key} '{value}': expected one of {', '.join(choices)}")


def validate(config: Config) -> None:
    """The checks no type can make: choices from the registries, ranges, and each registered
    variant's own check."""
    d, t, s = config.data, config.train, config.sync
    for value, key, choices in ((d.loader, "data.loader", LOADERS),
                                (d.resident_dtype, "data.resident_dtype", RESIDENT_DTYPES),
                                (d.resident_memory, "data.resident_memory", RESIDENT_MEMORY),
                                (t.precision, "train.precision", PRECISIONS),
                                (t.optimizer_impl, "train.optimizer_impl", OPTIMIZER_IMPLS),
                                (t.compile_mode, "train.compile_mode", COMPILE_MODES),
                                (t.schedule, "train.schedule", SCHEDULES),
                                (t.final_epoch, "train.final_epoch", FINAL_EPOCHS),
                                (t.optimizer, "train.optimizer", OPTIMIZERS),
                                (s.strategy, "sync.strategy", RULES),
                                (config.dist.device, "dist.device", ("auto", "cpu", "cuda")),
                                (config.dist.backend, "dist.backend", ("auto", "nccl", "gloo"))):
        check_choice(value, key, choices)
    for value, key, ok, expected in (
            (t.epochs, "train.epochs", t.epochs >= 1, ">= 1"),
            (t.lr, "train.lr", t.lr > 0, "> 0"),
            (t.momentum, "train.momentum", 0 <= t.momentum < 1, "in [0, 1)"),
            (t.weight_decay, "train.weight_decay", t.weight_decay >= 0, ">= 0"),
            (t.checkpoint_every_blocks, "train.checkpoint_every_blocks",
             t.checkpoint_every_blocks >= 0, ">= 0 (0: at epoch ends)"),
            (d.minibatch_frames, "data.minibatch_frames", d.minibatch_frames >= 1, ">= 1"),
            (config.dist.timeout_s, "dist.timeout_s", config.dist.timeout_s > 0, "> 0"),
            (s.block_size, "sync.block_size", s.block_size >= 1, ">= 1")):
        if not ok:
            raise ConfigError(f"{key} must be {expected}, got {value}")
    if d.resident_part_frames < 0:
        raise ConfigError("data.resident_part_frames must be >= 0 (0: the whole shard resident), "
                          f"got {d.resident_part_frames}")
    if t.init_model_epochs is not None and t.init_model_epochs < 0:
        raise ConfigError(f"train.init_model_epochs must be >= 0, got {t.init_model_epochs}")
    if t.init_model == "":
        raise ConfigError("train.init_model must be a model file or checkpoint dir, or null "
                          "(no warm start), got ''")
    if t.max_grad_norm < 0:
        raise ConfigError(f"train.max_grad_norm must be >= 0 (0: no clipping), got "
                          f"{t.max_grad_norm}")
    zero_ok = t.schedule == "linear"   # a geometric decay cannot reach 0
    if t.final_lr is not None and not (0 < t.final_lr <= t.lr or (zero_ok and t.final_lr == 0)):
        low = "[0" if zero_ok else "(0"
        raise ConfigError(f"train.final_lr must be in {low}, train.lr = {t.lr}] for the "
                          f"{t.schedule} schedule, got {t.final_lr}")
    if config.dist.workers_per_process < 1:
        raise ConfigError(f"dist.workers_per_process must be an integer >= 1, got "
                          f"{config.dist.workers_per_process}")
    if not RULES[s.strategy].parallel and config.dist.workers_per_process > 1:
        raise ConfigError(f"sync.strategy {s.strategy} trains one worker, but "
                          f"dist.workers_per_process is {config.dist.workers_per_process}; use a "
                          "parallel rule for several")
    checks = [RULES[s.strategy].check, config.architecture.check,
              *(m.check for m in AVERAGED_MODELS.values())]
    for check in checks:
        if check is not None:
            check(config)


def flatten(values: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def defaults(model_type: str = DEFAULT_MODEL) -> dict:
    """Every key at its default (the model section of `model_type`), as a mapping."""
    return build({"model": {"type": model_type if model_type in ARCHITECTURES
                            else DEFAULT_MODEL}}).to_dict()


def with_defaults(saved: dict) -> dict[str, Any]:
    """A saved config, flattened, with the keys added since it was written at their defaults
    (which compute what the code computed before them)."""
    model_type = saved.get("model", {}).get("type", DEFAULT_MODEL)
    return {**flatten(defaults(model_type)), **flatten(saved)}


def differences(saved: dict, current: Config, ignore: Iterable[str] = RESUMABLE_CHANGES
                ) -> list[str]:
    """Human-readable 'key: saved -> current' lines for keys that differ (ignoring `ignore`); a
    key the saved config predates counts as its default."""
    a, b = with_defaults(saved), flatten(current.to_dict())
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b))
            if k not in ignore and a.get(k) != b.get(k)]


def save(config: Config, path: str | os.PathLike) -> None:
    with atomic_write(path) as f:
        yaml.safe_dump(config.to_dict(), f, sort_keys=False, default_flow_style=False)


def load(path: str | os.PathLike) -> dict:
    """A saved conf.yaml as it was written (a mapping)."""
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def from_saved(saved: dict) -> Config:
    """The Config of a saved conf.yaml, keys it predates at their defaults and moved keys where
    they went (the report reads old exp dirs too)."""
    values = copy.deepcopy(saved)
    for old, new in MOVED.items():
        section, key = old.split(".")
        if key in values.get(section, {}):
            value = values[section].pop(key)
            new_section, new_key = new.split(".")
            values.setdefault(new_section, {})[new_key] = value
    return build(values)
