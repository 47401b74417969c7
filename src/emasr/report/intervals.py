"""Intervals that count speakers, seeds and the choices made on dev: a bootstrap of CERs and of
contrasts between systems.

What is resampled, and why:
- **Speakers, as clusters.** The decodes of one speaker's utterances share the speaker (voice,
  rate, channel), and the decodes of one utterance by several seeds' models share the utterance:
  each replicate draws the set's speakers with replacement, and every utterance of a drawn
  speaker comes with it, decoded by every seed of every system (which pairs the systems). Dev
  and test have different speakers and are drawn independently. Where the scoring recorded no
  speaker for an utterance, the utterance is its own cluster.
- **The choices made on dev.** A system's test CER is read at the model and scoring setting that
  dev chose (the EMA's half-life, the LM weight, the insertion penalty): each replicate chooses
  them again on its own dev draw, per seed, and reads that seed's test errors at its choice, so
  the interval carries the noise of the choice. Holding a dev-chosen LM weight fixed understates
  it (a setting that is best on this dev by luck is not best on another).
- **Seeds, with Student's t.** Three training runs are too few for a percentile bootstrap of
  seeds (3 seeds give 10 distinct draws, and the bootstrap's normal-like tails under-cover).
  Each replicate's statistic is the one of the seed means plus T * s / sqrt(S): T drawn from
  Student's t with S - 1 degrees of freedom, s the standard deviation of the per-seed statistics
  on the data as they are (the per-seed differences, where the systems share their seeds:
  paired). It is a little conservative: s also holds the part of the speakers' noise that differs
  from seed to seed, which the speaker level carries too.
  One seed leaves the speaker level alone: such an interval speaks for these speakers, not for
  another training run.

A system's CER in a replicate is its errors over its reference characters, summed over the drawn
speakers' utterances, per seed, then the mean over seeds; a contrast is any statistic of the
systems' CERs computed in every replicate (B - A for a difference, (D - C) / C - (B - A) / A for
a difference of relative gains). The 95% percentile interval is the default level;
`Contrast.interval(level)` gives any other from the same replicates (a family-wise level over
several comparisons). `t_interval` gives Student's t-interval of per-seed values beside it.
"""
from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

REPLICATIONS = 10000
LEVEL = 0.95
CHUNK = 1000       # replicates computed together (bounds the memory of the weight matrices)
SETS = ("dev", "test")


@dataclass(frozen=True)
class SetCounts:
    """One system's counts on one set: for each seed, errors[s][c, u] of candidate c (a model and
    a scoring setting that dev chooses among; candidate 0 is the one dev chose on the whole set)
    on utterance u; chars[u] its reference characters; clusters[u] its speaker."""
    utts: tuple[str, ...]
    clusters: tuple[str, ...]
    chars: np.ndarray                   # int [U]
    errors: tuple[np.ndarray, ...]      # per seed, int [C_s, U]

    def __post_init__(self) -> None:
        shapes = [e.shape for e in self.errors]
        if self.chars.shape != (len(self.utts),) or len(self.clusters) != len(self.utts) or \
                any(len(s) != 2 or s[1] != len(self.utts) or s[0] < 1 for s in shapes):
            raise ValueError(f"counts of shapes {shapes} and {self.chars.shape} for "
                             f"{len(self.utts)} utterances")

    @property
    def candidates(self) -> tuple[int, ...]:
        return tuple(e.shape[0] for e in self.errors)

    def restricted(self, utts: Sequence[str]) -> "SetCounts":
        index = {u: i for i, u in enumerate(self.utts)}
        columns = [index[u] for u in utts]
        return SetCounts(tuple(utts), tuple(self.clusters[i] for i in columns),
                         self.chars[columns], tuple(e[:, columns] for e in self.errors))


@dataclass(frozen=True)
class System:
    """What the bootstrap resamples of one table row (or one model): its seeds, and its counts on
    dev and on test with the same candidates per seed. Without dev counts nothing is chosen
    again: every seed has one test candidate, the setting chosen once."""
    seeds: tuple[int, ...]
    dev: SetCounts | None
    test: SetCounts | None

    def __post_init__(self) -> None:
        for counts in (self.dev, self.test):
            if counts is not None and len(counts.errors) != len(self.seeds):
                raise ValueError(f"counts for {len(counts.errors)} seeds, expected "
                                 f"{len(self.seeds)}")
        if self.dev is not None and self.test is not None and \
                self.dev.candidates != self.test.candidates:
            raise ValueError(f"{self.dev.candidates} candidates per seed on dev but "
                             f"{self.test.candidates} on test")
        if self.dev is None and self.test is not None and set(self.test.candidates) != {1}:
            raise ValueError("test candidates without dev counts to choose among them")

    def counts(self, set_name: str) -> SetCounts | None:
        return self.dev if set_name == "dev" else self.test

    @property
    def rechooses(self) -> bool:
        """Whether dev chooses among several candidates for some seed."""
        return self.dev is not None and max(self.dev.candidates) > 1


