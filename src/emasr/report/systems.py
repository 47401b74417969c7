"""What an exp dir holds, for the report: a trained network (conf.yaml, regime.json with its
workers and hardware, metrics.jsonl, decode dirs for the global and the averaged models) or a GMM
system (decode dirs only).

A network exp dir gives a row of the paper's table for its strategy with the global model
(`decode_<set>`, final.pt) and one `<strategy>+<name>` row for each averaged model it kept
(emasr.nnet.averages: `decode_<set>_<name>`, <name>.pt): averaged models never change what the
workers compute, so one training run serves them all.

The scoring protocol: a decode's LM weight and insertion penalty are chosen on dev (its best
setting there) and the test CER is read at that setting; Kaldi's best-on-test CER is kept beside
it as a secondary number.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import yaml

from emasr.nnet import config as configs
from emasr.nnet.training import regime as regimes
from emasr.nnet.averages import AVERAGED_MODELS, family, kept_models
from emasr.nnet.training.selection import accuracy_key, best_epochs
from emasr.nnet.sync import RULES
from emasr.nnet.config.tuning import tuned_settings as grid_settings
from emasr.nnet.training.metrics import TrainingMetrics, read_metrics
from emasr.report.scoring import ScoredDecode, ScoringError, read_decode_dir

logger = logging.getLogger(__name__)

# block records kept per run: enough for the loss curve, and small enough to commit beside the
# results (emasr.report.counts), where a report rebuilt from the counts draws the same curve
PLOTTED_BLOCKS = 300


def parse_label(label: str) -> tuple[str, str]:
    """A row label -> (sync rule, model): 'bmuf+ema' -> ('bmuf', 'ema'), 'ma' -> ('ma', 'final');
    ValueError for a name no registry knows, or an averaged model its rule does not keep."""
    base, plus, model = label.partition("+")
    if base not in RULES or (plus and model not in AVERAGED_MODELS):
        raise ValueError(f"'{label}': expected one of {', '.join(RULES)}, optionally "
                         f"+{'/+'.join(AVERAGED_MODELS)}")
    if plus and not AVERAGED_MODELS[model].applies_to(base):
        raise ValueError(f"'{label}': the {AVERAGED_MODELS[model].title} is kept by "
                         f"{', '.join(AVERAGED_MODELS[model].rules)} runs only")
    return base, model if plus else "final"


def default_labels() -> list[str]:
    """Every sync rule's row, and its row with each averaged model it can keep."""
    return [label for rule in RULES for label in
            (rule, *(f"{rule}+{m}" for m, a in AVERAGED_MODELS.items() if a.applies_to(rule)))]


@dataclass
class TunedDecodes:
    """A model's decodes under the protocol: dev at its best setting, test at dev's setting, and
    test at its own best setting (Kaldi's best-on-test, secondary)."""
    dev: ScoredDecode | None = None
    test: ScoredDecode | None = None
    test_best: ScoredDecode | None = None

    def get(self, set_name: str) -> ScoredDecode | None:
        return {"dev": self.dev, "test": self.test, "test_best": self.test_best}[set_name]


def read_tuned(dev_dir: str, test_dir: str, sweeps: bool = True) -> TunedDecodes:
    """`sweeps`: read the counts of every scoring setting too (the intervals choose again)."""
    dev = read_decode_dir(dev_dir, sweep=sweeps) if os.path.isdir(dev_dir) else None
    test_best = read_decode_dir(test_dir, sweep=sweeps) if os.path.isdir(test_dir) else None
    test = None
    if dev is not None and test_best is not None:
        test = read_decode_dir(test_dir, (dev.lmwt, dev.wip), sweep=test_best.sweep)
    return TunedDecodes(dev, test, test_best)


