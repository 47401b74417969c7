"""RESULTS.md: the paper's table, the regime of every run, the GMM baselines, the comparisons with
intervals that count seeds, the findings, the plots."""
from __future__ import annotations

import os
from collections import Counter

from emasr.nnet.sync import RULES, one_worker_rule, reference_rule, regime_columns
from emasr.report.findings import findings, grid_warnings, name
from emasr.report.intervals import LEVEL, Contrast
from emasr.report.rows import CerSummary, Comparison, GmmRow, Row, find_row, relative_change

NOT_RUN = "not run"


def fmt(value, spec: str, empty: str = "-") -> str:
    return empty if value is None else format(value, spec)


def cer_cell(summary: CerSummary | None) -> str:
    if summary is None:
        return "-"
    if summary.interval is None:
        return f"{summary.cer:.2f} [no per-utt]"
    return f"{summary.cer:.2f} [{summary.interval.low:.2f}, {summary.interval.high:.2f}]"


def seeds_cell(summary: CerSummary | None) -> str:
    """Each seed's CER, 's1 7.52 / s2 7.61' (the row's CER is their mean)."""
    if summary is None:
        return "-"
    return " / ".join(f"s{seed} {cer:.2f}" for seed, cer in sorted(summary.seeds.items()))


def relative_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def grid_cell(row: Row) -> str:
    """The settings searched on dev for this row ('-': none, the row ran one setting)."""
    return "; ".join(f"{key.split('.')[-1]} {{{', '.join(map(str, values))}}}"
                     for key, values in row.grid.items()) or "-"


def network_header() -> list[str]:
    """The networks table's columns; a row's test CER is set against the reference rule's and
    the one-worker rule's (emasr.nnet.sync.RULES)."""
    return ["arch", "strategy", "workers", "seeds", "lr", "searched on dev", "dev frame acc (%)",
            "dev CER (%) [95% CI]", "test CER (%) [95% CI]", "test CER per seed",
            "LM weight, penalty (dev)", "test CER best on test (%)", "failed utts dev/test",
            f"test vs {name(reference_rule())}", f"test vs {name(one_worker_rule())}",
            "train time (s)", "syncs", "all-reduced / worker (MB)"]


def setting_cell(summary: CerSummary | None) -> str:
    if summary is None or not summary.settings:
        return "-"
    # one entry per distinct setting, with the number of seeds that chose it when more than one
    counts = Counter(f"{lmwt}, {wip}" for lmwt, wip in summary.settings)
    return "; ".join(s if n == 1 else f"{s} ({n} seeds)" for s, n in counts.items())


def failed_cell(row: Row) -> str:
    return "/".join(str(row.cer[s].failed) if s in row.cer else "-" for s in ("dev", "test"))


def epochs_note(epochs: list[int]) -> str:
    """' (epoch 7)' after a dev frame accuracy whose model's epoch dev chose; '' else."""
    if not epochs:
        return ""
    return f" (epoch{'s' if len(epochs) > 1 else ''} {', '.join(map(str, epochs))})"


def network_row(row: Row, rows: list[Row]) -> list[str]:
    head = [row.arch.upper(), name(row.label)]
    if not row.ran:
        return head + [NOT_RUN] + [""] * (len(network_header()) - 3)
    acc = row.dev_acc()
    mb = row.total("bytes_reduced")
    best = row.cer.get("test_best")
    return head + [
        row.workers(), str(len(row.runs)), row.learning_rates(), grid_cell(row),
        fmt(None if acc is None else 100 * acc, ".2f") + epochs_note(row.chosen_epochs()),
        cer_cell(row.cer.get("dev")), cer_cell(row.cer.get("test")),
        seeds_cell(row.cer.get("test")),
        setting_cell(row.cer.get("dev")), fmt(None if best is None else best.cer, ".2f"),
        failed_cell(row),
        relative_cell(relative_change(row, find_row(rows, row.arch, reference_rule(),
                                                    row.workers_key))
                      if RULES[row.base].parallel else None),
        relative_cell(relative_change(row, find_row(rows, row.arch, one_worker_rule(), 1))),
        fmt(row.total("seconds_train"), ".0f"), fmt(row.total("syncs"), ".0f"),
        fmt(None if mb is None else mb / 1e6, ".1f")]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(r) + " |" for r in rows])


