"""What no type can say about a spec: its names come from the registries (sync rules, averaged
models, architectures, tunable settings), and its numbers must make a possible experiment (every
worker count on its nodes in processes of K workers, a grid seed among the seeds, a warm start
from a one-worker row). Each refusal names the spec's file and key; every run's config is
resolved here too, so a bad override fails before the first training, not during the third.
"""
from __future__ import annotations

import os

from emasr.experiment.plan import config_runs
from emasr.experiment.rows import fail, rows, trained_rules
from emasr.experiment.spec import Spec, value_text
from emasr.nnet import config as configs
from emasr.nnet.averages import AVERAGED_MODELS
from emasr.nnet.models import ARCHITECTURES
from emasr.nnet.training.selection import FINAL_EPOCHS
from emasr.nnet.sync import RULES, one_worker_rule
from emasr.nnet.config.tuning import GridError, parse_entry
from emasr.report.counts import SYSTEMS


def check_archs(spec: Spec) -> None:
    if not spec.archs:
        fail(spec, "archs", "expected at least one architecture and its config file")
    for name, arch in spec.archs.items():
        if name not in ARCHITECTURES:
            fail(spec, f"archs.{name}", f"expected an architecture among "
                 f"{', '.join(ARCHITECTURES)} (emasr.nnet.models.ARCHITECTURES)")
        if not os.path.isfile(arch.config):
            fail(spec, f"archs.{name}.config", f"expected file {arch.config} to exist (a path "
                 "from the recipe's directory)")


def check_workers(spec: Spec) -> None:
    for key, value in (("nodes", spec.nodes), ("workers_per_process", spec.workers_per_process)):
        if value < 1:
            fail(spec, key, f"expected a number >= 1, got {value}")
    if not spec.workers:
        fail(spec, "workers", "expected the parallel runs' worker counts")
    for i, n in enumerate(spec.workers):
        if n < 1 or n % spec.nodes:
            fail(spec, "nodes", f"{spec.nodes} nodes do not divide workers[{i}] = {n} (every "
                 "worker count runs N / M workers on each of its M nodes)")
        if n // spec.nodes % spec.workers_per_process:
            fail(spec, "workers_per_process", f"{spec.workers_per_process} workers a process do "
                 f"not divide the {n // spec.nodes} workers of workers[{i}] = {n} on each of "
                 f"{spec.nodes} node(s)")


def check_seeds(spec: Spec) -> None:
    if not spec.seeds or len(set(spec.seeds)) != len(spec.seeds):
        fail(spec, "seeds", f"expected one or more seeds, each once, got {spec.seeds}")
    if spec.grid_seed is not None and spec.grid_seed not in spec.seeds:
        fail(spec, "grid_seed", f"expected one of the seeds {spec.seeds}, got {spec.grid_seed}")


def entry_text(entry: dict[str, list]) -> str:
    return " ".join(f"{key}={','.join(value_text(v) for v in values)}"
                    for key, values in entry.items())


def check_grid(spec: Spec) -> None:
    rules = trained_rules(spec)
    for rule, entries in spec.grid.items():
        if rule not in RULES:
            fail(spec, f"grid.{rule}", f"expected a sync rule among {', '.join(RULES)}")
        if rule not in rules:
            fail(spec, f"grid.{rule}", f"no row trains {rule} (the rows' rules: "
                 f"{', '.join(rules)}); expected a grid of one of them")
        for i, entry in enumerate(entries):
            try:
                parse_entry(rule, entry_text(entry), f"{rule}: {entry_text(entry)}", RULES)
            except GridError as err:
                fail(spec, f"grid.{rule}[{i}]", str(err))


def check_warm_start(spec: Spec) -> None:
    k = spec.warm_start_epochs
    if k is None:
        return
    single = one_worker_rule()
    fewest = min((e for e in map(spec.epochs_of, trained_rules(spec)) if e is not None),
                 default=None)
    if k < 1 or (fewest is not None and k >= fewest):
        fail(spec, "warm_start_epochs", f"expected 1 <= k < the epochs of every rule's runs "
             f"({fewest} at fewest), got {k}")
    if single not in trained_rules(spec):
        fail(spec, "warm_start_epochs", f"expected a row '{single}' (the one-worker runs the "
             "parallel runs start from)")
    if spec.grid.get(single):
        fail(spec, f"grid.{single}", "a warm start needs one one-worker run per arch and seed: "
             "no grid of it")


def check_averages(spec: Spec) -> None:
    for i, (rule, model) in enumerate(rows(spec)):
        if model != "final" and spec.averages.get(model, AVERAGED_MODELS[model].default) is None:
            fail(spec, f"rows[{i}]", f"the row {spec.rows[i]} needs averages.{model} (the value "
                 f"of average.{AVERAGED_MODELS[model].key})")
    for key in ("rule_overrides", "rule_epochs"):
        for rule in getattr(spec, key):
            if rule not in RULES:
                fail(spec, f"{key}.{rule}", f"expected a sync rule among {', '.join(RULES)}")
    for rule, epochs in spec.rule_epochs.items():
        if rule not in trained_rules(spec):
            fail(spec, f"rule_epochs.{rule}", f"no row trains {rule} (the rows' rules: "
                 f"{', '.join(trained_rules(spec))}); expected epochs of one of them")
        if epochs < 1:
            fail(spec, f"rule_epochs.{rule}", f"expected epochs >= 1, got {epochs}")
    if spec.epoch_choice is not None and spec.epoch_choice not in FINAL_EPOCHS:
        fail(spec, "epoch_choice", f"expected one of {', '.join(FINAL_EPOCHS)} (train.final_epoch)")
    controls = spec.decode.controls_at or []
    parallel = [n for n in controls if n != 1 and n not in spec.workers]
    if parallel:
        fail(spec, "decode.controls_at", f"{parallel[0]} is no worker count of the runs "
             f"(workers {spec.workers}, or 1: the one-worker runs')")


def check_configs(spec: Spec, runs) -> None:
    """Every (arch, rule) run's config, its grid points aside (checked with the grid), resolved as
    `emasr train` will: unknown keys, bad values and the config's own checks, named now."""
    seen = set()
    for run in runs:
        if (run.arch, run.rule, run.workers) in seen:
            continue
        seen.add((run.arch, run.rule, run.workers))
        epochs = [] if run.epochs is None else [f"train.epochs={run.epochs}"]
        try:
            config = configs.resolve(run.config, [*run.overrides, f"sync.strategy={run.rule}",
                                                  f"dist.workers_per_process={run.per_process}",
                                                  *epochs])
        except configs.ConfigError as err:
            fail(spec, f"archs.{run.arch}", f"the {run.rule} runs' config: {err}")
        if config.model.type != run.arch:
            fail(spec, f"archs.{run.arch}.config", f"{run.config} is a {config.model.type} "
                 f"(model.type), not a {run.arch}")


def check_earlier_counts(spec: Spec) -> None:
    path = spec.earlier_counts
    if path is not None and not os.path.isfile(os.path.join(path, SYSTEMS)):
        fail(spec, "earlier_counts", f"expected a counts dir `emasr report` wrote ({SYSTEMS}, "
             f"utterances.tsv.gz), got {path!r}")


def check(spec: Spec) -> None:
    """Refuse a spec no experiment can run, naming its file and the key."""
    rows(spec)
    check_archs(spec)
    check_workers(spec)
    check_seeds(spec)
    check_grid(spec)
    check_warm_start(spec)
    check_averages(spec)
    check_earlier_counts(spec)
    check_configs(spec, config_runs(spec))
