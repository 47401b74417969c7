"""The numbers of each table row, and the comparisons between rows, with intervals that count seeds.

A row is (arch, label, workers): the same strategy at several worker counts gives several rows.
Its runs are one per seed (each the best of its grid on dev). Its CER on a set is all errors over
all reference characters of its seeds' decodes (the mean of the per-seed CERs, which the table
also shows), with the two-level bootstrap interval of emasr.report.intervals: utterances resampled
as clusters, seeds as a second level. A comparison of two rows is the interval of their
difference on the same utterances (seeds paired where both rows ran the same seeds), beside the
per-seed differences, their signs and their t-interval. Test CERs are at the setting chosen on dev
(`test`); Kaldi's best-on-test (`test_best`) is kept as a secondary number, without an interval.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace

import numpy as np

from emasr.nnet.averages import WARM, warm_twin
from emasr.report.intervals import (LEVEL, Contrast, Interval, SeedMatrix, cer_interval,
                                    difference, t_interval)
from emasr.report.scoring import ScoredDecode
from emasr.report.systems import (GmmSystem, NetworkRun, candidate_runs, grid, parse_label,
                                  select_runs, worker_counts)

SUMMARIES = ("dev", "test", "test_best")
WITH_INTERVALS = ("dev", "test")


@dataclass
class CerSummary:
    cer: float                          # percent, from the scoring's %WER counts of every seed
    errors: int
    total: int
    seeds: dict[int, float] = field(default_factory=dict)   # seed -> its CER
    matrix: SeedMatrix | None = None    # per-utterance counts (None: some seed has none)
    interval: Interval | None = None
    failed: int = 0                     # utterances without a hypothesis (counted as deletions)
    settings: list[tuple[str, str]] = field(default_factory=list)   # (LM weight, penalty) per seed
    grids: list[list[str]] = field(default_factory=list)            # the LM weights swept


@dataclass
class Row:
    arch: str
    label: str                  # single | ma | bmuf, optionally +ema / +ema-warm / +avg / +lastk
    runs: list[NetworkRun]
    workers_key: int | None = None      # the worker count of the row (None: not run)
    cer: dict[str, CerSummary] = field(default_factory=dict)   # dev | test | test_best -> summary
    candidates: list[NetworkRun] = field(default_factory=list)  # every run the row chose among

    @property
    def model(self) -> str:
        return parse_label(self.label)[1]

    @property
    def base(self) -> str:
        return parse_label(self.label)[0]

    @property
    def key(self) -> tuple[str, str, int | None]:
        return self.arch, self.label, self.workers_key

    @property
    def ran(self) -> bool:
        return bool(self.runs)

    @property
    def grid(self) -> dict[str, list]:
        """The settings the candidates differ in, searched on dev ({}: nothing was tuned)."""
        return grid(self.candidates)

    def mean(self, values) -> float | None:
        values = [v for v in values if v is not None]
        return statistics.fmean(values) if values else None

    def dev_acc(self) -> float | None:
        return self.mean(r.dev_acc(self.model) for r in self.runs)

    def chosen_epochs(self) -> list[int]:
        """The epoch each run's model is from, where dev chose it (train.final_epoch)."""
        return [e for e in (r.file_epoch(r.chosen(self.model)) for r in self.runs) if e is not None]

    def total(self, key: str) -> float | None:
        return self.mean(r.metrics.final.get(key) for r in self.runs)

    def workers(self) -> str:
        counts = sorted({r.workers for r in self.runs if r.workers is not None})
        return ",".join(map(str, counts)) or "?"

    def learning_rates(self) -> str:
        """The configured rates; 'x N' where each worker ran at N times it (Kaldi's MA rule)."""
        rates = sorted({(r.lr, r.workers if r.lr_times_workers else None) for r in self.runs},
                       key=lambda item: (item[0], item[1] or 0))
        return ",".join(f"{lr:g}" + (f" (x{n})" if n else "") for lr, n in rates)

    def regime(self) -> dict | None:
        """The regime of the row's first run (its seeds share it)."""
        return next((r.regime for r in self.runs if r.regime), None)


def seed_matrix(decodes: list[tuple[int, ScoredDecode]]) -> SeedMatrix | None:
    """The per-utterance counts of a row's seeds on the utterances every seed decoded."""
    if not decodes or not all(d.has_utterances for _, d in decodes):
        return None
    utts = sorted(set.intersection(*(set(d.utterances) for _, d in decodes)))
    if not utts:
        return None
    errors = np.array([[d.utterances[u][0] for u in utts] for _, d in decodes], dtype=np.int64)
    chars = np.array([decodes[0][1].utterances[u][1] for u in utts], dtype=np.int64)
    return SeedMatrix(tuple(seed for seed, _ in decodes), tuple(utts), errors, chars)


