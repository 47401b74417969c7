"""The paper's claims (Tian et al. 2017), as data: which of its systems it compares, what it says
of them, and its own figures. They name the paper's systems (single, MA, BMUF and their EMAs);
everything else the report compares comes from the registries' entries (emasr.report.rows)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Claim:
    """One of the paper's claims: B against A. kind "better": B improves on A; "no_worse": B
    matches (within PARITY) or beats A. `paper`: the paper's own relative change of B against A
    (percent of A's CER) per architecture, where recorded here."""
    a: str
    b: str
    text: str
    kind: str
    paper: dict[str, float] = field(default_factory=dict)


CLAIMS = [
    Claim("bmuf", "bmuf+ema", "the EMA model improves on the global BMUF model", "better",
          {"dnn": -8.4, "lstm": -3.9}),
    Claim("ma", "ma+ema", "the EMA model improves on the global MA model", "better"),
    Claim("ma", "bmuf", "BMUF beats model averaging", "better"),
    Claim("single", "bmuf+ema", "BMUF+EMA with N workers matches or beats single-worker training",
          "no_worse"),
]
