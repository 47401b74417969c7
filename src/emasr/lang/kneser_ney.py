"""Interpolated modified Kneser-Ney n-gram estimation (Chen & Goodman 1998), as KenLM's lmplz does.

1. Counts: each sentence is `<s> w1 .. wk </s>`; every n-gram (n <= order) that ends on a word
   after <s> is counted.
2. Adjusted counts a(g): raw counts at the top order and for n-grams that start with <s>; otherwise
   the number of distinct words seen to the left of g (the continuation count).
3. Discounts per order from the counts-of-counts t1..t4 of the adjusted counts:
   Y = t1/(t1 + 2 t2), D1 = 1 - 2Y t2/t1, D2 = 2 - 3Y t3/t2, D3+ = 3 - 4Y t4/t3.
   Small corpora can leave some t_k at 0 or a D_k outside (0, k]; then every D_k of that order
   falls back to Y (or 0.5 when Y is undefined), i.e. plain Kneser-Ney with one discount, logged.
4. p(w | h) = (a(hw) - D(a(hw))) / S(h) + gamma(h) p(w | h'), with S(h) = sum_w a(hw),
   gamma(h) = (D1 N1(h) + D2 N2(h) + D3+ N3+(h)) / S(h), h' = h without its first word; the unigram
   level interpolates with the uniform distribution over the vocabulary (without <s>).
The ARPA back-off weight of a context h is gamma(h): with interpolated estimates stored for listed
n-grams, back-off reproduces the interpolated model exactly.
"""
from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from typing import Iterable

from emasr.lang.arpa import BOS, EOS, ArpaModel

logger = logging.getLogger(__name__)

Discounts = tuple[float, float, float]


def count_ngrams(sentences: Iterable[list[str]], order: int) -> list[Counter]:
    """Raw counts per order (index n-1), n-grams as tuples."""
    counts = [Counter() for _ in range(order)]
    for words in sentences:
        padded = [BOS] + words + [EOS]
        for end in range(1, len(padded)):
            for n in range(1, min(order, end + 1) + 1):
                counts[n - 1][tuple(padded[end - n + 1:end + 1])] += 1
    return counts


def adjusted_counts(counts: list[Counter]) -> list[Counter]:
    """Continuation counts below the top order, raw counts at the top and for <s>-initial n-grams."""
    adjusted = [Counter() for _ in counts]
    adjusted[-1] = Counter(counts[-1])
    for n in range(len(counts) - 1):
        for gram, count in counts[n].items():
            if gram[0] == BOS:
                adjusted[n][gram] = count
        for longer in counts[n + 1]:
            if longer[1] != BOS:
                adjusted[n][longer[1:]] += 1
    return adjusted


def estimate_discounts(counts: Iterable[int], order: int = 0) -> Discounts:
    """(D1, D2, D3+) from counts-of-counts, with the plain-KN fallback described above."""
    t = Counter(c for c in counts if 1 <= c <= 4)
    t1, t2, t3, t4 = (t[k] for k in (1, 2, 3, 4))
    y = t1 / (t1 + 2 * t2) if t1 + 2 * t2 > 0 else 0.5
    if min(t1, t2, t3, t4) > 0:
        d = (1 - 2 * y * t2 / t1, 2 - 3 * y * t3 / t2, 3 - 4 * y * t4 / t3)
        if all(0 < dk <= k for k, dk in enumerate(d, 1)):
            return d
    y = y if 0 < y < 1 else 0.5
    logger.info("order %d: counts-of-counts t1..t4 = %d %d %d %d give no valid modified-KN "
                "discounts; using one discount %.3f", order, t1, t2, t3, t4, y)
    return (y, y, y)


def discount(d: Discounts, count: int) -> float:
    return d[min(count, 3) - 1]


def train_kneser_ney(sentences: Iterable[list[str]], order: int = 3, vocabulary: Iterable[str] = (),
                     discounts: list[Discounts] | None = None) -> ArpaModel:
    """Estimate an interpolated modified-KN model; `vocabulary` adds words unseen in the text.

    `discounts` (one triple per order, unigrams first) overrides the estimates (tests use it to
    check hand-computed probabilities).
    """
    adjusted = adjusted_counts(count_ngrams(sentences, order))
    if discounts is None:
        discounts = [estimate_discounts(a.values(), n + 1) for n, a in enumerate(adjusted)]
    vocab = ({g[0] for g in adjusted[0]} | set(vocabulary) | {EOS}) - {BOS}
    model = ArpaModel([{} for _ in range(order)])
    lower: dict[tuple[str, ...], float] = {}     # p(w | h') of the previous order, by n-gram
    gammas: list[dict[tuple[str, ...], float]] = []
    for n in range(order):
        totals, gamma = context_stats(adjusted[n], discounts[n])
        gammas.append(gamma)
        probs = {}
        if n == 0:
            for word in sorted(vocab):
                a = adjusted[0].get((word,), 0)
                seen = (a - discount(discounts[0], a)) / totals[()] if a else 0.0
                probs[(word,)] = seen + gamma[()] / len(vocab)
        else:
            for gram, a in adjusted[n].items():
                h = gram[:-1]
                probs[gram] = ((a - discount(discounts[n], a)) / totals[h]
                               + gamma[h] * lower[gram[1:]])
        for gram, p in probs.items():
            model.ngrams[n][gram] = (math.log10(p), 0.0)
        lower = {**lower, **probs}
    model.ngrams[0][(BOS,)] = (-99.0, 0.0)
    attach_backoffs(model, gammas)
    return model


def context_stats(adjusted: Counter, d: Discounts):
    """Per context h: S(h) = sum of adjusted counts, and gamma(h)."""
    totals: dict[tuple[str, ...], int] = defaultdict(int)
    mass: dict[tuple[str, ...], float] = defaultdict(float)
    for gram, a in adjusted.items():
        totals[gram[:-1]] += a
        mass[gram[:-1]] += discount(d, a)
    return totals, {h: mass[h] / totals[h] for h in totals}


def attach_backoffs(model: ArpaModel, gammas: list[dict]) -> None:
    """bow(h) = log10 gamma(h) on each listed n-gram that is a context of the next order."""
    for n in range(model.order - 1):
        for h, gamma in gammas[n + 1].items():
            if h in model.ngrams[n]:
                logprob, _ = model.ngrams[n][h]
                model.ngrams[n][h] = (logprob, math.log10(gamma) if gamma > 0 else -99.0)
