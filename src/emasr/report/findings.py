"""The text under the table: the regime each claim is judged in, then each of the paper's claims
against the intervals of emasr.report.rows.

A verdict word follows a test, never a threshold on a probability: an ordering is claimed only
where the 95% interval of the difference (speakers, dev's choices and seeds resampled) excludes
zero and every seed agrees, and every line names that interval, its family-wise counterpart, the
per-seed signs, the t-interval of the per-seed differences and where the paper's own figure falls
against the interval (so that "no verdict" says whether the effect is smaller than the paper's or
there is no evidence either way). The paper's claims assume BMUF-N close to one worker, and that
is a test too (non-inferiority): the upper end of the 95% interval of BMUF-N's relative dev-CER
gap to one worker must be at most PARITY. Where it is not, the comparisons are reported as what
they are, not as a verdict on the paper, whatever the point estimate. MA is judged only where its
learning rate was tuned on dev; a speed-up only where every worker had an accelerator of its own.
"""
from __future__ import annotations

from dataclasses import dataclass

from emasr.nnet.averages import AVERAGED_MODELS, EMA
from emasr.nnet.sync import RULES, one_worker_rule, parallel_rules, reference_rule
from emasr.nnet.training.regime import own_devices
from emasr.report.intervals import LEVEL, Contrast, Interval, bootstrap
from emasr.report.paper import CLAIMS, Claim
from emasr.report.rows import Comparison, Row, compare, find_row, warm_start

PARITY = 3.0   # percent: the upper end of BMUF-N's relative dev-CER gap to one worker, at most
NEAR_LINEAR = 0.8   # speed-up / N at or above: the paper's "near-linear" speed-up
SAME_FRAMES = 0.5   # percent: rows compared must have trained this close in frames


# An LM weight chosen on dev needs neighbours in the sweep within this share of its acoustic
# scale (1 / LM weight) on both sides, or a finer grid could have moved it.
GRID_STEP = 0.10


def name(label: str) -> str:
    base, plus, model = label.partition("+")
    text = RULES[base].label if base in RULES else base
    return f"{text}+{AVERAGED_MODELS[model].label if model in AVERAGED_MODELS else model}" \
        if plus else text


def level_text(interval: Interval, contrast: Contrast | None = None) -> str:
    units = "utterances"
    if contrast is not None and 0 < contrast.speakers < contrast.utterances:
        units = f"{contrast.speakers} speakers"
    if interval.seeds > 1:
        return f"{interval.level:.0%}, {units} and {interval.seeds} seeds resampled"
    return f"{interval.level:.0%}, one seed: {units} resampled, not training runs"


def evidence(c: Comparison) -> str:
    """The numbers behind a verdict, in one parenthesis."""
    i, r = c.interval, c.relative.interval(LEVEL)
    wide = c.relative.interval(c.family_level)
    cer = "test CER" if c.set_name == "test" else f"{c.set_name} CER"
    text = (f"{cer} {c.cer_a:.2f} -> {c.cer_b:.2f}; {name(c.b)} - {name(c.a)} = "
            f"{i.estimate:+.2f} [{i.low:+.2f}, {i.high:+.2f}] points, {r.estimate:+.1f}% "
            f"[{r.low:+.1f}, {r.high:+.1f}] ({level_text(i, c.difference)}; at the family-wise "
            f"{c.family_level:.2%} of {c.family} comparisons [{wide.low:+.1f}, {wide.high:+.1f}]%)"
            f" on {c.utterances} utterances")
    if c.seed_differences:
        text += f"; {c.signs()} seeds with {name(c.b)} better"
    t = c.t()
    if t is not None:
        text += f"; per-seed t-interval [{t.low:+.2f}, {t.high:+.2f}]"
    if c.resolved:
        survives = "holds" if c.resolved_family_wise else "does not hold"
        text += f"; the ordering {survives} at the family-wise {c.family_level:.2%}"
    return text


def paper_text(c: Comparison, claim: Claim) -> str:
    """Where the paper's own figure falls against the interval of the relative change: inside
    it, or excluded (the effect here smaller or larger than the paper's)."""
    figure = claim.paper.get(c.arch)
    if figure is None:
        return "the paper's own figure for this claim is not recorded here"
    r = c.relative.interval(LEVEL)
    if r.contains(figure):
        return f"the paper's {figure:+.1f}% lies inside the interval"
    smaller = r.low > figure if figure < 0 else r.high < figure
    return (f"the interval excludes the paper's {figure:+.1f}%: the effect here is "
            f"**{'smaller' if smaller else 'larger'} than the paper's**")


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


