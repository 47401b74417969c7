"""`emasr report`: read exp dirs, write RESULTS.md, the PNG plots and the counts beside it (or
rebuild all of them from committed counts)."""
from __future__ import annotations

import logging
import os

import click

from emasr.io.atomic import atomic_write

logger = logging.getLogger(__name__)

DEFAULT_OPTIONS = {"title": "Results", "archs": ["dnn", "lstm"], "replications": 10000}


def default_options() -> dict:
    from emasr.report.systems import default_labels

    return {**DEFAULT_OPTIONS, "labels": default_labels()}


def order_labels(strategies: str) -> list[str]:
    from emasr.report.systems import parse_label

    labels = strategies.split()
    for label in labels:
        try:
            parse_label(label)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--strategies") from None
    return labels


def make_report(exp_dirs: list[str], out: str, plot_dir: str, options: dict,
                bench: str | None, counts_dir: str, from_counts: bool = False,
                earlier_counts: str | None = None) -> str:
    """Read the exp dirs, write the counts dir, the plots and the report; `from_counts`: read the
    counts dir alone, its stored options under the ones given (`options`' None values);
    `earlier_counts`: a counts dir whose runs are reported too where their exp dirs are not read
    (emasr.report.counts.merge_earlier)."""
    from emasr.report.counts import merge_earlier, read_counts, write_counts
    from emasr.report.findings import parity_tests, specificity_tests
    from emasr.report.markdown import render
    from emasr.report.plots import write_plots
    from emasr.report.rows import build_rows, comparisons, gmm_summary, ladder_comparisons
    from emasr.report.systems import read_exp_dirs

    if from_counts:
        networks, gmms, stored = read_counts(counts_dir)
        options = {**stored, **{k: v for k, v in options.items() if v is not None},
                   "notes": stored["notes"] + options["notes"]}
    else:
        options = {**default_options(), **{k: v for k, v in options.items() if v is not None}}
        networks, gmms = read_exp_dirs(exp_dirs)
        if earlier_counts is not None:
            networks, gmms, options["notes"] = merge_earlier(earlier_counts, networks, gmms,
                                                             options["notes"])
        write_counts(counts_dir, networks, gmms, options)
    replications = options["replications"]
    rows = build_rows(networks, options["archs"], options["labels"], replications)
    gmm_rows = [gmm_summary(g, replications) for g in gmms]
    ladder = ladder_comparisons(gmm_rows, replications)
    compared = comparisons(rows, replications)
    parities = parity_tests(rows, replications)
    specificity = specificity_tests(rows, replications)
    tested = [p.comparison for p in parities if p.comparison is not None]
    family = len(compared) + len(tested) + len(specificity) + sum(c is not None for c in ladder)
    for c in compared + tested:
        c.family = family
    plots = write_plots(networks, options["archs"], plot_dir, bench, rows)
    out_dir = os.path.dirname(os.path.abspath(out))
    text = render(options["title"], options["notes"], rows, gmm_rows, ladder, compared,
                  parities, specificity, family, plots, [g.exp_dir for g in gmms], out_dir)
    with atomic_write(out) as f:
        f.write(text)
    return text


def print_selected(exp_dirs: list[str], archs: list[str], labels: list[str]) -> None:
    """The runs a table row would use (learning rate tuned on dev frame accuracy), one a line."""
    from emasr.report.systems import read_exp_dirs, select_runs, worker_counts

    networks, _ = read_exp_dirs(exp_dirs, sweeps=False, decodes=False)
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
@click.option("--archs", default=None, help="Architectures (table rows) [default: dnn lstm; "
              "with --from-counts, the committed report's].")
@click.option("--strategies", default=None,
              help="Table rows: a sync rule (emasr.nnet.sync.RULES: single, ma, bmuf, diloco), "
                   "optionally +<averaged model> (emasr.nnet.averages.AVERAGED_MODELS: ema, "
                   "ema-warm for a rule with a warm-up, avg, lastk) of the same runs [default: "
                   "every registered rule, alone and with each averaged model it can keep; with "
                   "--from-counts, the committed report's].")
@click.option("--note", "notes", multiple=True,
              help="A line under the title, e.g. the command, wall time and machine (repeatable).")
@click.option("--bench", default=None, type=click.Path(dir_okay=False),
              help="Speed-up benchmark JSON ([{workers, frames_per_second}, ...]) to plot too.")
@click.option("--replications", default=None, type=click.IntRange(1),
              help="Bootstrap replications [default: 10000; with --from-counts, the committed "
                   "report's, which gives its intervals exactly].")
@click.option("--title", default=None, help="[default: Results; with --from-counts, the "
              "committed report's]")
