"""The training configuration: defaults, then a YAML file, then `--set key=value` overrides.

Resolved once at the start of training and saved to <exp>/conf.yaml; a resumed run must resolve
to the same configuration, except for the keys in RESUMABLE_CHANGES (more epochs, say).
Unknown keys are errors, so a typo never silently trains with a default.
"""
from __future__ import annotations

import copy
import os
from typing import Any, Iterable

import yaml

from emasr.io.atomic import atomic_write

MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "dnn": {"type": "dnn", "hidden_layers": 6, "hidden_dim": 1024, "activation": "relu",
            "norm": "none", "dropout": 0.0},
    "lstm": {"type": "lstm", "num_layers": 3, "hidden_size": 1024, "proj_size": 256,
             "dropout": 0.0},
}

DEFAULTS: dict[str, Any] = {
    "model": MODEL_DEFAULTS["dnn"],
    # The network feature pipeline (emasr.feats.pipeline.PipelineConfig); `dim` is the raw feature
    # dimension expected in feats.scp (null: whatever the data has).
    "features": {"cmvn": "speaker", "norm_vars": False, "stack": 3, "splice": 2, "dim": None},
    "data": {
        "seed": 777,
        "minibatch_frames": 256,          # DNN: frames per minibatch
        "shuffle_buffer_frames": 50000,   # DNN: frames shuffled together (bounds memory)
        "chunk_frames": 20,               # LSTM: frames per truncated-BPTT chunk
        "left_context": 10,               # LSTM: frames before the chunk re-run to warm the state
        "output_delay": 2,                # LSTM: output t predicts the label of frame t - delay
        "chunks_per_minibatch": 32,
        "shuffle_buffer_chunks": 2000,
        "loader": "stream",               # stream (read per epoch, buffer shuffle) | resident
                                          # (the shard in one tensor, index gathers; global
                                          # shuffle) (emasr.nnet.loaders.LOADERS)
        "resident_dtype": "float32",      # resident: storage of the features, float32 | float16
        "resident_memory": "auto",        # resident: auto (the GPU if the shard fits in half its
                                          # free memory, else host) | device | host
        "resident_part_frames": 0,        # resident: 0, the whole shard held; N: a shard that
                                          # fits nowhere goes through memory in parts of <= N
                                          # frames, each loaded while the one before it trains
    },
    "train": {
        "epochs": 10,
        "optimizer": "sgd",               # sgd | adam
        "lr": 0.1,
        "momentum": 0.9,
        "weight_decay": 0.0,
        "max_grad_norm": 0.0,             # clip each minibatch's gradient norm to this (0: off)
        "schedule": "exponential",        # exponential | newbob | constant (emasr.nnet.schedule)
        "final_lr": None,                 # exponential: the rate at the run's end (null: lr / 10)
        "newbob_start_halving": 0.01,     # newbob: halve once the relative dev-loss gain is under
        "newbob_end_halving": 0.001,      # newbob: then stop once it is under this
        "lr_decay": 0.5,                  # newbob: the halving factor
        "min_lr": 1.0e-5,
        "checkpoint_every_blocks": 0,     # 0: checkpoints only at epoch ends
        "init_seed": 1,
        # how a step computes (emasr.nnet.precision)
        "precision": "fp32",              # fp32 | bf16 (autocast, fp32 master weights)
        "tf32": False,                    # CUDA: TF32 tensor-core matmuls for fp32
        "optimizer_impl": "default",      # default (torch's choice) | foreach | fused
        "compile": False,                 # torch.compile the forward and loss of a step
        "compile_mode": "default",        # compile: default | reduce-overhead (CUDA graphs)
    },
    "sync": {
        "strategy": "bmuf",               # single | ma | bmuf
        "block_size": 16,                 # tau: local minibatches between syncs
        "block_lr": 1.0,                  # zeta
        "block_momentum": None,           # eta; null: 1 - 1/N
        "nesterov": True,
        "ema_decay": None,                # alpha per sync; null: off (unless a half life is set)
        "ema_half_life_frames": None,     # half life in training frames (all workers together)
        "lr_times_workers": False,        # each worker's LR is N x train.lr (Kaldi's MA rule)
        "warmup_blocks": 0,               # BMUF: the first K syncs with block momentum 0
    },
    # The EMA's controls (emasr.nnet.averages), each written as its own model file.
    "average": {
        "cumulative_start": None,         # avg.pt: uniform average of W_g from this fraction of
                                          # the run's planned frames (0.0: from the first sync)
        "last_k": 0,                      # lastk.pt: mean of the last k epochs' W_g (0: off)
    },
    "dist": {
        "device": "auto",                 # auto (a GPU when torch sees one) | cpu | cuda
        "backend": "auto",                # auto: nccl if each worker has a GPU, else gloo
        "timeout_s": 300,
        "workers_per_process": 1,         # K: workers trained side by side in each process
    },
}