@dataclass(frozen=True)
class Interval:
    estimate: float    # percent (points for a contrast): on the data as they are
    low: float
    high: float
    level: float = LEVEL
    seeds: int = 1     # the seed level's size (1: speakers only)

    def __str__(self) -> str:
        return f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}]"

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Contrast:
    """A statistic of the systems' CERs (a difference, say), with its sorted bootstrap replicates."""
    estimate: float
    replicates: np.ndarray
    seeds: int                       # the smallest number of seeds among the systems
    utterances: int
    speakers: int = 0                # clusters resampled (0: unknown)

    def interval(self, level: float = LEVEL) -> Interval:
        """The percentile interval; NaN bounds where the statistic is undefined in some replicate
        (a relative change of a CER that is 0 there): no interval is better than a biased one."""
        if not np.all(np.isfinite(self.replicates)):
            return Interval(self.estimate, math.nan, math.nan, level, self.seeds)
        tail = (1.0 - level) / 2.0
        low, high = np.quantile(self.replicates, [tail, 1.0 - tail])
        return Interval(self.estimate, float(low), float(high), level, self.seeds)


@dataclass(frozen=True)
class Replicates:
    """Per set, each system's per-seed CERs (percent): on the data as they are (`estimates`,
    [S_j] each) and in each bootstrap replicate (`cers`, [replications, S_j] each), with the
    Student-t draws of the seed level (one per distinct seed tuple)."""
    seeds: tuple[tuple[int, ...], ...]
    estimates: dict[str, list[np.ndarray]]
    cers: dict[str, list[np.ndarray]]
    t_draws: dict[tuple[int, ...], np.ndarray]
    utterances: dict[str, int]
    speakers: dict[str, int]

    def contrast(self, statistic: Callable[[np.ndarray], np.ndarray],
                 set_name: str = "test") -> Contrast:
        """`statistic` maps CERs along the last axis (c[..., 1] - c[..., 0], say)."""
        if set_name not in self.cers:
            raise ValueError(f"no {set_name} counts for every system compared")
        estimates = np.array([e.mean() for e in self.estimates[set_name]])
        per_seed = self.cers[set_name]
        with np.errstate(divide="ignore", invalid="ignore"):
            values = self.seed_level(statistic, per_seed, self.estimates[set_name])
            estimate = float(statistic(estimates))
        return Contrast(estimate, np.sort(values), min(len(s) for s in self.seeds),
                        self.utterances[set_name], self.speakers[set_name])

    def speaker_spread(self, statistic: Callable[[np.ndarray], np.ndarray],
                       set_name: str = "test") -> float:
        """The standard deviation of the statistic of the seed means over the replicates: the
        speaker level alone (these seeds held fixed), what more seeds cannot shrink."""
        means = np.stack([c.mean(axis=1) for c in self.cers[set_name]], axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.std(statistic(means), ddof=1))

    def seed_level(self, statistic: Callable[[np.ndarray], np.ndarray],
                   per_seed: list[np.ndarray], observed: list[np.ndarray]) -> np.ndarray:
        """The statistic of the replicate's seed means, plus T * s / sqrt(S): s the spread of
        the per-seed statistics on the data as they are (paired: of the per-seed differences)
        where every system ran the same seeds, else each system's mean moved by its own seed
        tuple's draw (s of its per-seed CERs). The observed spread, not each replicate's: a
        resampled seed's value varies by the speakers drawn too, which the speaker level
        already carries."""
        means = np.stack([c.mean(axis=1) for c in per_seed], axis=-1)       # [R, J]
        if len(set(self.seeds)) == 1:
            seeds = self.seeds[0]
            values = statistic(means)
            if len(seeds) > 1:
                spread = float(np.std(statistic(np.stack(observed, axis=-1)), ddof=1))
                values = values + self.t_draws[seeds] * spread / math.sqrt(len(seeds))
            return values
        moved = [c.mean(axis=1) + (self.t_draws[s] * np.std(o, ddof=1) / math.sqrt(len(s))
                                   if len(s) > 1 else 0.0)
                 for c, o, s in zip(per_seed, observed, self.seeds)]
        return statistic(np.stack(moved, axis=-1))


