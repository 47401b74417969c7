#!/usr/bin/env python
"""The training roofline on this machine: the small profile's networks at their campaign settings
(egs/aishell_sim/parity/run.sh; conf/nnet/*.yaml with the profile's options), trained by the
trainer on synthetic data of the campaign's shapes (80-dim fbank, 1185 pdfs), one worker and K
virtual workers (BMUF, dist.workers_per_process=K), each against references measured in the same
run on the same threads, in rounds (--repeats) of a trainer epoch, the plain loop on as many
frames, the steps alone, torch.mm at the layer shape and the matmul floor, so that a slow spell of the machine (one
measurement varies by +-15% here) hits every side of a ratio; a ratio is printed as the bests'
and, in brackets, the median of the rounds' own:

- frames/s: labelled frames trained per second by Trainer.run_epoch (data path, steps, syncs and
  the campaign's three EMAs; the epochs after a warm-up epoch), and by the workers' steps alone
  on minibatches already in memory ("steps alone": the trainer less its data path and syncs);
- a plain PyTorch loop: the same model (emasr's DNN, or nn.LSTM with proj_size and a Linear),
  SGD with the same momentum and clipping, minibatches drawn from one worker's shard in memory;
- FLOP/s: 6 x parameters per trained frame (forward 2, backward 4), plus for the LSTMP the
  recurrent work of the frames run but not trained (left context and output delay:
  6 x LSTM parameters x (left + delay) / chunk per frame);
- torch.mm at the layer shape (the DNN's hidden [256 x 512] x [512 x 512], the LSTMP's recurrent
  [8 x 128] x [128 x 1024]) and at 2048^3 (the machine's peak), and the step's matmul
  floor: every matmul of a training step at its shape, timed alone as torch.mm (what the
  arithmetic allows in these shapes, whatever runs between them).

Targets: the LSTMP's trainer >= 1.0 x the plain loop's frames/s; the DNN 8x512's
FLOP/s >= 0.9 x torch.mm at its layer shape; each for one worker and 8 virtual workers.
--profile prints each configuration's per-operator profile (torch.profiler, self CPU time) of a
few steps, where the time goes.

Usage: python bench/roofline.py [--models dnn8,dnn3,lstm] [--workers 1,8] [--threads 2]
                               [--frames 30000] [--repeats 3] [--json out.json] [--profile]
                               [--set key=value ...]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from nnet_synthetic import make_corpus, write_targets  # noqa: E402

from emasr.nnet import config as configs  # noqa: E402
from emasr.nnet.data import IGNORE, make_chunks  # noqa: E402
from emasr.nnet.workers.flat import model_to_vector  # noqa: E402
from emasr.nnet.models import build_model  # noqa: E402
from emasr.nnet.trainer import Trainer  # noqa: E402
from emasr.nnet.workers import predict, summed  # noqa: E402

FBANK, PDFS = 80, 1185   # the small profile's network features and tree (1185 pdfs)
EMAS = "average.ema_half_life_frames=[100000, 400000, 1600000]"   # parity/run.sh's
# the campaign's networks: conf/nnet/<file> with the small profile's and parity/run.sh's options
MODELS = {
    "dnn8": ("DNN 8x512", "dnn.yaml", ["model.hidden_layers=8", "model.hidden_dim=512"]),
    "dnn3": ("DNN 3x512", "dnn.yaml", ["model.hidden_layers=3", "model.hidden_dim=512"]),
    "lstm": ("LSTMP 3x256, projection 128", "lstm.yaml",
             ["model.num_layers=3", "model.hidden_size=256", "model.proj_size=128",
              "train.lr=0.1", "data.chunks_per_minibatch=8"]),
}


def make_problem(root: str, frames: int):
    """Synthetic train and dev sets of about `frames` network frames (utterances of 100-200)."""
    utts = max(16, frames // 150)
    labels = make_corpus(root, "train", speakers=utts // 8, utts_per_speaker=8, dim=FBANK,
                         num_pdfs=PDFS, min_frames=300, max_frames=600)
    labels.update(make_corpus(root, "dev", 1, 2, dim=FBANK, num_pdfs=PDFS, seed=5))
    return (write_targets(root, labels, num_pdfs=PDFS), os.path.join(root, "train"),
            os.path.join(root, "dev"))


def campaign_config(name: str, workers: int, extra: list[str]) -> configs.Config:
    _, conf, options = MODELS[name]
    rule = ["sync.strategy=single"] if workers == 1 else [
        "sync.strategy=bmuf", f"dist.workers_per_process={workers}"]
    return configs.resolve(os.path.join(REPO, "conf", "nnet", conf),
                           [*options, *rule, EMAS, "features.dim=80", "dist.device=cpu", *extra])


def flop_per_frame(model, config) -> float:
    """6 x parameters per trained frame, plus an LSTMP's frames run but not trained."""
    total = model_to_vector(model).numel()
    lstm = getattr(model, "lstm", None)
    if lstm is None:
        return 6.0 * total
    d = config.data
    recurrent = sum(p.numel() for p in lstm.parameters())
    return 6.0 * (total + recurrent * (d.left_context + d.output_delay) / d.chunk_frames)