# Keys a resumed run may change without invalidating the checkpoint.
RESUMABLE_CHANGES = {"train.epochs", "train.checkpoint_every_blocks", "dist.timeout_s",
                     "dist.device", "dist.backend", "data.resident_memory"}


class ConfigError(ValueError):
    """A configuration file or override is wrong; the message says which key and why."""


def parse_value(text: str) -> Any:
    """`--set` values are YAML scalars: 3, 0.5, true, null, relu."""
    return yaml.safe_load(text) if text != "" else ""


def merge(base: dict, update: dict, where: str) -> dict:
    """Merge `update` into a copy of `base`, rejecting keys `base` does not have."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        name = f"{where}.{key}" if where else key
        if key not in out:
            raise ConfigError(f"unknown configuration key '{name}'; known: {', '.join(sorted(out))}")
        if isinstance(out[key], dict):
            if not isinstance(value, dict):
                raise ConfigError(f"'{name}' must be a mapping, got {value!r}")
            out[key] = merge(out[key], value, name)
        else:
            out[key] = value
    return out


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
        node[parts[-1]] = parse_value(value)
    return out


def resolve(path: str | None = None, overrides: Iterable[str] = ()) -> dict:
    """Defaults + YAML file + overrides, with the model defaults chosen by model.type."""
    layers = []
    if path:
        with open(path, encoding="utf-8") as f:
            loaded = yaml.safe_load(f) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a YAML mapping at the top level")
        layers.append(loaded)
    layers.append(overrides_to_dict(overrides))
    model_type = DEFAULTS["model"]["type"]
    for layer in layers:
        model_type = layer.get("model", {}).get("type", model_type)
    if model_type not in MODEL_DEFAULTS:
        raise ConfigError(f"unknown model.type '{model_type}'; expected one of "
                          f"{', '.join(MODEL_DEFAULTS)}")
    config = copy.deepcopy(DEFAULTS)
    config["model"] = copy.deepcopy(MODEL_DEFAULTS[model_type])
    for layer in layers:
        config = merge(config, layer, "")
    validate(config)
    return config


# Keys whose default is null but whose value, when set, is a number.
NUMBERS_OR_NULL = {"train.final_lr", "sync.block_momentum", "sync.ema_decay",
                   "sync.ema_half_life_frames", "average.cumulative_start", "features.dim"}


def as_number(text: str) -> float | int | None:
    """'1e4' -> 10000.0 (YAML 1.1 reads exponents without a dot as strings), '3' -> 3."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def check_types(config: dict) -> None:
    """A value whose default is a number (or a flag) must be one: `train.lr=fast` is named here,
    not as a bare float() error somewhere in training. Numbers YAML left as strings ('1e-3') are
    turned into numbers in place."""
    defaults = flatten({**DEFAULTS, "model": MODEL_DEFAULTS[config["model"]["type"]]})
    for key, value in flatten(config).items():
        default = 0.0 if key in NUMBERS_OR_NULL else defaults.get(key)
        if value is None or default is None:
            continue
        if isinstance(value, str) and isinstance(default, (int, float)) \
                and not isinstance(default, bool) and as_number(value) is not None:
            section, name = key.split(".", 1)
            value = config[section][name] = as_number(value)
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, (int, float)):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            continue
        if not ok:
            kind = "true or false" if isinstance(default, bool) else "a number"
            raise ConfigError(f"'{key}' must be {kind} (default {default!r}), got {value!r}")


def check_choice(config: dict, key: str, choices) -> None:
    section, name = key.split(".")
    if config[section][name] not in choices:
        raise ConfigError(f"{key} '{config[section][name]}': expected one of {', '.join(choices)}")


