"""Bootstrap confidence intervals of a CER and the probability that one system improves on another
on the same utterances (Bisani and Ney 2004; emasr.score.compare.bootstrap, i.e. kaldialign's
version of Kaldi's compute-wer-bootci). Utterance keys may be any sortable ids, e.g. (seed, utt)
when several seeds are pooled."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

from emasr.score.compare import bootstrap

REPLICATIONS = 10000

Texts = Mapping[Hashable, Sequence[str]]


@dataclass(frozen=True)
class Interval:
    cer: float     # percent: bootstrap mean
    low: float     # percent: 95% interval
    high: float

    def __str__(self) -> str:
        return f"{self.cer:.2f} [{self.low:.2f}, {self.high:.2f}]"


def cer_interval(refs: Texts, hyps: Texts, replications: int = REPLICATIONS) -> Interval | None:
    """95% interval of the CER over the utterances of `refs` (None when there are none)."""
    if not refs:
        return None
    result = bootstrap(refs, hyps, replications=replications)
    return Interval(100.0 * result["wer"], 100.0 * result["ci95min"], 100.0 * result["ci95max"])


def improvement_probability(refs: Texts, hyps_a: Texts, hyps_b: Texts,
                            replications: int = REPLICATIONS) -> float | None:
    """P(system B has a lower CER than system A) over bootstrap resamples of the same utterances."""
    if not refs:
        return None
    return float(bootstrap(refs, hyps_a, hyps_b, replications=replications)["p_s2_improv_over_s1"])
