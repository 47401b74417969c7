"""The short text under the table: each of the paper's claims checked against the numbers, saying
"agrees", "disagrees" or "not resolved" (the difference is smaller than the intervals, or the
paired test is decisive but the intervals overlap and too few seeds agree)."""
from __future__ import annotations

from emasr.report.rows import Comparison, Row

CONFIDENT = 0.95   # P(B better) at or above: B is better; P(A better) at or above: B is worse

# (A, B, the claim, kind): "better" claims B improves on A; "no_worse" claims B matches or beats A.
CLAIMS = [
    ("bmuf", "bmuf+ema", "the EMA model improves on the global BMUF model", "better"),
    ("ma", "ma+ema", "the EMA model improves on the global MA model", "better"),
    ("ma", "bmuf", "BMUF beats model averaging", "better"),
    ("single", "bmuf+ema", "BMUF+EMA with N workers matches or beats single-worker training",
     "no_worse"),
]

NAMES = {"single": "single", "ma": "MA", "bmuf": "BMUF", "ma+ema": "MA+EMA", "bmuf+ema": "BMUF+EMA"}


def name(label: str) -> str:
    return NAMES.get(label, label)


# Seeds that must all order two systems the same way before an ordering is claimed although their
# 95% intervals overlap (the paired test alone speaks for these test utterances, not for reruns).
SEEDS_FOR_ORDERING = 3


def verdict(c: Comparison, kind: str) -> str:
    numbers = (f"test CER {c.cer_a:.2f} -> {c.cer_b:.2f}, P({name(c.b)} better) = "
               f"{c.p_b_better:.2f}, P({name(c.a)} better) = {c.p_a_better:.2f}, "
               f"on {c.utterances} utterance decodes")
    if c.p_b_better >= CONFIDENT:
        return decisive("agrees", c, c.seeds_b_better, numbers)
    if c.p_a_better is not None and c.p_a_better >= CONFIDENT:
        return decisive(f"disagrees: {name(c.b)} is worse", c, c.seeds_a_better, numbers)
    if kind == "no_worse":
        return (f"**agrees within the intervals**: the difference is smaller than the 95% "
                f"intervals ({numbers})")
    return (f"**not resolved**: the difference is smaller than the 95% intervals ({numbers}); "
            "more seeds are needed before claiming an ordering")


def decisive(finding: str, c: Comparison, seeds_agreeing: int, numbers: str) -> str:
    """A paired test at or above CONFIDENT: claimed outright when the intervals are apart, or when
    they overlap but every one of at least SEEDS_FOR_ORDERING seeds orders the two the same way."""
    if not c.intervals_overlap:
        return f"**{finding}** ({numbers})"
    seeds = f"{seeds_agreeing} of {c.seeds} seed(s) order them this way"
    if c.seeds >= SEEDS_FOR_ORDERING and seeds_agreeing == c.seeds:
        return (f"**{finding}** ({numbers}); the 95% intervals overlap, but the paired test is "
                f"decisive and all {seeds}")
    return (f"**{finding} on these utterances, not resolved across runs**: the paired test is "
            f"decisive but the 95% intervals overlap and {seeds} ({numbers}); more seeds are needed "
            f"before claiming an ordering (all of at least {SEEDS_FOR_ORDERING} must agree)")


def claim_lines(comparisons: list[Comparison]) -> list[str]:
    by_key = {(c.arch, c.a, c.b): c for c in comparisons}
    lines = []
    for arch in dict.fromkeys(c.arch for c in comparisons):
        for a, b, claim, kind in CLAIMS:
            c = by_key.get((arch, a, b))
            if c is None or c.p_b_better is None:
                continue
            lines.append(f"- {arch.upper()}: the paper says {claim}: {verdict(c, kind)}.")
    return lines


def speed_lines(rows: list[Row]) -> list[str]:
    """Wall time of N-worker BMUF against one worker (the paper's reason for parallel training)."""
    lines = []
    by_key = {(r.arch, r.label): r for r in rows}
    for arch in dict.fromkeys(r.arch for r in rows):
        single, bmuf = by_key.get((arch, "single")), by_key.get((arch, "bmuf"))
        if not (single and bmuf and single.ran and bmuf.ran):
            continue
        t1, tn = single.total("seconds_train"), bmuf.total("seconds_train")
        if not t1 or not tn:
            continue
        speedup = t1 / tn
        workers = bmuf.runs[0].workers or 0
        head = (f"- {arch.upper()}: the paper trains in parallel to cut wall time: BMUF with "
                f"{bmuf.workers()} workers took {tn:.0f} s against {t1:.0f} s for one worker "
                f"(speed-up {speedup:.2f}x): ")
        if workers and speedup > 1.2 * workers:
            lines.append(head + f"**not comparable**: more than {workers}x from {workers} workers "
                         "means the one-worker run was slowed by something else (e.g. its threads "
                         "competing for cores other jobs were using).")
        elif speedup > 1.05:
            lines.append(head + "**agrees**.")
        else:
            lines.append(head + ("**disagrees** here" if speedup < 0.95 else
                                 "**no measurable speed-up** here") +
                         " (the workers share this machine's cores, so no speed-up is expected "
                         "unless each worker has its own).")
    return lines


def findings(rows: list[Row], comparisons: list[Comparison]) -> list[str]:
    lines = claim_lines(comparisons) + speed_lines(rows)
    missing = sorted({f"{r.arch} {name(r.label)}" for r in rows if not r.ran})
    if missing:
        lines.append(f"- Not run, so not checked: {', '.join(missing)}.")
    if not lines:
        lines.append("- Nothing to compare yet: no two rows have decoded test results.")
    return lines
