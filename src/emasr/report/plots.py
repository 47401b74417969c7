"""PNG plots of the report (matplotlib, Agg backend: no display needed).

- dev_frame_accuracy.png: dev frame accuracy per epoch of the global model (solid) against its
  averaged models (EMA dashed, cumulative average dotted, last-k dash-dotted), per architecture;
- training_loss.png: training loss per sync block (and dev loss per epoch) against training frames,
  on a log axis (a diverging run stays on the plot without flattening the others);
- cer_vs_workers.png: dev-tuned test CER (with its 95% interval), dev CER and dev frame accuracy
  against the number of workers, for every parallel rule and its averaged models (the one-worker
  rule at N = 1);
- speedup.png: training frames per second against workers, relative to one worker, from the
  recipe's runs and from a benchmark's JSON when given.
"""
from __future__ import annotations

import json
import os

from emasr.io.atomic import atomic_write
from emasr.nnet.averages import AVERAGED_MODELS, family
from emasr.nnet.sync import RULES, one_worker_rule
from emasr.report.rows import Row
from emasr.report.systems import NetworkRun

GLOBAL_STYLE = "-o"   # the global model's line; an averaged model's is its registry entry's


def color(strategy: str) -> str | None:
    return RULES[strategy].color if strategy in RULES else None


def one_worker(strategy: str) -> bool:
    """Whether the rule trains one worker only (its runs are named and plotted without N)."""
    return strategy in RULES and not RULES[strategy].parallel


def style(model: str) -> str:
    """The line style of a model (final, or a kept averaged model such as ema_90000)."""
    return GLOBAL_STYLE if model == "final" else AVERAGED_MODELS[family(model)].style


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: str) -> str:
    with atomic_write(path, mode="wb") as f:
        fig.savefig(f, format="png", dpi=110, bbox_inches="tight")
    pyplot().close(fig)
    return path


def plotted_runs(runs: list[NetworkRun], rows: list[Row]) -> list[NetworkRun]:
    """The runs the table's rows stand on (a grid's other points left out), else every run."""
    chosen = {run.exp_dir: run for row in rows for run in row.runs}
    return list(chosen.values()) or runs


def first_seed_runs(runs: list[NetworkRun], arch: str) -> list[NetworkRun]:
    """One run per strategy and worker count (the lowest seed): curves of several seeds would
    hide each other."""
    chosen: dict[tuple[str, int], NetworkRun] = {}
    ordered = sorted((r for r in runs if r.arch == arch),
                     key=lambda r: (r.strategy, r.workers or 0, r.seed, r.lr))
    for run in ordered:
        chosen.setdefault((run.strategy, run.workers or 0), run)
    return [chosen[k] for k in sorted(chosen)]


def run_name(run: NetworkRun) -> str:
    return run.strategy if one_worker(run.strategy) else f"{run.strategy} N={run.workers}"


def axes_grid(plt, archs: list[str]):
    fig, axes = plt.subplots(1, max(1, len(archs)), figsize=(5.5 * max(1, len(archs)), 4),
                             squeeze=False)
    return fig, axes[0]


LEGEND_INSIDE = 6   # more curves than this: the legend goes below the panel, off the curves


def finish_axes(ax) -> None:
    """Grid and legend, or "not run" on a panel with no curve."""
    ax.grid(alpha=0.3)
    # the curves of plot(); errorbar() labels its container, so CER panels keep theirs inside
    labelled = [line for line in ax.lines if not line.get_label().startswith("_")]
    if len(labelled) > LEGEND_INSIDE:   # a legend this long would cover the converged curves
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    elif ax.lines:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)


