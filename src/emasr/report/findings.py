"""The text under the table: the regime each claim is judged in, then each of the paper's claims
against the intervals of emasr.report.rows.

A verdict word follows a test, never a threshold on a probability: an ordering is claimed only
where the 95% interval of the difference (utterances and seeds resampled) excludes zero, and every
line names that interval, the per-seed signs, the t-interval of the per-seed differences and
whether the ordering survives the family-wise level of all the report's comparisons. The paper's
claims assume BMUF-N close to one worker; where the report's BMUF-N is not within PARITY of one
worker on dev, its comparisons are reported as what they are, not as a verdict on the paper. MA is
judged only where its learning rate was tuned on dev; a speed-up only where every worker had an
accelerator of its own.
"""
from __future__ import annotations

from dataclasses import dataclass

from emasr.nnet.averages import AVERAGED_MODELS
from emasr.nnet.sync import RULES
from emasr.nnet.regime import own_devices
from emasr.report.intervals import LEVEL, Contrast, Interval, bootstrap
from emasr.report.rows import WARM_START, Comparison, Row, find_row

PARITY = 3.0   # percent: BMUF-N within this relative dev CER of one worker is the paper's regime
NEAR_LINEAR = 0.8   # speed-up / N at or above: the paper's "near-linear" speed-up

# (A, B, the claim, kind): "better" claims B improves on A; "no_worse" claims B matches (within
# PARITY) or beats A.
CLAIMS = [
    ("bmuf", "bmuf+ema", "the EMA model improves on the global BMUF model", "better"),
    ("ma", "ma+ema", "the EMA model improves on the global MA model", "better"),
    ("ma", "bmuf", "BMUF beats model averaging", "better"),
    ("single", "bmuf+ema", "BMUF+EMA with N workers matches or beats single-worker training",
     "no_worse"),
]

# An LM weight chosen on dev needs neighbours in the sweep within this share of its acoustic
# scale (1 / LM weight) on both sides, or a finer grid could have moved it.
GRID_STEP = 0.10


def name(label: str) -> str:
    base, plus, model = label.partition("+")
    text = RULES[base].label if base in RULES else base
    return f"{text}+{AVERAGED_MODELS[model].label if model in AVERAGED_MODELS else model}" \
        if plus else text


def level_text(interval: Interval) -> str:
    if interval.seeds > 1:
        return f"{interval.level:.0%}, utterances and {interval.seeds} seeds resampled"
    return f"{interval.level:.0%}, one seed: utterances resampled, not training runs"


def evidence(c: Comparison) -> str:
    """The numbers behind a verdict, in one parenthesis."""
    i, r = c.interval, c.relative.interval(LEVEL)
    text = (f"test CER {c.cer_a:.2f} -> {c.cer_b:.2f}; {name(c.b)} - {name(c.a)} = "
            f"{i.estimate:+.2f} [{i.low:+.2f}, {i.high:+.2f}] points, {r.estimate:+.1f}% "
            f"[{r.low:+.1f}, {r.high:+.1f}] ({level_text(i)}) on {c.utterances} utterances")
    if c.seed_differences:
        text += f"; {c.signs()} seeds with {name(c.b)} better"
    t = c.t()
    if t is not None:
        text += f"; per-seed t-interval [{t.low:+.2f}, {t.high:+.2f}]"
    if c.resolved:
        survives = "holds" if c.resolved_family_wise else "does not hold"
        text += f"; the ordering {survives} at the family-wise {c.family_level:.2%} of {c.family}"
    return text


def ordering(c: Comparison, kind: str) -> str:
    """'better', 'worse' or 'unresolved': B against A by the claim's test."""
    if kind == "no_worse":
        # within the margin (or beyond it) by the interval and by every seed's own runs
        r, seeds = c.relative.interval(LEVEL), c.seed_relative()
        if r.high <= PARITY and all(v <= PARITY for v in seeds):
            return "better"
        return "worse" if r.low > PARITY and all(v > PARITY for v in seeds) else "unresolved"
    if not c.resolved:
        return "unresolved"
    return "better" if c.interval.high < 0 else "worse"