@dataclass
class NetworkRun:
    exp_dir: str
    arch: str
    strategy: str              # the training's sync rule (a name of emasr.nnet.sync.RULES)
    seed: int
    lr: float
    workers: int | None
    averages: list[str]        # the averaged models the run kept (ema or ema_<frames>..., avg)
    lr_times_workers: bool     # each worker ran at N x lr (sync.lr_times_workers)
    metrics: TrainingMetrics
    tuned: dict[str, TunedDecodes] = field(default_factory=dict)   # model -> its decodes
    settings: dict = field(default_factory=dict)   # tuned settings -> this run's value
    regime: dict | None = None                     # the trainer's regime.json
    final_epoch: str = "last"  # train.final_epoch: which epoch each model file is from

    def keeps(self, model: str) -> bool:
        """Whether the run kept a model of this family (final, ema, avg, ...)."""
        return model == "final" or any(family(m) == model for m in self.averages)

    def variants(self, model: str) -> list[str]:
        """The kept models of a family: ['final'], ['ema'] or ['ema_30000', 'ema_90000'], ..."""
        return ["final"] if model == "final" else [m for m in self.averages if family(m) == model]

    def chosen(self, model: str) -> str:
        """The kept model that stands for a family: the one with the best dev CER (the EMA's
        half-life chosen on dev, as the LM weight is), else the best dev frame accuracy."""
        variants = self.variants(model) or [model]
        decoded = [m for m in variants if m in self.tuned and self.tuned[m].dev is not None]
        if decoded:
            return min(decoded, key=lambda m: self.tuned[m].dev.cer)
        return max(variants, key=lambda m: self.variant_acc(m) or 0.0)

    def model_epoch(self, name: str) -> dict:
        """The epoch record of the epoch the model file `name` is from: the run's last, or, under
        train.final_epoch best_dev_acc, the epoch of the model's best dev frame accuracy."""
        if self.final_epoch == "best_dev_acc":
            epoch = best_epochs(self.metrics.epochs, [name]).get(name)
            for record in self.metrics.epochs:
                if int(record["epoch"]) == epoch:
                    return record
        return self.metrics.final

    def file_epoch(self, name: str) -> int | None:
        """The epoch dev chose for the model file `name` (None: the run's end stands)."""
        if self.final_epoch != "best_dev_acc":
            return None
        epoch = self.model_epoch(name).get("epoch")
        return None if epoch is None else int(epoch)

    def variant_acc(self, name: str) -> float | None:
        value = self.model_epoch(name).get(accuracy_key(name))
        return None if value is None else float(value)

    def dev_acc(self, model: str) -> float | None:
        return self.variant_acc(self.chosen(model))

    def decode(self, set_name: str, model: str) -> ScoredDecode | None:
        """The protocol's result of a family's chosen model on a set (None: not decoded)."""
        tuned = self.tuned.get(self.chosen(model))
        return None if tuned is None else tuned.get(set_name)



@dataclass
class GmmSystem:
    exp_dir: str
    name: str
    tuned: TunedDecodes = field(default_factory=TunedDecodes)


def is_network_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "conf.yaml")) or \
        os.path.isfile(os.path.join(path, "metrics.jsonl"))


def read_regime(exp_dir: str) -> dict | None:
    try:
        return regimes.read(exp_dir)
    except ValueError as err:
        raise ScoringError(str(err)) from None


def decode_dir_name(exp_dir: str, set_name: str, model: str) -> str:
    """decode_<set> (or decode_<set>_final) for the global model, decode_<set>_<name> else."""
    if model != "final":
        return os.path.join(exp_dir, f"decode_{set_name}_{model}")
    plain = os.path.join(exp_dir, f"decode_{set_name}")
    other = os.path.join(exp_dir, f"decode_{set_name}_final")
    return other if not os.path.isdir(plain) and os.path.isdir(other) else plain


def read_config(exp_dir: str) -> configs.Config:
    """The run's saved conf.yaml (the defaults when it has none yet)."""
    path = os.path.join(exp_dir, "conf.yaml")
    try:
        return configs.from_saved(configs.load(path) if os.path.isfile(path) else {})
    except (configs.ConfigError, yaml.YAMLError) as err:
        raise ScoringError(f"{path}: {err}") from None


def tuned_settings(flat: dict, regime: dict | None) -> dict:
    """The run's tuned settings (emasr.nnet.config.tuning) as it ran: one left null for its rule to
    resolve (BMUF's block momentum, 1 - 1/N) is read from regime.json, where the rule's entry
    records it under the key's own name, so a run at the default and one that named it are one
    grid point."""
    settings = {k: flat[k] for k in grid_settings() if k in flat}
    for key, value in settings.items():
        recorded = (regime or {}).get(key.partition(".")[2])
        if value is None and recorded is not None:
            settings[key] = recorded
    return settings


def thinned(records: list[dict], at_most: int = PLOTTED_BLOCKS) -> list[dict]:
    """At most `at_most` of the records, evenly spaced, the first and the last among them."""
    if len(records) <= at_most:
        return records
    step = (len(records) - 1) / (at_most - 1)
    return [records[round(i * step)] for i in range(at_most)]


