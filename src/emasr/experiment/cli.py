"""`emasr experiment`: validate, show, plan, decode-list and report an experiment spec
(emasr.experiment.spec); steps/nnet/experiment.sh trains and decodes what `plan` and `decodes`
list."""
from __future__ import annotations

import contextlib
import os

import click
import yaml

SPEC = click.argument("spec_path", metavar="SPEC", type=click.Path(exists=True, dir_okay=False))
SETS = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                    help="Override a key of the spec, e.g. --set seeds='1 2 3' or "
                         "--set archs.dnn.overrides+=train.lr=0.2 (repeatable).")
NNET_DIR = click.option("--nnet-dir", default="exp/nnet", show_default=True,
                        type=click.Path(file_okay=False), help="Where the runs' dirs are.")


@contextlib.contextmanager
def one_line_errors():
    """An error of the spec, the plan, the counts, metrics or tables (each a ValueError that
    names its file) as one `Error:` line, not a traceback."""
    try:
        yield
    except ValueError as err:
        raise click.ClickException(str(err)) from None


def checked_spec(spec_path: str, sets):
    """The spec, loaded and validated."""
    from emasr.experiment.checks import check
    from emasr.experiment.spec import load

    with one_line_errors():
        spec = load(spec_path, sets)
        check(spec)
    return spec


@click.group("experiment")
def experiment_cli() -> None:
    """An experiment as a typed spec file (conf/experiment/*.yaml): the architectures and their
    configs, the rows (sync rule x averaged model), worker counts, seeds, the tuning grid, epochs,
    EMA half-lives and decoding (docs/experiment.md). Paths in it are relative to the recipe's
    directory."""


@experiment_cli.command("validate")
@SPEC
@SETS
def validate_cli(spec_path, sets) -> None:
    """Check SPEC: unknown keys, names the registries do not know (sync rules, averaged models,
    architectures, tunable settings), impossible combinations, and every run's config resolved as
    `emasr train` will. An error names the file and the key."""
    from emasr.experiment.plan import config_runs

    spec = checked_spec(spec_path, sets)
    click.echo(f"{spec_path}: valid ({len(config_runs(spec))} training runs at most)")


@experiment_cli.command("show")
@SPEC
@SETS
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the resolved spec here (default: stdout).")
@click.option("--key", default=None, metavar="KEY.PATH",
              help="Print only this key's value (decode.opts, results): a step's options.")
def show_cli(spec_path, sets, out, key) -> None:
    """The spec with its --set overrides applied, every key at its value, validated: what a
    recipe stores beside its runs (<nnet-dir>/experiment.yaml) and hands to the step."""
    from emasr.io.atomic import atomic_write

    values = checked_spec(spec_path, sets).to_dict()
    if key is not None:
        click.echo(key_value(values, key))
        return
    text = yaml.safe_dump(values, sort_keys=False, allow_unicode=True, default_flow_style=None,
                          width=100)
    if out is None:
        click.echo(text, nl=False)
        return
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with atomic_write(out) as f:
        f.write(text)


def key_value(values: dict, key: str) -> str:
    """One key's value as text (a list by spaces)."""
    from emasr.experiment.spec import value_text

    node = values
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise click.BadParameter(f"'{key}': no such key in the spec", param_hint="--key")
        node = node[part]
    if isinstance(node, list):
        return " ".join(value_text(v) for v in node)
    return "" if node is None else node if isinstance(node, str) else value_text(node)


@experiment_cli.command("plan")
@SPEC
@SETS
@NNET_DIR
@click.option("--lines", is_flag=True, help="One tab-separated line per run for "
              "steps/nnet/experiment.sh: dir, done|todo, train.sh options (shell-quoted), the "
              "warm start's checkpoint.")
def plan_cli(spec_path, sets, nnet_dir, lines) -> None:
    """The training runs of SPEC in training order: each run's directory, whether it is done
    (<dir>/.done), recorded (in the spec's earlier_counts only) or todo, and its
    steps/nnet/train.sh options with the config overrides. With a grid searched on one seed
    (grid_seed), the other seeds' runs are listed once that seed's grid is trained (the point
    chosen on dev)."""
    from emasr.experiment.plan import runs

    spec = checked_spec(spec_path, sets)
    with one_line_errors():
        planned = runs(spec, nnet_dir)
    for run in planned:
        if lines:
            click.echo(run.line())
            continue
        warm = f" --init-model {run.init_model}" if run.init_model else ""
        click.echo(f"{run.state} {run.dir}: {' '.join(run.train_options()[:-2])}{warm}")
        click.echo(f"     overrides: {' '.join(run.overrides)}")


@experiment_cli.command("decodes")
@SPEC
@SETS
@NNET_DIR
def decodes_cli(spec_path, sets, nnet_dir) -> None:
    """The decodes of dev and test the report needs, one a line: the run dir and its model
    (final, or an averaged model's file, ema_90000): the trained runs the rows use (with a grid,
    the best on dev), and the averaged models their rows ask for."""
    from emasr.experiment.plan import decodes

    spec = checked_spec(spec_path, sets)
    with one_line_errors():
        for run_dir, model in decodes(spec, nnet_dir):
            click.echo(f"{run_dir} {model}")


@experiment_cli.command("report")
@SPEC
@SETS
@NNET_DIR
@click.option("--note", "notes", multiple=True, help="A line under the title (repeatable).")
@click.argument("gmm_dirs", nargs=-1, type=click.Path(file_okay=False))
def report_cli(spec_path, sets, nnet_dir, notes, gmm_dirs) -> None:
    """Write SPEC's report (its `results`, with plots/ and counts/ beside it) from the trained
    runs of its plan and GMM_DIRS (the GMM baselines, those decoded), and the runs of the spec's
    earlier_counts whose dirs are not here: its title, rows and architectures are the spec's."""
    from emasr.experiment.plan import runs
    from emasr.report.cli import make_report

    spec = checked_spec(spec_path, sets)
    out_dir = os.path.dirname(os.path.abspath(spec.results))
    options = {"title": spec.title, "notes": list(notes), "archs": list(spec.archs),
               "labels": list(spec.rows), "replications": None}
    with one_line_errors():
        exp_dirs = [run.dir for run in runs(spec, nnet_dir)
                    if os.path.isfile(os.path.join(run.dir, "conf.yaml"))]
        exp_dirs += [d for d in gmm_dirs if os.path.isdir(os.path.join(d, "decode_dev"))]
        make_report(exp_dirs, spec.results, os.path.join(out_dir, "plots"), options, None,
                    os.path.join(out_dir, "counts"), earlier_counts=spec.earlier_counts)