def resampling_text(systems: list) -> str:
    """How the intervals were made, from what the counts allowed (emasr.report.intervals)."""
    speakers = any(len(set(s.test.clusters)) < len(s.test.utts) for s in systems if s.test)
    units = ("speakers resampled as clusters (every utterance of a drawn speaker, decoded by "
             "every seed of every system, comes with it; dev and test drawn apart)" if speakers
             else "utterances resampled as clusters (every seed's decode of an utterance together;"
                  " the scoring recorded no speakers)")
    rechosen = [s.rechooses for s in systems]
    if rechosen and all(rechosen):
        choice = ("each seed's model (the EMA's half-life) and scoring setting (LM weight, "
                  "insertion penalty) chosen again on each replicate's dev, and test read at "
                  "that choice")
    elif any(rechosen):
        choice = ("the model and scoring setting chosen again on each replicate's dev where the "
                  "counts hold every setting, held at the one dev chose elsewhere")
    else:
        choice = ("each model's scoring setting held at the one dev chose (the counts hold no "
                  "other setting, so the interval leaves out the noise of that choice)")
    return (f"{units}; {choice}; seeds by Student's t (each replicate adds t with S - 1 degrees "
            f"of freedom times the spread of the per-seed values over sqrt(S); with one seed the "
            f"interval covers the speakers only, not another training run)")


def network_section(rows: list[Row], resampling: str) -> list[str]:
    return ["## Networks", "",
            "CER in percent: all errors over all reference characters of the row's seeds (the "
            "mean of the per-seed CERs, listed beside it), with its 95% bootstrap interval "
            f"(emasr.report.intervals): {resampling}. Each model's LM weight and insertion "
            "penalty are chosen on dev (its best dev CER) and the test CER is read at that "
            "setting; Kaldi's best-on-test CER is given beside it for reference only. Utterances "
            "without a hypothesis (failed decodes) count as all deletions. Where a row's runs "
            "searched settings on dev (\"searched on dev\"), each seed's run with the best dev "
            "frame accuracy of the global model stands for it and for its +EMA, +avg and +lastk "
            "rows (the grid point and the epoch are chosen on the whole dev set's frame accuracy,"
            " not again inside the resampling: only the chosen run's models are decoded). "
            "Relative changes are of the test CER, against BMUF at "
            "the same worker count and against the single worker. Train time, syncs and bytes "
            "all-reduced per worker are per run (mean over seeds); a +EMA, +avg (cumulative "
            "average) or +lastk (last-k epochs average) row decodes an averaged model of the "
            "training run of the row without it." + (
                " \"(epoch k)\" after a dev frame accuracy: the run wrote each model from the "
                "end of the epoch of its own best dev frame accuracy (train.final_epoch "
                "best_dev_acc), one epoch per seed." if any(r.chosen_epochs() for r in rows)
                else ""), ""] + \
        table(network_header(), [network_row(r, rows) for r in rows])


def regime_header() -> list[str]:
    """The regime table's columns: the numbers of every run, then what the registered rules add
    (their entries' `regime_columns`: BMUF's block momentum and block lr), then the data rule's
    and the EMAs'."""
    return (["arch", "strategy", "workers", "frames / epoch", "frames / sync", "syncs / epoch",
             "syncs in all"] + [heading for _, heading, _ in regime_columns()] +
            ["time constant (frames)", "data rule (frames)", "rule met", "EMA decay / sync",
             "EMA half-life (syncs, epochs)"])


