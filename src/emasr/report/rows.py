"""The numbers of each table row: seeds pooled, CER intervals, training cost, and same-utterance
comparisons between rows.

With several seeds a row's CER is pooled over (seed, utterance) pairs: total errors over total
reference characters, with the bootstrap resampling those pairs. Comparisons between two rows
pair the same utterance decoded by the same seed's runs. A row is (arch, label, workers): the same
strategy at several worker counts gives several rows. Test CERs are at the setting chosen on dev
(`test`); Kaldi's best-on-test (`test_best`) is kept as a secondary number.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from emasr.report.intervals import Interval, Texts, cer_interval, improvement_probability
from emasr.report.systems import (GmmSystem, NetworkRun, parse_label, select_runs,
                                  worker_counts)
from emasr.report.scoring import ScoredDecode

Key = tuple[int, str]   # (seed, utterance)
SUMMARIES = ("dev", "test", "test_best")


@dataclass
class CerSummary:
    cer: float                          # percent, pooled from the scoring's best_cer counts
    errors: int
    total: int
    interval: Interval | None           # None without per-utterance results
    utterances: dict[Key, tuple[list[str], list[str]]] = field(default_factory=dict)
    failed: int = 0                     # utterances without a hypothesis (counted as deletions)
    settings: list[tuple[str, str]] = field(default_factory=list)   # (LM weight, penalty) per seed
    grids: list[list[str]] = field(default_factory=list)            # the LM weights swept


@dataclass
class Row:
    arch: str
    label: str                          # single | ma | bmuf, optionally +ema / +avg / +lastk
    runs: list[NetworkRun]
    workers_key: int | None = None      # the worker count of the row (None: not run)
    cer: dict[str, CerSummary] = field(default_factory=dict)   # dev | test | test_best -> summary

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

    def mean(self, values) -> float | None:
        values = [v for v in values if v is not None]
        return statistics.fmean(values) if values else None

    def dev_acc(self) -> float | None:
        return self.mean(r.dev_acc(self.model) for r in self.runs)

    def total(self, key: str) -> float | None:
        return self.mean(r.metrics.final.get(key) for r in self.runs)

    def workers(self) -> str:
        counts = sorted({r.workers for r in self.runs if r.workers is not None})
        return ",".join(map(str, counts)) or "?"

    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]

    def learning_rates(self) -> str:
        """The configured rates; 'x N' where each worker ran at N times it (Kaldi's MA rule)."""
        rates = sorted({(r.lr, r.workers if r.lr_times_workers else None) for r in self.runs},
                       key=lambda item: (item[0], item[1] or 0))
        return ",".join(f"{lr:g}" + (f" (x{n})" if n else "") for lr, n in rates)

    def seed_spread(self, set_name: str) -> float | None:
        """Standard deviation of the per-seed CERs (None with fewer than two seeds)."""
        cers = list(seed_cers(self, set_name).values())
        return statistics.stdev(cers) if len(cers) >= 2 else None


def summarize(decodes: list[tuple[int, ScoredDecode]], replications: int) -> CerSummary | None:
    if not decodes:
        return None
    errors = sum(d.errors for _, d in decodes)
    total = sum(d.total for _, d in decodes)
    utterances: dict[Key, tuple[list[str], list[str]]] = {}
    complete = all(d.has_utterances for _, d in decodes)
    if complete:
        for seed, d in decodes:
            for utt in d.refs:
                utterances[(seed, utt)] = (d.refs[utt], d.hyps[utt])
    interval = None
    if utterances:
        interval = cer_interval({k: r for k, (r, _) in utterances.items()},
                                {k: h for k, (_, h) in utterances.items()}, replications)
    cer = 100.0 * errors / total if total else math.nan
    return CerSummary(cer, errors, total, interval, utterances,
                      failed=sum(d.failed for _, d in decodes),
                      settings=[(d.lmwt, d.wip) for _, d in decodes],
                      grids=[d.lmwts for _, d in decodes])


def build_row(networks: list[NetworkRun], arch: str, label: str, workers: int | None,
              replications: int) -> Row:
    runs = select_runs(networks, arch, label, workers) if workers is not None else []
    row = Row(arch, label, runs, workers)
    for set_name in SUMMARIES:
        decodes = [(r.seed, r.tuned[row.model].get(set_name)) for r in row.runs
                   if row.model in r.tuned and r.tuned[row.model].get(set_name) is not None]
        summary = summarize(decodes, replications)
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
        summary = summarize([(0, decode)], replications) if decode is not None else None
        if summary is not None:
            out[set_name] = summary
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
    arch: str
    a: str                 # row labels: the probability is that B improves on A
    b: str
    workers: int | None    # the worker count of the parallel row(s) compared
    cer_a: float
    cer_b: float
    utterances: int
    p_b_better: float | None     # P(B has the lower CER); ties count for neither
    p_a_better: float | None
    intervals_overlap: bool | None = None   # the two rows' 95% CER intervals (None: no interval)
    seeds_b_better: int = 0      # seeds whose run of B has the lower CER than that seed's A
    seeds_a_better: int = 0
    seeds: int = 0               # seeds with both rows decoded


def paired_texts(a: CerSummary, b: CerSummary) -> tuple[Texts, Texts, Texts]:
    """References and the two systems' hypotheses on the (seed, utterance) pairs both decoded."""
    keys = set(a.utterances) & set(b.utterances)
    refs = {k: a.utterances[k][0] for k in keys}
    return refs, {k: a.utterances[k][1] for k in keys}, {k: b.utterances[k][1] for k in keys}


def ladder_probabilities(gmms: list[tuple[str, dict[str, CerSummary]]], replications: int,
                         set_name: str = "test") -> list[float | None]:
    """For each GMM system after the first, P(it has a lower CER on `set_name` than the system
    before it) on the same utterances, each at its dev-chosen setting (None: not both decoded)."""
    probabilities = [improvement_probability(*paired_texts(before[set_name], after[set_name]),
                                             replications)
                     if set_name in before and set_name in after else None
                     for (_, before), (_, after) in zip(gmms, gmms[1:])]
    return [None, *probabilities] if gmms else []


def compare(a: Row, b: Row, replications: int, set_name: str = "test") -> Comparison | None:
    """P(row B has a lower CER than row A) on the (seed, utterance) pairs both decoded."""
    if set_name not in a.cer or set_name not in b.cer:
        return None
    refs, hyps_a, hyps_b = paired_texts(a.cer[set_name], b.cer[set_name])
    p_b = improvement_probability(refs, hyps_a, hyps_b, replications)
    p_a = improvement_probability(refs, hyps_b, hyps_a, replications)
    ia, ib = a.cer[set_name].interval, b.cer[set_name].interval
    overlap = None if ia is None or ib is None else ia.low <= ib.high and ib.low <= ia.high
    cers_a, cers_b = seed_cers(a, set_name), seed_cers(b, set_name)
    both = cers_a.keys() & cers_b.keys()
    parallel = [r.workers_key for r in (a, b) if r.base != "single"]
    return Comparison(a.arch, a.label, b.label, parallel[0] if parallel else 1,
                      a.cer[set_name].cer, b.cer[set_name].cer,
                      len(refs), p_b, p_a, overlap,
                      seeds_b_better=sum(cers_b[s] < cers_a[s] for s in both),
                      seeds_a_better=sum(cers_a[s] < cers_b[s] for s in both), seeds=len(both))


def seed_cers(row: Row, set_name: str) -> dict[int, float]:
    """Seed -> CER of that seed's run on `set_name` (runs without that decode are left out)."""
    return {r.seed: r.decodes[(set_name, row.model)].cer for r in row.runs
            if (set_name, row.model) in r.decodes}


# (A, B) pairs compared on the same test utterances at each worker count: B is the paper's
# proposed or preferred system, or the EMA against one of its controls.
COMPARISONS = [("bmuf", "bmuf+ema"), ("ma", "ma+ema"), ("ma", "bmuf"), ("single", "bmuf+ema"),
               ("single", "bmuf"), ("single", "single+ema"),
               *((f"{base}+{control}", f"{base}+ema") for base in ("single", "ma", "bmuf")
                 for control in ("avg", "lastk"))]


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
    return out
