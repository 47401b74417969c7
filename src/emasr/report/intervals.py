"""Intervals that count seeds: a two-level bootstrap of CERs and of contrasts between systems.

The decodes of one utterance by several seeds' models are not independent samples: they share the
utterance (its length, its difficulty). So the bootstrap resamples *utterances as clusters* (every
seed's decode of a drawn utterance comes with it, and with it every other system's decode of it)
and, as a second level, *seeds* (each replicate draws S of the S seeds with replacement; systems
run with the same seeds draw the same ones, which pairs them). One seed leaves only the utterance
level: such an interval speaks for these test utterances, not for another training run.

A system's CER in a replicate is its errors over its reference characters, summed over the drawn
utterances and seeds; a contrast is any statistic of the systems' CERs computed in every replicate
(B - A for a difference, (D - C) / C - (B - A) / A for a difference of relative gains). Beside the bootstrap, per-seed
differences get Student's t-interval (`t_interval`), which carries the seed variance alone and is
wide with few seeds. The 95% percentile interval is the default level; `Contrast.interval(level)`
gives any other from the same replicates (a family-wise level over several comparisons, say).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

REPLICATIONS = 10000
LEVEL = 0.95
CHUNK = 1000       # replicates computed together (bounds the memory of the weight matrices)


@dataclass(frozen=True)
class SeedMatrix:
    """One system's per-utterance counts: errors[s, u] of seed s on utterance u, chars[u] the
    reference characters of u (the same for every seed)."""
    seeds: tuple[int, ...]
    utts: tuple[str, ...]
    errors: np.ndarray      # int [S, U]
    chars: np.ndarray       # int [U]

    def __post_init__(self) -> None:
        if self.errors.shape != (len(self.seeds), len(self.utts)) or \
                self.chars.shape != (len(self.utts),):
            raise ValueError(f"counts of shape {self.errors.shape} and {self.chars.shape} for "
                             f"{len(self.seeds)} seeds and {len(self.utts)} utterances")

    @property
    def cer(self) -> float:
        """Percent: all errors over all reference characters (every seed counts the same)."""
        total = self.chars.sum() * len(self.seeds)
        return 100.0 * float(self.errors.sum()) / total if total else math.nan

    def seed_cers(self) -> dict[int, float]:
        total = self.chars.sum()
        return {s: 100.0 * float(row.sum()) / total if total else math.nan
                for s, row in zip(self.seeds, self.errors)}

    def restricted(self, utts: Sequence[str]) -> "SeedMatrix":
        index = {u: i for i, u in enumerate(self.utts)}
        columns = [index[u] for u in utts]
        return SeedMatrix(self.seeds, tuple(utts), self.errors[:, columns], self.chars[columns])


@dataclass(frozen=True)
class Interval:
    estimate: float    # percent (points for a contrast): on the data as they are
    low: float
    high: float
    level: float = LEVEL
    seeds: int = 1     # the seed level's size (1: utterances only)

    def __str__(self) -> str:
        return f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}]"

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class Contrast:
    """A statistic of the systems' CERs (a difference, say), with its sorted bootstrap replicates."""
    estimate: float
    replicates: np.ndarray
    seeds: int                       # the smallest number of seeds among the systems
    utterances: int

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
    """The systems' CERs (percent) on their common utterances, as they are (`estimates`, [k]) and
    in each bootstrap replicate (`cers`, [replications, k])."""
    estimates: np.ndarray
    cers: np.ndarray
    seeds: int
    utterances: int

    def contrast(self, statistic: Callable[[np.ndarray], np.ndarray]) -> Contrast:
        """`statistic` maps CERs along the last axis (c[..., 1] - c[..., 0], say)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return Contrast(float(statistic(self.estimates)), np.sort(statistic(self.cers)),
                            self.seeds, self.utterances)


def common_utterances(systems: Sequence[SeedMatrix]) -> tuple[str, ...]:
    shared = set(systems[0].utts).intersection(*(s.utts for s in systems[1:]))
    return tuple(sorted(shared))


def check_references(systems: Sequence[SeedMatrix]) -> None:
    """Systems compared on an utterance must have scored it against the same reference length."""
    first = systems[0]
    for other in systems[1:]:
        if not np.array_equal(first.chars, other.chars):
            bad = next(u for u, a, b in zip(first.utts, first.chars, other.chars) if a != b)
            raise ValueError(f"utterance {bad}: reference lengths differ between the systems "
                             "compared (decoded against different texts?)")


def seed_weights(rng: np.random.Generator, seeds: int, count: int) -> np.ndarray:
    """[count, seeds] multinomial counts: a draw of `seeds` seeds with replacement per replicate
    (one seed: always itself)."""
    if seeds == 1:
        return np.ones((count, 1))
    return rng.multinomial(seeds, np.full(seeds, 1.0 / seeds), size=count).astype(float)


def bootstrap(systems: Sequence[SeedMatrix], replications: int = REPLICATIONS,
              seed: int = 0) -> Replicates:
    """The two-level bootstrap of the systems' CERs on the utterances every one decoded. Systems
    run with the same seed tuple share their seed draws (paired by seed)."""
    if not systems:
        raise ValueError("no system to resample")
    utts = common_utterances(systems)
    if not utts:
        raise ValueError("the systems have no utterance in common")
    systems = [s.restricted(utts) for s in systems]
    check_references(systems)
    rng = np.random.default_rng(seed)
    chars = systems[0].chars.astype(float)
    groups = list(dict.fromkeys(s.seeds for s in systems))   # one seed draw per distinct seed set
    out = []
    for start in range(0, replications, CHUNK):
        count = min(CHUNK, replications - start)
        utt_weights = rng.multinomial(len(utts), np.full(len(utts), 1.0 / len(utts)), size=count)
        draws = {g: seed_weights(rng, len(g), count) for g in groups}
        drawn_chars = utt_weights @ chars                        # [count]
        out.append(np.stack([
            100.0 * ((draws[s.seeds] @ s.errors) * utt_weights).sum(axis=1)
            / (len(s.seeds) * drawn_chars) for s in systems], axis=1))
    return Replicates(np.array([s.cer for s in systems]), np.concatenate(out),
                      min(len(s.seeds) for s in systems), len(utts))


def cer_interval(system: SeedMatrix, replications: int = REPLICATIONS,
                 level: float = LEVEL) -> Interval:
    """The two-level interval of one system's CER (percent)."""
    return bootstrap([system], replications).contrast(lambda c: c[..., 0]).interval(level)