def regime_row(row: Row) -> list[str] | None:
    regime = row.regime()
    if regime is None:
        return None
    emas = regime.get("emas", [])
    return [row.arch.upper(), name(row.base), str(regime["workers"]),
            str(regime["frames_per_epoch"]), str(regime["frames_per_sync"]),
            str(regime["syncs_per_epoch"]), str(regime["syncs_total"]),
            *(fmt(regime.get(key), spec) for key, _, spec in regime_columns()),
            fmt(regime["time_constant_frames"], ".0f"), fmt(regime["data_rule_frames"], ".0f"),
            {True: "yes", False: "**no**", None: "-"}[regime["data_rule_met"]],
            ", ".join(f"{e['decay_per_sync']:.4g}" for e in emas) or "-",
            ", ".join(f"{e['half_life_syncs']:.3g}, {e['half_life_epochs']:.3g}"
                      for e in emas) or "-"]


def regime_section(rows: list[Row]) -> list[str]:
    seen, body = set(), []
    for row in rows:
        if row.ran and (row.arch, row.base, row.workers_key) not in seen:
            seen.add((row.arch, row.base, row.workers_key))
            cells = regime_row(row)
            if cells:
                body.append(cells)
    lines = ["## Regime", "",
             "From each run's regime.json (emasr.nnet.training.regime). BMUF's block-momentum filter has a "
             "time constant of -(frames per sync) / ln(block momentum) frames; its authors ask "
             "for at least that times N frames of training data (the data rule). Below it "
             "BMUF-N falls behind one worker, and the paper's claims are not tested.", ""]
    return lines + (table(regime_header(), body) if body else ["No run recorded its regime."])


def sweep_rows(row: Row) -> list[list[str]]:
    """One line per averaged model a run of `row` kept for the row's family (several EMAs, one
    per half-life): its half-life, dev frame accuracy, dev and test CER, and whether dev chose it."""
    lines = []
    for run in row.runs:
        variants = run.variants(row.model)
        if len(variants) < 2:
            continue
        chosen = run.chosen(row.model)
        halves = {e["name"]: e for e in (run.regime or {}).get("emas", [])}
        for model in variants:
            tuned, ema = run.tuned.get(model), halves.get(model, {})
            dev = tuned.dev if tuned else None
            test = tuned.test if tuned else None
            acc = run.variant_acc(model)
            lines.append([row.arch.upper(), name(row.label), str(row.workers_key), str(run.seed),
                          model, fmt(ema.get("half_life_frames"), ".0f"),
                          fmt(ema.get("half_life_syncs"), ".3g"),
                          fmt(ema.get("half_life_epochs"), ".3g"),
                          fmt(None if acc is None else 100 * acc, ".2f") +
                          epochs_note([e for e in [run.file_epoch(model)] if e is not None]),
                          fmt(None if dev is None else dev.cer, ".2f"),
                          fmt(None if test is None else test.cer, ".2f"),
                          "**chosen**" if model == chosen else ""])
    return lines


def sweep_section(rows: list[Row]) -> list[str]:
    """The averaged models a row chose among on dev (several EMA half-lives in one run)."""
    body = [line for row in rows if row.ran and row.model != "final" for line in sweep_rows(row)]
    if not body:
        return []
    return ["## Averaged models chosen on dev", "",
            "A run that kept several models of one family (an EMA per half-life) is reported by "
            "the one with the lowest dev CER, as the LM weight is chosen; the others are here. "
            "Half-lives from the run's regime.json.", ""] + \
        table(["arch", "row", "workers", "seed", "model", "half-life (frames)",
               "half-life (syncs)", "half-life (epochs)", "dev frame acc (%)", "dev CER (%)",
               "test CER (%)", ""], body) + [""]


