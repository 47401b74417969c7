"""The short text under the table: each of the paper's claims checked against the numbers, saying
"agrees", "disagrees" or "not resolved" (the difference is smaller than the intervals, or the
paired test is decisive but the intervals overlap and too few seeds agree)."""
from __future__ import annotations

from emasr.nnet.averages import AVERAGED_MODELS
from emasr.report.rows import Comparison, Row, find_row, relative_change

CONFIDENT = 0.95   # P(B better) at or above: B is better; P(A better) at or above: B is worse

# (A, B, the claim, kind): "better" claims B improves on A; "no_worse" claims B matches or beats A.
CLAIMS = [
    ("bmuf", "bmuf+ema", "the EMA model improves on the global BMUF model", "better"),
    ("ma", "ma+ema", "the EMA model improves on the global MA model", "better"),
    ("ma", "bmuf", "BMUF beats model averaging", "better"),
    ("single", "bmuf+ema", "BMUF+EMA with N workers matches or beats single-worker training",
     "no_worse"),
]

BASE_NAMES = {"single": "single", "ma": "MA", "bmuf": "BMUF"}

# An LM weight chosen on dev needs neighbours in the sweep within this share of its acoustic
# scale (1 / LM weight) on both sides, or a finer grid could have moved it.
GRID_STEP = 0.10


def name(label: str) -> str:
    base, plus, model = label.partition("+")
    text = BASE_NAMES.get(base, base)
    return f"{text}+{AVERAGED_MODELS[model].label if model in AVERAGED_MODELS else model}" \
        if plus else text


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


def where(c: Comparison) -> str:
    return f"{c.arch.upper()}, {c.workers} worker{'s' if c.workers != 1 else ''}"


def claim_lines(comparisons: list[Comparison]) -> list[str]:
    by_key = {(c.arch, c.workers, c.a, c.b): c for c in comparisons}
    lines = []
    for arch, workers in dict.fromkeys((c.arch, c.workers) for c in comparisons):
        for a, b, claim, kind in CLAIMS:
            c = by_key.get((arch, workers, a, b))
            if c is None or c.p_b_better is None:
                continue
            lines.append(f"- {where(c)}: the paper says {claim}: {verdict(c, kind)}.")
    return lines


def gain(rows: list[Row], arch: str, base: str, model: str, workers: int | None) -> float | None:
    """Relative test CER change (%) of BASE+MODEL against BASE (negative: the average helps)."""
    plain = find_row(rows, arch, base, workers)
    averaged = find_row(rows, arch, f"{base}+{model}", workers)
    return None if plain is None or averaged is None else relative_change(averaged, plain)


def ema_specificity_lines(rows: list[Row]) -> list[str]:
    """Is the EMA's gain specific to parallel training? Its gain for BMUF/MA at N workers against
    its gain for a single worker, and against the averaging controls of the same run."""
    lines = []
    for arch in dict.fromkeys(r.arch for r in rows):
        single = gain(rows, arch, "single", "ema", 1)
        for base in ("ma", "bmuf"):
            for workers in sorted({r.workers_key for r in rows if r.arch == arch and r.ran
                                   and r.base == base}):
                parallel = gain(rows, arch, base, "ema", workers)
                if parallel is None or single is None:
                    continue
                if parallel >= 0:
                    verdict_text = f"**the EMA brings {name(base)} no gain here**"
                elif parallel < single:
                    verdict_text = "**the gain is larger in parallel training**"
                else:
                    verdict_text = ("**the EMA's gain is not specific to parallel training here** "
                                    "(the paper attributes it to parallel training)")
                lines.append(
                    f"- {arch.upper()}, {workers} workers: the EMA changes {name(base)}'s test CER "
                    f"by {parallel:+.1f}% and a single worker's by {single:+.1f}% (relative): "
                    f"{verdict_text}.")
        for base in ("single", "ma", "bmuf"):
            for workers in sorted({r.workers_key for r in rows if r.arch == arch and r.ran
                                   and r.base == base}):
                parts = {m: gain(rows, arch, base, m, workers) for m in ("ema", "avg", "lastk")}
                if parts["ema"] is None or all(parts[m] is None for m in ("avg", "lastk")):
                    continue
                shown = ", ".join(f"{name(base + '+' + m)} {v:+.1f}%" for m, v in parts.items()
                                  if v is not None)
                lines.append(f"- {arch.upper()}, {workers} worker{'s' if workers != 1 else ''}: "
                             f"averaging at all against the EMA, test CER change against "
                             f"{name(base)}: {shown} (the same-utterance tests below say which "
                             "differences are resolved).")
    return lines


def grid_warnings(rows: list[Row]) -> list[str]:
    """Rows whose dev-chosen LM weight sits at the edge of the sweep or between coarse steps."""
    lines = []
    for row in rows:
        summary = row.cer.get("dev")
        if summary is None:
            continue
        for (lmwt, _), grid in zip(summary.settings, summary.grids):
            problem = grid_problem(lmwt, grid)
            if problem:
                lines.append(f"- {row.arch.upper()} {name(row.label)} ({row.workers()} "
                             f"worker{'' if row.workers() == '1' else 's'}): the LM weight chosen "
                             f"on dev, {lmwt}, {problem}.")
    return lines


def grid_problem(lmwt: str, grid: list[str]) -> str | None:
    values = sorted(float(g) for g in grid)
    if lmwt == "" or float(lmwt) not in values:
        return None
    at = values.index(float(lmwt))
    if at == 0 or at == len(values) - 1:
        return f"is at the edge of the swept {values[0]:g}..{values[-1]:g}: widen the sweep"
    scale = 1 / values[at]
    steps = [abs(1 / values[at + d] - scale) / scale for d in (-1, 1)]
    if max(steps) > GRID_STEP:
        return (f"has neighbours {values[at - 1]:g} and {values[at + 1]:g}, "
                f"{100 * max(steps):.0f}% of its acoustic scale away: use a finer --lmwt-step")
    return None


def speed_lines(rows: list[Row]) -> list[str]:
    """Wall time of N-worker BMUF against one worker (the paper's reason for parallel training)."""
    lines = []
    for arch, workers in dict.fromkeys((r.arch, r.workers_key) for r in rows
                                       if r.label == "bmuf" and r.ran):
        single, bmuf = find_row(rows, arch, "single", 1), find_row(rows, arch, "bmuf", workers)
        if not (single and bmuf):
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
    lines = claim_lines(comparisons) + ema_specificity_lines(rows) + speed_lines(rows)
    missing = sorted({f"{r.arch} {name(r.label)}" for r in rows if not r.ran})
    if missing:
        lines.append(f"- Not run, so not checked: {', '.join(missing)}.")
    if not lines:
        lines.append("- Nothing to compare yet: no two rows have decoded test results.")
    return lines