def common_utterances(counts: Sequence[SetCounts]) -> tuple[str, ...]:
    shared = set(counts[0].utts).intersection(*(c.utts for c in counts[1:]))
    return tuple(sorted(shared))


def check_references(counts: Sequence[SetCounts], set_name: str) -> None:
    """Systems compared on an utterance must have scored it against the same reference length,
    and placed it with the same speaker."""
    first = counts[0]
    for other in counts[1:]:
        for name, a, b in (("reference lengths", first.chars, other.chars),
                           ("speakers", first.clusters, other.clusters)):
            if not np.array_equal(np.asarray(a), np.asarray(b)):
                bad = next(u for u, x, y in zip(first.utts, a, b) if x != y)
                raise ValueError(f"{set_name} utterance {bad}: {name} differ between the systems "
                                 "compared (decoded against different data dirs?)")


@dataclass(frozen=True)
class Clustered:
    """One set's counts summed per cluster: chars [K], and per system and seed errors [C, K]."""
    chars: np.ndarray
    errors: list[list[np.ndarray]]

    def cers(self, weights: np.ndarray, choices: list[list[np.ndarray]] | None = None
             ) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
        """Per system [R, S] CERs under cluster `weights` [R, K]: at the given candidate choices
        ([R] per system and seed), or at each seed's lowest (dev's own choice); and the choices."""
        drawn = weights @ self.chars
        out, chosen = [], []
        for j, system in enumerate(self.errors):
            per_seed, picks = [], []
            for s, errors in enumerate(system):
                sums = weights @ errors.T                                         # [R, C]
                pick = sums.argmin(axis=1) if choices is None else choices[j][s]
                picks.append(pick)
                per_seed.append(100.0 * sums[np.arange(len(sums)), pick] / drawn)
            out.append(np.stack(per_seed, axis=1))
            chosen.append(picks)
        return out, chosen


def clustered(counts: Sequence[SetCounts]) -> Clustered:
    clusters = {c: k for k, c in enumerate(sorted(set(counts[0].clusters)))}
    index = np.array([clusters[c] for c in counts[0].clusters])
    member = np.zeros((len(index), len(clusters)))
    member[np.arange(len(index)), index] = 1.0
    return Clustered(counts[0].chars @ member,
                     [[e @ member for e in c.errors] for c in counts])


def cluster_weights(rng: np.random.Generator, clusters: int, count: int) -> np.ndarray:
    """[count, clusters]: how often each cluster is drawn in `clusters` draws with replacement,
    per replicate (a multinomial, counted with one bincount)."""
    drawn = rng.integers(0, clusters, size=(count, clusters))
    flat = (drawn + clusters * np.arange(count)[:, None]).ravel()
    return np.bincount(flat, minlength=count * clusters).reshape(count, clusters).astype(float)


def aligned(systems: Sequence[System], set_name: str) -> list[SetCounts] | None:
    """Every system's counts on a set, on the utterances all of them decoded (None: a system has
    no counts on it)."""
    counts = [s.counts(set_name) for s in systems]
    if any(c is None for c in counts):
        return None
    utts = common_utterances(counts)
    if not utts:
        raise ValueError(f"the systems have no {set_name} utterance in common")
    counts = [c.restricted(utts) for c in counts]
    check_references(counts, set_name)
    return counts


