"""Interrupted steps: a step SIGKILLed in the middle (its whole process group, as a lost node or
a killed job does) leaves nothing that a later stage would take for complete, and rerunning it
gives byte-identical outputs to an uninterrupted run."""
import os
import signal
import subprocess
import sys
import time

import kaldiio
import pytest

from conftest import REPO
from emasr.nnet.training import checkpoint
from nnet_synthetic import TINY_DNN, make_problem
from test_feats_steps import make_data

ENV = {"PATH": f"{REPO / 'utils'}:{REPO / 'steps'}:{os.path.dirname(sys.executable)}:"
               f"{os.environ['PATH']}", "LC_ALL": "C", "EMASR_NUM_THREADS": "1"}


def start(args, cwd):
    return subprocess.Popen([str(a) for a in args], cwd=cwd, env=dict(os.environ, **ENV),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def run(args, cwd):
    proc = start(args, cwd)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    return out


def kill_when(proc, condition, what, timeout=300):
    """SIGKILL proc's whole process group as soon as condition() holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the step finished before {what}; cannot interrupt it:\n"
                        f"{proc.stdout.read()[-2000:]}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no {what} within {timeout} s")
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def make_fbank(root):
    return ["steps/make_fbank.sh", "--nj", "2", "--fbank-config", root / "conf" / "fbank.conf",
            root / "data" / "train", root / "log", root / "fbank"]


def outputs(root):
    """Everything make_fbank.sh produced, with the root's absolute paths taken out."""
    data, fbank = root / "data" / "train", root / "fbank"
    files = {name: (data / name).read_bytes() for name in ("utt2num_frames", "utt2dur",
                                                           "frame_shift")}
    files["feats.scp"] = (data / "feats.scp").read_text().replace(str(root), "ROOT").encode()
    for name in sorted(os.listdir(fbank)):
        if name.endswith(".ark"):
            files[name] = (fbank / name).read_bytes()
    return files


def test_killed_make_fbank_leaves_no_feats_and_reruns_to_identical_outputs(tmp_path):
    lengths = [24000 + 800 * i for i in range(40)]
    reference, interrupted = tmp_path / "ref", tmp_path / "int"
    for root in (reference, interrupted):
        root.mkdir()
        make_data(root, lengths)
    run(make_fbank(reference), cwd=REPO)

    proc = start(make_fbank(interrupted), cwd=REPO)
    fbank = interrupted / "fbank"
    # mid-way: a job is writing its ark under its temporary name
    kill_when(proc, lambda: fbank.is_dir() and any(".ark.tmp." in f for f in os.listdir(fbank)),
              "ark being written")
    data = interrupted / "data" / "train"
    assert not (data / "feats.scp").exists(), "a killed step left a feats.scp behind"
    for name in os.listdir(fbank):   # any job scp present names a complete ark
        if name.endswith(".scp"):
            assert all(m.shape[0] > 0 for m in kaldiio.load_scp(str(fbank / name)).values())
    # validation refuses the data dir as it is (a later stage stops here, not on partial data)
    check = subprocess.run(["utils/validate_data_dir.sh", "--no-text", str(data)], cwd=REPO,
                           env=dict(os.environ, **ENV), capture_output=True, text=True)
    assert check.returncode != 0 and "feats.scp" in check.stdout + check.stderr

    run(make_fbank(interrupted), cwd=REPO)
    assert outputs(interrupted) == outputs(reference)


@pytest.mark.slow
def test_killed_training_resumes_to_identical_models(tmp_path):
    problem = make_problem(str(tmp_path), train_speakers=6, utts_per_speaker=6)
    opts = TINY_DNN + ["sync.strategy=single", "average.ema_decay=0.8", "train.epochs=6",
                       "train.checkpoint_every_blocks=2"]

    def train_sh(exp, resume):
        return ["steps/nnet/train.sh", "--resume", resume, "--set-opts", " ".join(opts),
                *problem, exp]

    run(train_sh(tmp_path / "ref", "false"), cwd=REPO)
    exp = tmp_path / "int"
    proc = start(train_sh(exp, "false"), cwd=REPO)
    # after the first epoch, with five to go
    kill_when(proc, lambda: os.path.basename(checkpoint.latest(str(exp)) or "") >= "epoch001",
              "the first epoch's checkpoint")
    assert not (exp / "final.pt").exists()
    out = run(train_sh(exp, "true"), cwd=REPO)
    log = (exp / "log" / "train.log").read_text()
    assert "resumed from" in log, out[-2000:] + log[-2000:]
    for name in ("final.pt", "ema.pt"):
        want = checkpoint.load(tmp_path / "ref" / name)["state_dict"]
        got = checkpoint.load(exp / name)["state_dict"]
        assert all(want[k].equal(got[k]) for k in want), name