def why_unresolved(c: Comparison, kind: str) -> str:
    """What keeps an ordering from being claimed: its interval, or the seeds that contradict it."""
    if kind == "no_worse":
        r = c.relative.interval(LEVEL)
        if r.low <= PARITY < r.high:
            return f"the interval of the relative change includes +{PARITY:g}%"
        return f"the seeds fall on both sides of +{PARITY:g}%"
    if not c.interval.excludes_zero():
        return "the interval includes zero"
    values = list(c.seed_differences.values())
    better = c.interval.high < 0
    agreeing = sum(v < 0 if better else v > 0 for v in values)
    return (f"the interval excludes zero, but only {agreeing}/{len(values)} seeds have "
            f"{name(c.b)} {'better' if better else 'worse'}")


def verdict(c: Comparison, kind: str, in_regime: bool) -> str:
    found = ordering(c, kind)
    b, a = name(c.b), name(c.a)
    if kind == "no_worse":
        outcome = {"better": f"{b} matches {a} within {PARITY:g}% or beats it",
                   "worse": f"{b} is more than {PARITY:g}% worse than {a}"}
    else:
        outcome = {"better": f"{b} is better", "worse": f"{b} is worse"}
    outcome["unresolved"] = "not resolved: " + why_unresolved(c, kind)
    if in_regime:
        word = {"better": "agrees", "worse": "disagrees", "unresolved": "no verdict"}[found]
        return f"**{word}**: {outcome[found]} ({evidence(c)})"
    return (f"**{outcome[found]} here**, outside the paper's regime, so not a verdict on it "
            f"({evidence(c)})")


def parity(rows: list[Row], arch: str, workers: int) -> tuple[bool, str]:
    """Whether BMUF-N is within PARITY of one worker in dev CER (the paper's regime), and why."""
    single, bmuf = find_row(rows, arch, "single", 1), find_row(rows, arch, "bmuf", workers)
    if single is None or bmuf is None or "dev" not in single.cer or "dev" not in bmuf.cer:
        return False, (f"no dev CER of both BMUF-{workers} and one worker, so the regime is not "
                       "established")
    gap = 100.0 * (bmuf.cer["dev"].cer - single.cer["dev"].cer) / single.cer["dev"].cer
    text = (f"BMUF-{workers} dev CER {bmuf.cer['dev'].cer:.2f} against one worker's "
            f"{single.cer['dev'].cer:.2f} ({gap:+.1f}%)")
    return gap <= PARITY, text


def regime_text(row: Row | None) -> str:
    regime = row.regime() if row else None
    if not regime:
        return "its regime is not recorded"
    rule = regime.get("data_rule_met")
    rule_text = ("" if rule is None else "; BMUF's data rule " + (
        "holds" if rule else f"is broken ({regime['frames_per_epoch']} frames per epoch against "
                             f"{regime['data_rule_frames']:.0f} needed)"))
    return (f"{regime['syncs_total']} syncs of {regime['frames_per_sync']} frames{rule_text}")


def regime_lines(rows: list[Row]) -> list[str]:
    lines = []
    for arch, workers in dict.fromkeys((r.arch, r.workers_key) for r in rows
                                       if r.base == "bmuf" and r.ran):
        at_parity, text = parity(rows, arch, workers)
        state = (f"**the paper's regime** (within {PARITY:g}%)" if at_parity else
                 f"**not the paper's regime** (more than {PARITY:g}% behind, or unknown): the "
                 "comparisons at this N are reported as what they are, not as a verdict on it")
        lines.append(f"- {arch.upper()}, {workers} workers: {text}: {state}; "
                     f"{regime_text(find_row(rows, arch, 'bmuf', workers))}.")
    return lines


def untuned(rows: list[Row], c: Comparison, arch: str) -> str | None:
    """Why MA cannot be judged in this comparison (its rate was not searched on dev), or None."""
    if "ma" not in (c.a.partition("+")[0], c.b.partition("+")[0]):
        return None
    ma = find_row(rows, arch, "ma", c.workers)
    if ma is None or {"train.lr", "sync.lr_times_workers"} & set(ma.grid):
        return None
    return (f"**no verdict**: MA's learning rate was not tuned on dev (one rate, "
            f"{ma.learning_rates()}); a baseline is judged at its dev-tuned setting")


def where(c: Comparison) -> str:
    return f"{c.arch.upper()}, {c.workers} worker{'s' if c.workers != 1 else ''}"


