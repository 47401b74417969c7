"""The numbers of each table row, and the comparisons between rows, with intervals that count
speakers, seeds and the choices made on dev.

A row is (arch, label, workers): the same strategy at several worker counts gives several rows.
Its runs are one per seed (each the best of its grid on dev). Its CER on a set is all errors over
all reference characters of its seeds' decodes (the mean of the per-seed CERs, which the table
also shows), with the bootstrap interval of emasr.report.intervals: speakers resampled as
clusters, the model and scoring setting chosen again on each replicate's dev (the candidates of
emasr.report.candidates), seeds by Student's t. A comparison of two rows is the interval of their
difference on the same utterances (seeds paired where both rows ran the same seeds), beside the
per-seed differences, their signs and their t-interval. Test CERs are at the setting chosen on dev
(`test`); Kaldi's best-on-test (`test_best`) is kept as a secondary number, without an interval.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace

import numpy as np

from emasr.nnet.averages import AVERAGED_MODELS, EMA, WARM, warm_twin
from emasr.nnet.sync import RULES
from emasr.report.candidates import tuned_system
from emasr.report.intervals import (LEVEL, SETS, Contrast, Interval, System, bootstrap,
                                    difference, t_interval)
from emasr.report.paper import CLAIMS
from emasr.report.scoring import ScoredDecode
from emasr.report.systems import (GmmSystem, NetworkRun, TunedDecodes, candidate_runs, grid,
                                  parse_label, select_runs, worker_counts)

SUMMARIES = ("dev", "test", "test_best")
WITH_INTERVALS = ("dev", "test")


@dataclass
class CerSummary:
    cer: float                          # percent, from the scoring's %WER counts of every seed
    errors: int
    total: int
    seeds: dict[int, float] = field(default_factory=dict)   # seed -> its CER
    interval: Interval | None = None    # None: some seed has no per-utterance counts
    failed: int = 0                     # utterances without a hypothesis (counted as deletions)
    settings: list[tuple[str, str]] = field(default_factory=list)   # (LM weight, penalty) per seed
    grids: list[list[str]] = field(default_factory=list)            # the LM weights swept


@dataclass
class Row:
    arch: str
    label: str                  # a sync rule, optionally +<averaged model> (emasr.report.systems)
    runs: list[NetworkRun]
    workers_key: int | None = None      # the worker count of the row (None: not run)
    cer: dict[str, CerSummary] = field(default_factory=dict)   # dev | test | test_best -> summary
    candidates: list[NetworkRun] = field(default_factory=list)  # every run the row chose among
    system: System | None = None        # what the bootstrap resamples (None: no per-utt counts)

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


def summarize(decodes: list[tuple[int, ScoredDecode]]) -> CerSummary | None:
    if not decodes:
        return None
    errors = sum(d.errors for _, d in decodes)
    total = sum(d.total for _, d in decodes)
    return CerSummary(100.0 * errors / total if total else math.nan, errors, total,
                      seeds={seed: d.cer for seed, d in decodes},
                      failed=sum(d.failed for _, d in decodes),
                      settings=[(d.lmwt, d.wip) for _, d in decodes],
                      grids=[d.lmwts for _, d in decodes])


def family_candidates(run: NetworkRun, model: str) -> list[TunedDecodes]:
    """The decodes dev chooses a family's model among on one run: the chosen one first, then the
    others the run kept (the EMA per half-life); none where the chosen one was not decoded."""
    chosen = run.chosen(model)
    if chosen not in run.tuned:
        return []
    return [run.tuned[m] for m in dict.fromkeys([chosen, *run.variants(model)]) if m in run.tuned]


def add_intervals(summaries: dict[str, CerSummary], system: System | None,
                  replications: int) -> None:
    """Each set's interval from one bootstrap of the system (dev at its own choice, test at the
    choice dev made in the same replicate)."""
    if system is None:
        return
    replicates = bootstrap([system], replications)
    for set_name in SETS:
        if set_name in summaries and set_name in replicates.cers:
            interval = replicates.contrast(lambda c: c[..., 0], set_name).interval(LEVEL)
            # the seed level's t can reach below 0 with few seeds; a CER cannot
            summaries[set_name].interval = replace(interval, low=max(0.0, interval.low))


def build_row(networks: list[NetworkRun], arch: str, label: str, workers: int | None,
              replications: int) -> Row:
    runs = select_runs(networks, arch, label, workers) if workers is not None else []
    candidates = candidate_runs(networks, arch, label, workers) if runs else []
    row = Row(arch, label, runs, workers, candidates=candidates)
    for set_name in SUMMARIES:
        decodes = [(r.seed, r.decode(set_name, row.model)) for r in row.runs
                   if r.decode(set_name, row.model) is not None]
        summary = summarize(decodes)
        if summary is not None:
            row.cer[set_name] = summary
    if row.runs:
        row.system = tuned_system([(r.seed, family_candidates(r, row.model)) for r in row.runs])
    add_intervals(row.cer, row.system, replications)
    return row


def build_rows(networks: list[NetworkRun], archs: list[str], labels: list[str],
               replications: int) -> list[Row]:
    """A row per (arch, label, worker count that ran); a label without runs gets one row."""
    return [build_row(networks, arch, label, workers, replications) for arch in archs
            for label in labels for workers in worker_counts(networks, arch, label)]


@dataclass
class GmmRow:
    name: str
    cer: dict[str, CerSummary]
    system: System | None


def gmm_summary(system: GmmSystem, replications: int) -> GmmRow:
    out = {}
    for set_name in SUMMARIES:
        decode = system.tuned.get(set_name)
        if decode is not None:
            out[set_name] = summarize([(0, decode)])
    resampled = tuned_system([(0, [system.tuned])])
    add_intervals(out, resampled, replications)
    return GmmRow(system.name, out, resampled)


def find_row(rows: list[Row], arch: str, label: str, workers: int | None) -> Row | None:
    """The row of `label` at `workers` (a single-worker label's row whatever `workers` is)."""
    for row in rows:
        if row.arch == arch and row.label == label and row.ran and (
                not RULES[row.base].parallel or row.workers_key == workers):
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
    set_name: str = "test"

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
        """Whether every seed's own difference lies on the side of zero the interval claims: an
        ordering that a training run of its own contradicts is not claimed, whatever the
        interval (with many seeds one can disagree inside a resolved interval)."""
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
    parallel = [r.workers_key for r in (a, b) if RULES[r.base].parallel]
    return compare_systems(a.arch, a.label, b.label, parallel[0] if parallel else 1,
                           (a.cer.get(set_name), a.system), (b.cer.get(set_name), b.system),
                           replications, set_name)


Compared = tuple[CerSummary | None, System | None]


def compare_systems(arch: str, a: str, b: str, workers: int | None, sa: Compared, sb: Compared,
                    replications: int, set_name: str = "test") -> Comparison | None:
    (summary_a, system_a), (summary_b, system_b) = sa, sb
    if summary_a is None or summary_b is None or system_a is None or system_b is None or \
            system_a.counts(set_name) is None or system_b.counts(set_name) is None:
        return None
    points, relative = difference(system_a, system_b, replications, set_name)
    both = sorted(summary_a.seeds.keys() & summary_b.seeds)
    return Comparison(arch, a, b, workers, summary_a.cer, summary_b.cer, points, relative,
                      {s: summary_b.seeds[s] - summary_a.seeds[s] for s in both},
                      seed_cers_a={s: summary_a.seeds[s] for s in both}, set_name=set_name)


def model_summary(runs: list[NetworkRun], model: str, set_name: str = "test") -> Compared:
    """A kept model's CER over the runs' seeds, and its system (the LM weight chosen on dev, the
    model fixed); (None, None) where a run did not decode it."""
    tuned = [r.tuned.get(model) for r in runs]
    if not runs or any(t is None or t.get(set_name) is None for t in tuned):
        return None, None
    return (summarize([(r.seed, t.get(set_name)) for r, t in zip(runs, tuned)]),
            tuned_system([(r.seed, [t]) for r, t in zip(runs, tuned)]))


def warm_start_by_half_life(ema: Row, replications: int) -> list[Comparison]:
    """The EMA after BMUF's warm-up against the one from the first sync at every half-life the
    runs kept, not only the one dev chose: where the start matters (the warm-up's weight in the
    EMA from the first sync fades with the half-life)."""
    models = [m for m in ema.runs[0].variants(EMA) if all(m in r.averages for r in ema.runs)]
    if len(models) < 2:
        return []   # one EMA: the rows' comparison is this one
    out = []
    for model in models:
        twin = warm_twin(model)
        found = compare_systems(ema.arch, f"{ema.base}+{model}", f"{ema.base}+{twin}",
                                ema.workers_key, model_summary(ema.runs, model),
                                model_summary(ema.runs, twin), replications)
        if found is not None:
            out.append(replace(found, half_life=model[len(EMA) + 1:]))
    return out


def ladder_comparisons(gmms: list[GmmRow], replications: int,
                       set_name: str = "test") -> list[Contrast | None]:
    """For each GMM system after the first, its test CER minus the one before it's, on the same
    utterances, each at its dev-chosen setting (None: not both decoded)."""
    out: list[Contrast | None] = [None] if gmms else []
    for before, after in zip(gmms, gmms[1:]):
        a, b = before.system, after.system
        out.append(difference(a, b, replications, set_name)[0]
                   if a and b and a.counts(set_name) and b.counts(set_name) else None)
    return out


def warm_start(a: str, b: str) -> bool:
    """Whether A against B is the EMA from the first sync against the one started after the
    rule's warm-up (then each half-life the runs kept is compared too)."""
    return a.partition("+")[2] == EMA and b.partition("+")[2] == WARM


def comparison_pairs() -> list[tuple[str, str]]:
    """The (A, B) row labels compared on the same test utterances at each worker count, B the
    proposed or preferred system: the paper's claims (emasr.report.paper), then what each
    registry entry says it is compared with: a rule's global model against each rule of its
    `compared_with`; for every rule, each averaged model against its `compared_with` of the same
    runs (the global model, or the EMA against each of its controls); last the averaged models
    compared with another that is not their control (the EMA after BMUF's warm-up against the one
    from the first sync)."""
    pairs = [(c.a, c.b) for c in CLAIMS]
    pairs += [(a, rule.name) for rule in RULES.values() for a in rule.compared_with]
    kept = {rule: [m for m in AVERAGED_MODELS.values() if m.applies_to(rule) and m.compared_with]
            for rule in RULES}
    for rule, models in kept.items():
        pairs += [(rule, f"{rule}+{m.name}") for m in models if m.compared_with == "final"]
        pairs += [(f"{rule}+{m.name}", f"{rule}+{m.compared_with}") for m in models if m.control]
    for rule, models in kept.items():
        pairs += [(f"{rule}+{m.compared_with}", f"{rule}+{m.name}") for m in models
                  if m.compared_with != "final" and not m.control]
    return list(dict.fromkeys(pairs))


def comparisons(rows: list[Row], replications: int) -> list[Comparison]:
    out, seen = [], set()
    for arch in dict.fromkeys(r.arch for r in rows):
        counts = sorted({r.workers_key for r in rows if r.arch == arch and r.ran})
        for workers in counts:
            for a, b in comparison_pairs():
                ra, rb = find_row(rows, arch, a, workers), find_row(rows, arch, b, workers)
                if ra is None or rb is None or (ra.key, rb.key) in seen:
                    continue
                seen.add((ra.key, rb.key))
                result = compare(ra, rb, replications)
                if result is not None:
                    out.append(result)
                if warm_start(a, b):
                    out += warm_start_by_half_life(ra, replications)
    return out