@dataclass
class Parity:
    """A parallel row's non-inferiority test against one worker on dev CER: passed where the
    upper end of the 95% interval of its relative gap is at most PARITY."""
    arch: str
    label: str
    workers: int
    comparison: Comparison | None     # one worker (A) against the parallel row (B), on dev
    rows: tuple[Row, Row | None]      # the parallel row, one worker's

    @property
    def passed(self) -> bool:
        return self.comparison is not None and \
            self.comparison.relative.interval(LEVEL).high <= PARITY

    @property
    def defines_regime(self) -> bool:
        """The reference rule (BMUF) at N close to one worker is the regime the paper's claims
        assume."""
        return RULES[self.label].reference


def parity_tests(rows: list[Row], replications: int) -> list[Parity]:
    """Every parallel rule's global-model row against one worker's, on dev."""
    out = []
    for row in rows:
        if not row.ran or row.model != "final" or not RULES[row.base].parallel:
            continue
        single = find_row(rows, row.arch, one_worker_rule(), 1)
        found = compare(single, row, replications, "dev") if single is not None else None
        out.append(Parity(row.arch, row.label, row.workers_key, found, (row, single)))
    return out


def in_regime(parities: list[Parity], arch: str, workers: int) -> bool:
    return any(p.passed for p in parities
               if p.defines_regime and p.arch == arch and p.workers == workers)


def trained_frames(row: Row | None) -> int | None:
    """The frames the row's run trained (regime.json: every block, the short ones too; before
    that was recorded, the syncs times the frames of a full sync)."""
    regime = row.regime() if row is not None else None
    if not regime:
        return None
    if regime.get("frames_trained_total") is not None:
        return int(regime["frames_trained_total"])
    return int(regime["syncs_total"]) * int(regime["frames_per_sync"])


def frames_text(a: Row | None, b: Row | None) -> str:
    """'' where the rows trained the same frames (within SAME_FRAMES), else what differs."""
    fa, fb = trained_frames(a), trained_frames(b)
    if not fa or not fb:
        return ""
    gap = 100.0 * (fb - fa) / fa
    if abs(gap) <= SAME_FRAMES:
        return ""
    return (f"; **unequal data**: {name(b.label)} trained {fb:,} frames against {fa:,} for "
            f"{name(a.label)} ({gap:+.1f}%)")


def regime_text(row: Row | None) -> str:
    regime = row.regime() if row else None
    if not regime:
        return "its regime is not recorded"
    rule = regime.get("data_rule_met")
    rule_text = ("" if rule is None else "; BMUF's data rule " + (
        "holds" if rule else f"is broken ({regime['frames_per_epoch']} frames per epoch against "
                             f"{regime['data_rule_frames']:.0f} needed)"))
    return (f"{regime['syncs_total']} syncs of {regime['frames_per_sync']} frames{rule_text}")


def parity_outcome(p: Parity) -> str:
    if p.comparison is None:
        return "**no parity test**: no dev CER of both it and one worker with per-utterance counts"
    high = p.comparison.relative.interval(LEVEL).high
    if p.passed:
        found = (f"**within {PARITY:g}% of one worker by the test** (the interval's upper end, "
                 f"{high:+.1f}%, is at most +{PARITY:g}%)")
    else:
        found = (f"**not shown within {PARITY:g}% of one worker** (the interval's upper end, "
                 f"{high:+.1f}%, is above +{PARITY:g}%)")
    return f"{found} ({evidence(p.comparison)})"


def regime_lines(parities: list[Parity]) -> list[str]:
    lines = []
    for p in parities:
        head = f"- {p.arch.upper()}, {p.workers} workers, {name(p.label)} against one worker on dev"
        if p.defines_regime:
            state = ("**the paper's regime**" if p.passed else
                     "**not the paper's regime**: the comparisons at this N are reported as what "
                     "they are, not as a verdict on it")
        else:
            state = f"a parity test only (the paper's regime is {name(reference_rule())}'s)"
        lines.append(f"{head}: {parity_outcome(p)}: {state}; {regime_text(p.rows[0])}"
                     f"{frames_text(p.rows[1], p.rows[0])}.")
    return lines


