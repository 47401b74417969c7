#!/usr/bin/env python
"""Training speed checks, each a ratio against a reference measured in the same run:

(a) the trainer's frames/s against a minimal hand-written PyTorch loop (same model, same data
    already in memory, same minibatch size and optimizer); target >= 90%;
(b) one EMA update against one training block; target < 1%;
(c) one sync (flatten + all-reduce + rule + unflatten) against one block, from a 2-worker run;
(d) speed-up against the number of workers (--workers 1,2,4,8): total training frames/s of N
    workers over 1 worker, the same data (one epoch) split among them, --threads per worker.

--device cuda runs all of it on the GPU (the hand-written loop too, its data already there); with
more workers than GPUs the workers share them through gloo (dist.device, dist.backend).

Usage: python bench/train.py [--workers 1,2] [--utts 64] [--hidden 256] [--layers 4] [--tau 4]
                           [--device cpu|cuda] [--json speedup.json]   (for `emasr report --bench`)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from nnet_synthetic import make_corpus, write_targets  # noqa: E402

from emasr.nnet import config as configs  # noqa: E402
from emasr.nnet.flat import model_to_vector  # noqa: E402
from emasr.nnet.models import build_model  # noqa: E402
from emasr.nnet.sync import ExponentialMovingAverage  # noqa: E402
from emasr.nnet.trainer import Trainer  # noqa: E402


def make_data(root: str, utts: int, dim: int, pdfs: int):
    labels = make_corpus(root, "train", speakers=max(1, utts // 8), utts_per_speaker=8, dim=dim,
                         num_pdfs=pdfs, min_frames=300, max_frames=600)
    labels.update(make_corpus(root, "dev", 1, 4, dim=dim, num_pdfs=pdfs, seed=5))
    return (write_targets(root, labels, num_pdfs=pdfs), os.path.join(root, "train"),
            os.path.join(root, "dev"))


def overrides(args) -> list[str]:
    return [f"model.hidden_layers={args.layers}", f"model.hidden_dim={args.hidden}",
            "features.splice=2", f"data.minibatch_frames={args.batch}",
            "data.shuffle_buffer_frames=2048", f"sync.block_size={args.tau}", "train.epochs=1",
            "train.schedule=constant", "train.lr=0.02", "sync.strategy=single",
            f"dist.device={args.device}"]


def make_trainer(problem, exp, args) -> Trainer:
    trainer = Trainer(configs.resolve(None, overrides(args)), *problem, exp)
    trainer.setup()
    os.makedirs(exp, exist_ok=True)
    return trainer


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":   # GPU work is asynchronous: wait for it before reading the clock
        torch.cuda.synchronize(device)


def trainer_fps(trainer: Trainer) -> float:
    """Frames/s of one epoch of the trainer's own loop (data streaming, blocks, syncs)."""
    frames_before = trainer.counters["frames"]
    start = time.perf_counter()
    trainer.run_epoch(0, 0)
    synchronize(trainer.device)
    return (trainer.counters["frames"] - frames_before) / (time.perf_counter() - start)


def hand_loop(trainer: Trainer, args) -> float:
    """Frames/s of a bare loop over the same frames (loaded into memory first, not timed)."""
    feats, labels = [], []
    for _, x, y in trainer.train_source.utterances(trainer.data.utts):
        feats.append(x)
        labels.append(y)
    device = trainer.device
    x_all = torch.from_numpy(np.concatenate(feats)).to(device)
    y_all = torch.from_numpy(np.concatenate(labels)).to(device)
    torch.manual_seed(1)
    model = build_model(trainer.config["model"], trainer.input_dim, trainer.num_pdfs).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    order = torch.randperm(len(y_all), device=device)
    frames = int(trainer.counters["frames"] / trainer.counters["syncs"]) * trainer.counters["syncs"]
    frames = min(frames, len(order))   # about the frames one trainer epoch trains
    start = time.perf_counter()
    for i in range(0, frames, args.batch):
        take = order[i:i + args.batch]
        optimizer.zero_grad(set_to_none=True)
        F.nll_loss(model(x_all[take]), y_all[take]).backward()
        optimizer.step()
    synchronize(device)
    return frames / (time.perf_counter() - start)