def bootstrap(systems: Sequence[System], replications: int = REPLICATIONS,
              seed: int = 0) -> Replicates:
    """The bootstrap of the systems' dev and test CERs (each set where every system has counts):
    speakers resampled as clusters, dev's choices made again in every replicate, seeds by
    Student's t. Systems compared share the utterance draws (paired)."""
    if not systems:
        raise ValueError("no system to resample")
    dev, test = aligned(systems, "dev"), aligned(systems, "test")
    if dev is None and any(s.rechooses for s in systems):
        raise ValueError("a system chooses on dev, but not every system compared has dev counts")
    if dev is None and test is None:
        raise ValueError("the systems have no set with counts for every one of them")
    sets = {name: clustered(c) for name, c in (("dev", dev), ("test", test)) if c is not None}
    rng = np.random.default_rng(seed)
    seed_tuples = tuple(s.seeds for s in systems)
    t_draws = {s: rng.standard_t(len(s) - 1, replications) if len(s) > 1 else np.zeros(1)
               for s in dict.fromkeys(seed_tuples)}
    cers: dict[str, list[list[np.ndarray]]] = {name: [] for name in sets}
    for start in range(0, replications, CHUNK):
        count = min(CHUNK, replications - start)
        draws = {name: cluster_weights(rng, len(c.chars), count) for name, c in sets.items()}
        for name, chunk in replicate_cers(sets, draws).items():
            cers[name].append(chunk)
    ones = {name: np.ones((1, len(c.chars))) for name, c in sets.items()}
    estimates = {name: [c[0] for c in chunk] for name, chunk in replicate_cers(sets, ones).items()}
    counts = {"dev": dev, "test": test}
    return Replicates(seed_tuples, estimates,
                      {name: [np.concatenate([chunk[j] for chunk in parts])
                              for j in range(len(systems))] for name, parts in cers.items()},
                      t_draws, {name: len(counts[name][0].utts) for name in sets},
                      {name: len(set(counts[name][0].clusters)) for name in sets})


def replicate_cers(sets: dict[str, Clustered], weights: dict[str, np.ndarray]
                   ) -> dict[str, list[np.ndarray]]:
    """Per set, each system's [R, S] CERs: dev at each seed's best candidate on the draw, test at
    the candidate dev chose in the same replicate (the only candidate where dev has no counts)."""
    out, choices = {}, None
    if "dev" in sets:
        out["dev"], choices = sets["dev"].cers(weights["dev"])
    if "test" in sets:
        if choices is None:
            count = len(weights["test"])
            choices = [[np.zeros(count, dtype=int) for _ in system]
                       for system in sets["test"].errors]
        out["test"] = sets["test"].cers(weights["test"], choices)[0]
    return out


def cer_interval(system: System, set_name: str = "test", replications: int = REPLICATIONS,
                 level: float = LEVEL) -> Interval:
    """The interval of one system's CER (percent) on a set."""
    return bootstrap([system], replications).contrast(lambda c: c[..., 0],
                                                      set_name).interval(level)


def difference(a: System, b: System, replications: int = REPLICATIONS, set_name: str = "test"
               ) -> tuple[Contrast, Contrast]:
    """CER_B - CER_A on their common utterances, in points and in percent of CER_A (negative: B
    is better), from the same replicates."""
    replicates = bootstrap([a, b], replications)
    return (replicates.contrast(lambda c: c[..., 1] - c[..., 0], set_name),
            replicates.contrast(lambda c: 100.0 * (c[..., 1] - c[..., 0]) / c[..., 0], set_name))


# -- per-seed differences and Student's t ------------------------------------------------------

def student_t_cdf(x: float, df: int) -> float:
    """P(T <= x) for Student's t with `df` degrees of freedom: Simpson's rule on the density over
    [0, |x|] in the variable atan(t) (a finite interval, smooth integrand)."""
    if x == 0:
        return 0.5
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    steps = 2000
    theta = np.linspace(0.0, math.atan(abs(x)), steps + 1)
    t = np.tan(theta)   # f(tan theta) x d tan(theta) / d theta
    density = np.exp(log_norm - (df + 1) / 2 * np.log1p(t * t / df)) / np.cos(theta) ** 2
    weights = np.where(np.arange(steps + 1) % 2 == 1, 4.0, 2.0)
    weights[0] = weights[-1] = 1.0
    half = float(weights @ density) * (theta[1] - theta[0]) / 3
    return 0.5 + half if x > 0 else 0.5 - half


@functools.lru_cache(maxsize=None)
def student_t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t (bisection on the CDF; remembered: a power analysis asks for
    the same few many times)."""
    if not 0 < p < 1 or df < 1:
        raise ValueError(f"quantile needs 0 < p < 1 and df >= 1, got p={p}, df={df}")
    if p < 0.5:
        return -student_t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if student_t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2


def t_interval(values: Sequence[float], level: float = LEVEL) -> Interval | None:
    """Student's t-interval of the mean of per-seed values (None with fewer than two)."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    half = student_t_quantile(0.5 + level / 2, len(values) - 1) * statistics.stdev(values) \
        / math.sqrt(len(values))
    return Interval(mean, mean - half, mean + half, level, len(values))
