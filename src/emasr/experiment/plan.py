"""A spec's plan: the training runs (arch x sync rule x worker count x seed x grid point), each with
its directory, its steps/nnet/train.sh options and config overrides and whether it is done; the
models each chosen run decodes; the exp dirs the report reads.

A run's dir is <nnet-dir>/<arch>_<rule>[_n<N>]_s<seed>[_<tag><value>...] (a one-worker rule has
no _n<N>; the tags are the grid's, emasr.nnet.config.tuning). Its overrides, in this order (later ones
win): the seeds, tau, the epoch choice, the spec's `overrides`, the architecture's, the rule's
(`rule_overrides`), the averaged models its rows ask for (`averages`, the registry's key), the
grid point. With `grid_seed`, another seed trains only the point chosen on the grid seed (best dev
frame accuracy of the global model, as the report selects), once all of that seed's points are
trained; with `warm_start_epochs`, the one-worker rule trains first and each parallel run starts
from its arch and seed's one-worker checkpoint after that epoch. With `earlier_counts`, a run
recorded there (by its dir) counts as trained where its dir has no done marker: the plan does not
train it, the grid seed's choice and the report's selection read its record, and only the runs
trained here are decoded (a campaign in pieces, resumed on a fresh checkout). A recorded
one-worker run trains again where a run still to train starts from its checkpoint; a recorded run
that started from other parameters than the checkpoint here (its regime.json's warm start) is
refused, so that the runs a report compares started from one model.
"""
from __future__ import annotations

import glob
import logging
import os
import shlex
from dataclasses import dataclass, replace

import yaml

