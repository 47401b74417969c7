#!/usr/bin/env python
"""Peak resident memory per training worker at two corpus sizes.

Trains the same DNN on synthetic data of N and 4N utterances through the training entry point
(`steps/nnet/train.sh`: torchrun, --workers gloo processes, one epoch) and samples every worker's
VmHWM (peak RSS, from /proc) while it runs. Training streams utterances from the ark files and
holds only a bounded shuffle buffer, so the peak should barely grow with the corpus: the printed
ratio (4N over N) is the check; about 1.0 is bounded, about 4.0 would be proportional.

Usage: python bench/memory.py [--utts 64] [--workers 2] [--frames 400]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from nnet_synthetic import make_corpus, write_targets  # noqa: E402

OVERRIDES = ["model.hidden_layers=2", "model.hidden_dim=256", "features.splice=2",
             "data.minibatch_frames=256", "data.shuffle_buffer_frames=4096", "sync.block_size=4",
             "sync.strategy=bmuf", "train.epochs=1", "train.schedule=constant"]


def make_data(root: str, utts: int, frames: int):
    labels = make_corpus(root, "train", speakers=max(1, utts // 8), utts_per_speaker=8, dim=40,
                         num_pdfs=200, min_frames=frames // 2, max_frames=frames * 3 // 2)
    labels.update(make_corpus(root, "dev", 1, 4, dim=40, num_pdfs=200, seed=5))
    return (write_targets(root, labels, num_pdfs=200), os.path.join(root, "train"),
            os.path.join(root, "dev"))


def worker_pids(exp: str) -> list[int]:
    """Processes running `emasr.cli train ... exp` (the workers, not the torchrun agent)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if exp.encode() in cmdline and b"emasr.cli" in cmdline \
                and b"torch.distributed.run" not in cmdline:
            pids.append(int(pid))
    return pids


def peak_kib(pid: int) -> int | None:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def train_and_watch(problem, exp: str, workers: int) -> dict[int, int]:
    """Run train.sh; return {pid: peak RSS KiB} of every worker, sampled every 50 ms."""
    env = dict(os.environ, EMASR_NUM_THREADS="1", LC_ALL="C",
               PATH=f"{REPO}/utils:{REPO}/steps:{os.environ['PATH']}")
    proc = subprocess.Popen([f"{REPO}/steps/nnet/train.sh", "--num-workers", str(workers),
                             "--set-opts", " ".join(OVERRIDES), *problem, exp],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peaks: dict[int, int] = {}
    while proc.poll() is None:
        for pid in worker_pids(exp):
            kib = peak_kib(pid)
            if kib is not None:
                peaks[pid] = max(peaks.get(pid, 0), kib)
        time.sleep(0.05)
    if proc.returncode != 0:
        sys.exit(f"training failed; see {exp}/log/train.log")
    return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--utts", type=int, default=64, help="N: utterances in the small corpus")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--frames", type=int, default=400, help="mean frames per utterance")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="emasr-memory-") as root:
        for utts in (args.utts, 4 * args.utts):
            where = os.path.join(root, f"n{utts}")
            problem = make_data(where, utts, args.frames)
            peaks = train_and_watch(problem, os.path.join(where, "exp"), args.workers)
            if len(peaks) < args.workers:
                sys.exit(f"saw {len(peaks)} of {args.workers} workers; they ended before sampling")
            results[utts] = max(peaks.values()) / 1024
            each = ", ".join(f"{kib / 1024:.0f}" for kib in sorted(peaks.values()))
            print(f"{utts:6d} utterances (about {utts * args.frames} frames): "
                  f"peak RSS per worker {each} MiB")
    small, large = results[args.utts], results[4 * args.utts]
    print(f"peak RSS per worker: N={args.utts}: {small:.0f} MiB, "
          f"4N={4 * args.utts}: {large:.0f} MiB, ratio 4N/N = {large / small:.2f}")


if __name__ == "__main__":
    main()
