"""The same comparisons across several reports: a sweep over a setting that no single report
varies (how far the learning rate anneals, say), read from each report's committed counts.

Each setting is one counts dir (emasr report's counts/); in each, the pairs asked for (B against A,
row labels such as `single` and `single+ema`) are compared as the report compares them: on the
same test utterances, each model at its dev-chosen scoring setting (and EMA half-life), every
seed of both rows (or the seeds given), speakers and seeds resampled (emasr.report.intervals).
Comparisons of different settings share no utterance pairing and are not compared with each other
here: each interval stands for its own setting. Writes a markdown table and a plot of B - A in
percent of A with its 95% interval against the setting.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from emasr.io.atomic import atomic_write

if TYPE_CHECKING:
    from emasr.report.rows import Comparison

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Setting:
    label: str        # as the table and the plot name it: "lr/100"
    counts_dir: str


@dataclass(frozen=True)
class Point:
    setting: Setting
    comparison: Comparison


def parse_setting(text: str) -> Setting:
    label, sep, directory = text.partition("=")
    if not sep or not label.strip() or not directory.strip():
        raise click.BadParameter(f"'{text}': expected LABEL=COUNTS_DIR (lr/100=verdict/anneal/"
                                 "lr001/counts)", param_hint="--counts")
    return Setting(label.strip(), directory.strip())


def parse_pair(text: str) -> tuple[str, str]:
    a, sep, b = text.partition(",")
    if not sep or not a.strip() or not b.strip():
        raise click.BadParameter(f"'{text}': expected A,B (two row labels: single,single+ema)",
                                 param_hint="--compare")
    return a.strip(), b.strip()


def setting_points(setting: Setting, pairs: list[tuple[str, str]], seeds: set[int] | None,
                   replications: int) -> list[Point]:
    """The setting's comparisons of the pairs asked for (every arch and worker count its report
    has); refuses a pair its report has no comparison of."""
    from emasr.report.counts import read_counts
    from emasr.report.rows import build_rows, comparisons

    if not os.path.isfile(os.path.join(setting.counts_dir, "systems.json")):
        raise click.ClickException(f"{setting.label}: expected a counts dir at "
                                   f"{setting.counts_dir} (emasr report's counts/, with "
                                   "systems.json)")
    networks, _, options = read_counts(setting.counts_dir)
    if seeds is not None:
        networks = [r for r in networks if r.seed in seeds]
    rows = build_rows(networks, options["archs"], options["labels"], replications)
    found = [c for c in comparisons(rows, replications)
             if (c.a, c.b) in pairs and c.half_life is None]
    for a, b in pairs:
        if not any((c.a, c.b) == (a, b) for c in found):
            raise click.ClickException(
                f"{setting.label} ({setting.counts_dir}): no comparison of {b} against {a} "
                f"(its report's rows: {', '.join(options['labels'])}; with seeds "
                f"{sorted({r.seed for r in networks}) or 'none'})")
    return [Point(setting, c) for c in found]


def render(title: str, points: list[Point], seeds: set[int] | None, notes: list[str]) -> str:
    from emasr.report.findings import level_text, name
    from emasr.report.intervals import LEVEL

    family = len(points)
    lines = [f"# {title}", ""] + [f"- {n}" for n in notes] + [
        "", f"B - A in percent of A's test CER with its {LEVEL:.0%} interval ("
        "emasr.report.intervals; each setting's interval from its own counts: "
        f"{'seeds ' + ', '.join(map(str, sorted(seeds))) if seeds else 'every seed'} of both "
        f"rows), the seeds with B better, and whether the ordering is resolved (the interval "
        f"excludes zero and every seed agrees; at the family-wise "
        f"{1 - (1 - LEVEL) / max(1, family):.2%} of these {family} comparisons where it says "
        "so).", "",
        "| setting | arch | workers | A | B | A CER | B CER | B - A (% of A) | seeds B better | "
        "resolved |", "|---|---|---|---|---|---|---|---|---|---|"]
    for p in points:
        c = p.comparison
        r = c.relative.interval(LEVEL)
        resolved = "no"
        if c.resolved:
            resolved = "yes, family-wise too" if c.resolved_family_wise else "yes"
        lines.append(f"| {p.setting.label} | {c.arch.upper()} | {c.workers} | {name(c.a)} | "
                     f"{name(c.b)} | {c.cer_a:.2f} | {c.cer_b:.2f} | {r.estimate:+.1f} "
                     f"[{r.low:+.1f}, {r.high:+.1f}] | {c.signs()} | {resolved} |")
    if points:
        first = points[0].comparison
        lines += ["", f"Intervals: {level_text(first.interval, first.difference)}."]
    return "\n".join(lines) + "\n"


def plot(points: list[Point], settings: list[Setting], path: str, xlabel: str) -> str:
    """B - A in % of A against the setting, one line per compared pair (and arch, workers)."""
    from emasr.report.findings import name
    from emasr.report.intervals import LEVEL
    from emasr.report.plots import pyplot, save

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    x = {s.label: i for i, s in enumerate(settings)}
    series: dict[str, list[Point]] = {}
    for p in points:
        c = p.comparison
        series.setdefault(f"{c.arch.upper()} N={c.workers}: {name(c.b)} - {name(c.a)}",
                          []).append(p)
    for k, (label, members) in enumerate(series.items()):
        shift = 0.06 * (k - (len(series) - 1) / 2)   # side by side at each setting
        xs = [x[p.setting.label] + shift for p in members]
        ints = [p.comparison.relative.interval(LEVEL) for p in members]
        ys = [i.estimate for i in ints]
        err = [[y - i.low for y, i in zip(ys, ints)], [i.high - y for y, i in zip(ys, ints)]]
        ax.errorbar(xs, ys, yerr=err, fmt="-o", capsize=3, label=label)
    ax.axhline(0.0, color="gray", linewidth=0.8)
    ax.set_xticks(range(len(settings)), [s.label for s in settings])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"B - A, % of A's test CER ({LEVEL:.0%} interval)")
    ax.legend(fontsize=8)
    return save(fig, path)


@click.command("sweep")
@click.option("--counts", "settings", multiple=True, required=True, metavar="LABEL=DIR",
              help="A setting's label and its report's counts dir (repeatable, in plot order).")
@click.option("--compare", "pairs", multiple=True, required=True, metavar="A,B",
              help="Row labels: B against A, as the reports compare them (repeatable), e.g. "
                   "single,single+ema.")
@click.option("--seeds", default=None, metavar="'1 2 3'",
              help="Only these seeds of every counts dir (default: every seed).")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Markdown file to write.")
@click.option("--plot", "plot_path", default=None, type=click.Path(dir_okay=False),
              help="PNG of B - A against the setting (default: none).")
@click.option("--xlabel", default="setting", show_default=True, help="The plot's x axis.")
@click.option("--replications", default=2000, show_default=True, type=click.IntRange(100))
@click.option("--title", default="The same comparisons across settings", show_default=True)
@click.option("--note", "notes", multiple=True, help="A line under the title (repeatable).")
def sweep_cli(settings, pairs, seeds, out, plot_path, xlabel, replications, title,
              notes) -> None:
    """The comparisons B against A of several reports, one per setting of something no report
    varies alone (e.g. how far the rate anneals): a table and a plot of B - A in % of A with its
    95% interval per setting, from each report's committed counts.

    e.g.: emasr sweep --counts lr/10=verdict/dnn3/counts --counts lr/100=verdict/anneal/lr001/counts
    --compare single,single+ema --compare bmuf,bmuf+ema --seeds '1 2 3' --out SWEEP.md
    --plot plots/sweep.png"""
    from emasr.report.scoring import ScoringError

    parsed = [parse_setting(s) for s in settings]
    wanted = list(dict.fromkeys(parse_pair(p) for p in pairs))
    try:
        chosen = None if seeds is None else {int(s) for s in seeds.replace(",", " ").split()}
    except ValueError:
        raise click.BadParameter(f"'{seeds}': expected seeds as integers", param_hint="--seeds")
    try:
        points = [p for s in parsed for p in setting_points(s, wanted, chosen, replications)]
    except ScoringError as err:
        raise click.ClickException(str(err)) from None
    for p in points:
        p.comparison.family = len(points)   # the family-wise level is over the whole sweep
    notes = [*(f"{s.label}: {os.path.normpath(s.counts_dir)}" for s in parsed), *notes]
    text = render(title, points, chosen, notes)
    with atomic_write(out) as f:
        f.write(text)
    if plot_path:
        plot(points, parsed, plot_path, xlabel)
    logger.info("wrote %s (%d comparisons over %d settings)", out, len(points), len(parsed))
