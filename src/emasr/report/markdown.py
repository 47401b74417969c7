"""RESULTS.md: the paper's table, the GMM baselines, same-utterance comparisons, findings, plots."""
from __future__ import annotations

import os

from emasr.report.findings import findings, name
from emasr.report.rows import CerSummary, Comparison, Row, relative_change

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
                  "dev CER (%) [95% CI]", "test CER (%) [95% CI]", "test vs BMUF", "test vs single",
                  "train time (s)", "syncs", "all-reduced / worker (MB)"]


def network_row(row: Row, by_key: dict) -> list[str]:
    head = [row.arch.upper(), name(row.label)]
    if not row.ran:
        return head + [NOT_RUN] + [""] * (len(NETWORK_HEADER) - 3)
    acc = row.dev_acc()
    mb = row.total("bytes_reduced")
    return head + [
        row.workers(), str(len(row.runs)), row.learning_rates(),
        fmt(None if acc is None else 100 * acc, ".2f"),
        cer_cell(row.cer.get("dev"), row.seed_spread("dev")),
        cer_cell(row.cer.get("test"), row.seed_spread("test")),
        relative_cell(relative_change(row, by_key.get((row.arch, "bmuf")))),
        relative_cell(relative_change(row, by_key.get((row.arch, "single")))),
        fmt(row.total("seconds_train"), ".0f"), fmt(row.total("syncs"), ".0f"),
        fmt(None if mb is None else mb / 1e6, ".1f")]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(r) + " |" for r in rows])


def network_section(rows: list[Row]) -> list[str]:
    by_key = {(r.arch, r.label): r for r in rows}
    return ["## Networks", "",
            "CER in percent with the 95% bootstrap interval over test utterances (pooled over seeds; "
            "sd: the spread of the per-seed CERs). Relative changes are of the test CER. Train time, "
            "syncs and bytes all-reduced per worker are per run (mean over seeds); an EMA row shares "
            "its training run with the row above it.", ""] + \
        table(NETWORK_HEADER, [network_row(r, by_key) for r in rows])


def gmm_section(gmms: list[tuple[str, dict[str, CerSummary]]]) -> list[str]:
    lines = ["## GMM-HMM baselines", ""]
    if not gmms:
        return lines + [f"GMM systems: {NOT_RUN}."]
    body = [[system, cer_cell(cer.get("dev")) if cer else NOT_RUN,
             cer_cell(cer.get("test")) if cer else NOT_RUN] for system, cer in gmms]
    return lines + table(["system", "dev CER (%) [95% CI]", "test CER (%) [95% CI]"], body)


def comparison_section(comparisons: list[Comparison]) -> list[str]:
    lines = ["## Same test utterances", "",
             "P(B better): the share of bootstrap resamples of the same (seed, utterance) decodes in "
             "which B has the lower CER, P(A better) the same for A (ties count for neither; "
             "kaldialign's bootstrap).", ""]
    body = [[c.arch.upper(), name(c.a), name(c.b), f"{c.cer_a:.2f}", f"{c.cer_b:.2f}",
             str(c.utterances), fmt(c.p_b_better, ".3f"), fmt(c.p_a_better, ".3f")]
            for c in comparisons]
    if not body:
        return lines + ["No two rows have decoded test results yet."]
    return lines + table(["arch", "A", "B", "A test CER", "B test CER", "utterances",
                          "P(B better)", "P(A better)"], body)


def plot_section(plots: dict[str, str], out_dir: str) -> list[str]:
    titles = {"dev_frame_accuracy": "Dev frame accuracy per epoch: global model against its EMA",
              "training_loss": "Training and dev loss",
              "speedup": "Speed-up against workers"}
    lines = ["## Plots", ""]
    for key, path in plots.items():
        lines += [f"![{titles.get(key, key)}]({os.path.relpath(path, out_dir)})", ""]
    if "speedup" not in plots:
        lines.append("Speed-up against workers: not measured (needs runs with 1 and N workers).")
    return lines


def run_section(rows: list[Row], gmm_dirs: list[str], out_dir: str) -> list[str]:
    lines = ["## Runs", ""]
    for row in rows:
        if row.ran:
            dirs = ", ".join(os.path.relpath(r.exp_dir, out_dir) for r in row.runs)
            lines.append(f"- {row.arch.upper()} {name(row.label)}: {dirs}")
    for d in gmm_dirs:
        lines.append(f"- GMM: {os.path.relpath(d, out_dir)}")
    return lines


def render(title: str, notes: list[str], rows: list[Row],
           gmms: list[tuple[str, dict[str, CerSummary]]], comparisons: list[Comparison],
           plots: dict[str, str], gmm_dirs: list[str], out_dir: str) -> str:
    lines = [f"# {title}", ""]
    if notes:
        lines += [f"- {n}" for n in notes] + [""]
    lines += network_section(rows) + [""]
    lines += ["## What agrees and what disagrees with the paper", ""] + findings(rows, comparisons)
    lines += [""] + gmm_section(gmms) + [""] + comparison_section(comparisons) + [""]
    lines += plot_section(plots, out_dir) + [""] + run_section(rows, gmm_dirs, out_dir)
    return "\n".join(lines).rstrip() + "\n"