def claim_lines(rows: list[Row], comparisons: list[Comparison]) -> list[str]:
    by_key = {(c.arch, c.workers, c.a, c.b): c for c in comparisons}
    lines = []
    for arch, workers in dict.fromkeys((c.arch, c.workers) for c in comparisons):
        if workers == 1:
            continue
        in_regime = parity(rows, arch, workers)[0]
        for a, b, claim, kind in CLAIMS:
            c = by_key.get((arch, workers, a, b))
            if c is None:
                continue
            text = untuned(rows, c, arch) or verdict(c, kind, in_regime)
            lines.append(f"- {where(c)}: the paper says {claim}: {text}.")
    return lines


def start_outcome(c: Comparison) -> str:
    """The EMA after the warm-up (B) against the one from the first sync (A), by the ordering's
    test; 'no difference' where every resampling and every seed gives zero (the warm-up's weight
    had faded from the EMA from the first sync: the same decodes)."""
    i = c.interval
    if i.low == i.high == 0 and not any(c.seed_differences.values()):
        return "**no difference**: the same test errors on every seed and in every resampling"
    found = ordering(c, "better")
    return {"better": "**better after the warm-up**", "worse": "**better from the first sync**",
            "unresolved": f"**not resolved**: {why_unresolved(c, 'better')}"}[found]


def warm_start_lines(comparisons: list[Comparison]) -> list[str]:
    """When should the EMA start: after BMUF's warm-up (B) or at the first sync (A)? Not a claim
    of the paper (it starts at the first sync), so an ordering, not a verdict: first the rows,
    each at its half-life chosen on dev, then each half-life the runs kept."""
    lines = []
    for c in comparisons:
        if (c.a, c.b) == WARM_START:
            lines.append(f"- {where(c)}: the EMA started after BMUF's warm-up against the EMA from "
                         f"the first sync, each at its half-life chosen on dev: "
                         f"{start_outcome(c)} ({evidence(c)}).")
        elif c.half_life is not None:
            lines.append(f"  - at the half-life of {c.half_life} frames: {start_outcome(c)} "
                         f"({evidence(c)}).")
    return lines


def relative_gain(c, plain: int, averaged: int):
    """Percent change of the averaged model's CER against the plain one's (columns of c)."""
    return 100.0 * (c[..., averaged] - c[..., plain]) / c[..., plain]


@dataclass
class Specificity:
    """The EMA's relative gain for BASE at N workers minus its gain for one worker (percentage
    points; negative: the gain is larger in parallel training), all four rows on the same
    utterances: the bootstrap's contrast and each seed's own value (seeds all four rows ran)."""
    arch: str
    base: str
    workers: int
    contrast: Contrast
    seeds: list[float]

    def found(self) -> str:
        """'parallel', 'single' or 'unresolved': which gain is larger, by the interval and by
        every seed (as for an ordering, rows.Comparison.seeds_agree)."""
        i = self.contrast.interval(LEVEL)
        if i.high < 0 and all(v < 0 for v in self.seeds):
            return "parallel"
        if i.low > 0 and all(v > 0 for v in self.seeds):
            return "single"
        return "unresolved"


def seed_gain(seeds: list[dict[int, float]]) -> list[float]:
    """Per seed, the EMA's relative gain at N workers minus one worker's, from the four rows'
    per-seed CERs (single, single+ema, base, base+ema)."""
    common = sorted(set.intersection(*(set(s) for s in seeds)))
    return [100.0 * ((seeds[3][k] - seeds[2][k]) / seeds[2][k]
                     - (seeds[1][k] - seeds[0][k]) / seeds[0][k])
            for k in common if seeds[0][k] and seeds[2][k]]


def specificity(rows: list[Row], arch: str, base: str, workers: int,
                replications: int) -> Specificity | None:
    """The EMA's specificity to parallel training for BASE at WORKERS (None: a row not decoded)."""
    found = [find_row(rows, arch, label, n) for label, n in
             (("single", 1), ("single+ema", 1), (base, workers), (f"{base}+ema", workers))]
    if any(r is None or "test" not in r.cer or r.cer["test"].matrix is None for r in found):
        return None
    if found[0].cer["test"].cer == 0 or found[2].cer["test"].cer == 0:
        return None   # a relative gain over a CER of 0 is undefined
    replicates = bootstrap([r.cer["test"].matrix for r in found], replications)
    contrast = replicates.contrast(lambda c: relative_gain(c, 2, 3) - relative_gain(c, 0, 1))
    return Specificity(arch, base, workers, contrast,
                       seed_gain([r.cer["test"].seeds for r in found]))


