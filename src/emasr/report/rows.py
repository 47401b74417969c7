"""The numbers of each table row: seeds pooled, CER intervals, training cost, and same-utterance
comparisons between rows.

With several seeds a row's CER is pooled over (seed, utterance) pairs: total errors over total
reference characters, with the bootstrap resampling those pairs. Comparisons between two rows
pair the same utterance decoded by the same seed's runs.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from emasr.report.intervals import Interval, cer_interval, improvement_probability
from emasr.report.systems import SETS, GmmSystem, NetworkRun, select_runs
from emasr.report.scoring import ScoredDecode

Key = tuple[int, str]   # (seed, utterance)


@dataclass
class CerSummary:
    cer: float                          # percent, pooled from the scoring's best_cer counts
    errors: int
    total: int
    interval: Interval | None           # None without per-utterance results
    utterances: dict[Key, tuple[list[str], list[str]]] = field(default_factory=dict)


@dataclass
class Row:
    arch: str
    label: str                          # single | ma | bmuf | ma+ema | bmuf+ema
    runs: list[NetworkRun]
    cer: dict[str, CerSummary] = field(default_factory=dict)   # set -> summary

    @property
    def model(self) -> str:
        return "ema" if self.label.endswith("+ema") else "final"

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
        return ",".join(f"{lr:g}" for lr in sorted({r.lr for r in self.runs}))

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
    return CerSummary(cer, errors, total, interval, utterances)


def build_row(networks: list[NetworkRun], arch: str, label: str, replications: int) -> Row:
    row = Row(arch, label, select_runs(networks, arch, label))
    for set_name in SETS:
        decodes = [(r.seed, r.decodes[(set_name, row.model)]) for r in row.runs
                   if (set_name, row.model) in r.decodes]
        summary = summarize(decodes, replications)
        if summary is not None:
            row.cer[set_name] = summary
    return row


def build_rows(networks: list[NetworkRun], archs: list[str], labels: list[str],
               replications: int) -> list[Row]:
    return [build_row(networks, arch, label, replications) for arch in archs for label in labels]


def gmm_summary(system: GmmSystem, replications: int) -> dict[str, CerSummary]:
    out = {}
    for set_name, decode in system.decodes.items():
        summary = summarize([(0, decode)], replications)
        if summary is not None:
            out[set_name] = summary
    return out


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
    cer_a: float
    cer_b: float
    utterances: int
    p_b_better: float | None     # P(B has the lower CER); ties count for neither
    p_a_better: float | None
    intervals_overlap: bool | None = None   # the two rows' 95% CER intervals (None: no interval)
    seeds_b_better: int = 0      # seeds whose run of B has the lower CER than that seed's A
    seeds_a_better: int = 0
    seeds: int = 0               # seeds with both rows decoded


def compare(a: Row, b: Row, replications: int, set_name: str = "test") -> Comparison | None:
    """P(row B has a lower CER than row A) on the (seed, utterance) pairs both decoded."""
    if set_name not in a.cer or set_name not in b.cer:
        return None
    ua, ub = a.cer[set_name].utterances, b.cer[set_name].utterances
    keys = set(ua) & set(ub)
    refs = {k: ua[k][0] for k in keys}
    hyps_a, hyps_b = {k: ua[k][1] for k in keys}, {k: ub[k][1] for k in keys}
    p_b = improvement_probability(refs, hyps_a, hyps_b, replications) if keys else None
    p_a = improvement_probability(refs, hyps_b, hyps_a, replications) if keys else None
    ia, ib = a.cer[set_name].interval, b.cer[set_name].interval
    overlap = None if ia is None or ib is None else ia.low <= ib.high and ib.low <= ia.high
    cers_a, cers_b = seed_cers(a, set_name), seed_cers(b, set_name)
    both = cers_a.keys() & cers_b.keys()
    return Comparison(a.arch, a.label, b.label, a.cer[set_name].cer, b.cer[set_name].cer,
                      len(keys), p_b, p_a, overlap,
                      seeds_b_better=sum(cers_b[s] < cers_a[s] for s in both),
                      seeds_a_better=sum(cers_a[s] < cers_b[s] for s in both), seeds=len(both))


def seed_cers(row: Row, set_name: str) -> dict[int, float]:
    """Seed -> CER of that seed's run on `set_name` (runs without that decode are left out)."""
    return {r.seed: r.decodes[(set_name, row.model)].cer for r in row.runs
            if (set_name, row.model) in r.decodes}


# (A, B) pairs compared on the same test utterances: B is the paper's proposed or preferred system.
COMPARISONS = [("bmuf", "bmuf+ema"), ("ma", "ma+ema"), ("ma", "bmuf"), ("single", "bmuf+ema"),
               ("single", "bmuf")]


def comparisons(rows: list[Row], replications: int) -> list[Comparison]:
    by_key = {(r.arch, r.label): r for r in rows}
    out = []
    for arch in dict.fromkeys(r.arch for r in rows):
        for a, b in COMPARISONS:
            ra, rb = by_key.get((arch, a)), by_key.get((arch, b))
            if ra is not None and rb is not None:
                result = compare(ra, rb, replications)
                if result is not None:
                    out.append(result)
    return out