def ema_cost(trainer: Trainer) -> float:
    vector = model_to_vector(trainer.model)
    ema = ExponentialMovingAverage(0.99)
    ema.update(vector)
    reps = 200
    start = time.perf_counter()
    for _ in range(reps):
        ema.update(vector)
    synchronize(vector.device)
    return (time.perf_counter() - start) / reps


def run_workers(problem, exp, workers: int, args, strategy: str) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           str(workers), "--module", "emasr.cli", "train",
           *sum((["--set", o] for o in overrides(args)), []), "--strategy", strategy, *problem, exp]
    env = dict(os.environ, EMASR_NUM_THREADS=str(args.threads))
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{workers} workers failed:\n{result.stderr[-3000:]}")
    with open(os.path.join(exp, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if '"epoch"' in line and '"type": "epoch"' in line][-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--workers", default="1,2", help="worker counts for the speed-up curve")
    parser.add_argument("--utts", type=int, default=128)
    parser.add_argument("--dim", type=int, default=40)
    parser.add_argument("--pdfs", type=int, default=200)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--tau", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the trainer, the hand-written loop and the workers run")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads per worker (and for (a)); 1 keeps workers independent")
    parser.add_argument("--json", default=None,
                        help="also write (d) here as [{workers, frames_per_second}] for "
                             "`emasr report --bench`")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="bench_train.") as root:
        problem = make_data(root, args.utts, args.dim, args.pdfs)
        trainer = make_trainer(problem, os.path.join(root, "exp_a"), args)
        # alternate the two and keep each one's best, so load from other processes hits both
        ours, loop = [], []
        for _ in range(args.repeats):
            ours.append(trainer_fps(trainer))
            loop.append(hand_loop(trainer, args))
        name = torch.cuda.get_device_name(trainer.device) if args.device == "cuda" else None
        print(f"device: {trainer.device}" + (f" ({name})" if name else ""))
        print(f"model: DNN {args.layers}x{args.hidden}, input {trainer.input_dim}, "
              f"{trainer.num_pdfs} pdfs, {model_to_vector(trainer.model).numel()} parameters; "
              f"{int(trainer.counters['frames'] / args.repeats)} frames per epoch, minibatch "
              f"{args.batch}, tau {args.tau}, {torch.get_num_threads()} threads, best of "
              f"{args.repeats}")
        print(f"(a) trainer {max(ours):.0f} frames/s, hand-written loop {max(loop):.0f} frames/s: "
              f"{100 * max(ours) / max(loop):.1f}% (target >= 90%)")
        block = trainer.counters["seconds_compute"] / trainer.counters["syncs"]
        ema = ema_cost(trainer)
        print(f"(b) EMA update {1e3 * ema:.3f} ms, training block {1e3 * block:.1f} ms: "
              f"{100 * ema / block:.3f}% (target < 1%)")
        results = {}
        for n in [int(w) for w in args.workers.split(",")]:
            strategy = "single" if n == 1 else "bmuf"
            results[n] = run_workers(problem, os.path.join(root, f"exp_{n}"), n, args, strategy)
        if 2 in results:
            r = results[2]
            print(f"(c) 2 workers: sync (all-reduce) {1e3 * r['seconds_comm'] / r['syncs']:.2f} ms, "
                  f"block {1e3 * r['seconds_compute'] / r['syncs']:.1f} ms: "
                  f"{100 * r['seconds_comm'] / r['seconds_compute']:.1f}%; "
                  f"{r['bytes_reduced'] / r['syncs'] / 1e6:.2f} MB per sync per worker")
        base = results[min(results)]["frames"] / results[min(results)]["seconds_train"]
        print("(d) workers  frames/s  speed-up  (all workers together, one epoch)")
        curve = [{"workers": n, "frames_per_second": r["frames"] / r["seconds_train"]}
                 for n, r in results.items()]
        for point in curve:
            fps = point["frames_per_second"]
            print(f"    {point['workers']:7d}  {fps:8.0f}  {fps / base:8.2f}")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(curve, f, indent=1)


if __name__ == "__main__":
    main()