def grid_rows(row: Row) -> list[list[str]]:
    """One line per run a row chose among on dev (a baseline's grid): its settings, the dev frame
    accuracy of its global model (what chose it, each seed's best) and its dev CER if decoded."""
    searched = row.grid   # computed from the candidates: once, not per run and key
    order = sorted(row.candidates, key=lambda run: (
        run.seed, tuple(values.index(run.settings.get(k)) for k, values in searched.items())))
    lines = []
    for run in order:
        acc, dev = run.dev_acc("final"), run.decode("dev", "final")
        epoch = run.file_epoch("final")
        lines.append([row.arch.upper(), name(row.base), str(row.workers_key), str(run.seed),
                      ", ".join(f"{k.split('.')[-1]} {run.settings.get(k)}" for k in searched),
                      fmt(None if acc is None else 100 * acc, ".2f") +
                      epochs_note([] if epoch is None else [epoch]),
                      fmt(None if dev is None else dev.cer, ".2f"),
                      "**chosen**" if any(run is chosen for chosen in row.runs) else ""])
    return lines


def grid_section(rows: list[Row]) -> list[str]:
    """Every grid point of the rows whose runs searched settings on dev (--grid)."""
    seen, body = set(), []
    for row in rows:
        if row.grid and (row.arch, row.base, row.workers_key) not in seen:
            seen.add((row.arch, row.base, row.workers_key))
            body += grid_rows(row)
    if not body:
        return []
    return ["## Baselines searched on dev", "",
            "Each setting a row's runs searched (--grid), with the dev frame accuracy of its "
            "global model: each seed's best stands for the row and its averaged models. A grid "
            "searched on one seed (--grid-seed) has its other seeds at the chosen point only.",
            ""] + table(["arch", "strategy", "workers", "seed", "setting", "dev frame acc (%)",
                         "dev CER (%)", ""], body) + [""]


def gmm_section(gmms: list[GmmRow], ladder: list[Contrast | None]) -> list[str]:
    """The GMM systems in ladder order; `ladder[i]`: system i's test CER minus system i - 1's on
    the same utterances."""
    lines = ["## GMM-HMM baselines", ""]
    if not gmms:
        return lines + [f"GMM systems: {NOT_RUN}."]

    def step(contrast: Contrast | None) -> str:
        if contrast is None:
            return "-"
        i = contrast.interval(LEVEL)
        return f"{i.estimate:+.2f} [{i.low:+.2f}, {i.high:+.2f}]" + \
            (" (resolved)" if i.excludes_zero() else "")

    body = [[system, cer_cell(cer.get("dev")) if cer else NOT_RUN,
             cer_cell(cer.get("test")) if cer else NOT_RUN, setting_cell(cer.get("dev")),
             step(contrast),
             fmt(cer["test_best"].cer if "test_best" in cer else None, ".2f"),
             "/".join(str(cer[s].failed) if s in cer else "-" for s in ("dev", "test"))]
            for (system, cer), contrast in zip(((g.name, g.cer) for g in gmms), ladder)]
    return lines + table(["system", "dev CER (%) [95% CI]", "test CER (%) [95% CI]",
                          "LM weight, penalty (dev)",
                          "test CER minus the system above's (points) [95% CI]",
                          "test CER best on test (%)", "failed utts dev/test"], body)


def comparison_row(c: Comparison) -> list[str]:
    i, r, t = c.interval, c.relative.interval(LEVEL), c.t()
    return [c.arch.upper(), str(c.workers), name(c.a), name(c.b), f"{c.cer_a:.2f}",
            f"{c.cer_b:.2f}", f"{i.estimate:+.2f} [{i.low:+.2f}, {i.high:+.2f}]",
            f"{r.estimate:+.1f}% [{r.low:+.1f}, {r.high:+.1f}]", str(c.seeds),
            c.signs() if c.seed_differences else "-",
            "-" if t is None else f"[{t.low:+.2f}, {t.high:+.2f}]", str(c.utterances),
            "yes" if c.resolved else "no", "yes" if c.resolved_family_wise else "no"]