def difference(a: SeedMatrix, b: SeedMatrix, replications: int = REPLICATIONS
               ) -> tuple[Contrast, Contrast]:
    """CER_B - CER_A on their common utterances, in points and in percent of CER_A (negative: B
    is better), from the same replicates."""
    replicates = bootstrap([a, b], replications)
    return (replicates.contrast(lambda c: c[..., 1] - c[..., 0]),
            replicates.contrast(lambda c: 100.0 * (c[..., 1] - c[..., 0]) / c[..., 0]))


# -- per-seed differences and Student's t ------------------------------------------------------

def student_t_cdf(x: float, df: int) -> float:
    """P(T <= x) for Student's t with `df` degrees of freedom: Simpson's rule on the density over
    [0, |x|] in the variable atan(t) (a finite interval, smooth integrand)."""
    if x == 0:
        return 0.5
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def density_in_angle(theta: float) -> float:   # f(tan theta) x d tan(theta) / d theta
        t = math.tan(theta)
        return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df)) / math.cos(theta) ** 2

    steps = 2000
    top = math.atan(abs(x))
    h = top / steps
    area = density_in_angle(0.0) + density_in_angle(top)
    area += sum((4 if i % 2 else 2) * density_in_angle(i * h) for i in range(1, steps))
    half = area * h / 3
    return 0.5 + half if x > 0 else 0.5 - half


def student_t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t (bisection on the CDF)."""
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
