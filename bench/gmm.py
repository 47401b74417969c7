#!/usr/bin/env python3
"""GMM training speed: steps/train_lda_mllt.sh (tri2) and steps/train_sat.sh (tri3) beside
steps/train_deltas.sh (tri1), in one run, from the same alignments, data, tree size, Gaussians
and schedule (SAT on the alignments' own features, re-estimating fMLLR at passes 2, 4, 6).

Each step is run --repeats times, interleaved (deltas, LDA, SAT, deltas ...), each time into a
fresh exp dir; reported per step: wall and CPU seconds (the step's child processes) of the best
run, and the time per training frame per pass (seconds / (frames x passes)), in microseconds,
then the ratios LDA+MLLT / deltas and SAT / deltas. CPU time is reported beside wall time because it is stable
on a shared machine; both include each job's process start-up, which dominates small data sets.

Data: --data, --lang and --ali (an alignment dir: ali.JOB.gz, final.mdl, num_jobs), with
--utts to train on the first N utterances of --data (utils/subset_data_dir.sh) in one job (the
ali dir's alignments merged into one ali.1.gz; those of the other utterances are not used). Default: the Kaldi yesno fixture (its 31 training
recordings as 13-dim MFCC, Kaldi's monophone alignments), LDA to 10 dims (its 11 pdfs).

Usage: . ./path.sh && python bench/gmm.py [--num-iters 8] [--repeats 1] [--keep]
           [--data data/train --lang data/lang --ali exp/tri1_ali --utts 500 --dim 40]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))


def yesno_inputs(root: str) -> tuple[str, str, str]:
    from gmm_helpers import LANG, MONO, write_data_dir, yesno_mfcc_feats, yesno_texts
    data = str(write_data_dir(Path(root) / "train", yesno_mfcc_feats(dither=1.0),
                              yesno_texts()))
    return data, str(LANG), str(MONO)


def one_job_ali_dir(ali: str, out: str) -> str:
    """The ali dir as one job (ali.1.gz: the concatenated gzip members of all ali.JOB.gz), so
    that a subset of its data dir, split in one, finds every alignment in job 1."""
    os.makedirs(out)
    for name in ("final.mdl", "tree", "cmvn_opts", "phones.txt", "delta_order", "final.mat",
                 "splice_opts"):
        if os.path.exists(os.path.join(ali, name)):
            shutil.copy(os.path.join(ali, name), out)
    num_jobs = int(open(os.path.join(ali, "num_jobs")).read())
    with open(os.path.join(out, "ali.1.gz"), "wb") as merged:
        for job in range(1, num_jobs + 1):
            with open(os.path.join(ali, f"ali.{job}.gz"), "rb") as part:
                shutil.copyfileobj(part, merged)
    with open(os.path.join(out, "num_jobs"), "w") as f:
        f.write("1\n")
    return out


def num_frames(data: str) -> int:
    import kaldiio
    return sum(m.shape[0] for _, m in kaldiio.load_scp(os.path.join(data, "feats.scp")).items())


def env() -> dict:
    full = dict(os.environ)
    full["PATH"] = f"{REPO}/utils:{REPO}/steps:{full['PATH']}"
    full["LC_ALL"] = "C"
    return full


def run_step(args: list[str], cwd: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one step and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(args, cwd=cwd, env=env(), capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"{args[0]} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data"), parser.add_argument("--lang"), parser.add_argument("--ali")
    parser.add_argument("--utts", type=int, default=0, help="first N utterances (0: all)")
    parser.add_argument("--num-leaves", type=int, default=20)
    parser.add_argument("--totgauss", type=int, default=200)
    parser.add_argument("--num-iters", type=int, default=8)
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the work dir (exp dirs)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench_gmm.")
    if args.data:
        data, lang, ali = (os.path.abspath(p) for p in (args.data, args.lang, args.ali))
    else:
        data, lang, ali = yesno_inputs(work)
    if args.utts:
        subset = os.path.join(work, "subset")
        subprocess.run([f"{REPO}/utils/subset_data_dir.sh", data, str(args.utts), subset],
                       check=True, env=env(), capture_output=True)
        data, ali = subset, one_job_ali_dir(ali, os.path.join(work, "ali"))
    frames = num_frames(data)
    iters = args.num_iters
    common = ["--num-iters", str(iters), "--max-iter-inc", str(max(iters - 2, 1)),
              "--realign-iters", " ".join(str(x) for x in (iters // 2,) if x > 0),
              "--tree-thresh", "100"]
    steps = {
        "train_deltas.sh": [f"{REPO}/steps/train_deltas.sh", *common],
        "train_lda_mllt.sh": [f"{REPO}/steps/train_lda_mllt.sh", *common, "--dim",
                              str(args.dim), "--mllt-iters",
                              " ".join(str(x) for x in (2, 4, 6) if x < iters)],
        "train_sat.sh": [f"{REPO}/steps/train_sat.sh", *common, "--fmllr-iters",
                         " ".join(str(x) for x in (2, 4, 6) if x < iters)],
    }
    best: dict[str, tuple[float, float]] = {}
    for repeat in range(args.repeats):
        for name, command in steps.items():
            exp = os.path.join(work, f"exp_{name.split('.')[0]}_{repeat}")
            wall, cpu = run_step([*command, str(args.num_leaves), str(args.totgauss), data, lang,
                                  ali, exp], work)
            if name not in best or wall < best[name][0]:
                best[name] = (wall, cpu)
    passes = iters - 1
    print(f"{frames} training frames ({frames / 100:.0f} s), {passes} passes, "
          f"{args.num_leaves} leaves, {args.totgauss} Gaussians; best of {args.repeats}")
    for name, (wall, cpu) in best.items():
        print(f"{name:18s} wall {wall:7.1f} s  CPU {cpu:7.1f} s  "
              f"{1e6 * wall / (frames * passes):8.2f} us wall / {1e6 * cpu / (frames * passes):8.2f}"
              " us CPU per frame per pass")
    w_d, c_d = best["train_deltas.sh"]
    for label, name in (("LDA+MLLT", "train_lda_mllt.sh"), ("SAT", "train_sat.sh")):
        wall, cpu = best[name]
        print(f"ratio {label} / deltas: wall {wall / w_d:.2f}, CPU {cpu / c_d:.2f}")
    if args.keep:
        print(f"(work dir {work})")
    else:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