def mm_flops(m: int, k: int, n: int, seconds: float = 0.2) -> float:
    """FLOP/s of torch.mm [m x k] x [k x n] on this process's threads (best of 3 timings)."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    out = torch.empty(m, n)
    torch.mm(a, b, out=out)
    calls = max(1, int(seconds * 1e11 / (2 * m * k * n)))   # about `seconds` at 100 GFLOP/s
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            torch.mm(a, b, out=out)
        best = min(best, (time.perf_counter() - start) / calls)
    return 2 * m * k * n / best


def linear_matmuls(rows: int, fan_in: int, fan_out: int, input_grad: bool = True) -> list:
    """(m, k, n) of a Linear's forward, weight gradient and (if needed) input gradient."""
    shapes = [(rows, fan_in, fan_out), (fan_out, rows, fan_in)]
    return shapes + ([(rows, fan_out, fan_in)] if input_grad else [])


def step_matmuls(model, config) -> list:
    """Every matmul (m, k, n) of one worker's training step, the best algorithm's: an LSTMP's
    input projections and weight gradients over all of a minibatch's frames at once, and per time
    step its recurrent matmul and projection, forward and backward."""
    lstm = getattr(model, "lstm", None)
    if lstm is None:
        linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        rows = config.data.minibatch_frames
        return [s for i, m in enumerate(linears)
                for s in linear_matmuls(rows, m.in_features, m.out_features, i > 0)]
    d = config.data
    b, t = d.chunks_per_minibatch, d.left_context + d.chunk_frames + d.output_delay
    hidden, proj, gates = lstm.hidden_size, lstm.proj_size, 4 * lstm.hidden_size
    shapes = []
    for layer in range(lstm.num_layers):
        fan_in = lstm.input_size if layer == 0 else proj
        shapes += linear_matmuls(b * t, fan_in, gates, layer > 0)
        shapes += [(gates, b * t, proj), (proj, b * t, hidden)]    # W_hh, W_hr gradients
        shapes += [(b, proj, gates), (b, hidden, proj), (b, gates, proj), (b, proj, hidden)] * t
    return shapes + linear_matmuls(b * d.chunk_frames, proj, model.num_pdfs)


def floor_seconds(shapes: list) -> float:
    """Seconds of the matmuls alone (each distinct shape timed once, then counted)."""
    counts: dict = {}
    for shape in shapes:
        counts[shape] = counts.get(shape, 0) + 1
    return sum(n * 2 * m * k * c / mm_flops(m, k, c, 0.05) for (m, k, c), n in counts.items())


def trainer_fps(trainer: Trainer, epoch: int) -> tuple[float, float]:
    """Labelled frames/s of one epoch of the trainer, and the epoch's labelled frames."""
    before = trainer.counters["frames"]
    start = time.perf_counter()
    trainer.run_epoch(epoch, 0)
    frames = trainer.counters["frames"] - before
    return frames / (time.perf_counter() - start), frames


def steps_fps(trainer: Trainer, examples, count: int) -> float:
    """Labelled frames/s of the workers' steps alone: `count` steps of random minibatches of
    `examples` (in memory: no data path, no loader thread, no sync)."""
    x_all, y_all = examples
    c = trainer.config
    batch = c.data.chunks_per_minibatch if trainer.mode.sequence else c.data.minibatch_frames
    takes = [[torch.randint(len(y_all), (batch,)) for _ in range(trainer.per_process)]
             for _ in range(count)]
    steps = [[(x_all[take], y_all[take]) for take in step] for step in takes]
    start = time.perf_counter()
    summed([trainer.local.step(step) for step in steps])
    frames = sum(int((y != IGNORE).sum()) for step in steps for _, y in step)
    return frames / (time.perf_counter() - start)