def summarize(decodes: list[tuple[int, ScoredDecode]], replications: int,
              with_interval: bool = True) -> CerSummary | None:
    if not decodes:
        return None
    errors = sum(d.errors for _, d in decodes)
    total = sum(d.total for _, d in decodes)
    matrix = seed_matrix(decodes) if with_interval else None
    return CerSummary(100.0 * errors / total if total else math.nan, errors, total,
                      seeds={seed: d.cer for seed, d in decodes}, matrix=matrix,
                      interval=cer_interval(matrix, replications) if matrix else None,
                      failed=sum(d.failed for _, d in decodes),
                      settings=[(d.lmwt, d.wip) for _, d in decodes],
                      grids=[d.lmwts for _, d in decodes])


def build_row(networks: list[NetworkRun], arch: str, label: str, workers: int | None,
              replications: int) -> Row:
    runs = select_runs(networks, arch, label, workers) if workers is not None else []
    candidates = candidate_runs(networks, arch, label, workers) if runs else []
    row = Row(arch, label, runs, workers, candidates=candidates)
    for set_name in SUMMARIES:
        decodes = [(r.seed, r.decode(set_name, row.model)) for r in row.runs
                   if r.decode(set_name, row.model) is not None]
        summary = summarize(decodes, replications, set_name in WITH_INTERVALS)
        if summary is not None:
            row.cer[set_name] = summary
    return row


def build_rows(networks: list[NetworkRun], archs: list[str], labels: list[str],
               replications: int) -> list[Row]:
    """A row per (arch, label, worker count that ran); a label without runs gets one row."""
    return [build_row(networks, arch, label, workers, replications) for arch in archs
            for label in labels for workers in worker_counts(networks, arch, label)]


def gmm_summary(system: GmmSystem, replications: int) -> dict[str, CerSummary]:
    out = {}
    for set_name in SUMMARIES:
        decode = system.tuned.get(set_name)
        if decode is not None:
            out[set_name] = summarize([(0, decode)], replications, set_name in WITH_INTERVALS)
    return out


def find_row(rows: list[Row], arch: str, label: str, workers: int | None) -> Row | None:
    """The row of `label` at `workers` (a single-worker label's row whatever `workers` is)."""
    for row in rows:
        if row.arch == arch and row.label == label and row.ran and (
                row.base == "single" or row.workers_key == workers):
            return row
    return None


def relative_change(row: Row, reference: Row | None, set_name: str = "test") -> float | None:
    """Relative CER change of `row` against `reference`, in percent (negative = better)."""
    if reference is None or set_name not in row.cer or set_name not in reference.cer:
        return None
    base = reference.cer[set_name].cer
    return 100.0 * (row.cer[set_name].cer - base) / base if base else None


@dataclass
class Comparison:
    """B against A on the same utterances: `difference` is CER_B - CER_A in points (negative: B
    is better), `relative` the same in percent of CER_A."""
    arch: str
    a: str                 # row labels
    b: str
    workers: int | None    # the worker count of the parallel row(s) compared
    cer_a: float
    cer_b: float
    difference: Contrast
    relative: Contrast
    seed_differences: dict[int, float]   # seeds both rows ran: CER_B - CER_A of that seed's runs
    family: int = 1                      # comparisons in the report (for the family-wise level)
    seed_cers_a: dict[int, float] = field(default_factory=dict)   # CER_A of those seeds' runs
    half_life: str | None = None   # frames: both at this half-life, not each at its dev-chosen one

    @property
    def interval(self) -> Interval:
        return self.difference.interval(LEVEL)

    @property
    def resolved(self) -> bool:
        return self.interval.excludes_zero() and self.seeds_agree(self.interval)

    @property
    def family_level(self) -> float:
        return 1.0 - (1.0 - LEVEL) / max(1, self.family)

    @property
    def resolved_family_wise(self) -> bool:
        interval = self.difference.interval(self.family_level)
        return interval.excludes_zero() and self.seeds_agree(interval)

    def seeds_agree(self, interval: Interval) -> bool:
        """Whether every seed's own difference lies on the side of zero the interval claims.
        With two or three seeds the bootstrap's seed level has only 3-10 distinct draws, so one
        seed against the others can hide in its 2.5% tail: an ordering that a training run of
        its own contradicts is not claimed."""
        values = self.seed_differences.values()
        return all(v < 0 for v in values) if interval.high < 0 else all(v > 0 for v in values)

    @property
    def seeds(self) -> int:
        return self.difference.seeds

    @property
    def utterances(self) -> int:
        return self.difference.utterances

    def seed_relative(self) -> list[float]:
        """Each seed's B - A in percent of its own A run's CER."""
        return [100.0 * d / self.seed_cers_a[s] for s, d in self.seed_differences.items()
                if self.seed_cers_a.get(s)]

    def t(self) -> Interval | None:
        return t_interval(list(self.seed_differences.values()))

    def signs(self) -> str:
        """'2/3 B better' style: the seeds whose B run beats their A run, of the seeds both ran."""
        values = list(self.seed_differences.values())
        return f"{sum(v < 0 for v in values)}/{len(values)}"


