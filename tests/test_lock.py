"""utils/lib/lock.sh: every step holds an exclusive lock on the dirs it writes for its whole run."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, run_script

# Each writing step with its arguments, the locked dir written as {dir}; the other arguments need
# not exist: the lock is taken before any input is read.
STEPS = {
    "steps/train_mono.sh": ["data/train", "data/lang", "{dir}"],
    "steps/train_deltas.sh": ["10", "100", "data/train", "data/lang", "exp/mono_ali", "{dir}"],
    "steps/train_lda_mllt.sh": ["10", "100", "data/train", "data/lang", "exp/tri1_ali", "{dir}"],
    "steps/train_sat.sh": ["10", "100", "data/train", "data/lang", "exp/tri2_ali", "{dir}"],
    "steps/align_si.sh": ["data/train", "data/lang", "exp/mono", "{dir}"],
    "steps/align_fmllr.sh": ["data/train", "data/lang", "exp/tri3", "{dir}"],
    "steps/decode.sh": ["exp/mono/graph", "data/test", "{dir}"],
    "steps/decode_fmllr.sh": ["exp/tri3/graph", "data/test", "{dir}"],
    "steps/score_kaldi.sh": ["data/test", "data/lang", "{dir}"],
    "steps/compute_cmvn_stats.sh": ["{dir}"],
    "steps/make_mfcc.sh": ["{dir}"],
    "steps/nnet/build_tree.sh": ["100", "data/train", "data/lang", "exp/ali", "{dir}"],
    "steps/nnet/convert_ali.sh": ["exp/ali", "exp/tree", "{dir}"],
    "steps/nnet/make_targets.sh": ["exp/ali", "data/train", "{dir}"],
    "steps/nnet/train.sh": ["exp/targets", "data/train", "data/dev", "{dir}"],
    "steps/nnet/decode.sh": ["exp/tree/graph", "data/test", "{dir}"],
    "steps/nnet/experiment.sh": ["spec.yaml", "t", "a", "b", "c", "g", "m", "{dir}"],
    "utils/mkgraph.sh": ["data/lang", "exp/mono", "{dir}"],
    "utils/prepare_lang.sh": ["data/local/dict", "<UNK>", "data/local/lang", "{dir}"],
    "utils/prepare_lang_nnet.sh": ["data/lang", "{dir}"],
    "utils/format_lm.sh": ["data/lang", "lm.arpa", "lexicon.txt", "{dir}"],
    "utils/copy_data_dir.sh": ["data/train", "{dir}"],
    "utils/combine_data.sh": ["{dir}", "data/a", "data/b"],
    "utils/fix_data_dir.sh": ["{dir}"],
    "utils/data/get_utt2dur.sh": ["{dir}"],
    "utils/data/modify_speaker_info.sh": ["data/train", "{dir}"],
    "utils/data/perturb_data_dir_speed.sh": ["0.9", "data/train", "{dir}"],
    "utils/data/perturb_data_dir_speed_3way.sh": ["data/train", "{dir}"],
}

HOLDER = """set -euo pipefail
. {repo}/utils/lib/log.sh; . {repo}/utils/lib/lock.sh
step_command="holder.sh --the-first-step $1"
lock_dirs "$1"
echo locked
exec sleep 600
"""


@pytest.fixture
def holder(tmp_path):
    """A process holding the lock on tmp_path/out as a step does; killed (SIGKILL) at the end."""
    script = tmp_path / "holder.sh"
    script.write_text(HOLDER.format(repo=REPO))
    proc = subprocess.Popen(["bash", str(script), str(tmp_path / "out")], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout.readline() == "locked\n"
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def step_args(step: str, out: Path) -> list[str]:
    return [str(REPO / step)] + [a.replace("{dir}", str(out)) for a in STEPS[step]]


@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_second_step_on_a_locked_dir_fails_at_once_naming_the_holder(step, holder, tmp_path):
    out = tmp_path / "out"
    before = sorted(p.name for p in out.iterdir())
    started = time.monotonic()
    result = run_script(step_args(step, out), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert time.monotonic() - started < 20
    assert f"{out} is in use by another step" in result.stderr, result.stderr
    assert f"PID {holder.pid}: holder.sh --the-first-step {out}" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == before   # nothing touched


def test_a_killed_holder_leaves_no_lock(holder, tmp_path):
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait()
    out = tmp_path / "out"
    # the dir is free again: the step gets past the lock to its own input checks
    result = run_script(step_args("steps/nnet/train.sh", out), cwd=tmp_path)
    assert result.returncode != 0 and "in use by another step" not in result.stderr
    assert not (out / ".lock").exists()   # a step removes its lock file when it exits


def test_the_dirs_a_parent_step_holds_pass_through_to_its_children(holder, tmp_path):
    out = tmp_path / "out"
    result = run_script(step_args("steps/nnet/train.sh", out), cwd=tmp_path,
                        env={"EMASR_LOCKED_DIRS": f"/elsewhere:{out}"})
    assert "in use by another step" not in result.stderr
    assert "expected" in result.stderr or "Error" in result.stderr, result.stderr


def processes_naming(word: str) -> list[str]:
    """The command lines of the running processes that have `word` in them (zombies excluded)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if word in cmdline and state != "Z":
            found.append(f"{pid}: {cmdline}")
    return found


def test_no_process_outlives_train_sh_killed_by_its_own_pid(tmp_path):
    # SIGKILL to train.sh alone (not its process group): run.pl, torchrun and the worker must not
    # train on unowned, holding the exp dir's lock; a rerun then gets the dir
    from nnet_synthetic import TINY_DNN, make_problem

    targets, train, dev = make_problem(tmp_path)
    exp = tmp_path / "exp_killed"
    args = [str(REPO / "steps/nnet/train.sh"), "--set-opts",
            " ".join([*TINY_DNN, "train.epochs=100000", "train.checkpoint_every_blocks=0"]),
            targets, train, dev, str(exp)]
    env = {**os.environ, "PATH": f"{REPO / 'utils'}:{os.environ['PATH']}", "LC_ALL": "C",
           "EMASR_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    step = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while "epoch 1:" not in (read_or_empty(exp / "log" / "train.log")):
        assert step.poll() is None and time.monotonic() < deadline, "the training never started"
        time.sleep(0.1)
    os.kill(step.pid, signal.SIGKILL)
    step.wait()
    deadline = time.monotonic() + 15
    while survivors := processes_naming(str(exp)):
        assert time.monotonic() < deadline, f"processes outlived train.sh: {survivors}"
        time.sleep(0.1)
    result = run_script(args[:2] + [" ".join(TINY_DNN)] + args[3:], env={
        "EMASR_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr
    assert (exp / "final.pt").exists() and not processes_naming(str(exp))


def read_or_empty(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""
