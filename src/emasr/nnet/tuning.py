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
"""
from __future__ import annotations

import itertools

import click

# setting -> the tag of its value in a run's directory name
TUNED_SETTINGS = {
    "train.lr": "lr",
    "sync.lr_times_workers": "lrxn",
    "sync.block_size": "tau",
    "sync.block_momentum": "eta",
    "sync.block_lr": "zeta",
    "sync.warmup_blocks": "warmup",
    "sync.nesterov": "nesterov",
}


class GridError(ValueError):
    pass


def parse_grid(spec: str, rules) -> dict[str, list[list[tuple[str, list[str]]]]]:
    """'rule: key=v,v key=v; rule: ...' -> {rule: [entry, ...]}, each entry [(key, values)]."""
    grid: dict[str, list[list[tuple[str, list[str]]]]] = {}
    for part in filter(str.strip, spec.split(";")):
        rule, colon, settings = part.partition(":")
        rule = rule.strip()
        if not colon or rule not in rules:
            raise GridError(f"grid entry '{part.strip()}': expected '<rule>: key=v,v ...' with "
                            f"a rule among {', '.join(rules)}")
        entry = []
        for item in settings.split():
            key, eq, values = item.partition("=")
            if key not in TUNED_SETTINGS or not eq or not all(values.split(",")):
                raise GridError(f"grid entry '{part.strip()}': '{item}' is not key=v[,v...] with "
                                f"a key among {', '.join(TUNED_SETTINGS)}")
            if key in dict(entry):
                raise GridError(f"grid entry '{part.strip()}' names {key} twice")
            entry.append((key, values.split(",")))
        if not entry:
            raise GridError(f"grid entry '{part.strip()}' names no setting")
        grid.setdefault(rule, []).append(entry)
    return grid


def grid_points(entries: list[list[tuple[str, list[str]]]]) -> list[tuple[str, list[str]]]:
    """A rule's entries -> its runs, each (directory suffix, overrides); [('', [])] without a
    grid. Two entries that give the same point are one run."""
    if not entries:
        return [("", [])]
    points: dict[str, list[str]] = {}
    for entry in entries:
        keys = [key for key, _ in entry]
        for values in itertools.product(*(vals for _, vals in entry)):
            suffix = "".join(f"_{TUNED_SETTINGS[k]}{v}" for k, v in zip(keys, values))
            points.setdefault(suffix, [f"{k}={v}" for k, v in zip(keys, values)])
    return list(points.items())


@click.command("tuning-grid")
@click.option("--grid", "spec", default="", help="'rule: key=v,v ...; rule: ...' (the settings: "
              + ", ".join(TUNED_SETTINGS) + ").")
@click.argument("rule")
def tuning_grid_cli(spec: str, rule: str) -> None:
    """Print RULE's runs of a tuning grid, one a line: the run directory's suffix ('-' for none)
    and its config overrides (what steps/nnet/experiment.sh trains)."""
    from emasr.nnet.sync import RULES

    try:
        grid = parse_grid(spec, RULES)
    except GridError as err:
        raise click.BadParameter(str(err), param_hint="--grid") from None
    if rule not in RULES:
        raise click.BadParameter(f"'{rule}': expected one of {', '.join(RULES)}",
                                 param_hint="RULE")
    for suffix, overrides in grid_points(grid.get(rule, [])):
        click.echo(" ".join([suffix or "-", *overrides]))