def compare(a: Row, b: Row, replications: int, set_name: str = "test") -> Comparison | None:
    """B against A on the utterances both decoded, with every seed of each."""
    parallel = [r.workers_key for r in (a, b) if r.base != "single"]
    return compare_summaries(a.arch, a.label, b.label, parallel[0] if parallel else 1,
                             a.cer.get(set_name), b.cer.get(set_name), replications)


def compare_summaries(arch: str, a: str, b: str, workers: int | None, sa: CerSummary | None,
                      sb: CerSummary | None, replications: int) -> Comparison | None:
    if sa is None or sb is None or sa.matrix is None or sb.matrix is None:
        return None
    points, relative = difference(sa.matrix, sb.matrix, replications)
    both = sorted(sa.seeds.keys() & sb.seeds)
    return Comparison(arch, a, b, workers, sa.cer, sb.cer, points, relative,
                      {s: sb.seeds[s] - sa.seeds[s] for s in both},
                      seed_cers_a={s: sa.seeds[s] for s in both})


def model_summary(runs: list[NetworkRun], model: str, replications: int,
                  set_name: str = "test") -> CerSummary | None:
    """A kept model's CER over the runs' seeds (None: a run did not decode it)."""
    tuned = [r.tuned.get(model) for r in runs]
    if not runs or any(t is None or t.get(set_name) is None for t in tuned):
        return None
    return summarize([(r.seed, t.get(set_name)) for r, t in zip(runs, tuned)], replications)


def warm_start_by_half_life(ema: Row, replications: int) -> list[Comparison]:
    """The EMA after BMUF's warm-up against the one from the first sync at every half-life the
    runs kept, not only the one dev chose: where the start matters (the warm-up's weight in the
    EMA from the first sync fades with the half-life)."""
    models = [m for m in ema.runs[0].variants("ema") if all(m in r.averages for r in ema.runs)]
    if len(models) < 2:
        return []   # one EMA: the rows' comparison is this one
    out = []
    for model in models:
        twin = warm_twin(model)
        found = compare_summaries(ema.arch, f"{ema.base}+{model}", f"{ema.base}+{twin}",
                                  ema.workers_key, model_summary(ema.runs, model, replications),
                                  model_summary(ema.runs, twin, replications), replications)
        if found is not None:
            out.append(replace(found, half_life=model[len("ema_"):]))
    return out


def ladder_comparisons(gmms: list[tuple[str, dict[str, CerSummary]]], replications: int,
                       set_name: str = "test") -> list[Contrast | None]:
    """For each GMM system after the first, its test CER minus the one before it's, on the same
    utterances, each at its dev-chosen setting (None: not both decoded)."""
    out: list[Contrast | None] = [None] if gmms else []
    for (_, before), (_, after) in zip(gmms, gmms[1:]):
        a, b = before.get(set_name), after.get(set_name)
        out.append(difference(a.matrix, b.matrix, replications)[0]
                   if a and b and a.matrix and b.matrix else None)
    return out


# (A, B) pairs compared on the same test utterances at each worker count: B is the paper's
# proposed or preferred system, or the EMA against one of its controls, or the EMA started after
# BMUF's warm-up against the one started at the first sync (WARM_START).
WARM_START = ("bmuf+ema", f"bmuf+{WARM}")
COMPARISONS = [("bmuf", "bmuf+ema"), ("ma", "ma+ema"), ("ma", "bmuf"), ("single", "bmuf+ema"),
               ("single", "bmuf"), ("single", "single+ema"),
               *((f"{base}+{control}", f"{base}+ema") for base in ("single", "ma", "bmuf")
                 for control in ("avg", "lastk")), WARM_START]


def comparisons(rows: list[Row], replications: int) -> list[Comparison]:
    out, seen = [], set()
    for arch in dict.fromkeys(r.arch for r in rows):
        counts = sorted({r.workers_key for r in rows if r.arch == arch and r.ran})
        for workers in counts:
            for a, b in COMPARISONS:
                ra, rb = find_row(rows, arch, a, workers), find_row(rows, arch, b, workers)
                if ra is None or rb is None or (ra.key, rb.key) in seen:
                    continue
                seen.add((ra.key, rb.key))
                result = compare(ra, rb, replications)
                if result is not None:
                    out.append(result)
                if (a, b) == WARM_START:
                    out += warm_start_by_half_life(ra, replications)
    return out
