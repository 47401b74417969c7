"""`emasr power`: how many seeds a verdict needs, planned from a report's committed counts before
the seeds are spent.

For each comparison a verdict rests on (the paper's claims, and each parallel row's parity test
on dev), the counts give two spreads of the difference B - A in CER points: between seeds (the
standard deviation of the per-seed differences, which more seeds average down) and between
speakers (the bootstrap's spread with the seeds held fixed, which more seeds do not shrink: only
more test speakers do). With S seeds the difference's standard error is about
sqrt(sd_seed^2 / S + sd_speaker^2), and its interval resolves a true effect d with probability
`power` where (t(0.975, S-1) + t(power, S-1)) x that error <= |d| (a two-sided test at 95%). A
non-inferiority test (parity, "matches within 3%") needs the same with d the margin, for a true
gap of zero. Effects: the paper's own figure where it is recorded (emasr.report.paper.CLAIMS)
and half of it; elsewhere the paper's EMA gain for the architecture stands in, and says so.
"""
from __future__ import annotations

import logging
import math
import os
import statistics
from dataclasses import dataclass

import click

from emasr.io.atomic import atomic_write

logger = logging.getLogger(__name__)

MAX_SEEDS = 64
POWER = 0.8
PLANNED_SEEDS = 8      # the verdict's seeds: how much larger dev and test must be for them
SIZES = (1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32)   # multiples of the sets' size tried


@dataclass
class Need:
    """One comparison's spreads and the seeds it needs for each effect."""
    arch: str
    workers: int
    what: str                       # the comparison in words
    seeds: int                      # seeds in the counts
    cer_a: float
    seed_sd: float                  # points
    speaker_sd: float               # points
    # (label, relative %, seeds needed, the sets' size needed at PLANNED_SEEDS; None: beyond)
    effects: list[tuple[str, float, int | None, float | None]]


def seeds_needed(effect: float, seed_sd: float, speaker_sd: float, power: float = POWER
                 ) -> int | None:
    """The fewest seeds (2..MAX_SEEDS) whose interval resolves `effect` points with `power`;
    None where even MAX_SEEDS do not (the speakers' spread alone is too wide)."""
    from emasr.report.intervals import student_t_quantile

    for seeds in range(2, MAX_SEEDS + 1):
        error = math.sqrt(seed_sd ** 2 / seeds + speaker_sd ** 2)
        quantiles = student_t_quantile(0.975, seeds - 1) + student_t_quantile(power, seeds - 1)
        if quantiles * error <= abs(effect):
            return seeds
    return None


def size_needed(effect: float, seed_sd: float, speaker_sd: float, power: float) -> float | None:
    """How many times larger dev and test must be (speakers and utterances alike, so the
    speakers' spread shrinks with its square root) for PLANNED_SEEDS seeds to resolve `effect`."""
    for size in SIZES:
        found = seeds_needed(effect, seed_sd, speaker_sd / math.sqrt(size), power)
        if found is not None and found <= PLANNED_SEEDS:
            return size
    return None


def comparison_need(c, replicates, effects: list[tuple[str, float]], power: float) -> Need:
    seed_sd = statistics.stdev(c.seed_differences.values()) if len(c.seed_differences) > 1 \
        else math.nan
    speaker_sd = replicates.speaker_spread(lambda x: x[..., 1] - x[..., 0], c.set_name)
    from emasr.report.findings import name

    what = f"{name(c.b)} - {name(c.a)}" + (" (dev: parity)" if c.set_name == "dev" else "")
    planned = []
    for label, rel in effects:
        points = rel / 100.0 * c.cer_a
        known = not math.isnan(seed_sd)
        planned.append((label, rel, seeds_needed(points, seed_sd, speaker_sd, power) if known
                        else None,
                        size_needed(points, seed_sd, speaker_sd, power) if known else None))
    return Need(c.arch, c.workers, what, len(c.seed_differences), c.cer_a, seed_sd, speaker_sd,
                planned)


def claim_effects(claim, arch: str) -> list[tuple[str, float]]:
    """The effects to plan for: the paper's own figure and half of it; the margin for a
    non-inferiority claim; the paper's EMA gain where the claim's own is not recorded."""
    from emasr.report.findings import PARITY
    from emasr.report.paper import CLAIMS

    if claim is None or claim.kind == "no_worse":
        return [(f"margin {PARITY:g}%, true gap 0", PARITY)]
    figure = claim.paper.get(arch)
    label = "the paper's"
    if figure is None:
        figure, label = CLAIMS[0].paper.get(arch, -8.4), "the paper's EMA gain"
    return [(f"{label} {figure:+.1f}%", figure), (f"half: {figure / 2:+.1f}%", figure / 2)]


