"""What an exp dir holds, for the report: a trained network (conf.yaml, metrics.jsonl, decode dirs
for the global and the EMA model) or a GMM system (decode dirs only).

A network exp dir gives up to two rows of the paper's table: its strategy with the global model
(`decode_<set>`, final.pt) and, when it kept an EMA, `<strategy>+ema` (`decode_<set>_ema`, ema.pt):
EMA never changes what the workers compute, so one training run serves both rows.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import yaml

from emasr.report.metrics import TrainingMetrics, read_metrics
from emasr.report.scoring import ScoredDecode, read_decode_dir

logger = logging.getLogger(__name__)

SETS = ("dev", "test")
MODELS = ("final", "ema")


@dataclass
class NetworkRun:
    exp_dir: str
    arch: str
    strategy: str              # single | ma | bmuf (the training's sync rule)
    seed: int
    lr: float
    workers: int | None
    has_ema: bool
    metrics: TrainingMetrics
    decodes: dict[tuple[str, str], ScoredDecode] = field(default_factory=dict)  # (set, model)

    def dev_acc(self, model: str) -> float | None:
        value = self.metrics.final.get("dev_acc_ema" if model == "ema" else "dev_acc")
        return None if value is None else float(value)

    def label(self, model: str) -> str:
        return f"{self.strategy}+ema" if model == "ema" else self.strategy


@dataclass
class GmmSystem:
    exp_dir: str
    name: str
    decodes: dict[str, ScoredDecode] = field(default_factory=dict)   # set -> result


def is_network_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "conf.yaml")) or \
        os.path.isfile(os.path.join(path, "metrics.jsonl"))


def read_workers(exp_dir: str, strategy: str) -> int | None:
    """Workers of the run: `<exp>/num_workers` (the recipe writes it); 1 for single; else None."""
    path = os.path.join(exp_dir, "num_workers")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return int(f.read().split()[0])
    return 1 if strategy == "single" else None


def decode_dir_names(set_name: str, model: str) -> list[str]:
    return [f"decode_{set_name}_ema"] if model == "ema" else [f"decode_{set_name}",
                                                              f"decode_{set_name}_final"]


def read_network_run(exp_dir: str) -> NetworkRun:
    conf_path = os.path.join(exp_dir, "conf.yaml")
    config = {}
    if os.path.isfile(conf_path):
        with open(conf_path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    sync, train = config.get("sync", {}), config.get("train", {})
    strategy = sync.get("strategy", "?")
    metrics_path = os.path.join(exp_dir, "metrics.jsonl")
    metrics = read_metrics(metrics_path) if os.path.isfile(metrics_path) else \
        TrainingMetrics(metrics_path)
    run = NetworkRun(
        exp_dir=exp_dir, arch=config.get("model", {}).get("type", "?"), strategy=strategy,
        seed=int(train.get("init_seed", 0)), lr=float(train.get("lr", float("nan"))),
        workers=read_workers(exp_dir, strategy),
        has_ema=sync.get("ema_decay") is not None or sync.get("ema_half_life_frames") is not None,
        metrics=metrics)
    for set_name in SETS:
        for model in MODELS:
            for name in decode_dir_names(set_name, model):
                path = os.path.join(exp_dir, name)
                result = read_decode_dir(path) if os.path.isdir(path) else None
                if result is not None:
                    run.decodes[(set_name, model)] = result
                    break
    return run


def read_gmm_system(exp_dir: str) -> GmmSystem:
    system = GmmSystem(exp_dir, os.path.basename(os.path.normpath(exp_dir)))
    for set_name in SETS:
        path = os.path.join(exp_dir, f"decode_{set_name}")
        result = read_decode_dir(path) if os.path.isdir(path) else None
        if result is not None:
            system.decodes[set_name] = result
    return system


def read_exp_dirs(paths: list[str]) -> tuple[list[NetworkRun], list[GmmSystem]]:
    networks, gmms = [], []
    for path in paths:
        if not os.path.isdir(path):
            logger.warning("%s: not a directory; skipped", path)
        elif is_network_dir(path):
            networks.append(read_network_run(path))
        else:
            gmms.append(read_gmm_system(path))
    return networks, gmms


def best_by_dev(runs: list[NetworkRun], model: str) -> NetworkRun | None:
    """Among runs that differ only in their learning rate, the one with the best final dev frame
    accuracy of `model` (how the learning rate is tuned per strategy on dev)."""
    scored = [r for r in runs if r.dev_acc(model) is not None]
    if not scored:
        return runs[0] if runs else None
    return max(scored, key=lambda r: r.dev_acc(model))


def select_runs(networks: list[NetworkRun], arch: str, label: str) -> list[NetworkRun]:
    """The runs behind one table row, one per seed (learning rate tuned on dev)."""
    base, _, ema = label.partition("+")
    model = "ema" if ema else "final"
    candidates = [r for r in networks if r.arch == arch and r.strategy == base
                  and (model == "final" or r.has_ema)]
    by_seed: dict[int, list[NetworkRun]] = {}
    for run in candidates:
        by_seed.setdefault(run.seed, []).append(run)
    return [best_by_dev(by_seed[seed], model) for seed in sorted(by_seed)]
