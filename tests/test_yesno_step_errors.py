"""The network and scoring steps on the yesno recipe's own files: what a failed step says on the
console, and that no output of an earlier run survives beside a new one."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import run_script

ONE_THREAD = {"OMP_NUM_THREADS": "1", "EMASR_NUM_THREADS": "1"}
DECODE = "exp/mono0a/decode_test"


@pytest.fixture(scope="module")
def recipe(yesno_run):
    recipe, result = yesno_run
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return recipe


def train_sh(recipe, set_opts: str, dev: str, exp: str):
    return run_script(["steps/nnet/train.sh", "--nnet-config", "conf/nnet/dnn.yaml",
                       "--set-opts", set_opts, "exp/dnn/targets", "data/train_yesno", dev, exp],
                      cwd=recipe, env=ONE_THREAD)


def test_an_error_inside_torchrun_reaches_the_console_as_emasrs_line(recipe):
    # the dev set has no targets: only the trainer, inside torchrun, reads it
    result = train_sh(recipe, "", "data/test_yesno", "exp/bad_dev")
    assert result.returncode == 1
    error = [line for line in result.stderr.splitlines() if "Error: " in line]
    assert error and "dev set data/test_yesno" in error[0], result.stderr
    assert result.stderr.index(error[0]) < result.stderr.index("job failed")
    assert "To enable traceback" not in result.stderr
    # the traceback stays in the log
    assert "ChildFailedError" in (recipe / "exp/bad_dev/log/train.log").read_text()


def test_a_config_error_stops_train_sh_before_any_job(recipe):
    # `emasr regime` resolves the config before the workers start: no job, no train.log
    result = train_sh(recipe, "model.no_such_key=1", "data/train_yesno", "exp/bad_key")
    assert result.returncode == 1
    error = [line for line in result.stderr.splitlines() if "Error: " in line]
    assert error and "no_such_key" in error[0] and "train.sh" in error[0], result.stderr
    assert not (recipe / "exp/bad_key/log/train.log").exists()


def test_rescoring_with_a_narrower_grid_leaves_no_earlier_score(recipe, tmp_path):
    decode = tmp_path / "decode"
    shutil.copytree(recipe / DECODE, decode)
    assert (decode / "wer_17_1.0").exists()   # the recipe's grid: 7..17, penalties 0, 0.5, 1
    result = run_script(["steps/score_kaldi.sh", "--min-lmwt", "9", "--max-lmwt", "10",
                         "--word-ins-penalty", "0.5", "data/test_yesno", "exp/mono0a/graph_tgpr",
                         str(decode)], cwd=recipe)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in decode.glob("wer_*")) == ["wer_10_0.5", "wer_9_0.5"]
    assert sorted(p.name for p in (decode / "scoring_kaldi" / "penalty_0.5").iterdir()) == [
        "10.txt", "9.txt"]
    assert not (decode / "scoring_kaldi" / "penalty_1.0").exists()
    best = (decode / "scoring_kaldi" / "best_wer").read_text()
    assert re.search(r"wer_(9|10)_0\.5$", best.strip()), best


def test_a_failed_decode_leaves_no_earlier_lattice_or_score(recipe, tmp_path):
    decode = tmp_path / "exp" / "decode"
    shutil.copytree(recipe / DECODE, decode)
    shutil.copy(recipe / "exp/mono0a/final.mdl", tmp_path / "exp" / "final.mdl")
    shutil.copy(recipe / "exp/mono0a/tree", tmp_path / "exp" / "tree")
    # the decode jobs fail (as when a cluster kills them): `false` as the launcher
    result = run_script(["steps/decode.sh", "--nj", "1", "--cmd", "false", "exp/mono0a/graph_tgpr",
                         "data/test_yesno", str(decode)], cwd=recipe)
    assert result.returncode == 1, result.stderr
    assert not list(decode.glob("lat.*.gz")) and not list(decode.glob("wer_*"))
    assert not (decode / "scoring_kaldi").exists()


def experiment(recipe, nnet_dir: str, stage: int, stop_stage: int):
    """The experiment driver as the yesno recipe runs it, on a run dir of the test's own."""
    spec = run_script([
        "emasr", "experiment", "show", "--out", f"{nnet_dir}/experiment.yaml",
        "conf/experiment.yaml", "--set", "epochs=2",
        "--set", "archs.dnn.overrides=model.hidden_layers=2 model.hidden_dim=128 "
        "data.minibatch_frames=64", "--set", "decode.opts=--acwt 0.3 --beam 13 --lattice-beam 6",
        "--set", "decode.scoring_opts=--min-lmwt 1 --max-lmwt 17 --cer true",
        "--set", f"results={nnet_dir}/RESULTS.md"], cwd=recipe)
    assert spec.returncode == 0, spec.stderr
    return run_script([
        "steps/nnet/experiment.sh", "--stage", str(stage), "--stop-stage", str(stop_stage),
        "--nj", "1", f"{nnet_dir}/experiment.yaml", "exp/dnn/targets", "data/train_yesno",
        "data/train_yesno", "data/test_yesno", "exp/mono0a/graph_tgpr",
        "exp/mono0a_ali/final.mdl", nnet_dir], cwd=recipe, env=ONE_THREAD)


@pytest.mark.slow
def test_a_retrained_or_failed_decode_is_decoded_again_never_reported_stale(recipe):
    nnet, run = "exp/nnet_stale", "exp/nnet_stale/dnn_single_s1"
    result = experiment(recipe, nnet, 1, 3)
    assert result.returncode == 0, result.stderr[-3000:]
    # the model retrained without --resume (another learning rate): its old decodes are stale
    result = train_sh(recipe, "train.init_seed=1 data.seed=1 model.hidden_layers=2 "
                      "model.hidden_dim=128 data.minibatch_frames=64 train.lr=0.05 "
                      "sync.strategy=single train.epochs=1", "data/train_yesno", run)
    assert result.returncode == 0, result.stderr[-3000:]
    report = recipe / nnet / "stale.md"
    result = run_script(["emasr", "report", "--out", str(report), "--archs", "dnn",
                         "--strategies", "single", run], cwd=recipe)
    assert result.returncode == 1 and not report.exists()
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert errors == [f"Error: {run}/decode_dev was decoded from another {run}/final.pt than the "
                      f"one there now (its sha256 in {run}/decode_dev/inputs.sha256 differs): "
                      "its scores are not this model's; decode it again (the experiment "
                      "driver's stage 2 does)"], result.stderr
    result = experiment(recipe, nnet, 2, 3)
    assert result.returncode == 0, result.stderr[-3000:]
    for decode in ("decode_dev", "decode_test"):
        assert (f"{run}/{decode}: not decoded from the inputs it has now ({run}/final.pt "
                "differs); decoding again") in result.stdout
    row = next(line for line in (recipe / nnet / "RESULTS.md").read_text().splitlines()
               if line.startswith("| DNN | single | 1 | 1 | 0.05 |"))
    assert "not decoded" not in row
    # a decode that fails into the dir leaves no record of its inputs: decoded again, not skipped
    result = run_script(["steps/nnet/decode.sh", "--cmd", "false", "--nj", "1",
                         "exp/mono0a/graph_tgpr", "data/test_yesno", f"{run}/decode_test"],
                        cwd=recipe)
    assert result.returncode == 1 and not (recipe / run / "decode_test/inputs.sha256").exists()
    result = experiment(recipe, nnet, 2, 2)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{run}/decode_dev: decoded already, from the same model" in result.stdout
    assert (f"{run}/decode_test: not decoded from the inputs it has now (it has no "
            "inputs.sha256: its decode did not finish); decoding again") in result.stdout