def read_network_run(exp_dir: str, sweeps: bool = True, decodes: bool = True) -> NetworkRun:
    """`decodes`: read its decode dirs too (choosing a run on dev frame accuracy does not)."""
    config = read_config(exp_dir)
    metrics_path = os.path.join(exp_dir, "metrics.jsonl")
    metrics = read_metrics(metrics_path) if os.path.isfile(metrics_path) else \
        TrainingMetrics(metrics_path)
    metrics.blocks = thinned(metrics.blocks)
    regime = read_regime(exp_dir)
    strategy = config.sync.strategy
    workers = regime["workers"] if regime else (1 if not RULES[strategy].parallel else None)
    flat = configs.flatten(config.to_dict())
    run = NetworkRun(
        exp_dir=exp_dir, arch=config.model.type, strategy=strategy, seed=config.train.init_seed,
        lr=config.train.lr, workers=workers, averages=kept_models(config.average),
        lr_times_workers=config.sync.lr_times_workers, metrics=metrics,
        settings=tuned_settings(flat, regime), regime=regime,
        final_epoch=config.train.final_epoch)
    for model in ("final", *run.averages) if decodes else ():
        tuned = read_tuned(decode_dir_name(exp_dir, "dev", model),
                           decode_dir_name(exp_dir, "test", model), sweeps)
        if tuned.dev or tuned.test_best:
            run.tuned[model] = tuned
    return run


def read_gmm_system(exp_dir: str, sweeps: bool = True) -> GmmSystem:
    return GmmSystem(exp_dir, os.path.basename(os.path.normpath(exp_dir)),
                     read_tuned(os.path.join(exp_dir, "decode_dev"),
                                os.path.join(exp_dir, "decode_test"), sweeps))


def read_exp_dirs(paths: list[str], sweeps: bool = True, decodes: bool = True
                  ) -> tuple[list[NetworkRun], list[GmmSystem]]:
    """The network runs and GMM systems of `paths`; `sweeps`: with the counts of every scoring
    setting (what the intervals need; choosing runs does not); `decodes`: with the networks'
    decode dirs (choosing runs needs none: a decode made from a model since replaced must not
    stop the choice of the runs to decode again)."""
    networks, gmms = [], []
    for path in paths:
        if not os.path.isdir(path):
            logger.warning("%s: not a directory; skipped", path)
        elif is_network_dir(path):
            networks.append(read_network_run(path, sweeps, decodes))
        else:
            gmms.append(read_gmm_system(path, sweeps))
    return networks, gmms


def best_by_dev(runs: list[NetworkRun]) -> NetworkRun | None:
    """Among runs that differ only in their tuned settings, the one with the best final dev frame
    accuracy of the global model (how a baseline is tuned on dev)."""
    scored = [r for r in runs if r.dev_acc("final") is not None]
    if not scored:
        return runs[0] if runs else None
    return max(scored, key=lambda r: r.dev_acc("final"))


def worker_counts(networks: list[NetworkRun], arch: str, label: str) -> list[int | None]:
    """The worker counts that have runs for a row label, ascending ([None] when none ran)."""
    base, model = parse_label(label)
    counts = {r.workers for r in networks if r.arch == arch and r.strategy == base
              and r.keeps(model)}
    return sorted(counts, key=lambda n: -1 if n is None else n) or [None]


def candidate_runs(networks: list[NetworkRun], arch: str, label: str,
                   workers: int | None = None) -> list[NetworkRun]:
    """Every run that could stand behind a table row (all of a grid's settings and seeds); with
    `workers`, only the runs with that many workers."""
    base, model = parse_label(label)
    return [r for r in networks if r.arch == arch and r.strategy == base
            and r.keeps(model) and (workers is None or r.workers == workers)]


def select_runs(networks: list[NetworkRun], arch: str, label: str,
                workers: int | None = None) -> list[NetworkRun]:
    """The runs behind one table row, one per seed: among a seed's runs that differ in their
    tuned settings, the best on dev frame accuracy of the global model. An averaged model's row
    (+EMA) uses the run of its sync rule's row, so that the two rows compare one training, as the
    paper does, and a grid searched on one seed (--grid-seed) stands for every seed's row."""
    by_seed: dict[int, list[NetworkRun]] = {}
    for run in candidate_runs(networks, arch, label, workers):
        by_seed.setdefault(run.seed, []).append(run)
    return [best_by_dev(by_seed[seed]) for seed in sorted(by_seed)]


def grid(candidates: list[NetworkRun]) -> dict[str, list]:
    """The tuned settings the candidates of a row differ in -> their values (a grid searched on
    dev); {} when every candidate ran with the same settings (nothing was tuned)."""
    values: dict[str, list] = {}
    for run in candidates:
        for key, value in run.settings.items():
            values.setdefault(key, [])
            if value not in values[key]:
                values[key].append(value)
    # keys and values in one order however the runs were read (exp dirs or committed counts)
    return {k: sorted(v, key=setting_order) for k, v in sorted(values.items()) if len(v) > 1}


def setting_order(value) -> tuple:
    """Numbers by value (tau 4 before 16), then anything else by its text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))
