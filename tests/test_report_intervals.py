"""Intervals that count seeds (emasr.report.intervals) against known truths."""
from __future__ import annotations

import numpy as np
import pytest

from emasr.report.intervals import (SeedMatrix, bootstrap, cer_interval, difference,
                                    student_t_quantile, t_interval)

TRUE_CER = 10.0   # percent: the mean of the Beta(2, 18) utterance difficulties below


def synthetic(rng: np.random.Generator, utts: int = 120, seeds: int = 3,
              seed_sd: float = 0.02) -> SeedMatrix:
    """Decodes of `utts` utterances by `seeds` training runs: an utterance's difficulty is shared
    by every seed (so its decodes are correlated), and each run shifts every error rate by its
    own amount (training variance, sd `seed_sd`); the expected CER is TRUE_CER."""
    chars = rng.integers(6, 16, utts)
    difficulty = rng.beta(2, 18, utts)
    shift = rng.normal(0.0, seed_sd, seeds)
    errors = np.stack([rng.binomial(chars, np.clip(difficulty + s, 0, 1)) for s in shift])
    return SeedMatrix(tuple(range(1, seeds + 1)), tuple(f"u{i:03d}" for i in range(utts)),
                      errors, chars)


def pooled_interval(m: SeedMatrix, replications: int, rng: np.random.Generator):
    """The interval that treats every (seed, utterance) decode as an independent sample."""
    errors, chars = m.errors.ravel(), np.tile(m.chars, len(m.seeds))
    draws = rng.integers(0, len(errors), size=(replications, len(errors)))
    return np.quantile(100.0 * errors[draws].sum(1) / chars[draws].sum(1), [0.025, 0.975])


def test_the_seed_aware_interval_is_wider_than_the_pooled_one_and_covers_the_known_mean():
    rng = np.random.default_rng(0)
    datasets = 60
    covered = pooled_covered = 0
    for _ in range(datasets):
        m = synthetic(rng)
        interval = cer_interval(m, 1000)
        low, high = pooled_interval(m, 1000, rng)
        assert interval.high - interval.low > high - low
        assert interval.low <= m.cer <= interval.high and interval.seeds == 3
        covered += interval.low <= TRUE_CER <= interval.high
        pooled_covered += low <= TRUE_CER <= high
    # measured with these seeds: 54 and 40 of 60; the pooled one misses the training variance
    assert covered >= 0.85 * datasets
    assert pooled_covered <= 0.75 * datasets


def test_one_seed_leaves_the_utterance_level_and_identical_seeds_add_nothing():
    rng = np.random.default_rng(1)
    one = synthetic(rng, seeds=1)
    assert cer_interval(one, 2000).seeds == 1
    # the same decodes three times over: the seed level draws copies, the interval is unchanged
    three = SeedMatrix((1, 2, 3), one.utts, np.repeat(one.errors, 3, axis=0), one.chars)
    a, b = cer_interval(one, 2000), cer_interval(three, 2000)
    assert (a.low, a.high) == pytest.approx((b.low, b.high), abs=0.3)


def test_a_difference_pairs_utterances_and_seeds():
    rng = np.random.default_rng(2)
    a = synthetic(rng)
    # B makes one error fewer on every fourth utterance where A made one: on the same utterances
    # a clear gain, although each system's own interval overlaps the other's
    fewer = np.zeros_like(a.errors)
    fewer[:, ::4] = 1
    b = SeedMatrix(a.seeds, a.utts, np.maximum(a.errors - fewer, 0), a.chars)
    points, relative = difference(a, b, 2000)
    assert points.estimate == pytest.approx(b.cer - a.cer)
    assert points.interval().high < 0 and relative.interval().high < 0
    ia, ib = cer_interval(a, 2000), cer_interval(b, 2000)
    assert ib.high > ia.low     # the separate intervals overlap
    # the contrast is computed on the utterances both decoded
    shorter = b.restricted(b.utts[:50])
    assert difference(a, shorter, 100)[0].utterances == 50


def test_the_bootstrap_is_seeded_and_checks_its_inputs():
    rng = np.random.default_rng(3)
    a = synthetic(rng)
    assert np.array_equal(bootstrap([a], 500).cers, bootstrap([a], 500).cers)
    other_refs = SeedMatrix(a.seeds, a.utts, a.errors, a.chars + 1)
    with pytest.raises(ValueError, match=r"utterance u000: reference lengths differ"):
        difference(a, other_refs, 10)
    with pytest.raises(ValueError, match=r"counts of shape \(3, 120\) and \(5,\)"):
        SeedMatrix(a.seeds, a.utts, a.errors, a.chars[:5])


@pytest.mark.parametrize("df, quantile", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281),
                                          (30, 2.0423)])
def test_student_t_quantiles_match_the_tables(df, quantile):
    assert student_t_quantile(0.975, df) == pytest.approx(quantile, abs=1e-3)
    assert student_t_quantile(0.025, df) == pytest.approx(-quantile, abs=1e-3)


def test_the_t_interval_of_per_seed_differences():
    interval = t_interval([-1.0, -2.0, -3.0])
    assert interval.estimate == -2.0
    assert (interval.low, interval.high) == pytest.approx((-2 - 4.3027 / 3 ** 0.5,
                                                           -2 + 4.3027 / 3 ** 0.5), abs=1e-3)
    assert t_interval([1.0]) is None
