"""Bad input that used to be silently wrong, a traceback or a leftover (docs/reliability.md):
each is now one line naming the file, line or utterance and what was expected, and leaves
nothing behind. GMM steps on the Kaldi yesno fixture (read in place), feature steps on tiny
generated data dirs, the launchers and train.sh's own options."""
from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time

import kaldiio
import numpy as np
import pytest
from click.testing import CliRunner

from conftest import REPO, run_script
from datadir_helpers import make_data_dir, snapshot, temp_files, write_lines
from emasr.gmm.accumulate import GmmStats, acc_stats_ali_cli
from emasr.gmm.align import gmm_align_cli
from emasr.gmm.estimate import gmm_est_cli
from emasr.kaldi.model_io import read_model
from emasr.gmm.mono import init_mono_cli
from gmm_helpers import LANG, MONO, write_data_dir, yesno_mfcc_feats, yesno_texts
from test_feats_steps import ENV, make_data, step


# -- utils/fix_data_dir.sh ------------------------------------------------------------------

def test_fix_data_dir_refuses_a_utt2spk_line_with_three_fields(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 2, "spkB": 1})
    write_lines(data / "utt2spk", ["spkA-u1 spkA", "spkA-u2 spkA extra", "spkB-u1 spkB"])
    before = snapshot(data)
    result = run_script(["fix_data_dir.sh", str(data)])
    assert result.returncode != 0
    assert (f"{data}/utt2spk:2: 'spkA-u2 spkA extra' has 3 fields; expected 'utterance speaker'"
            in result.stderr + result.stdout)
    assert snapshot(data) == before and not (data / ".backup").exists() and not temp_files(data)


# -- NaN features in GMM training -------------------------------------------------------------

@pytest.fixture(scope="module")
def nan_data(tmp_path_factory):
    """yesno's training set with one NaN in one utterance (its CMVN stats from before, clean:
    with NaN stats every utterance of the speaker is skipped, and named)."""
    feats = yesno_mfcc_feats()
    data = write_data_dir(tmp_path_factory.mktemp("nan") / "train", feats, yesno_texts())
    victim = sorted(feats)[4]
    feats[victim] = feats[victim].copy()
    feats[victim][7, 2] = np.nan
    kaldiio.save_ark(str(data / "feats.ark"), feats, scp=str(data / "feats.scp"))
    return data, victim


def test_nan_features_are_named_and_skipped_by_align_and_init(nan_data, tmp_path, caplog):
    data, victim = nan_data
    with caplog.at_level("WARNING"):
        result = CliRunner().invoke(gmm_align_cli, ["--max-failed", "0.1", str(MONO / "final.mdl"),
                                                    str(MONO / "tree"), str(LANG), str(data),
                                                    str(tmp_path / "ali.1.gz")])
    assert result.exit_code == 0, result.output
    assert f"skipping utterance {victim}: features have nan at frame 7 (dimension 2)" in caplog.text
    result = CliRunner().invoke(gmm_align_cli, ["--max-failed", "0", str(MONO / "final.mdl"),
                                                str(MONO / "tree"), str(LANG), str(data),
                                                str(tmp_path / "ali.2.gz")])
    assert result.exit_code != 0 and "1 of 31 utterances skipped" in result.output
    assert not (tmp_path / "ali.2.gz").exists()
    caplog.clear()
    with caplog.at_level("WARNING"):
        result = CliRunner().invoke(init_mono_cli, ["--num-utts", "31", str(LANG / "topo"),
                                                    str(data), str(tmp_path / "0.mdl"),
                                                    str(tmp_path / "tree")])
    assert result.exit_code == 0, result.output
    assert f"skipping utterance {victim}: features have nan" in caplog.text
    # the model held while its pdf is read: get_pdf returns a reference into it, which reads
    # freed memory once a temporary model is collected
    model = read_model(tmp_path / "0.mdl")
    assert np.all(np.isfinite(np.array(model.am_gmm.get_pdf(0).means)))


