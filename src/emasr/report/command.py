"""`emasr report`: read exp dirs, write RESULTS.md and the PNG plots beside it."""
from __future__ import annotations

import logging
import os

import click

from emasr.io.atomic import atomic_write

logger = logging.getLogger(__name__)

DEFAULT_STRATEGIES = ("single single+ema single+avg single+lastk ma ma+ema bmuf bmuf+ema bmuf+avg "
                      "bmuf+lastk")


def order_labels(strategies: str) -> list[str]:
    from emasr.report.systems import parse_label

    labels = strategies.split()
    for label in labels:
        try:
            parse_label(label)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--strategies") from None
    return labels


def make_report(exp_dirs: list[str], out: str, plot_dir: str, archs: list[str],
                labels: list[str], notes: list[str], bench: str | None, replications: int,
                title: str) -> str:
    from emasr.report.markdown import render
    from emasr.report.plots import write_plots
    from emasr.report.rows import build_rows, comparisons, gmm_summary, ladder_probabilities
    from emasr.report.systems import read_exp_dirs

    networks, gmms = read_exp_dirs(exp_dirs)
    rows = build_rows(networks, archs, labels, replications)
    gmm_rows = [(g.name, gmm_summary(g, replications)) for g in gmms]
    plots = write_plots(networks, archs, plot_dir, bench, rows)
    out_dir = os.path.dirname(os.path.abspath(out))
    text = render(title, notes, rows, gmm_rows, ladder_probabilities(gmm_rows, replications),
                  comparisons(rows, replications), plots, [g.exp_dir for g in gmms], out_dir)
    with atomic_write(out) as f:
        f.write(text)
    return text


def print_selected(exp_dirs: list[str], archs: list[str], labels: list[str]) -> None:
    """The runs a table row would use (learning rate tuned on dev frame accuracy), one a line."""
    from emasr.report.systems import read_exp_dirs, select_runs, worker_counts

    networks, _ = read_exp_dirs(exp_dirs)
    chosen = dict.fromkeys(r.exp_dir for arch in archs for label in labels
                           for workers in worker_counts(networks, arch, label)
                           for r in select_runs(networks, arch, label, workers))
    for exp_dir in chosen:
        click.echo(exp_dir)


@click.command("report")
@click.option("--out", default="RESULTS.md", show_default=True, type=click.Path(dir_okay=False),
              help="Markdown file to write.")
@click.option("--plot-dir", default=None, type=click.Path(file_okay=False),
              help="Where the PNG plots go [default: plots/ beside --out].")
@click.option("--archs", default="dnn lstm", show_default=True, help="Architectures (table rows).")
@click.option("--strategies", default=DEFAULT_STRATEGIES, show_default=True,
              help="Table rows: a sync rule (single, ma, bmuf), optionally +ema, +avg or +lastk "
                   "(an averaged model of the same runs).")
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
    decode_{dev,test}[_<averaged model>]/ scored by local/score.sh) and GMM exp dirs
    (decode_{dev,test}/).

    Rows are arch x strategy x worker count; a row whose runs are missing says "not run". Each
    model's LM weight and insertion penalty are chosen on dev and its test CER is read at that
    setting (Kaldi's best-on-test beside it, for reference); failed utterances count as
    deletions. Columns: dev frame accuracy, dev and test CER with 95% bootstrap intervals, the
    dev-chosen setting, relative change against BMUF and against single, training wall time, syncs
    and bytes all-reduced per worker. Below: what agrees and disagrees with the paper (and whether
    the EMA's gain is specific to parallel training, against a single worker's EMA and the
    averaging controls), the GMM baselines, the probability that one system improves on another on
    the same test utterances, and PNG plots (dev frame accuracy per epoch, loss curves, CER against
    workers, speed-up against workers when measured).
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