def plot_dev_accuracy(runs: list[NetworkRun], archs: list[str], path: str) -> str:
    plt = pyplot()
    fig, axes = axes_grid(plt, archs)
    for ax, arch in zip(axes, archs):
        for run in first_seed_runs(runs, arch):
            epochs = [e["epoch"] for e in run.metrics.epochs]
            ax.plot(epochs, [100 * e["dev_acc"] for e in run.metrics.epochs], style("final"),
                    color=color(run.strategy), label=f"{run_name(run)} global")
            for model in run.averages:
                key = f"dev_acc_{model}"
                points = [(e["epoch"], e[key]) for e in run.metrics.epochs if key in e]
                if points:
                    ax.plot([x for x, _ in points], [100 * y for _, y in points], style(model),
                            color=color(run.strategy), label=f"{run_name(run)} {model}")
        ax.set(title=f"{arch.upper()}: dev frame accuracy per epoch", xlabel="epoch",
               ylabel="dev frame accuracy (%)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        finish_axes(ax)
    return save(fig, path)


def training_loss_figure(runs: list[NetworkRun], archs: list[str]):
    """Loss on a log axis: a run that diverges (MA's loss at 10^4, say) leaves the others'
    curves readable."""
    plt = pyplot()
    fig, axes = axes_grid(plt, archs)
    for ax, arch in zip(axes, archs):
        for run in first_seed_runs(runs, arch):
            blocks = run.metrics.blocks
            ax.plot([b.get("frames", i) for i, b in enumerate(blocks)], [b["loss"] for b in blocks],
                    "-", color=color(run.strategy), alpha=0.8, label=f"{run_name(run)} train")
            epochs = [e for e in run.metrics.epochs if "dev_loss" in e]
            ax.plot([e.get("frames", e["epoch"]) for e in epochs], [e["dev_loss"] for e in epochs],
                    "o:", color=color(run.strategy), label=f"{run_name(run)} dev (global)")
        ax.set(title=f"{arch.upper()}: cross-entropy", xlabel="training frames (all workers)",
               ylabel="loss per frame (log scale)")
        if ax.lines:
            ax.set_yscale("log")
        finish_axes(ax)
    return fig


def plot_training_loss(runs: list[NetworkRun], archs: list[str], path: str) -> str:
    return save(training_loss_figure(runs, archs), path)


def workers_series(rows: list[Row], arch: str, label: str, value) -> list[tuple[int, tuple]]:
    """(N, value(row)) for the rows of `label` at each worker count, the one-worker rule's row at
    N = 1 first (the same model of one worker)."""
    base, _, model = label.partition("+")
    single = one_worker_rule() + (f"+{model}" if model else "")
    points = []
    for row in rows:
        if row.arch == arch and row.ran and row.label in (label, single):
            v = value(row)
            if v is not None:
                points.append((1 if one_worker(row.base) else row.workers_key, v))
    return sorted(set(points))


def plot_cer_vs_workers(rows: list[Row], archs: list[str], path: str) -> str | None:
    """None unless some strategy ran at two or more worker counts (single counting as N = 1)."""
    def test(row):
        s = row.cer.get("test")
        if s is None:
            return None
        interval = s.interval
        # a percentile interval need not contain the point estimate: clip the bars at it
        return (s.cer, max(0.0, s.cer - interval.low) if interval else 0.0,
                max(0.0, interval.high - s.cer) if interval else 0.0)

    panels = [("test CER (%), dev-tuned", test),
              ("dev CER (%)", lambda r: (r.cer["dev"].cer, 0.0, 0.0) if "dev" in r.cer else None),
              ("dev frame accuracy (%)",
               lambda r: None if r.dev_acc() is None else (100 * r.dev_acc(), 0.0, 0.0))]
    labels = list(dict.fromkeys(r.label for r in rows if r.base in RULES
                                and RULES[r.base].parallel))
    series = {(arch, label): [workers_series(rows, arch, label, f) for _, f in panels]
              for arch in archs for label in labels}
    if not any(len(s[0]) >= 2 for s in series.values()):
        return None
    plt = pyplot()
    fig, axes = plt.subplots(len(archs), 3, figsize=(16, 4 * len(archs)), squeeze=False)
    for i, arch in enumerate(archs):
        for j, (title, _) in enumerate(panels):
            ax = axes[i][j]
            for label in labels:
                points = series[(arch, label)][j]
                if len(points) < 1:
                    continue
                base, _, model = label.partition("+")
                ax.errorbar([n for n, _ in points], [v[0] for _, v in points],
                            yerr=[[v[1] for _, v in points], [v[2] for _, v in points]],
                            fmt=style(model or "final"), color=color(base), capsize=3,
                            label=label)
            ax.set(title=f"{arch.upper()}: {title}", xlabel="workers (single: N = 1)")
            ax.set_xscale("log", base=2)
            finish_axes(ax)
    fig.tight_layout()
    return save(fig, path)


def read_bench(path: str) -> dict[int, float]:
    """A benchmark's speed-up JSON: [{"workers": N, "frames_per_second": F}, ...] or {N: F}."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = data.get("results", data)
    if isinstance(data, dict):
        return {int(k): float(v) for k, v in data.items()}
    return {int(d["workers"]): float(d["frames_per_second"]) for d in data}


def speedup_series(runs: list[NetworkRun], arch: str) -> dict[int, float]:
    """Workers -> frames/s of this arch's runs (the mean over strategies and seeds per count)."""
    sums: dict[int, list[float]] = {}
    for run in runs:
        fps = run.metrics.frames_per_second()
        if run.arch == arch and run.workers and fps:
            sums.setdefault(run.workers, []).append(fps)
    return {n: sum(v) / len(v) for n, v in sorted(sums.items())}


def plot_speedup(runs: list[NetworkRun], archs: list[str], bench: str | None,
                 path: str) -> str | None:
    """None when no two worker counts were measured."""
    series = {arch: speedup_series(runs, arch) for arch in archs}
    if bench and os.path.isfile(bench):
        series["bench"] = read_bench(bench)
    series = {k: v for k, v in series.items() if len(v) >= 2 and min(v) == 1}
    if not series:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    top = 1
    for label, points in series.items():
        workers = sorted(points)
        ax.plot(workers, [points[n] / points[1] for n in workers], "-o", label=label)
        top = max(top, workers[-1])
    ax.plot([1, top], [1, top], ":", color="gray", label="linear")
    ax.set(title="speed-up against workers", xlabel="workers",
           ylabel="training frames/s relative to 1 worker")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def write_plots(runs: list[NetworkRun], archs: list[str], plot_dir: str,
                bench: str | None = None, rows: list[Row] = ()) -> dict[str, str]:
    """name -> path of every plot written."""
    path = lambda name: os.path.join(plot_dir, name)  # noqa: E731
    curves = plotted_runs(runs, list(rows))
    out = {"dev_frame_accuracy": plot_dev_accuracy(curves, archs, path("dev_frame_accuracy.png")),
           "training_loss": plot_training_loss(curves, archs, path("training_loss.png"))}
    by_workers = plot_cer_vs_workers(list(rows), archs, path("cer_vs_workers.png"))
    if by_workers:
        out["cer_vs_workers"] = by_workers
    speedup = plot_speedup(runs, archs, bench, path("speedup.png"))
    if speedup:
        out["speedup"] = speedup
    return out