def test_nan_statistics_write_no_model(nan_data, tmp_path):
    data, _ = nan_data
    acc = tmp_path / "1.acc"
    result = CliRunner().invoke(acc_stats_ali_cli, ["--max-skipped", "0.1", str(MONO / "final.mdl"),
                                                    str(data), str(MONO / "ali.1.gz"), str(acc)])
    assert result.exit_code == 0, result.output
    stats = GmmStats.load(str(acc))
    stats.x[3, 0] = np.nan  # what a NaN frame that reached the accumulator would have done
    stats.save(str(acc))
    result = CliRunner().invoke(gmm_est_cli, [str(MONO / "final.mdl"), str(tmp_path / "1.mdl"),
                                              str(acc)])
    assert result.exit_code != 0 and result.exc_info[0] is SystemExit  # not a traceback
    assert "pdf 0: the updated GMM is not finite" in result.output
    assert "not writing the model" in result.output
    assert not (tmp_path / "1.mdl").exists() and not temp_files(tmp_path)


# -- launchers --------------------------------------------------------------------------------

def launcher(args, cwd):
    return run_script([str(REPO / "utils" / "run.pl"), *args], cwd=cwd)


def test_run_pl_help_exits_0(tmp_path):
    for flag in ("--help", "-h"):
        result = launcher([flag], tmp_path)
        assert result.returncode == 0 and "Usage: run.pl" in result.stdout