def validate(config: dict) -> None:
    from emasr.nnet.loaders import LOADERS
    from emasr.nnet.precision import COMPILE_MODES, OPTIMIZER_IMPLS, PRECISIONS
    from emasr.nnet.resident import RESIDENT_DTYPES, RESIDENT_MEMORY
    from emasr.nnet.schedule import SCHEDULES
    from emasr.nnet.sync import STRATEGIES

    check_types(config)
    for key, choices in (("data.loader", LOADERS), ("data.resident_dtype", RESIDENT_DTYPES),
                         ("data.resident_memory", RESIDENT_MEMORY),
                         ("train.precision", PRECISIONS),
                         ("train.optimizer_impl", OPTIMIZER_IMPLS),
                         ("train.compile_mode", COMPILE_MODES)):
        check_choice(config, key, choices)

    sync, train, average = config["sync"], config["train"], config["average"]
    if sync["strategy"] not in STRATEGIES:
        raise ConfigError(f"sync.strategy '{sync['strategy']}': expected one of "
                          f"{', '.join(STRATEGIES)}")
    if int(sync["block_size"]) < 1:
        raise ConfigError(f"sync.block_size must be >= 1, got {sync['block_size']}")
    if sync["ema_decay"] is not None and sync["ema_half_life_frames"] is not None:
        raise ConfigError("set sync.ema_decay or sync.ema_half_life_frames, not both")
    if train["optimizer"] not in ("sgd", "adam"):
        raise ConfigError(f"train.optimizer '{train['optimizer']}': expected sgd or adam")
    if int(config["data"]["resident_part_frames"]) < 0:
        raise ConfigError("data.resident_part_frames must be >= 0 (0: the whole shard resident), "
                          f"got {config['data']['resident_part_frames']}")
    if float(train["max_grad_norm"]) < 0:
        raise ConfigError(f"train.max_grad_norm must be >= 0 (0: no clipping), got "
                          f"{train['max_grad_norm']}")
    if train["schedule"] not in SCHEDULES:
        raise ConfigError(f"train.schedule '{train['schedule']}': expected one of "
                          f"{', '.join(SCHEDULES)}")
    if train["final_lr"] is not None and not 0 < float(train["final_lr"]) <= float(train["lr"]):
        raise ConfigError(f"train.final_lr must be in (0, train.lr = {train['lr']}], got "
                          f"{train['final_lr']}")
    if int(sync["warmup_blocks"]) < 0:
        raise ConfigError(f"sync.warmup_blocks must be >= 0, got {sync['warmup_blocks']}")
    start = average["cumulative_start"]
    if start is not None and not 0.0 <= float(start) < 1.0:
        raise ConfigError(f"average.cumulative_start must be in [0, 1) (a fraction of the run) "
                          f"or null (off), got {start}")
    if int(average["last_k"]) < 0:
        raise ConfigError(f"average.last_k must be >= 0 (0: off), got {average['last_k']}")
    per_process = config["dist"]["workers_per_process"]
    if isinstance(per_process, bool) or not isinstance(per_process, int) or per_process < 1:
        raise ConfigError(f"dist.workers_per_process must be an integer >= 1, got {per_process!r}")
    if sync["strategy"] == "single" and per_process > 1:
        raise ConfigError(f"sync.strategy single trains one worker, but dist.workers_per_process "
                          f"is {per_process}; use ma or bmuf for several")
    for key, choices in (("device", ("auto", "cpu", "cuda")),
                         ("backend", ("auto", "nccl", "gloo"))):
        if config["dist"][key] not in choices:
            raise ConfigError(f"dist.{key} '{config['dist'][key]}': expected {', '.join(choices)}")


def flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def with_defaults(config: dict) -> dict[str, Any]:
    """A saved config, flattened, with the keys added since it was written at their defaults
    (which compute what the code computed before them)."""
    model_type = config.get("model", {}).get("type", DEFAULTS["model"]["type"])
    defaults = flatten({**DEFAULTS, "model": MODEL_DEFAULTS.get(model_type, {})})
    return {**defaults, **flatten(config)}


def differences(saved: dict, current: dict, ignore: Iterable[str] = RESUMABLE_CHANGES) -> list[str]:
    """Human-readable 'key: saved -> current' lines for keys that differ (ignoring `ignore`); a
    key the saved config predates counts as its default."""
    a, b = with_defaults(saved), flatten(current)
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b))
            if k not in ignore and a.get(k) != b.get(k)]


def save(config: dict, path: str | os.PathLike) -> None:
    with atomic_write(path) as f:
        yaml.safe_dump(config, f, sort_keys=False, default_flow_style=False)


def load(path: str | os.PathLike) -> dict:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)