def needs(counts_dir: str, replications: int, power: float) -> list[Need]:
    from emasr.report.counts import read_counts
    from emasr.report.findings import parity_tests
    from emasr.report.paper import CLAIMS
    from emasr.report.intervals import bootstrap
    from emasr.report.rows import build_rows, comparisons, find_row

    networks, _, options = read_counts(counts_dir)
    rows = build_rows(networks, options["archs"], options["labels"], replications)
    out = []
    for parity in parity_tests(rows, replications):
        if parity.comparison is not None and parity.rows[1] is not None:
            replicates = bootstrap([parity.rows[1].system, parity.rows[0].system], replications)
            out.append(comparison_need(parity.comparison, replicates,
                                       claim_effects(None, parity.arch), power))
    claims = {(c.a, c.b): c for c in CLAIMS}
    for c in comparisons(rows, replications):
        claim = claims.get((c.a, c.b))
        if claim is None or c.workers == 1:
            continue
        a, b = find_row(rows, c.arch, c.a, c.workers), find_row(rows, c.arch, c.b, c.workers)
        replicates = bootstrap([a.system, b.system], replications)
        out.append(comparison_need(c, replicates, claim_effects(claim, c.arch), power))
    return out


def render(title: str, found: list[Need], notes: list[str], power: float) -> str:
    lines = [f"# {title}", ""] + [f"- {n}" for n in notes] + [""]
    lines += [
        f"Seeds needed for a 95% interval to resolve each effect with probability {power:.0%} "
        "(emasr.report.power): with S seeds the difference's standard error is about "
        "sqrt(sd_seed^2 / S + sd_speaker^2); sd_seed is the spread of the per-seed differences "
        "(training runs), sd_speaker the bootstrap's spread with these seeds held fixed (the "
        "test speakers, which more seeds cannot shrink). \"none\": more than "
        f"{MAX_SEEDS} seeds, or never, with these speakers. The last column: how many times "
        f"larger dev and test must be (speakers and utterances alike) for {PLANNED_SEEDS} seeds to "
        "resolve it (the speakers' spread shrinking with the square root of the size; the "
        f"seeds' spread, which holds some speaker noise too, held as it is); \"none\": more than "
        f"{SIZES[-1]}x. Effects are relative to A's CER.", "",
        "| arch | workers | B - A | seeds in counts | A CER | sd seed (points) | "
        "sd speaker (points) | effect | seeds needed | dev/test size for "
        f"{PLANNED_SEEDS} seeds |", "|---|---|---|---|---|---|---|---|---|---|"]
    for need in found:
        for label, _, seeds, size in need.effects:
            lines.append(f"| {need.arch.upper()} | {need.workers} | {need.what} | {need.seeds} | "
                         f"{need.cer_a:.2f} | {need.seed_sd:.3f} | {need.speaker_sd:.3f} | "
                         f"{label} | {'none' if seeds is None else seeds} | "
                         f"{'none' if size is None else f'{size:g}x'} |")
    return "\n".join(lines) + "\n"


@click.command("power")
@click.option("--counts-dir", required=True, type=click.Path(file_okay=False),
              help="A report's committed counts (emasr report's counts/).")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="Markdown file to write (POWER.md beside the report, say).")
@click.option("--replications", default=2000, show_default=True, type=click.IntRange(100),
              help="Bootstrap replications for the speakers' spread.")
@click.option("--power", "power", default=POWER, show_default=True,
              type=click.FloatRange(0.5, 0.99), help="Probability of resolving the effect.")
@click.option("--title", default="Seeds needed, planned from the committed counts",
              show_default=True)
@click.option("--note", "notes", multiple=True, help="A line under the title (repeatable).")
def power_cli(counts_dir, out, replications, power, title, notes) -> None:
    """Plan a verdict's seeds from a report's committed counts: for every claim of the paper and
    every parity test the report makes, the spreads between seeds and between speakers of the
    difference, and the seeds needed to resolve an effect of the paper's size and of half of it
    (a parity test: the 3% margin for a true gap of zero)."""
    from emasr.report.scoring import ScoringError

    try:
        found = needs(counts_dir, replications, power)
    except ScoringError as err:
        raise click.ClickException(str(err)) from None
    text = render(title, found, [f"counts: {os.path.normpath(counts_dir)}", *notes], power)
    with atomic_write(out) as f:
        f.write(text)
    logger.info("wrote %s (%d comparisons)", out, len(found))