@pytest.mark.parametrize("spec", ["JOB=a:b", "JOB=1:"])
def test_run_pl_rejects_a_bad_job_range(tmp_path, spec):
    result = launcher([spec, "log/x.JOB.log", "true"], tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (f"Error: run.pl: bad job range '{spec}': expected "
                                      "NAME=START:END with positive integers, e.g. JOB=1:4")
    assert os.listdir(tmp_path) == []


def test_failed_job_prints_the_last_error_line_of_its_log(tmp_path):
    command = "echo start; echo 'ERROR (prog:main) data/x/feats.scp: bad line 3' >&2; echo done; [ JOB = 1 ]"
    result = launcher(["JOB=1:2", "log/x.JOB.log", command], tmp_path)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "Error: log/x.2.log: ERROR (prog:main) data/x/feats.scp: bad line 3"
    assert len(lines) == 2 and re.fullmatch(r"\S+ \S+ ERROR launcher.py:\d+ run.pl: 1 / 2 failed, "
                                            r"log is in log/x.\*.log", lines[1]), lines
    result = launcher(["log/y.log", sys.executable, "-c", "raise ValueError('a.txt: expected 3')"],
                      tmp_path)
    assert "Error: log/y.log: ValueError: a.txt: expected 3" in result.stderr


def test_failed_job_prints_emasrs_error_line_before_a_wrappers_traceback(tmp_path):
    # torchrun's report of a failed worker comes after the worker's own message, and ends in
    # lines that look like errors too: the console shows the cause
    command = ("echo '[rank0]: Error: conf.yaml: unknown key model.no_such_key' >&2; "
               "echo 'Traceback (most recent call last):' >&2; "
               "echo 'torch.distributed.elastic.multiprocessing.errors.ChildFailedError:' >&2; "
               "echo 'To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html' >&2; "
               "exit 1")
    result = launcher(["log/t.log", command], tmp_path)
    assert result.stderr.splitlines()[0] == (
        "Error: log/t.log: conf.yaml: unknown key model.no_such_key")


def test_a_multi_line_error_reaches_the_console_whole(tmp_path):
    # a resumed training whose configuration changed lists the keys on the lines after its
    # Error line (emasr.nnet.trainer), behind torchrun's prefix: the console shows them too
    command = ("printf '%s\\n' \"[rank0]: Error: cannot resume from exp/c: the configuration "
               "differs from the checkpoint's:\" '[rank0]:   model.hidden_dim: 32 -> 64' "
               "'[rank0]:   train.lr: 0.1 -> 0.3' 'Traceback (most recent call last):' >&2; exit 1")
    result = launcher(["log/t.log", command], tmp_path)
    assert result.stderr.splitlines()[0] == (
        "Error: log/t.log: cannot resume from exp/c: the configuration differs from the "
        "checkpoint's: model.hidden_dim: 32 -> 64; train.lr: 0.1 -> 0.3"), result.stderr


# -- steps/nnet/train.sh options --------------------------------------------------------------

def test_train_sh_help_exits_0():
    result = run_script([str(REPO / "steps/nnet/train.sh"), "--help"])
    assert result.returncode == 0 and "Usage:" in result.stderr and "--num-workers" in result.stderr


@pytest.mark.parametrize("value, message", [
    ("0", "--num-workers must be a positive integer (workers on each node), got '0'"),
    ("-1", "--num-workers must be a positive integer (workers on each node), got '-1'"),
    ("two", "expected a number (or a list of numbers): --num-workers 'two'")])
def test_train_sh_refuses_a_bad_number_of_workers(tmp_path, value, message):
    result = run_script([str(REPO / "steps/nnet/train.sh"), "--num-workers", value, "t", "a", "b",
                         str(tmp_path / "exp")])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert message in result.stderr
    assert not (tmp_path / "exp").exists()


@pytest.mark.parametrize("damage, message", [
    ("targets at 10 ms", "frame_subsampling_factor is 1 but features.stack is 3; expected "
                         "targets at the network frame rate"),
    ("targets at 10 ms, said to be at 30", "16 of the 16 training utterances have targets that "
                                           "do not fit their features"),
    ("no target frames", "the 16 training utterances of {train} have no target frames")])
def test_train_sh_refuses_targets_without_frames_or_at_another_rate(tmp_path, damage, message):
    # `emasr regime`, before anything is written: these used to pass it (with advice on the
    # data rule) and fail in the trainer ("a worker's shard gave no training minibatch")
    import nnet_synthetic as ns

    labels = ns.make_corpus(str(tmp_path), "train", 4, 4)
    train = tmp_path / "train"
    write_lines(train / "utt2num_frames", [f"{u} {len(v)}" for u, v in sorted(labels.items())])
    if damage == "no target frames":
        labels = {u: v[:0] for u, v in labels.items()}
    with np.errstate(invalid="ignore"):   # the priors of no frames
        targets = ns.write_targets(str(tmp_path), labels,
                                   k=3 if damage == "no target frames" else 1)
    if damage == "targets at 10 ms, said to be at 30":
        write_lines(tmp_path / "targets" / "frame_subsampling_factor", ["3"])
    result = run_script([str(REPO / "steps/nnet/train.sh"), "--set-opts",
                         " ".join(ns.TINY_DNN), targets, str(train), str(train),
                         str(tmp_path / "exp")])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(f"Error: {REPO}/steps/nnet/train.sh: {targets}/"), errors
    assert message.format(train=train) in errors[0]
    assert not (tmp_path / "exp").exists()   # no job, no log, no copy of anything


# -- feature steps: read-only dirs, full disk, leftovers --------------------------------------

def test_a_non_numeric_number_of_jobs_is_refused_before_any_work(tmp_path):
    data = make_data(tmp_path, [2000] * 2)
    (data / "feats.scp").write_text("old feats\n")
    before = snapshot(data)
    result = step("make_mfcc.sh", "--nj", "abc", "data/train", cwd=tmp_path)
    assert result.returncode == 1
    assert "expected a number (or a list of numbers): --nj 'abc'" in result.stderr
    assert snapshot(data) == before and not (data / ".backup").exists()


@pytest.mark.parametrize("cmd, message", [
    ("runpl", "Error: {step}: --cmd 'runpl': no command 'runpl'; expected a job launcher"),
    ("queue.pl", "Error: queue.pl: cannot run 'qsub-not-here' (the submit command of "),
    ("queue.pl --no-such-option 1", "Error: queue.pl: command line option --no-such-option "
                                    "not described in conf/queue.conf")])
def test_a_bad_launcher_is_refused_before_anything_is_moved(tmp_path, cmd, message):
    data = make_data(tmp_path, [2000] * 2)
    # queue.pl where there is no GridEngine: its config names a submit command not on PATH
    write_lines(tmp_path / "conf" / "queue.conf", ["command qsub-not-here -V"])
    (data / "feats.scp").write_text("old feats\n")
    before = snapshot(tmp_path)
    result = step("make_mfcc.sh", "--cmd", cmd, "data/train", "exp/log", "mfcc", cwd=tmp_path)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(message.format(step=REPO / "steps/make_mfcc.sh")), errors
    assert snapshot(tmp_path) == before and not (data / ".backup").exists()
    assert not (tmp_path / "exp").exists() and not (tmp_path / "mfcc").exists()


def test_a_step_run_without_path_sh_says_how_to_set_up(tmp_path):
    result = subprocess.run(["bash", str(REPO / "steps/make_mfcc.sh"), "data/train"], cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}, capture_output=True,
                            text=True)
    assert result.returncode == 1 and "command not found" not in result.stderr
    assert result.stderr.strip() == (
        f"Error: {REPO}/steps/make_mfcc.sh: emasr is not on PATH; expected the toolkit's "
        "environment: run '. ./path.sh' in the recipe dir (or the repository root) first, which "
        "also creates .venv")
    assert os.listdir(tmp_path) == []


