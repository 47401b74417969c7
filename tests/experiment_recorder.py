"""The steps/nnet/train.sh calls a recipe's experiment stage makes, recorded without training.

egs/aishell_sim/run.sh runs stage 8 (the experiment's training) in a work dir whose
steps/nnet/train.sh is a stand-in: it appends its arguments to train_calls.txt and leaves the
epoch-end checkpoints a warm start looks for; everything else (run.sh, steps/nnet/experiment.sh,
utils/, conf/, the `emasr` commands) is the repository's own. Run against the scripts of another
commit (`repo`, with its src/ first on PYTHONPATH) it records what that commit trained: how
tests/fixtures/experiment_trainings.json was made from main at 981d608, before the spec
(python tests/experiment_recorder.py <tree of 981d608> tests/fixtures/experiment_trainings.json).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

STAND_IN = """#!/usr/bin/env bash
printf '%q ' "$@" >> train_calls.txt
echo >> train_calls.txt
dir=${*: -1}
for e in $(seq -f %03g 1 30); do
  mkdir -p "$dir/checkpoints/epoch$e-block000000"
  touch "$dir/checkpoints/epoch$e-block000000/state.pt"
done
"""

# the recipe option sets recorded: the tiny profile as it is, and one that uses every experiment
# option the campaigns use but the grid seed (a grid, worker counts on nodes in processes of K, a
# warm start, several seeds and half-lives, one architecture's overrides, MA at 1 x the rate)
CASES = {
    "tiny": ["--profile", "tiny"],
    "options": ["--profile", "tiny", "--archs", "dnn", "--num-workers", "4 8", "--num-nodes", "2",
                "--workers-per-process", "2", "--seeds", "1 2", "--epochs", "4",
                "--block-size", "8", "--warm-start-epochs", "2",
                "--strategies", "single single+ema ma ma+ema bmuf bmuf+ema bmuf+avg",
                "--grid", "ma: train.lr=0.1,0.2; bmuf: sync.block_momentum=0.5,0.75",
                "--ema-half-life-frames", "1000,3000", "--ma-lr-times-workers", "false",
                "--nnet-opts", "train.momentum=0.5",
                "--dnn-opts", "train.final_epoch=best_dev_acc"],
}


def work_dir(repo: Path, work: Path) -> Path:
    recipe = repo / "egs" / "aishell_sim"
    work.mkdir(parents=True)
    for name in ("conf", "local"):
        (work / name).symlink_to(recipe / name)
    (work / "utils").symlink_to(repo / "utils")
    (work / "steps" / "nnet").mkdir(parents=True)
    (work / "steps" / "nnet" / "experiment.sh").symlink_to(repo / "steps/nnet/experiment.sh")
    (work / "steps" / "nnet" / "train.sh").write_text(STAND_IN)
    (work / "steps" / "nnet" / "train.sh").chmod(0o755)
    (work / "cmd.sh").write_text("export train_cmd=run.pl decode_cmd=run.pl cuda_cmd=run.pl\n")
    (work / "path.sh").write_text("")
    return work


def record(repo: Path, work: Path, options: list[str]) -> list[list[str]]:
    """The train.sh calls of run.sh stage 8 with `options`, each an argument list."""
    work = work_dir(repo, work)
    env = {**os.environ, "LC_ALL": "C", "PYTHONPATH": f"{repo / 'src'}",
           "PATH": f"{repo / 'utils'}:{os.environ['PATH']}"}
    result = subprocess.run([str(repo / "egs/aishell_sim/run.sh"), "--workdir", str(work),
                             "--stage", "8", "--stop-stage", "8", *options], cwd=work, env=env,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(result.stdout[-3000:] + result.stderr[-3000:])
    return [shlex.split(line) for line in (work / "train_calls.txt").read_text().splitlines()]


def normalized(call: list[str]) -> list[str]:
    """A call with its --set-opts' words joined by one space (the old driver left two at an
    empty part)."""
    out = list(call)
    for i, arg in enumerate(out[:-1]):
        if arg == "--set-opts":
            out[i + 1] = " ".join(out[i + 1].split())
    return out


if __name__ == "__main__":
    import tempfile

    tree, fixture = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        calls = {name: [normalized(c) for c in record(tree, Path(tmp) / name, options)]
                 for name, options in CASES.items()}
    fixture.write_text(json.dumps(calls, indent=1) + "\n")
