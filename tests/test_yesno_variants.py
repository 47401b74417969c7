"""Registered variants trained and decoded on Kaldi's yesno recordings, through the steps a user
runs (steps/nnet/train.sh, steps/nnet/decode.sh), on the yesno recipe's own targets and graph: each
variant is one module plus one registration, and must work end to end with nothing else edited."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import run_script

WER = re.compile(r"%WER (\d+\.\d+) \[ (\d+) / (\d+),")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "EMASR_NUM_THREADS": "1"}


def train(recipe: Path, exp: str, workers: int, *options: str):
    config = () if "--nnet-config" in options else ("--nnet-config", "conf/nnet/dnn.yaml")
    result = run_script(["steps/nnet/train.sh", "--num-workers", str(workers), *config,
                         "--trans-mdl", "exp/mono0a_ali/final.mdl", *options,
                         "exp/dnn/targets", "data/train_yesno", "data/train_yesno", exp],
                        cwd=recipe, env=ONE_THREAD)
    log = recipe / exp / "log" / "train.log"
    assert result.returncode == 0, result.stderr[-2000:] + (log.read_text()[-3000:]
                                                            if log.exists() else "")
    return result


def decode_wer(recipe: Path, exp: str, model: str = "final") -> float:
    decode = f"{exp}/decode_test_yesno_{model}"
    result = run_script(["steps/nnet/decode.sh", "--nj", "1", "--model", model,
                         "--acwt", "0.3", "--beam", "13", "--lattice-beam", "6",
                         "--scoring-opts", "--min-lmwt 1 --max-lmwt 17",
                         "exp/mono0a/graph_tgpr", "data/test_yesno", decode],
                        cwd=recipe, env=ONE_THREAD)
    assert result.returncode == 0, result.stderr[-3000:]
    match = WER.search((recipe / decode / "scoring_kaldi" / "best_wer").read_text())
    return float(match.group(1))


@pytest.fixture(scope="module")
def recipe(yesno_run):
    recipe, result = yesno_run
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return recipe


@pytest.mark.slow
def test_diloco_with_virtual_workers_and_an_ema_trains_and_decodes_yesno(recipe):
    # the paper's DiLoCo: AdamW inside each of 2 virtual workers, Nesterov SGD outside
    result = train(recipe, "exp/diloco", 2, "--workers-per-process", "2", "--strategy", "diloco",
                   "--epochs", "6", "--ema-half-life-frames", "500", "--set-opts",
                   "model.hidden_layers=2 model.hidden_dim=128 data.minibatch_frames=64 "
                   "train.optimizer=adamw train.lr=0.003 sync.block_size=4")
    assert "trained exp/diloco/final.pt and ema.pt" in result.stdout
    # measured: 0.43% WER (1 insertion in 232 words) for both, as the recipe's one-worker DNN
    assert decode_wer(recipe, "exp/diloco") <= 3.0
    assert decode_wer(recipe, "exp/diloco", "ema") <= 3.0