def specificity_tests(rows: list[Row], replications: int) -> list[Specificity]:
    out = []
    for arch in dict.fromkeys(r.arch for r in rows):
        for base in ("ma", "bmuf"):
            for workers in sorted({r.workers_key for r in rows if r.arch == arch and r.ran
                                   and r.base == base}):
                test = specificity(rows, arch, base, workers, replications)
                if test is not None:
                    out.append(test)
    return out


def specificity_lines(tests: list[Specificity], family: int) -> list[str]:
    """Is the EMA's gain specific to parallel training (the paper's reading of it)?"""
    found = {"unresolved": "**not resolved**: the two gains do not differ beyond the interval, "
                           "or a seed disagrees",
             "parallel": "**larger in parallel training**",
             "single": "**larger for one worker**: the EMA's gain is not specific to parallel "
                       "training"}
    lines = []
    for test in tests:
        i = test.contrast.interval(LEVEL)
        seeds = (f"; {sum(v < 0 for v in test.seeds)}/{len(test.seeds)} seeds with the larger "
                 f"gain in parallel training" if test.seeds else "")
        lines.append(
            f"- {test.arch.upper()}, {test.workers} workers: the EMA's relative gain for "
            f"{name(test.base)} minus its gain for one worker = {i.estimate:+.1f} "
            f"[{i.low:+.1f}, {i.high:+.1f}] points ({level_text(i)}{seeds}; {family} "
            f"comparisons in this report): {found[test.found()]}.")
    return lines


def speed_lines(rows: list[Row]) -> list[str]:
    """Wall time of N-worker BMUF against one worker, judged only where each worker had an
    accelerator of its own (shared cores or a shared GPU cannot show the paper's speed-up)."""
    lines = []
    for arch, workers in dict.fromkeys((r.arch, r.workers_key) for r in rows
                                       if r.label == "bmuf" and r.ran):
        single, bmuf = find_row(rows, arch, "single", 1), find_row(rows, arch, "bmuf", workers)
        t1 = single.total("seconds_train") if single else None
        tn = bmuf.total("seconds_train")
        if not t1 or not tn:
            continue
        speedup = t1 / tn
        runs = ("one run each" if len(single.runs) == len(bmuf.runs) == 1 else
                f"the mean of {len(bmuf.runs)} and {len(single.runs)} runs")
        head = (f"- {arch.upper()}: BMUF with {workers} workers trained in {tn:.0f} s against "
                f"{t1:.0f} s for one worker (speed-up {speedup:.2f}x, {runs}): ")
        regime = bmuf.regime()
        if regime is None or "hardware" not in regime:
            lines.append(head + "**no speed-up verdict**: the runs do not record their hardware.")
        elif not own_devices(regime):
            hw = regime["hardware"]
            lines.append(head + f"**no speed-up verdict**: the {workers} workers shared "
                         f"{hw['cpu_cores']} CPU core(s)" + (f" and {hw['gpus_per_node']} GPU(s)"
                                                             if hw["gpus_per_node"] else "")
                         + " in " + f"{regime['processes']} process(es), so the hardware cannot "
                         "show a parallel speed-up.")
        else:
            efficiency = speedup / workers
            word = "**agrees**" if efficiency >= NEAR_LINEAR else "**disagrees**"
            lines.append(head + f"{efficiency:.0%} of linear, each worker on its own GPU: the "
                         f"paper reports a near-linear speed-up: {word} (near-linear taken as "
                         f">= {NEAR_LINEAR:.0%}).")
    return lines


def findings(rows: list[Row], comparisons: list[Comparison],
             specificity_results: list[Specificity], family: int) -> list[str]:
    lines = regime_lines(rows) + claim_lines(rows, comparisons) + \
        specificity_lines(specificity_results, family) + warm_start_lines(comparisons) + \
        speed_lines(rows)
    missing = sorted({f"{r.arch} {name(r.label)}" for r in rows if not r.ran})
    if missing:
        lines.append(f"- Not run, so not checked: {', '.join(missing)}.")
    if not lines:
        lines.append("- No claim of the paper to check: each compares a row of parallel training "
                     "(MA or BMUF) with another, and no such pair has decoded test results.")
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
