"""Worker failures under torchrun, injected from outside: a worker SIGKILLed mid-training makes
torchrun restart the group, which resumes from the last complete checkpoint and ends with exactly
the parameters of an uninterrupted run; a frozen (SIGSTOPped) worker is reported by rank when a
collective times out instead of stalling the job."""
import json
import os
import re
import signal
import subprocess
import time

import pytest
import torch

from emasr.nnet.training import checkpoint
from conftest import REPO, find_process
from nnet_synthetic import TINY_DNN, make_problem

# Enough blocks that a kill after the first checkpoint lands well before the end; a checkpoint
# every 2 blocks so the restart resumes mid-epoch.
OVERRIDES = TINY_DNN + ["sync.strategy=bmuf", "average.ema_decay=0.8", "train.schedule=constant",
                        "train.epochs=5", "train.checkpoint_every_blocks=2"]


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    return make_problem(str(tmp_path_factory.mktemp("faults")), train_speakers=6,
                        utts_per_speaker=6)


def start_training(problem, exp, overrides, max_restarts):
    """steps/nnet/train.sh with 2 gloo workers (torchrun --standalone), in the background."""
    targets, train_dir, dev_dir = problem
    env = dict(os.environ, EMASR_NUM_THREADS="1", LC_ALL="C",
               PATH=f"{REPO / 'utils'}:{REPO / 'steps'}:{os.environ['PATH']}")
    return subprocess.Popen(
        [str(REPO / "steps" / "nnet" / "train.sh"), "--num-workers", "2", "--max-restarts",
         str(max_restarts), "--set-opts", " ".join(overrides), targets, train_dir, dev_dir,
         str(exp)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)


def finish(proc, timeout=240):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"training did not finish within {timeout} s:\n{out[-3000:]}")
    return proc.returncode, out


def worker_pid(exp, rank):
    """The pid of the `emasr train` process of `rank` training into `exp` (from /proc)."""
    return find_process([str(exp).encode(), b"emasr.cli"], [f"RANK={rank}".encode()])


def wait_for(condition, proc, timeout=120, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc.poll() is not None:
            pytest.fail(f"training ended before {what}:\n{proc.stdout.read()[-3000:]}")
        time.sleep(0.01)
    pytest.fail(f"no {what} within {timeout} s")


def state_dict(path):
    return checkpoint.load(path)["state_dict"]


def metrics_without_timings(exp):
    records = [json.loads(line) for line in open(exp / "metrics.jsonl")]
    return [{k: v for k, v in r.items() if not k.startswith("seconds")} for r in records]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_killed_worker_restarts_group_and_resumes_to_the_same_parameters(problem, tmp_path):
    code, out = finish(start_training(problem, tmp_path / "ref", OVERRIDES, max_restarts=0))
    assert code == 0, out[-3000:]

    exp = tmp_path / "faulty"
    proc = start_training(problem, exp, OVERRIDES, max_restarts=1)
    wait_for(lambda: checkpoint.latest(str(exp)), proc, what="first checkpoint")
    victim = wait_for(lambda: worker_pid(exp, 1), proc, what="rank 1 process")
    os.kill(victim, signal.SIGKILL)   # the external fault: no chance to clean up
    code, out = finish(proc)
    log = (exp / "log" / "train.log").read_text()
    assert code == 0, out[-3000:] + log[-3000:]
    assert "worker group restart 1: resuming" in log
    resumed = re.findall(r"resumed from \S*/checkpoints/epoch(\d+)-block(\d+)", log)
    assert resumed, log[-3000:]
    # it resumed mid-run: the restarted group had epochs left to train
    assert int(resumed[0][0]) < 5
    for name in ("final.pt", "ema.pt"):
        want, got = state_dict(tmp_path / "ref" / name), state_dict(exp / name)
        assert want.keys() == got.keys()
        assert all(torch.equal(want[k], got[k]) for k in want), name   # bitwise on CPU
    # the metrics the killed group logged past its checkpoint are not doubled
    assert metrics_without_timings(exp) == metrics_without_timings(tmp_path / "ref")


@pytest.mark.timeout(300)
def test_frozen_worker_is_reported_by_rank_when_the_collective_times_out(problem, tmp_path):
    exp = tmp_path / "hang"
    overrides = TINY_DNN + ["sync.strategy=ma", "train.epochs=200", "dist.timeout_s=4"]
    proc = start_training(problem, exp, overrides, max_restarts=0)
    frozen = None
    try:
        wait_for(lambda: (exp / "metrics.jsonl").exists(), proc, what="first block")
        frozen = wait_for(lambda: worker_pid(exp, 1), proc, what="rank 1 process")
        os.kill(frozen, signal.SIGSTOP)
        stopped_at = time.monotonic()
        log = exp / "log" / "train.log"
        wait_for(lambda: "made no progress within" in log.read_text(), proc, timeout=60,
                 what="timeout report")
        detected_after = time.monotonic() - stopped_at
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)   # let torchrun's shutdown reach it
    code, out = finish(proc)
    text = log.read_text()
    assert code != 0
    match = re.search(r"worker 0 of 2: collective #\d+ \(([^)]*)\) failed: a peer died or made "
                      r"no progress within dist.timeout_s=4 s; [^\n]*worker\(s\) 1 \([^)]*\) "
                      r"(never entered it|stopped responding)", text)
    assert match, text[-3000:]
    assert detected_after < 30   # the 4 s timeout, not torchrun's or gloo's 30 min default
    assert not (exp / "final.pt").exists()
