"""The settings a baseline is tuned over on dev, and the grids of runs that search them.

A grid gives one training run per point; the report (emasr.report.systems.select_runs) keeps, for
each table row and seed, the run with the best dev frame accuracy among runs that differ only in
these settings. Each setting has a short tag that names its runs' directories
(`dnn_ma_n8_s1_lr0.4`, `dnn_bmuf_n8_s1_eta0.75_warmup12`), so a grid's runs live side by side in
one network dir and adding a point later trains only that point.

A grid spec, per sync rule (`--grid` of steps/nnet/experiment.sh):
    "ma: train.lr=0.1,0.2,0.4; bmuf: sync.block_momentum=0.875,0.75"
Each entry is the product of its settings' values; a rule named twice searches the union of its
entries ("bmuf: sync.block_momentum=0.875,0.75; bmuf: sync.block_momentum=0.75
sync.warmup_blocks=12" adds warm-up at one block momentum only).

The settings are the ones every rule reads (COMMON_SETTINGS) and each rule's own, with their
tags, from its registry entry (emasr.nnet.sync.RULES, `tuned`).
"""
from __future__ import annotations

import itertools

import click

from emasr.nnet.sync import RULES

# the settings every rule reads -> the tag of its value in a run's directory name (the scaling
# of the rate by N: the parallel rules only)
COMMON_SETTINGS = {"train.lr": "lr", "sync.lr_times_workers": "lrxn", "sync.block_size": "tau"}
PARALLEL_ONLY = {"sync.lr_times_workers"}


def tuned_settings() -> dict[str, str]:
    """Every setting a grid may search -> its run dirs' tag: the common ones, then each
    registered rule's own (its entry's `tuned`)."""
    out = dict(COMMON_SETTINGS)
    for rule in RULES.values():
        out.update(rule.tuned)
    return out


class GridError(ValueError):
    pass


def rule_settings(rule) -> list[str]:
    """The tuned settings a sync rule (an entry of emasr.nnet.sync.RULES) reads: its own (its
    entry's `tuned`), the learning rate and tau, and for a parallel rule the scaling of the rate
    by N. A grid over another key trains one run under several names."""
    reads = set(rule.tuned) | {key for key in COMMON_SETTINGS
                               if rule.parallel or key not in PARALLEL_ONLY}
    return [key for key in tuned_settings() if key in reads]


def typed_value(rule: str, key: str, value: str, where: str):
    """A grid value as the run's config will read it, refused now (before the grid's first run
    trains) when the config would refuse it then."""
    from emasr.nnet import config as configs

    try:
        resolved = configs.resolve(None, [f"sync.strategy={rule}", f"{key}={value}"])
    except configs.ConfigError as err:
        raise GridError(f"grid entry '{where}': {key}={value}: {err}") from None
    return configs.flatten(resolved.to_dict())[key]


def parse_entry(rule: str, settings: str, where: str, rules) -> list[tuple[str, list[str]]]:
    """'key=v,v key=v' of one rule -> [(key, values)], each value checked and none repeated."""
    entry = []
    for item in settings.split():
        key, eq, values = item.partition("=")
        if key not in tuned_settings() or not eq or not all(values.split(",")):
            raise GridError(f"grid entry '{where}': '{item}' is not key=v[,v...] with "
                            f"a key among {', '.join(tuned_settings())}")
        if key in dict(entry):
            raise GridError(f"grid entry '{where}' names {key} twice")
        if key not in rule_settings(rules[rule]):
            raise GridError(f"grid entry '{where}': {rule} does not read {key} (it reads "
                            f"{', '.join(rule_settings(rules[rule]))}); its runs would differ "
                            "in their names only")
        seen: dict = {}
        for value in values.split(","):
            typed = typed_value(rule, key, value, where)
            if typed in seen:
                raise GridError(f"grid entry '{where}': {key} has the value {typed} twice "
                                f"({seen[typed]}, {value}); expected each value once")
            seen[typed] = value
        entry.append((key, values.split(",")))
    if not entry:
        raise GridError(f"grid entry '{where}' names no setting")
    return entry


def parse_grid(spec: str, rules, trained: list[str] | None = None
               ) -> dict[str, list[list[tuple[str, list[str]]]]]:
    """'rule: key=v,v key=v; rule: ...' -> {rule: [entry, ...]}, each entry [(key, values)].
    `trained`: the rules the runs train (the rows'); an entry for another would train nothing."""
    grid: dict[str, list[list[tuple[str, list[str]]]]] = {}
    for part in filter(str.strip, spec.split(";")):
        rule, colon, settings = part.partition(":")
        rule = rule.strip()
        if not colon or rule not in rules:
            raise GridError(f"grid entry '{part.strip()}': expected '<rule>: key=v,v ...' with "
                            f"a rule among {', '.join(rules)}")
        if trained is not None and rule not in trained:
            raise GridError(f"grid entry '{part.strip()}': no row trains {rule} (the rows' "
                            f"rules: {', '.join(trained)}); expected a grid of one of them")
        grid.setdefault(rule, []).append(parse_entry(rule, settings, part.strip(), rules))
    return grid


def grid_points(entries: list[list[tuple[str, list[str]]]]) -> list[tuple[str, list[str]]]:
    """A rule's entries -> its runs, each (directory suffix, overrides); [('', [])] without a
    grid. Two entries that give the same point are one run."""
    if not entries:
        return [("", [])]
    points: dict[str, list[str]] = {}
    tags = tuned_settings()
    for entry in entries:
        keys = [key for key, _ in entry]
        for values in itertools.product(*(vals for _, vals in entry)):
            suffix = "".join(f"_{tags[k]}{v}" for k, v in zip(keys, values))
            points.setdefault(suffix, [f"{k}={v}" for k, v in zip(keys, values)])
    return list(points.items())


@click.command("tuning-grid")
@click.option("--grid", "spec", default="", help="'rule: key=v,v ...; rule: ...' (the settings: "
              + ", ".join(tuned_settings()) + ", and any a rule registered later tunes).")
@click.option("--rules", default=None,
              help="The rules the runs train, e.g. 'single bmuf': a grid of another is refused.")
@click.argument("rule")
def tuning_grid_cli(spec: str, rules: str | None, rule: str) -> None:
    """Print RULE's runs of a tuning grid, one a line: the run directory's suffix ('-' for none)
    and its config overrides (what steps/nnet/experiment.sh trains). The whole grid is checked
    first: every value as the runs' config reads it, none twice, every key one its rule reads."""
    if rule not in RULES:
        raise click.ClickException(f"rule '{rule}': expected one of {', '.join(RULES)}")
    try:
        grid = parse_grid(spec, RULES, None if rules is None else rules.split())
    except GridError as err:
        raise click.ClickException(f"--grid: {err}") from None
    for suffix, overrides in grid_points(grid.get(rule, [])):
        click.echo(" ".join([suffix or "-", *overrides]))
