"""`emasr report`: read exp dirs, write RESULTS.md and the PNG plots beside it."""
from __future__ import annotations

import logging
import os

import click

from emasr.io.atomic import atomic_write

logger = logging.getLogger(__name__)

DEFAULT_STRATEGIES = "single ma ma+ema bmuf bmuf+ema"


def order_labels(strategies: str) -> list[str]:
    labels = strategies.split()
    for label in labels:
        base, _, ema = label.partition("+")
        if base not in ("single", "ma", "bmuf") or ema not in ("", "ema"):
            raise click.BadParameter(f"'{label}': expected single, ma or bmuf, optionally +ema",
                                     param_hint="--strategies")
    return labels


def make_report(exp_dirs: list[str], out: str, plot_dir: str, archs: list[str],
                labels: list[str], notes: list[str], bench: str | None, replications: int,
                title: str) -> str:
    from emasr.report.markdown import render
    from emasr.report.plots import write_plots
    from emasr.report.rows import build_rows, comparisons, gmm_summary
    from emasr.report.systems import read_exp_dirs

    networks, gmms = read_exp_dirs(exp_dirs)
    rows = build_rows(networks, archs, labels, replications)
    gmm_rows = [(g.name, gmm_summary(g, replications)) for g in gmms]
    plots = write_plots(networks, archs, plot_dir, bench)
    out_dir = os.path.dirname(os.path.abspath(out))
    text = render(title, notes, rows, gmm_rows, comparisons(rows, replications), plots,
                  [g.exp_dir for g in gmms], out_dir)
    with atomic_write(out) as f:
        f.write(text)
    return text


def print_selected(exp_dirs: list[str], archs: list[str], labels: list[str]) -> None:
    """The runs a table row would use (learning rate tuned on dev frame accuracy), one a line."""
    from emasr.report.systems import read_exp_dirs, select_runs

    networks, _ = read_exp_dirs(exp_dirs)
    chosen = dict.fromkeys(r.exp_dir for arch in archs for label in labels
                           for r in select_runs(networks, arch, label))
    for exp_dir in chosen:
        click.echo(exp_dir)


@click.command("report")
@click.option("--out", default="RESULTS.md", show_default=True, type=click.Path(dir_okay=False),
              help="Markdown file to write.")
@click.option("--plot-dir", default=None, type=click.Path(file_okay=False),
              help="Where the PNG plots go [default: plots/ beside --out].")
@click.option("--archs", default="dnn lstm", show_default=True, help="Architectures (table rows).")
@click.option("--strategies", default=DEFAULT_STRATEGIES, show_default=True,
              help="Strategies (table rows): single, ma, bmuf, each optionally +ema.")
@click.option("--note", "notes", multiple=True,
              help="A line under the title, e.g. the command, wall time and machine (repeatable).")
@click.option("--bench", default=None, type=click.Path(dir_okay=False),
              help="Speed-up benchmark JSON ([{workers, frames_per_second}, ...]) to plot too.")
@click.option("--replications", default=10000, show_default=True, type=click.IntRange(1),
              help="Bootstrap replications.")
@click.option("--title", default="Results", show_default=True)
@click.option("--select", is_flag=True,
              help="Only print the network exp dirs the table would use (one per row and seed; "
                   "among runs that differ in learning rate, the best on dev frame accuracy).")
@click.argument("exp_dirs", nargs=-1, type=click.Path(file_okay=False))
def report_cli(out, plot_dir, archs, strategies, notes, bench, replications, title, select,
               exp_dirs) -> None:
    """Write the paper's comparison from EXP_DIRS: network exp dirs (conf.yaml, metrics.jsonl,
    decode_{dev,test}[_ema]/ scored by local/score.sh) and GMM exp dirs (decode_{dev,test}/).

    Rows are arch x strategy; a row whose runs are missing says "not run". Columns: dev frame
    accuracy, dev and test CER with 95% bootstrap intervals, relative change against BMUF and
    against single, training wall time, syncs and bytes all-reduced per worker. Below: what agrees
    and disagrees with the paper, the GMM baselines, the probability that one system improves on
    another on the same test utterances, and PNG plots (dev frame accuracy per epoch of the global
    model against its EMA, loss curves, speed-up against workers when measured).
    """
    from emasr.report.metrics import MetricsError
    from emasr.report.scoring import ScoringError
    from emasr.io.table import TableError

    labels = order_labels(strategies)
    arch_list = archs.split()
    if select:
        print_selected(list(exp_dirs), arch_list, labels)
        return
    plot_dir = plot_dir or os.path.join(os.path.dirname(os.path.abspath(out)), "plots")
    try:
        make_report(list(exp_dirs), out, plot_dir, arch_list, labels, list(notes), bench,
                    replications, title)
    except (MetricsError, ScoringError, TableError) as err:
        raise click.ClickException(str(err)) from None
    logger.info("wrote %s and plots in %s", out, plot_dir)