from emasr.experiment.rows import rows, trained_rules
from emasr.experiment.spec import Spec, value_text
from emasr.nnet.averages import AVERAGED_MODELS
from emasr.nnet.sync import RULES, one_worker_rule
from emasr.nnet.config.tuning import grid_points
from emasr.nnet.training import checkpoint
from emasr.nnet.training.warm_start import checkpoint_parameters_sha256
from emasr.report.counts import read_counts
from emasr.report.systems import NetworkRun, read_exp_dirs, select_runs, worker_counts

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Run:
    dir: str
    arch: str
    rule: str
    workers: int                 # N, on all nodes together
    seed: int
    config: str
    overrides: tuple[str, ...]
    nodes: int
    per_process: int
    epochs: int | None
    init_model: str | None       # a warm start's checkpoint (train.sh --init-model)
    extra: str = ""              # the spec's train_opts: shell words that may quote values
    recorded: bool = False       # in the spec's earlier counts (trained by an earlier piece)

    @property
    def trained_here(self) -> bool:
        return os.path.isfile(os.path.join(self.dir, ".done"))

    @property
    def done(self) -> bool:
        return self.trained_here or self.recorded

    @property
    def state(self) -> str:
        """done (trained here), recorded (in the earlier counts only) or todo."""
        return "done" if self.trained_here else "recorded" if self.recorded else "todo"

    def train_options(self) -> list[str]:
        """steps/nnet/train.sh's options of this run (less the launcher and the data)."""
        epochs = [] if self.epochs is None else ["--epochs", str(self.epochs)]
        return ["--nnet-config", self.config, "--num-workers", str(self.workers // self.nodes),
                "--num-nodes", str(self.nodes), "--strategy", self.rule, *epochs,
                "--workers-per-process", str(self.per_process),
                "--set-opts", " ".join(self.overrides)]

    def line(self) -> str:
        """One tab-separated line for steps/nnet/experiment.sh: dir, its state, the options
        (shell-quoted, the spec's train_opts after them), the warm start ('' for none)."""
        options = " ".join(filter(None, [shlex.join(self.train_options()), self.extra]))
        return "\t".join([self.dir, self.state, options,
                          self.init_model or ""])


def training_rules(spec: Spec) -> list[str]:
    """The rows' sync rules in training order: with a warm start the one-worker rule first."""
    rules = trained_rules(spec)
    if spec.warm_start_epochs is None:
        return rules
    single = one_worker_rule()
    return [single, *(r for r in rules if r != single)]


def workers_of(spec: Spec, rule: str) -> list[int]:
    return spec.workers if RULES[rule].parallel else [1]


def run_prefix(nnet_dir: str, arch: str, rule: str, workers: int) -> str:
    """A run's dir up to its seed: exp/nnet/dnn_ma_n8."""
    suffix = f"_n{workers}" if RULES[rule].parallel else ""
    return f"{nnet_dir}/{arch}_{rule}{suffix}"


def points(spec: Spec, rule: str) -> list[tuple[str, list[str]]]:
    """A rule's grid points: (dir suffix, overrides); [('', [])] without a grid."""
    entries = [[(key, [value_text(v) for v in values]) for key, values in entry.items()]
               for entry in spec.grid.get(rule, [])]
    return grid_points(entries)


def averaged_overrides(spec: Spec, rule: str) -> list[str]:
    """The overrides that keep the averaged models the rule's rows ask for, each at the spec's
    value (or its registry entry's default)."""
    out = []
    for row_rule, model in rows(spec):
        if row_rule == rule and model != "final":
            entry = AVERAGED_MODELS[model]
            value = spec.averages.get(model, yaml.safe_load(entry.default or "null"))
            out.append(f"average.{entry.key}={value_text(value)}")
    return list(dict.fromkeys(out))


def overrides(spec: Spec, arch: str, rule: str, seed: int, point: list[str]) -> tuple[str, ...]:
    fixed = [f"train.init_seed={seed}", f"data.seed={seed}"]
    if spec.block_size is not None:
        fixed.append(f"sync.block_size={spec.block_size}")
    if spec.epoch_choice is not None:
        fixed.append(f"train.final_epoch={spec.epoch_choice}")
    return (*fixed, *spec.overrides, *spec.archs[arch].overrides,
            *spec.rule_overrides.get(rule, []), *averaged_overrides(spec, rule), *point)


def warm_start(spec: Spec, nnet_dir: str, arch: str, rule: str, seed: int) -> str | None:
    """The one-worker run's epoch-end checkpoint a parallel run starts from (None: no warm
    start)."""
    if spec.warm_start_epochs is None or not RULES[rule].parallel:
        return None
    single = run_prefix(nnet_dir, arch, one_worker_rule(), 1)
    return checkpoint.directory(f"{single}_s{seed}", spec.warm_start_epochs, 0)


def warm_start_source(init_model: str) -> str:
    """The run dir whose checkpoint `init_model` (warm_start()'s) is: <run>/checkpoints/<tag>."""
    return os.path.dirname(os.path.dirname(init_model))


def sources_trained_again(planned: list[Run]) -> list[Run]:
    """The plan with each recorded one-worker run that a run still to train starts from trained
    again here (the earlier piece's dir, and its checkpoint, are gone): the warm start needs the
    file. The same seed on the same inputs trains the same model where training is
    deterministic; check_warm_starts() refuses a recorded run that started from another."""
    needed = {warm_start_source(r.init_model) for r in planned if r.init_model and not r.done}
    return [replace(r, recorded=False) if r.recorded and r.dir in needed else r
            for r in planned]


def check_warm_starts(planned: list[Run], records: Records) -> None:
    """Refuse a run recorded in the earlier counts whose warm start's parameters (its regime.json)
    differ from the checkpoint here that the plan's other runs start from: the report would
    compare runs that started from different models."""
    here: dict[str, str] = {}
    for run in planned:
        record = records.get(os.path.abspath(run.dir))
        init = ((record.regime or {}).get("init_model") or {}) if record else {}
        if not run.init_model or not init.get("parameters_sha256") or \
                not os.path.isdir(run.init_model):
            continue
        if run.init_model not in here:
            here[run.init_model] = checkpoint_parameters_sha256(run.init_model)
        if init["parameters_sha256"] != here[run.init_model]:
            raise ValueError(
                f"{run.dir} (the earlier counts) started from parameters with sha256 "
                f"{init['parameters_sha256'][:12]}, but the warm start here, {run.init_model}, has "
                f"{here[run.init_model][:12]}: the one-worker run trained again is not the model "
                "the earlier piece started from (another CPU or library can train other "
                "parameters from the same seed); train the earlier piece's runs again here, "
                "without earlier_counts")


Records = dict[str, NetworkRun]   # a run's absolute dir -> its record in the earlier counts


def earlier_records(spec: Spec) -> Records:
    """The runs of the spec's earlier counts ({} without)."""
    if spec.earlier_counts is None:
        return {}
    networks, _, _ = read_counts(spec.earlier_counts)
    return {os.path.abspath(r.exp_dir): r for r in networks}


def trained(dirs: list[str], records: Records) -> dict[str, NetworkRun]:
    """Each trained dir's run: read from the dir once trained here (its .done), else its record
    in the earlier counts; a dir that is neither is left out."""
    here = [d for d in dirs if os.path.isfile(os.path.join(d, ".done"))]
    networks, _ = read_exp_dirs(here, sweeps=False, decodes=False)
    found = {r.exp_dir: r for r in networks}
    found.update({d: records[os.path.abspath(d)] for d in dirs
                  if d not in found and os.path.abspath(d) in records})
    return found


def chosen_point(spec: Spec, prefix: str, arch: str, rule: str, records: Records) -> str | None:
    """The grid point the grid seed chose (its dir suffix), None while any of its runs is
    untrained: the best on dev frame accuracy of the global model, as the report selects."""
    dirs = {f"{prefix}_s{spec.grid_seed}{suffix}": suffix for suffix, _ in points(spec, rule)}
    found = trained(list(dirs), records)
    if len(found) < len(dirs):
        return None
    best = select_runs(list(found.values()), arch, rule)
    chosen = next((d for d, r in found.items() if len(best) == 1 and r is best[0]), None)
    if chosen is None:
        raise ValueError(f"{prefix}_s{spec.grid_seed}*: none of the grid's runs was chosen")
    logger.info("%s_s%s*: the grid point chosen on dev for the other seeds: %s", prefix,
                spec.grid_seed, dirs[chosen] or "-")
    return dirs[chosen]


def seed_points(spec: Spec, prefix: str, arch: str, rule: str, seed: int, records: Records
                ) -> list[tuple[str, list[str]]]:
    """The grid points `seed` trains: every one, or with grid_seed the one chosen there (none
    while it is unknown)."""
    every = points(spec, rule)
    if spec.grid_seed is None or seed == spec.grid_seed or len(every) == 1:
        return every
    chosen = chosen_point(spec, prefix, arch, rule, records)
    return [p for p in every if p[0] == chosen]


def runs(spec: Spec, nnet_dir: str, choose: bool = True, records: Records | None = None
         ) -> list[Run]:
    """Every run the spec asks for, in training order; `choose=False`: every seed at every grid
    point (no look at what is trained: the runs whose configs the checks resolve); `records`:
    the spec's earlier counts' runs when the caller has read them already."""
    if records is None:
        records = earlier_records(spec) if choose else {}
    out = []
    for arch in spec.archs:
        for rule in training_rules(spec):
            parallel = RULES[rule].parallel
            for n in workers_of(spec, rule):
                prefix = run_prefix(nnet_dir, arch, rule, n)
                for seed in spec.seeds:
                    chosen = seed_points(spec, prefix, arch, rule, seed, records) if choose \
                        else points(spec, rule)
                    out += [Run(f"{prefix}_s{seed}{suffix}", arch, rule, n, seed,
                                spec.archs[arch].config, overrides(spec, arch, rule, seed, point),
                                spec.nodes if parallel else 1,
                                spec.workers_per_process if parallel else 1, spec.epochs_of(rule),
                                warm_start(spec, nnet_dir, arch, rule, seed),
                                spec.train_opts,
                                os.path.abspath(f"{prefix}_s{seed}{suffix}") in records)
                            for suffix, point in chosen]
    if not choose:
        return out
    out = sources_trained_again(out)
    check_warm_starts(out, records)
    return out


def config_runs(spec: Spec) -> list[Run]:
    return runs(spec, "exp/nnet", choose=False)


def selected(spec: Spec, nnet_dir: str) -> list[Run]:
    """The runs trained here that the report's rows use (one per row, worker count and seed:
    among a grid's points the best on dev frame accuracy, chosen among the earlier counts' runs
    too), the ones decoded."""
    records = earlier_records(spec)   # read once: the plan and the selection both need them
    planned = {run.dir: run for run in runs(spec, nnet_dir, records=records)}
    found = trained(list(planned), records)
    networks = list(found.values())
    chosen = {id(r) for arch in spec.archs for label in spec.rows
              for n in worker_counts(networks, arch, label)
              for r in select_runs(networks, arch, label, n)}
    return [planned[d] for d, r in found.items() if id(r) in chosen and planned[d].trained_here]


def kept_files(run: Run, model: str) -> list[str]:
    """The model files of an averaged model a run kept: <model>.pt or <model>_<frames>.pt (one
    per EMA half-life; the report picks one on dev)."""
    names = glob.glob(os.path.join(glob.escape(run.dir), f"{glob.escape(model)}.pt")) + \
        glob.glob(os.path.join(glob.escape(run.dir), f"{glob.escape(model)}_*.pt"))
    return sorted(os.path.basename(n)[:-len(".pt")] for n in names)


def decoded_models(spec: Spec, run: Run) -> list[str]:
    """The models a selected run decodes: the global model (final) and each kept model of the
    averaged models its rule's rows ask for (a control only at decode.controls_at)."""
    controls_at = spec.decode.controls_at
    models = ["final"]
    for rule, model in dict.fromkeys(rows(spec)):
        if rule != run.rule or model == "final":
            continue
        if AVERAGED_MODELS[model].control and controls_at and run.workers not in controls_at:
            continue   # a control at a worker count left to its dev frame accuracy
        kept = kept_files(run, model)
        if not kept:
            raise ValueError(f"expected {run.dir}/{model}.pt or {model}_*.pt (the row "
                             f"{rule}+{model})")
        models += kept
    return models


def decodes(spec: Spec, nnet_dir: str) -> list[tuple[str, str]]:
    """(run dir, model) of every decode of dev and test the report needs."""
    return [(run.dir, model) for run in selected(spec, nnet_dir)
            for model in decoded_models(spec, run)]
