"""RESULTS.md: the paper's table, the GMM baselines, same-utterance comparisons, findings, plots."""
from __future__ import annotations

import os
from collections import Counter

from emasr.report.findings import findings, grid_warnings, name
from emasr.report.rows import CerSummary, Comparison, Row, find_row, relative_change

NOT_RUN = "not run"


def fmt(value, spec: str, empty: str = "-") -> str:
    return empty if value is None else format(value, spec)


def cer_cell(summary: CerSummary | None, spread: float | None = None) -> str:
    if summary is None:
        return "-"
    text = (f"{summary.cer:.2f} [{summary.interval.low:.2f}, {summary.interval.high:.2f}]"
            if summary.interval else f"{summary.cer:.2f} [no per-utt]")
    return text + (f" (sd {spread:.2f})" if spread is not None else "")


def relative_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


NETWORK_HEADER = ["arch", "strategy", "workers", "seeds", "lr", "dev frame acc (%)",
                  "dev CER (%) [95% CI]", "test CER (%) [95% CI]", "LM weight, penalty (dev)",
                  "test CER best on test (%)", "failed utts dev/test", "test vs BMUF",
                  "test vs single", "train time (s)", "syncs", "all-reduced / worker (MB)"]


def setting_cell(summary: CerSummary | None) -> str:
    if summary is None or not summary.settings:
        return "-"
    # one entry per distinct setting, with the number of seeds that chose it when more than one
    counts = Counter(f"{lmwt}, {wip}" for lmwt, wip in summary.settings)
    return "; ".join(s if n == 1 else f"{s} ({n} seeds)" for s, n in counts.items())


def failed_cell(row: Row) -> str:
    return "/".join(str(row.cer[s].failed) if s in row.cer else "-" for s in ("dev", "test"))


def network_row(row: Row, rows: list[Row]) -> list[str]:
    head = [row.arch.upper(), name(row.label)]
    if not row.ran:
        return head + [NOT_RUN] + [""] * (len(NETWORK_HEADER) - 3)
    acc = row.dev_acc()
    mb = row.total("bytes_reduced")
    best = row.cer.get("test_best")
    return head + [
        row.workers(), str(len(row.runs)), row.learning_rates(),
        fmt(None if acc is None else 100 * acc, ".2f"),
        cer_cell(row.cer.get("dev"), row.seed_spread("dev")),
        cer_cell(row.cer.get("test"), row.seed_spread("test")),
        setting_cell(row.cer.get("dev")), fmt(None if best is None else best.cer, ".2f"),
        failed_cell(row),
        relative_cell(relative_change(row, find_row(rows, row.arch, "bmuf", row.workers_key))
                      if row.base != "single" else None),
        relative_cell(relative_change(row, find_row(rows, row.arch, "single", 1))),
        fmt(row.total("seconds_train"), ".0f"), fmt(row.total("syncs"), ".0f"),
        fmt(None if mb is None else mb / 1e6, ".1f")]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(r) + " |" for r in rows])


def network_section(rows: list[Row]) -> list[str]:
    return ["## Networks", "",
            "CER in percent with the 95% bootstrap interval over the utterances (pooled over seeds; "
            "sd: the spread of the per-seed CERs). Each model's LM weight and insertion penalty "
            "are chosen on dev (its best dev CER) and the test CER is read at that setting; Kaldi's "
            "best-on-test CER is given beside it for reference only. Utterances without a "
            "hypothesis (failed decodes) are counted as all deletions. Relative changes are of "
            "the test CER, against BMUF at the same worker count and against the single worker. "
            "Train time, syncs and bytes all-reduced per worker are per run (mean over seeds); a "
            "+EMA, +avg (cumulative average) or +lastk (last-k epochs average) row decodes an "
            "averaged model of the training run of the row without it.", ""] + \
        table(NETWORK_HEADER, [network_row(r, rows) for r in rows])


def gmm_section(gmms: list[tuple[str, dict[str, CerSummary]]],
                ladder: list[float | None]) -> list[str]:
    """The GMM systems in ladder order; `ladder[i]`: P(system i has the lower test CER than
    system i - 1 on the same utterances)."""
    lines = ["## GMM-HMM baselines", ""]
    if not gmms:
        return lines + [f"GMM systems: {NOT_RUN}."]
    body = [[system, cer_cell(cer.get("dev")) if cer else NOT_RUN,
             cer_cell(cer.get("test")) if cer else NOT_RUN, setting_cell(cer.get("dev")),
             fmt(p_better, ".3f"),
             fmt(cer["test_best"].cer if "test_best" in cer else None, ".2f"),
             "/".join(str(cer[s].failed) if s in cer else "-" for s in ("dev", "test"))]
            for (system, cer), p_better in zip(gmms, ladder)]
    return lines + table(["system", "dev CER (%) [95% CI]", "test CER (%) [95% CI]",
                          "LM weight, penalty (dev)", "P(test better than the system above)",
                          "test CER best on test (%)", "failed utts dev/test"], body)


def comparison_section(comparisons: list[Comparison]) -> list[str]:
    lines = ["## Same test utterances", "",
             "P(B better): the share of bootstrap resamples of the same (seed, utterance) decodes in "
             "which B has the lower CER, P(A better) the same for A (ties count for neither; "
             "kaldialign's bootstrap).", ""]
    body = [[c.arch.upper(), str(c.workers), name(c.a), name(c.b), f"{c.cer_a:.2f}",
             f"{c.cer_b:.2f}", str(c.utterances), fmt(c.p_b_better, ".3f"),
             fmt(c.p_a_better, ".3f")] for c in comparisons]
    if not body:
        return lines + ["No two rows have decoded test results yet."]
    return lines + table(["arch", "workers", "A", "B", "A test CER", "B test CER", "utterances",
                          "P(B better)", "P(A better)"], body)


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
           gmms: list[tuple[str, dict[str, CerSummary]]], ladder: list[float | None],
           comparisons: list[Comparison],
           plots: dict[str, str], gmm_dirs: list[str], out_dir: str) -> str:
    lines = [f"# {title}", ""]
    if notes:
        lines += [f"- {n}" for n in notes] + [""]
    lines += network_section(rows) + [""]
    warnings = grid_warnings(rows)
    if warnings:
        lines += ["## Scoring protocol", ""] + warnings + [""]
    lines += ["## What agrees and what disagrees with the paper", ""] + findings(rows, comparisons)
    lines += [""] + gmm_section(gmms, ladder) + [""] + comparison_section(comparisons) + [""]
    lines += plot_section(plots, out_dir) + [""] + run_section(rows, gmm_dirs, out_dir)
    return "\n".join(lines).rstrip() + "\n"