def shard_examples(trainer: Trainer):
    """Worker 0's shard in memory as the plain loop takes it: spliced frames, or chunks."""
    c, feats, labels = trainer.config, [], []
    for _, x, y in trainer.train_source.utterances(trainer.shards[0].utts):
        if trainer.mode.sequence:
            x, y = make_chunks(x, y, c.data.chunk_frames, c.data.left_context,
                               c.data.output_delay)
        feats.append(x)
        labels.append(y)
    return torch.from_numpy(np.concatenate(feats)), torch.from_numpy(np.concatenate(labels))


def plain_loop(trainer: Trainer, examples, frames: float) -> float:
    """Labelled frames/s of a plain PyTorch loop over about `frames` labelled frames: the same
    model (for the LSTMP nn.LSTM with proj_size and a Linear), SGD with the campaign's momentum
    and clipping, random minibatches of one worker's shard (already in memory)."""
    c = trainer.config
    x_all, y_all = examples
    batch = c.data.chunks_per_minibatch if trainer.mode.sequence else c.data.minibatch_frames
    torch.manual_seed(1)
    model = build_model(c.model, trainer.input_dim, trainer.num_pdfs)
    optimizer = torch.optim.SGD(model.parameters(), lr=c.train.lr, momentum=c.train.momentum)
    done, start = 0, time.perf_counter()
    while done < frames:
        take = torch.randint(len(y_all), (batch,))
        x, y = x_all[take], y_all[take]
        optimizer.zero_grad(set_to_none=True)
        out = predict(model, x, c.data)
        F.nll_loss(out.reshape(-1, out.shape[-1]), y.reshape(-1), ignore_index=IGNORE).backward()
        if c.train.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), c.train.max_grad_norm)
        optimizer.step()
        done += int((y != IGNORE).sum())
    return done / (time.perf_counter() - start)


def profile(trainer: Trainer, examples, count: int, rows: int = 15) -> str:
    """The per-operator profile (self CPU time) of `count` steps of the workers."""
    from torch.profiler import ProfilerActivity, profile as profiler

    with profiler(activities=[ProfilerActivity.CPU]) as prof:
        steps_fps(trainer, examples, count)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def measure(name: str, workers: int, problem, root: str, args, peak: float) -> dict:
    """One configuration: rounds of (a trainer epoch, the plain loop on as many frames, the
    steps alone, torch.mm at the layer shape, the matmul floor), alternated so that a slow spell
    of the machine hits every side of a ratio; each one's best, and the per-round ratios."""
    config = campaign_config(name, workers, args.set)
    trainer = Trainer(config, *problem, os.path.join(root, f"exp_{name}_{workers}"))
    trainer.setup()
    os.makedirs(trainer.exp_dir, exist_ok=True)
    _, frames = trainer_fps(trainer, 0)   # warm-up: allocations, first shapes (compilation)
    examples = shard_examples(trainer)
    shape = layer_shape(config)
    matmuls = step_matmuls(trainer.model, config)
    ours, plain, alone, mm, floors = [], [], [], [], []
    for round_ in range(args.repeats):
        ours.append(trainer_fps(trainer, 1 + round_)[0])
        plain.append(plain_loop(trainer, examples, frames))
        alone.append(steps_fps(trainer, examples, args.steps))
        mm.append(mm_flops(*shape))
        floors.append(floor_seconds(matmuls))
    flop, floor = flop_per_frame(trainer.model, config), min(floors)
    per_step = config.architecture.mode.minibatch_frames(config.data)
    result = {
        "model": name, "label": MODELS[name][0], "workers": workers,
        "parameters": model_to_vector(trainer.model).numel(), "flop_per_frame": flop,
        "frames_per_second": max(ours), "steps_frames_per_second": max(alone),
        "plain_loop_frames_per_second": max(plain),
        "vs_plain_loop": max(ours) / max(plain),
        "vs_plain_loop_per_round": [a / b for a, b in zip(ours, plain)],
        "gflops": flop * max(ours) / 1e9,
        "mm_layer_gflops": max(mm) / 1e9, "mm_layer_shape": shape,
        "vs_mm_layer": flop * max(ours) / max(mm),
        "vs_mm_layer_per_round": [flop * a / b for a, b in zip(ours, mm)],
        "mm_peak_gflops": peak / 1e9,
        "floor_gflops": flop * per_step / floor / 1e9,
        "vs_floor": flop * max(ours) * floor / (flop * per_step),
    }
    if args.profile:
        result["profile"] = profile(trainer, examples, args.steps)
    trainer.cleanup()
    return result