@click.option("--counts-dir", default=None, type=click.Path(file_okay=False),
              help="Where the per-utterance counts and the systems' records go (commit them "
                   "with the report) [default: counts/ beside --out].")
@click.option("--from-counts", is_flag=True,
              help="Rebuild the report from --counts-dir alone (no EXP_DIRS): the tables and "
                   "plots of a committed report, without its exp dirs.")
@click.option("--earlier-counts", default=None, type=click.Path(file_okay=False),
              help="A committed counts dir whose runs are reported too where EXP_DIRS do not "
                   "hold them (a campaign in pieces on a fresh checkout: the earlier pieces' "
                   "runs as recorded, the new ones from their exp dirs); refused where the "
                   "two trained on other inputs (their `inputs:` notes). It may be --counts-dir "
                   "itself: it is read before it is rewritten.")
@click.option("--select", is_flag=True,
              help="Only print the network exp dirs the table would use (one per row and seed; "
                   "among runs that differ in learning rate, the best on dev frame accuracy).")
@click.argument("exp_dirs", nargs=-1, type=click.Path(file_okay=False))
def report_cli(out, plot_dir, archs, strategies, notes, bench, replications, title, counts_dir,
               from_counts, earlier_counts, select, exp_dirs) -> None:
    """Write the paper's comparison from EXP_DIRS: network exp dirs (conf.yaml, metrics.jsonl,
    decode_{dev,test}[_<averaged model>]/ scored by local/score.sh) and GMM exp dirs
    (decode_{dev,test}/).

    Rows are arch x strategy x worker count; a row whose runs are missing says "not run"; a
    row's runs are one per seed, each the best on dev frame accuracy among runs that differ in a
    searched setting (emasr tuning-grid: learning rate, tau, block momentum, ...), and an
    averaged model's row uses its sync rule's run. Each model's LM weight and insertion penalty
    are chosen on dev and its test CER is read at that setting (Kaldi's best-on-test beside it,
    for reference); failed utterances count as deletions. Columns: dev frame accuracy, dev and
    test CER with 95% bootstrap intervals (speakers resampled as clusters, from the scoring's
    utt2spk; each seed's EMA half-life, LM weight and penalty chosen again on every replicate's
    dev and test read at that choice; seeds by Student's t), each seed's test CER, the
    dev-chosen setting, relative change against BMUF and against single, training wall time,
    syncs and bytes all-reduced per worker. Below: each run's regime (regime.json); the parity
    test of every parallel row against one worker on dev (non-inferiority: the upper end of the
    95% interval of the relative dev-CER gap at most +3%), BMUF-N's deciding whether the
    paper's regime holds; each of the paper's claims judged by the interval of the difference,
    with its family-wise interval and where the paper's own figure falls (and whether the EMA's
    gain is specific to parallel training); rows that trained different frames (more than 0.5%
    apart) are named; the GMM baselines; every comparison with its interval, per-seed signs and
    t-interval, resolved at 95% and at the family-wise level of all the report's comparisons;
    and PNG plots (dev frame accuracy per epoch, loss curves, CER against workers, speed-up
    against workers when measured).

    The per-utterance counts (at every scoring setting, with each utterance's speaker) and the
    systems' records go to --counts-dir (counts/ beside the report): commit them with it;
    `--from-counts` rebuilds the report from them alone (counts of version 1, one setting per
    model and no speakers, too: their intervals hold the setting fixed).
    """
    from emasr.nnet.training.metrics import MetricsError
    from emasr.report.scoring import ScoringError
    from emasr.io.table import TableError

    labels = order_labels(strategies) if strategies is not None else None
    arch_list = archs.split() if archs is not None else None
    if select:
        defaults = default_options()
        print_selected(list(exp_dirs), arch_list or defaults["archs"],
                       labels or defaults["labels"])
        return
    report_dir = os.path.dirname(os.path.abspath(out))
    plot_dir = plot_dir or os.path.join(report_dir, "plots")
    counts_dir = counts_dir or os.path.join(report_dir, "counts")
    if from_counts and (exp_dirs or earlier_counts):
        raise click.UsageError("--from-counts rebuilds from --counts-dir alone: give no EXP_DIRS "
                               "or --earlier-counts")
    try:
        options = {"title": title, "notes": list(notes), "archs": arch_list, "labels": labels,
                   "replications": replications}
        make_report(list(exp_dirs), out, plot_dir, options, bench, counts_dir, from_counts,
                    earlier_counts)
    except (MetricsError, ScoringError, TableError) as err:
        raise click.ClickException(str(err)) from None
    logger.info("wrote %s and plots in %s", out, plot_dir)