def test_read_only_data_or_feature_dir_is_refused_before_any_work(tmp_path):
    data = make_data(tmp_path, [2000] * 4)
    feats = tmp_path / "fbank"
    feats.mkdir()
    feats.chmod(0o555)
    try:
        result = step("make_fbank.sh", "--nj", 2, "data/train", "exp/log", "fbank", cwd=tmp_path)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert ("cannot write to fbank (read-only); expected a writable feature directory"
                in result.stderr)
        assert os.listdir(feats) == [] and not (data / "split2utt").exists()
    finally:
        feats.chmod(0o755)
    assert step("make_fbank.sh", "--nj", 1, "data/train", cwd=tmp_path).returncode == 0
    before = snapshot(data)
    data.chmod(0o555)
    try:
        for name in ("make_fbank.sh", "compute_cmvn_stats.sh"):
            result = step(name, "data/train", cwd=tmp_path)
            assert result.returncode == 1 and "Traceback" not in result.stderr
            assert ("cannot write to data/train (read-only); expected a writable data directory"
                    in result.stderr)
    finally:
        data.chmod(0o755)
    assert snapshot(data) == before


def test_full_disk_during_feature_extraction_names_the_ark(tmp_path):
    data = make_data(tmp_path, [16000] * 4)
    ark = tmp_path / "out" / "raw.1.ark"

    def small_files():  # as a full disk: writes past 32 KiB fail (EFBIG; Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (32768, 32768))

    result = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "emasr"), "compute-fbank-feats",
         "--config", str(tmp_path / "conf/fbank.conf"), "--no-compress", str(data / "wav.scp"),
         str(ark), str(tmp_path / "out" / "raw.1.scp")],
        capture_output=True, text=True, preexec_fn=small_files)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"Error: could not write {ark}: File too large" in result.stderr
    assert os.listdir(tmp_path / "out") == []


def test_job_with_no_usable_utterance_leaves_no_empty_ark(tmp_path):
    data = make_data(tmp_path, [2000] * 3, speakers=1, bad={"spk0-utt00", "spk0-utt01",
                                                           "spk0-utt02"})
    result = step("make_fbank.sh", "--nj", 1, "data/train", "exp/log", "fbank", cwd=tmp_path)
    assert result.returncode == 1
    # the job's error line, with the reason every utterance failed for
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert errors[0].startswith("Error: exp/log/make_fbank_train.1.log: no utterance of "
                                "data/train/split1utt/1/wav.scp succeeded (3 failed); the first, "
                                "spk0-utt00: "), result.stderr
    assert "utt00.wav" in errors[0]
    assert not any((tmp_path / "fbank").glob("*")) and not (data / "feats.scp").exists()


def test_interrupted_make_fbank_leaves_no_temporary_arks(tmp_path):
    """Ctrl-C (SIGINT to the step's process group) while the jobs write their arks."""
    make_data(tmp_path, [160000] * 40, speakers=1)
    proc = subprocess.Popen([str(REPO / "steps/make_fbank.sh"), "--nj", "2", "--compress", "false",
                             "data/train", "exp/log", "fbank"], cwd=tmp_path,
                            env={**os.environ, **ENV, "PATH": f"{REPO}/utils:{ENV['PATH']}"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "fbank").glob("*.tmp.*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list((tmp_path / "fbank").glob("*.tmp.*")), "the jobs never started writing"
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) != 0
    assert not temp_files(tmp_path / "fbank") and not temp_files(tmp_path / "exp")