def layer_shape(config) -> tuple[int, int, int]:
    """The torch.mm shape the targets compare with: a DNN's hidden layer (minibatch x hidden
    times hidden x hidden), an LSTMP's recurrent matmul (chunks x projection times projection x
    4 hidden)."""
    m, d = config.model, config.data
    if m.type == "dnn":
        return d.minibatch_frames, m.hidden_dim, m.hidden_dim
    return d.chunks_per_minibatch, m.proj_size, 4 * m.hidden_size


def table(results: list[dict]) -> str:
    """The results as a markdown table; a ratio is the bests' (the median of the rounds' own
    ratios in brackets)."""
    head = ("| model | K | frames/s | steps alone | plain loop | vs plain | GFLOP/s | mm layer "
            "GFLOP/s (shape) | vs mm layer | matmul floor GFLOP/s | vs floor |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n")
    rows = [f"| {r['label']} | {r['workers']} | {r['frames_per_second']:.0f} | "
            f"{r['steps_frames_per_second']:.0f} | {r['plain_loop_frames_per_second']:.0f} | "
            f"{r['vs_plain_loop']:.2f} ({np.median(r['vs_plain_loop_per_round']):.2f}) | "
            f"{r['gflops']:.1f} | {r['mm_layer_gflops']:.1f} "
            f"({'x'.join(map(str, r['mm_layer_shape']))}) | {r['vs_mm_layer']:.2f} "
            f"({np.median(r['vs_mm_layer_per_round']):.2f}) | "
            f"{r['floor_gflops']:.1f} | {r['vs_floor']:.2f} |" for r in results]
    return head + "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="dnn8,dnn3,lstm", help=f"of {', '.join(MODELS)}")
    parser.add_argument("--workers", default="1,8", help="K virtual workers (1: one worker)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="torch threads (default: the cores, as `emasr train` takes them)")
    parser.add_argument("--frames", type=int, default=30000,
                        help="network frames of the synthetic training set (an epoch)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per configuration")
    parser.add_argument("--steps", type=int, default=16,
                        help="steps timed alone (and profiled, --profile) per round")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for every trainer (e.g. train.compile=true)")
    parser.add_argument("--profile", action="store_true",
                        help="a per-operator profile of each configuration's steps")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.getLogger("emasr").setLevel(logging.ERROR)   # BMUF's data rule: not the point here
    warnings.filterwarnings("ignore", message="LSTM with projections is not supported")
    models = args.models.split(",")
    peak = mm_flops(2048, 2048, 2048)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_roofline.") as root:
        problem = make_problem(root, args.frames)
        for name in models:
            for workers in map(int, args.workers.split(",")):
                results.append(measure(name, workers, problem, root, args, peak))
                print(table(results[-1:]).splitlines()[-1], flush=True)
    print(f"\n{torch.get_num_threads()} threads; torch.mm at 2048^3: {peak / 1e9:.1f} GFLOP/s; "
          f"load average {open('/proc/loadavg').read().split()[0]}\n")
    print(table(results))
    for r in results:
        if "profile" in r:
            print(f"\n{r['label']}, K = {r['workers']}: the steps' operators\n{r['profile']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({**provenance(), "threads": torch.get_num_threads(),
                       "mm_peak_gflops": peak / 1e9, "results": results}, f, indent=1)


def provenance() -> dict:
    """What the figures need beside them: the command, the code, the machine, the date."""
    import subprocess

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "unknown")
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return {"command": " ".join(sys.argv), "commit": commit, "emasr": os.path.dirname(
                sys.modules["emasr"].__file__), "cpu": cpu, "cores": len(os.sched_getaffinity(0)),
            "torch": torch.__version__, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_average": open("/proc/loadavg").read().split()[:3]}


if __name__ == "__main__":
    main()