def comparison_section(comparisons: list[Comparison], family: int) -> list[str]:
    level = 1.0 - (1.0 - LEVEL) / max(1, family)
    lines = ["## Same test utterances", "",
             f"B - A in test CER points and in percent of A, with 95% intervals from the same "
             f"bootstrap, both rows on the same draws (rows run with the same seeds are paired "
             f"by seed: the seed level's spread is the one of the per-seed differences); \"seeds "
             f"B better\" counts the seeds whose B run has the lower CER than their A run, and "
             f"the t-interval is Student's over the per-seed "
             f"differences (two seeds or more). An ordering is resolved when the interval "
             f"excludes zero and every seed's own difference has its sign. This report makes "
             f"{family} comparisons (this table, the parity tests on dev, the EMA's specificity "
             f"and the GMM ladder): at "
             f"95% each, about {0.05 * family:.1f} of them would exclude zero by chance with no "
             f"difference at all, so the last column asks the same at the family-wise "
             f"(Bonferroni) level {level:.2%}.", ""]
    if not comparisons:
        return lines + ["No two rows have decoded test results yet."]
    return lines + table(["arch", "workers", "A", "B", "A test CER", "B test CER",
                          "B - A (points) [95% CI]", "B - A (% of A) [95% CI]", "seeds",
                          "seeds B better", "per-seed t-interval", "utterances",
                          "resolved (95%)", f"resolved ({level:.2%})"],
                         [comparison_row(c) for c in comparisons])


def plot_section(plots: dict[str, str], out_dir: str) -> list[str]:
    titles = {"dev_frame_accuracy": "Dev frame accuracy per epoch: global model against its EMA",
              "training_loss": "Training and dev loss",
              "cer_vs_workers": "CER and frame accuracy against the number of workers",
              "speedup": "Speed-up against workers"}
    lines = ["## Plots", ""]
    for key, path in plots.items():
        lines += [f"![{titles.get(key, key)}]({os.path.relpath(path, out_dir)})", ""]
    if "speedup" not in plots:
        lines.append("Speed-up against workers: not measured (needs runs with 1 and N workers).")
    return lines


def run_section(rows: list[Row], gmm_dirs: list[str], out_dir: str) -> list[str]:
    lines = ["## Runs", ""]
    listed: set[tuple[str, ...]] = set()
    for row in rows:
        dirs = tuple(os.path.relpath(r.exp_dir, out_dir) for r in row.runs)
        if row.ran and dirs not in listed:   # the averaged models' rows share their runs
            listed.add(dirs)
            workers = row.workers()
            lines.append(f"- {row.arch.upper()} {name(row.base)} ({workers} worker"
                         f"{'' if workers == '1' else 's'}): {', '.join(dirs)}")
    for d in gmm_dirs:
        lines.append(f"- GMM: {os.path.relpath(d, out_dir)}")
    return lines


def render(title: str, notes: list[str], rows: list[Row],
           gmms: list[GmmRow], ladder: list[Contrast | None],
           comparisons: list[Comparison], parities: list, specificity: list, family: int,
           plots: dict[str, str], gmm_dirs: list[str], out_dir: str) -> str:
    lines = [f"# {title}", ""]
    if notes:
        lines += [f"- {n}" for n in notes] + [""]
    systems = [r.system for r in rows if r.system] + [g.system for g in gmms if g.system]
    lines += network_section(rows, resampling_text(systems)) + [""] + grid_section(rows)
    lines += sweep_section(rows)
    lines += regime_section(rows) + [""]
    warnings = grid_warnings(rows)
    if warnings:
        lines += ["## Scoring protocol", ""] + warnings + [""]
    lines += ["## What agrees and what disagrees with the paper", ""]
    lines += findings(rows, comparisons, parities, specificity, family)
    lines += [""] + gmm_section(gmms, ladder) + [""] + comparison_section(comparisons, family)
    lines += [""] + plot_section(plots, out_dir) + [""] + run_section(rows, gmm_dirs, out_dir)
    return "\n".join(lines).rstrip() + "\n"