RATE_SETTINGS = {"train.lr", "sync.lr_times_workers"}


def untuned(rows: list[Row], c: Comparison, arch: str) -> str | None:
    """Why a rule that is judged only at a dev-tuned rate (its entry's `rate_tuned`: MA) cannot
    be judged in this comparison (its rate was not searched on dev), or None."""
    for base in dict.fromkeys(label.partition("+")[0] for label in (c.a, c.b)):
        if base not in RULES or not RULES[base].rate_tuned:
            continue
        row = find_row(rows, arch, base, c.workers)
        if row is None or RATE_SETTINGS & set(row.grid):
            continue
        return (f"**no verdict**: {name(base)}'s learning rate was not tuned on dev (one rate, "
                f"{row.learning_rates()}); a baseline is judged at its dev-tuned setting")
    return None


def where(c: Comparison) -> str:
    return f"{c.arch.upper()}, {c.workers} worker{'s' if c.workers != 1 else ''}"


def claim_lines(rows: list[Row], comparisons: list[Comparison],
                parities: list[Parity]) -> list[str]:
    by_key = {(c.arch, c.workers, c.a, c.b): c for c in comparisons}
    lines = []
    for arch, workers in dict.fromkeys((c.arch, c.workers) for c in comparisons):
        if workers == 1:
            continue
        regime = in_regime(parities, arch, workers)
        for claim in CLAIMS:
            c = by_key.get((arch, workers, claim.a, claim.b))
            if c is None:
                continue
            text = untuned(rows, c, arch) or verdict(c, claim.kind, regime)
            data = frames_text(find_row(rows, arch, claim.a, workers),
                               find_row(rows, arch, claim.b, workers))
            lines.append(f"- {where(c)}: the paper says {claim.text}: {text}; "
                         f"{paper_text(c, claim)}{data}.")
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
        if warm_start(c.a, c.b):
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
    one = one_worker_rule()
    found = [find_row(rows, arch, label, n) for label, n in
             ((one, 1), (f"{one}+{EMA}", 1), (base, workers), (f"{base}+{EMA}", workers))]
    if any(r is None or "test" not in r.cer or r.system is None or r.system.test is None
           for r in found):
        return None
    if found[0].cer["test"].cer == 0 or found[2].cer["test"].cer == 0:
        return None   # a relative gain over a CER of 0 is undefined
    replicates = bootstrap([r.system for r in found], replications)
    contrast = replicates.contrast(lambda c: relative_gain(c, 2, 3) - relative_gain(c, 0, 1))
    return Specificity(arch, base, workers, contrast,
                       seed_gain([r.cer["test"].seeds for r in found]))


def specificity_tests(rows: list[Row], replications: int) -> list[Specificity]:
    out = []
    for arch in dict.fromkeys(r.arch for r in rows):
        for base in parallel_rules():
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
            f"[{i.low:+.1f}, {i.high:+.1f}] points ({level_text(i, test.contrast)}{seeds}; {family} "
            f"comparisons in this report): {found[test.found()]}.")
    return lines


def speed_lines(rows: list[Row]) -> list[str]:
    """Wall time of the reference rule (BMUF) with N workers against one worker, judged only
    where each worker had an accelerator of its own (shared cores or a shared GPU cannot show the
    paper's speed-up)."""
    lines = []
    reference = reference_rule()
    for arch, workers in dict.fromkeys((r.arch, r.workers_key) for r in rows
                                       if r.label == reference and r.ran):
        single = find_row(rows, arch, one_worker_rule(), 1)
        bmuf = find_row(rows, arch, reference, workers)
        t1 = single.total("seconds_train") if single else None
        tn = bmuf.total("seconds_train")
        if not t1 or not tn:
            continue
        speedup = t1 / tn
        runs = ("one run each" if len(single.runs) == len(bmuf.runs) == 1 else
                f"the mean of {len(bmuf.runs)} and {len(single.runs)} runs")
        head = (f"- {arch.upper()}: {name(reference)} with {workers} workers trained in "
                f"{tn:.0f} s against {t1:.0f} s for one worker (speed-up {speedup:.2f}x, {runs}): ")
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


def findings(rows: list[Row], comparisons: list[Comparison], parities: list[Parity],
             specificity_results: list[Specificity], family: int) -> list[str]:
    lines = regime_lines(parities) + claim_lines(rows, comparisons, parities) + \
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
