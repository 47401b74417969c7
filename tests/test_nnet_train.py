"""Network training end to end on a tiny synthetic problem: torchrun workers against an in-process
simulation of the same algorithm, exact resume, bad input, and log-likelihoods for decoding."""
import copy
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys

import kaldiio
import numpy as np
import pytest
import yaml
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from emasr.cli import main
from emasr.nnet.training import checkpoint
from emasr.nnet import config as configs
from emasr.nnet.training.regime import describe
from emasr.nnet.training.warm_start import tensors_sha256
from emasr.nnet.data import Source, TrainingData, shard, utterances_with_targets
from emasr.nnet.workers.flat import model_to_vector, vector_to_model
from emasr.nnet.models import build_model
from emasr.nnet.averages import build_averagers
from emasr.nnet.sync import make_rule
from emasr.nnet.data.inputs import make_pipeline, open_targets
from emasr.nnet.trainer import Trainer
from emasr.nnet.workers import predict
from emasr.nnet.training.metrics import read_metrics
from conftest import REPO, run_script
from nnet_synthetic import (DIM, NUM_PDFS, TINY_DNN, TINY_LSTM, make_corpus, make_problem,
                            write_targets)

CONSTANT_LR = ["train.schedule=constant"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    return make_problem(str(tmp_path_factory.mktemp("nnet")))


def train(problem, exp, overrides, resume=False):
    targets, train_dir, dev_dir = problem
    args = ["train", *[a for o in overrides for a in ("--set", o)]]
    result = CliRunner().invoke(main, args + (["--resume"] if resume else []) +
                                [targets, train_dir, dev_dir, str(exp)])
    return result


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_sh(problem, exp, workers, overrides):
    """steps/nnet/train.sh: torchrun --standalone with `workers` gloo processes, through run.pl."""
    targets, train_dir, dev_dir = problem
    return run_script([str(REPO / "steps" / "nnet" / "train.sh"), "--num-workers", str(workers),
                       "--set-opts", " ".join(overrides), targets, train_dir, dev_dir, str(exp)])


def simulate(problem, workers, overrides):
    """The same algorithm in one process: N local models, tau local steps, mean, rule, EMA."""
    targets_dir, train_dir, _ = problem
    c = configs.resolve(None, overrides)
    pipeline, targets = make_pipeline(c.features), open_targets(targets_dir)
    source = Source(train_dir, targets_dir, pipeline, targets, pipeline.output_dim(DIM), NUM_PDFS)
    utts = utterances_with_targets(train_dir, targets, targets_dir, "training")
    torch.manual_seed(c.train.init_seed)
    initial = build_model(c.model, source.input_dim, NUM_PDFS)
    models = [copy.deepcopy(initial) for _ in range(workers)]
    lr = c.train.lr * (workers if c.sync.lr_times_workers else 1)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=c.train.weight_decay)
                  if c.train.optimizer == "adamw" else
                  torch.optim.SGD(m.parameters(), lr=lr, momentum=c.train.momentum)
                  for m in models]
    data = [TrainingData(source, shard(utts, c.data.seed, r, workers), c.data,
                         c.architecture.mode.sequence, r) for r in range(workers)]
    rule = make_rule(c.sync, workers)
    rule.start(model_to_vector(initial))
    averagers = build_averagers(c, 0)
    tau = c.sync.block_size
    full_sync = c.architecture.mode.minibatch_frames(c.data) * tau * workers
    for epoch in range(c.train.epochs):
        streams = [d.minibatches(epoch) for d in data]
        while True:   # every minibatch of every shard: the last blocks as long as what is left
            blocks = [[b for _, b in zip(range(tau), stream)] for stream in streams]
            if not any(blocks):
                break
            for model, optimizer, block in zip(models, optimizers, blocks):
                for x, y in block:
                    optimizer.zero_grad()
                    out = predict(model, x, c.data)
                    F.nll_loss(out.reshape(-1, NUM_PDFS), y.reshape(-1), ignore_index=-100).backward()
                    if c.train.max_grad_norm:
                        torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                       c.train.max_grad_norm)
                    optimizer.step()
            restart = rule.step(torch.stack([model_to_vector(m) for m in models]).mean(0))
            # a short block decays the EMA by its share of a full sync's minibatch frames
            share = sum(y.numel() for block in blocks for _, y in block) / full_sync
            for averager in averagers.values():
                averager.update(rule.global_model, share=min(1.0, share))
            for model in models:
                vector_to_model(restart, model)
        for averager in averagers.values():
            averager.end_epoch(rule.global_model)
    return rule.global_model, {name: a.average for name, a in averagers.items()}


def saved_vector(path):
    info = checkpoint.load(path)
    model = build_model(info["model_config"], info["input_dim"], info["num_pdfs"])
    model.load_state_dict(info["state_dict"])
    return model_to_vector(model)


@pytest.mark.parametrize("workers,extra", [
    (2, TINY_DNN + ["sync.strategy=bmuf", "sync.nesterov=true", "average.ema_decay=0.8",
                    "sync.warmup_blocks=2", "average.cumulative_start=0.0", "average.last_k=2",
                    "train.epochs=3"]),
    pytest.param(4, TINY_DNN + ["sync.strategy=ma", "average.ema_decay=0.5", "sync.lr_times_workers=true",
                                "data.minibatch_frames=8"], marks=pytest.mark.slow),
    # block momentum 0.9 at 2 workers asks for 1519 frames an epoch: the data rule is broken
    # DiLoCo as its paper runs it: AdamW inside each worker, Nesterov SGD outside, with an EMA
    (2, TINY_DNN + ["sync.strategy=diloco", "train.optimizer=adamw", "train.lr=0.01",
                    "average.ema_decay=0.8", "train.epochs=2"]),
    pytest.param(2, TINY_LSTM + ["sync.strategy=bmuf", "sync.nesterov=false",
                                 "sync.block_momentum=0.9", "train.max_grad_norm=0.5",
                                 "average.ema_decay=0.7"],
                 marks=pytest.mark.slow),
], ids=["2-dnn-bmuf-nesterov", "4-dnn-ma", "2-dnn-diloco", "2-lstm-bmuf-classic"])
def test_torchrun_workers_match_single_process_simulation(problem, tmp_path, workers, extra,
                                                          request):
    case = request.node.callspec.id
    overrides = extra + CONSTANT_LR
    result = train_sh(problem, tmp_path / "exp", workers, overrides)
    log = tmp_path / "exp" / "log" / "train.log"
    assert result.returncode == 0, result.stderr + (log.read_text()[-3000:] if log.exists() else "")
    want_global, want_averages = simulate(problem, workers, overrides)
    torch.testing.assert_close(saved_vector(tmp_path / "exp" / "final.pt"), want_global, rtol=0,
                               atol=1e-5)
    for name, want in want_averages.items():   # the EMA, and in the first case its controls
        assert not torch.allclose(want_global, want, atol=1e-3)   # the check can tell them apart
        torch.testing.assert_close(saved_vector(tmp_path / "exp" / f"{name}.pt"), want, rtol=0,
                                   atol=1e-5)
    records = [json.loads(line) for line in open(tmp_path / "exp" / "metrics.jsonl")]
    last = [r for r in records if r["type"] == "epoch"][-1]
    # a constant rate: the next epoch's is the one just used, times N for MA alike
    assert last["next_lr"] == pytest.approx(last["lr"])
    # one float32 all-reduce per sync: the model vector plus 5 piggybacked numbers
    assert last["bytes_reduced"] == last["syncs"] * (want_global.numel() + 5) * 4
    # the regime the trainer recorded: its workers, its device, and the syncs it then made
    regime = json.loads((tmp_path / "exp" / "regime.json").read_text())
    assert regime["workers"] == workers and regime["hardware"]["device"] == "cpu"
    assert regime["syncs_total"] == last["syncs"] > 0
    # every frame of every epoch, as one worker trains them (4-dnn-ma: a shard one minibatch
    # shorter sits the last step out)
    assert regime["frames_trained_total"] == last["frames"] == \
        regime["epochs"] * regime["frames_per_epoch"]
    # `emasr regime` gives the same numbers from the targets alone, before any training
    targets, train_dir, _ = problem
    planned = subprocess.run(
        [sys.executable, "-m", "emasr.cli", "regime", "--json", "--num-workers", str(workers),
         *[arg for kv in overrides for arg in ("--set", kv)], targets, train_dir],
        capture_output=True, text=True, check=True)
    assert json.loads(planned.stdout) == {k: v for k, v in regime.items() if k != "hardware"}
    # train.sh ran it before the workers (its line in log/regime.log) and prints its one warning
    # line exactly when BMUF's data rule is broken (MA has none)
    assert (tmp_path / "exp" / "log" / "regime.log").read_text() == describe(regime) + "\n"
    warned = len(re.findall(r"WARNING cli.py:\d+ BMUF's data rule is not met", result.stderr))
    assert warned == (1 if regime["data_rule_met"] is False else 0), (warned, regime)
    assert len(re.findall(r"WARNING cli.py:\d+ BMUF's data rule is not met", planned.stderr)) \
        == warned
    assert regime["data_rule_met"] is {"2-dnn-bmuf-nesterov": True, "4-dnn-ma": None,
                                       "2-dnn-diloco": None, "2-lstm-bmuf-classic": False}[case]


def state_dicts_equal(a, b):
    sa, sb = checkpoint.load(a)["state_dict"], checkpoint.load(b)["state_dict"]
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def interrupt_after(exp, kept: str, results: list[str]) -> None:
    """Make the finished run `exp` look interrupted after its checkpoint `kept`: every other
    checkpoint and the result files go."""
    root = exp / "checkpoints"
    assert (root / kept / "state.pt").is_file()
    for d in root.iterdir():
        if d.name != kept:
            shutil.rmtree(d)
    for name in results:
        (exp / name).unlink()


def planned_regime(problem, workers, overrides):
    """`emasr regime --json`: what train.sh plans from the targets alone."""
    targets, train_dir, _ = problem
    result = CliRunner().invoke(main, ["regime", "--json", "--num-workers", str(workers),
                                       *[a for o in overrides for a in ("--set", o)],
                                       targets, train_dir])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def epoch_records(exp):
    return [r for r in map(json.loads, open(exp / "metrics.jsonl")) if r["type"] == "epoch"]


@pytest.mark.parametrize("tiny", [
    TINY_DNN,
    TINY_LSTM + ["data.chunks_per_minibatch=2", "sync.block_size=3"],
], ids=["dnn", "lstm"])
def test_one_and_eight_workers_train_the_same_frames(problem, tmp_path, tiny):
    # every worker trains every minibatch of its shard: the 8 shards of 16 utterances differ in
    # length (the DNN's 2 or 3 minibatches, the LSTM's 3 or 4), so the epoch's last block is as
    # long as the longest shard's remainder, the others sitting steps out; the frames trained
    # are the data's, as one worker's, and regime.json (and `emasr regime`, before any work)
    # says so
    base = tiny + ["train.epochs=2", "average.ema_half_life_frames=200"]
    one, eight = tmp_path / "one", tmp_path / "eight"
    assert train(problem, one, base + ["sync.strategy=single"]).exit_code == 0
    parallel = base + ["sync.strategy=bmuf", "dist.workers_per_process=8",
                       "train.checkpoint_every_blocks=1"]
    result = train(problem, eight, parallel)
    assert result.exit_code == 0, result.output
    frames = {}
    for exp, workers, overrides in ((one, 1, base + ["sync.strategy=single"]),
                                    (eight, 8, parallel)):
        regime = json.loads((exp / "regime.json").read_text())
        last = epoch_records(exp)[-1]
        assert planned_regime(problem, workers, overrides) == \
            {k: v for k, v in regime.items() if k != "hardware"}
        assert regime["syncs_total"] == last["syncs"]
        assert regime["frames_trained_total"] == last["frames"] == \
            2 * regime["frames_trained_per_epoch"] == 2 * regime["frames_per_epoch"]
        frames[workers] = last["frames"]
    assert frames[8] == pytest.approx(frames[1], rel=0.005)
    # resumed from the checkpoint before the first epoch's last (short) block: exact
    blocks = [r for r in map(json.loads, open(eight / "metrics.jsonl")) if r["type"] == "block"]
    last_block = max(r["block"] for r in blocks if r["epoch"] == 1)
    kept = f"epoch000-block{last_block - 1:06d}"
    interrupt_after(eight, kept, ["final.pt", "ema.pt"])
    again = tmp_path / "again"
    shutil.copytree(eight, again)
    assert train(problem, again, parallel, resume=True).exit_code == 0
    assert train(problem, tmp_path / "whole", parallel).exit_code == 0
    for name in ("final.pt", "ema.pt"):
        assert state_dicts_equal(tmp_path / "whole" / name, again / name), name


@pytest.mark.parametrize("tiny", [TINY_DNN, TINY_LSTM], ids=["dnn", "lstm"])
def test_resume_is_exact(problem, tmp_path, tiny):
    base = tiny + ["sync.strategy=single", "average.ema_decay=0.9", "train.schedule=newbob",
                   "train.newbob_start_halving=0.5",   # newbob halves: its state must resume too
                   "average.cumulative_start=0.0", "average.last_k=1"]
    assert train(problem, tmp_path / "a", base + ["train.epochs=2"]).exit_code == 0
    first = train(problem, tmp_path / "b", base + ["train.epochs=1"])
    assert first.exit_code == 0, first.output
    second = train(problem, tmp_path / "b", base + ["train.epochs=2"], resume=True)
    assert second.exit_code == 0, second.output
    for name in ("final.pt", "ema.pt", "avg.pt", "lastk.pt"):
        assert state_dicts_equal(tmp_path / "a" / name, tmp_path / "b" / name), name
    # mid-epoch: checkpoint every 3 blocks, drop everything after the first one, resume
    mid = base + ["train.epochs=2", "train.checkpoint_every_blocks=3"]
    assert train(problem, tmp_path / "c", mid).exit_code == 0
    interrupt_after(tmp_path / "c", "epoch000-block000003", ["final.pt"])
    assert train(problem, tmp_path / "c", mid, resume=True).exit_code == 0
    assert state_dicts_equal(tmp_path / "a" / "final.pt", tmp_path / "c" / "final.pt")
    assert state_dicts_equal(tmp_path / "a" / "ema.pt", tmp_path / "c" / "ema.pt")
    # a different configuration must not resume
    bad = train(problem, tmp_path / "b", base + ["train.epochs=3", "train.lr=0.5"], resume=True)
    assert bad.exit_code != 0 and "train.lr: 0.05 -> 0.5" in bad.output


def test_several_emas_each_equal_a_run_with_that_half_life_alone_and_resume_exactly(problem,
                                                                                   tmp_path):
    base = TINY_DNN + ["sync.strategy=single", "train.epochs=2"]
    both = base + ["average.ema_half_life_frames=[200, 1000]"]
    assert train(problem, tmp_path / "both", both).exit_code == 0
    assert sorted(p.name for p in (tmp_path / "both").glob("ema*.pt")) == \
        ["ema_1000.pt", "ema_200.pt"]
    for frames in (200, 1000):
        alone = tmp_path / f"alone{frames}"
        assert train(problem, alone, base + [f"average.ema_half_life_frames={frames}"]
                     ).exit_code == 0
        assert state_dicts_equal(alone / "ema.pt", tmp_path / "both" / f"ema_{frames}.pt")
        assert state_dicts_equal(alone / "final.pt", tmp_path / "both" / "final.pt")
    assert not state_dicts_equal(tmp_path / "both" / "ema_200.pt",
                                 tmp_path / "both" / "ema_1000.pt")
    # the regime names each EMA with its decay and half-life; resume mid-run is exact
    regime = json.loads((tmp_path / "both" / "regime.json").read_text())
    assert [e["name"] for e in regime["emas"]] == ["ema_200", "ema_1000"]
    assert regime["emas"][0]["half_life_frames"] == pytest.approx(200)
    mid = both + ["train.checkpoint_every_blocks=3"]
    assert train(problem, tmp_path / "mid", mid).exit_code == 0
    interrupt_after(tmp_path / "mid", "epoch000-block000003",
                    ["final.pt", "ema_200.pt", "ema_1000.pt"])
    assert train(problem, tmp_path / "mid", mid, resume=True).exit_code == 0
    for name in ("final.pt", "ema_200.pt", "ema_1000.pt"):
        assert state_dicts_equal(tmp_path / "both" / name, tmp_path / "mid" / name), name


def test_the_ema_after_bmufs_warm_up_is_kept_beside_the_one_from_the_first_sync(problem, tmp_path):
    base = TINY_DNN + ["sync.strategy=bmuf", "sync.warmup_blocks=2", "train.epochs=1",
                       "average.ema_decay=0.5"]
    assert train_sh(problem, tmp_path / "first", 2, base).returncode == 0
    both = train_sh(problem, tmp_path / "both", 2, base + ["average.ema_after_warmup=true"])
    assert both.returncode == 0, both.stderr
    assert "and ema-warm.pt, ema.pt" in both.stdout   # train.sh names every averaged model
    # free beside training: the same global model and the same EMA from the first sync; the twin
    # starts from the third sync's W_g, so it differs
    for name in ("final.pt", "ema.pt"):
        assert state_dicts_equal(tmp_path / "first" / name, tmp_path / "both" / name), name
    assert not state_dicts_equal(tmp_path / "both" / "ema.pt", tmp_path / "both" / "ema-warm.pt")
    regime = json.loads((tmp_path / "both" / "regime.json").read_text())
    assert [e["name"] for e in regime["emas"]] == ["ema", "ema-warm"]


def test_metrics_records_reach_the_file_at_checkpoints_and_at_the_end(problem, tmp_path):
    # records are held (writing each alone took 0.5% of a small model's training epoch) and
    # appended at a checkpoint, or when the trainer stops, an error included (cleanup)
    trainer = Trainer(configs.resolve(None, TINY_DNN), *problem, str(tmp_path / "exp"))
    trainer.setup()
    trainer.prepare_exp_dir()
    metrics = tmp_path / "exp" / "metrics.jsonl"
    trainer.write_metrics({"type": "block", "epoch": 1, "block": 1})
    assert not metrics.exists()
    trainer.save_checkpoint()
    trainer.write_metrics({"type": "block", "epoch": 1, "block": 2})
    assert [json.loads(line)["block"] for line in metrics.read_text().splitlines()] == [1]
    trainer.cleanup()
    assert [json.loads(line)["block"] for line in metrics.read_text().splitlines()] == [1, 2]


def test_a_run_that_does_not_resume_leaves_nothing_of_an_earlier_one(problem, tmp_path):
    exp = tmp_path / "exp"
    first = train(problem, exp, TINY_DNN + ["sync.strategy=single", "train.epochs=2",
                                            "average.ema_half_life_frames=500"])
    assert first.exit_code == 0, first.output
    assert (exp / "ema.pt").exists() and len(os.listdir(exp / "checkpoints")) == 2
    again = train(problem, exp, TINY_DNN + ["sync.strategy=single"])   # 1 epoch, no EMA
    assert again.exit_code == 0, again.output
    epochs = [json.loads(line)["epoch"] for line in (exp / "metrics.jsonl").read_text().splitlines()
              if json.loads(line)["type"] == "epoch"]
    assert epochs == [1]
    assert not (exp / "ema.pt").exists() and len(os.listdir(exp / "checkpoints")) == 1


def test_a_read_only_checkpoints_dir_is_refused_before_any_work(problem, tmp_path):
    exp = tmp_path / "exp"
    (exp / "checkpoints").mkdir(parents=True)
    (exp / "checkpoints").chmod(0o555)
    try:
        result = train(problem, exp, TINY_DNN + ["sync.strategy=single"], resume=True)
        assert result.exit_code != 0
        assert (f"cannot write to {exp}/checkpoints (read-only); expected a writable directory"
                in result.output), result.output
        assert not (exp / "metrics.jsonl").exists()
    finally:
        (exp / "checkpoints").chmod(0o755)


def test_newbob_rejects_an_epoch_and_restores_the_state_it_started_from(problem, tmp_path,
                                                                        monkeypatch):
    # dev losses scripted per call (the initial model, then each epoch; a rejected epoch's
    # restored model is evaluated again): epoch 2 is worse than epoch 1, so it is rejected
    losses = iter([2.0, 1.0, 1.5, 1.0, 0.5])
    monkeypatch.setattr(Trainer, "evaluate", lambda self, vector: (next(losses), 0.5))
    exp = tmp_path / "exp"
    result = train(problem, exp, TINY_DNN + ["sync.strategy=single", "train.schedule=newbob",
                                             "train.epochs=3", "train.lr=0.2"])
    assert result.exit_code == 0, result.output
    epochs = read_metrics(exp / "metrics.jsonl").epochs
    assert [e["accepted"] for e in epochs] == [True, False, True]
    assert [e["lr"] for e in epochs] == [0.2, 0.2, 0.1]   # halved from the rejection on
    assert epochs[1]["dev_loss_rejected"] == 1.5 and epochs[1]["dev_loss"] == 1.0
    root = exp / "checkpoints"
    start, rejected, after = (checkpoint.load(root / f"epoch00{e}-block000000" / "rank0.pt")
                              for e in (1, 2, 3))
    # the checkpoint after the rejected epoch holds the model it started from; epoch 3 trains on
    for key in start["model"]:
        assert torch.equal(start["model"][key], rejected["model"][key]), key
    assert not all(torch.equal(start["model"][k], after["model"][k]) for k in start["model"])


def test_best_dev_acc_writes_each_model_from_the_epoch_of_its_own_best_dev_accuracy(
        problem, tmp_path, monkeypatch):
    # dev frame accuracies scripted per call (W_g, then the EMA, at each of 4 epochs): W_g is
    # best at epoch 2 (tied with 4: the earliest wins), the EMA at epoch 3
    accuracies = iter([0.3, 0.2, 0.6, 0.3, 0.5, 0.7, 0.6, 0.4])
    monkeypatch.setattr(Trainer, "evaluate", lambda self, vector: (1.0, next(accuracies)))
    base = TINY_DNN + CONSTANT_LR + ["sync.strategy=single", "average.ema_decay=0.8"]
    best = tmp_path / "best"
    result = train(problem, best, base + ["train.epochs=4", "train.final_epoch=best_dev_acc"])
    assert result.exit_code == 0, result.output
    # at a constant rate a run of k epochs is the first k epochs of a longer one
    monkeypatch.setattr(Trainer, "evaluate", lambda self, vector: (1.0, 0.5))
    for epochs in (2, 3):
        assert train(problem, tmp_path / f"last{epochs}",
                     base + [f"train.epochs={epochs}"]).exit_code == 0
    assert state_dicts_equal(best / "final.pt", tmp_path / "last2" / "final.pt")
    assert state_dicts_equal(best / "ema.pt", tmp_path / "last3" / "ema.pt")
    assert not state_dicts_equal(tmp_path / "last2" / "final.pt", tmp_path / "last3" / "final.pt")
    assert [checkpoint.load(best / name)["epoch"] for name in ("final.pt", "ema.pt")] == [2, 3]
    # the choice may change on resume: the finished run rewrites its models from its end
    again = train(problem, best, base + ["train.epochs=4"], resume=True)
    assert again.exit_code == 0, again.output
    assert [checkpoint.load(best / name)["epoch"] for name in ("final.pt", "ema.pt")] == [4, 4]


def test_exponential_schedule_decays_per_frame_to_the_final_rate(problem, tmp_path):
    exp = tmp_path / "exp"
    result = train(problem, exp, TINY_DNN + ["sync.strategy=single", "train.epochs=3",
                                             "train.lr=0.1", "train.final_lr=0.01"])
    assert result.exit_code == 0, result.output
    blocks = read_metrics(exp / "metrics.jsonl").blocks
    rates = [b["lr"] for b in blocks]
    assert rates[0] == pytest.approx(0.1) and all(a > b for a, b in zip(rates, rates[1:]))
    # each block's rate is the decay at the frames all workers processed before it, against the
    # planned epochs x the training set's labelled frames
    targets_dir, train_dir, _ = problem
    targets = open_targets(targets_dir)
    planned = 3 * sum(len(targets.reader[u]) for u in
                      utterances_with_targets(train_dir, targets, targets_dir, "training"))
    for before, block in zip(blocks, blocks[1:]):
        assert block["lr"] == pytest.approx(0.1 * 0.1 ** (before["frames"] / planned), rel=1e-9)
    assert rates[-1] > 0.01


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_bad_targets_fail_clearly_and_keep_checkpoints(problem, tmp_path):
    targets, train_dir, dev_dir = problem
    ok = train(problem, tmp_path / "exp", TINY_DNN + ["sync.strategy=single"])
    assert ok.exit_code == 0, ok.output
    ckpt = checkpoint.latest(str(tmp_path / "exp"))
    before = {f: digest(os.path.join(ckpt, f)) for f in os.listdir(ckpt)}
    final_before = digest(tmp_path / "exp" / "final.pt")
    # the same targets, but one utterance has pdf id 7 while the model has 5 outputs
    labels = {u: np.repeat(v, 3) for u, v in kaldiio.load_scp(os.path.join(targets, "pdf.scp")).items()}
    victim = sorted(u for u in labels if u.startswith("train"))[5]
    labels[victim][4] = 7
    bad = write_targets(str(tmp_path), labels, name="bad")
    args = ["train", *sum((["--set", o] for o in TINY_DNN + ["sync.strategy=single",
                                                            "train.epochs=2"]), [])]
    result = CliRunner().invoke(main, args + ["--resume", bad, train_dir, dev_dir,
                                              str(tmp_path / "exp")])
    assert result.exit_code != 0
    assert f"{bad}/pdf.scp: utterance {victim} has pdf id 7, but the model has 5 outputs" \
        in result.output
    # targets for another pdf set cannot continue this model
    other = write_targets(str(tmp_path), labels, num_pdfs=8, name="other")
    result = CliRunner().invoke(main, args + ["--resume", other, train_dir, dev_dir,
                                              str(tmp_path / "exp")])
    assert result.exit_code != 0 and "cannot resume" in result.output and "8" in result.output
    assert {f: digest(os.path.join(ckpt, f)) for f in os.listdir(ckpt)} == before
    assert digest(tmp_path / "exp" / "final.pt") == final_before
    assert checkpoint.latest(str(tmp_path / "exp")) == ckpt


@pytest.mark.parametrize("damage", ["no cmvn.scp", "a speaker missing from cmvn.scp"])
def test_cmvn_stats_missing_are_named_not_a_traceback(problem, tmp_path, damage):
    targets, train_dir, dev_dir = problem
    data = tmp_path / "train"
    shutil.copytree(train_dir, data)
    cmvn = data / "cmvn.scp"
    if damage == "no cmvn.scp":
        cmvn.unlink()
        expected = f"expected file {cmvn} to exist"
    else:
        first, *rest = cmvn.read_text().splitlines()
        cmvn.write_text("".join(line + "\n" for line in rest))
        expected = f"(speaker {first.split()[0]}) in {data}/cmvn.scp"
    result = CliRunner().invoke(main, ["train", *sum((["--set", o] for o in TINY_DNN), []),
                                       targets, str(data), dev_dir, str(tmp_path / "exp")])
    assert result.exit_code != 0 and not isinstance(result.exception, (KeyError, OSError))
    assert expected in result.output, result.output


def test_feature_dimension_mismatch_is_an_error(problem, tmp_path):
    result = train(problem, tmp_path / "exp", TINY_DNN + ["features.dim=7"])
    assert result.exit_code != 0
    assert "dimension 4" in result.output and "features.dim=7" in result.output


def test_dev_set_without_targets_is_an_error(problem, tmp_path):
    targets, train_dir, _ = problem
    make_corpus(str(tmp_path), "orphan", 1, 2, seed=9)
    result = CliRunner().invoke(main, ["train", targets, train_dir, str(tmp_path / "orphan"),
                                       str(tmp_path / "exp")])
    assert result.exit_code != 0
    assert "dev set" in result.output and "has targets" in result.output


def test_unreachable_peers_time_out_with_a_clear_error(problem, tmp_path):
    targets, train_dir, dev_dir = problem
    env = dict(os.environ, RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    result = subprocess.run([sys.executable, "-m", "emasr.cli", "train", "--set",
                             "dist.timeout_s=2", targets, train_dir, dev_dir, str(tmp_path / "exp")],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode != 0
    assert "worker 0 of 2 could not reach its peers at 127.0.0.1" in result.stderr
    assert not os.path.exists(tmp_path / "exp" / "checkpoints")


@pytest.mark.parametrize("tiny", [TINY_DNN, TINY_LSTM], ids=["dnn", "lstm"])
def test_nnet_forward_writes_log_likelihoods(problem, tmp_path, tiny):
    targets, _, dev_dir = problem
    assert train(problem, tmp_path / "exp", tiny + ["sync.strategy=single",
                                                    "average.ema_decay=0.5"]).exit_code == 0
    ark, scp = tmp_path / "ll.ark", tmp_path / "ll.scp"
    result = CliRunner().invoke(main, ["nnet-forward", "--model", "ema", str(tmp_path / "exp"),
                                       dev_dir, f"ark,scp:{ark},{scp}"])
    assert result.exit_code == 0, result.output
    loglikes = dict(kaldiio.load_scp(str(scp)))
    pdfs = kaldiio.load_scp(os.path.join(targets, "pdf.scp"))
    priors = checkpoint.load(tmp_path / "exp" / "ema.pt")["log_priors"].numpy()
    assert sorted(loglikes) == sorted(u for u in pdfs.keys() if u.startswith("dev"))
    for utt, mat in loglikes.items():
        assert mat.shape == (len(pdfs[utt]), NUM_PDFS) and mat.dtype == np.float32
        # adding the priors back gives posteriors that sum to one on every frame
        np.testing.assert_allclose(np.exp(mat + priors).sum(1), 1.0, rtol=1e-5)
    missing = CliRunner().invoke(main, ["nnet-forward", "--model", "final",
                                        str(tmp_path / "nowhere"), dev_dir, f"ark:{ark}"])
    assert missing.exit_code != 0
    # the exp dir's feature_pipeline.yaml edited: refused, naming the option, not ignored
    recorded = tmp_path / "exp" / "feature_pipeline.yaml"
    options = yaml.safe_load(recorded.read_text())
    recorded.write_text(yaml.safe_dump({**options, "stack": options["stack"] + 1}))
    edited = CliRunner().invoke(main, ["nnet-forward", str(tmp_path / "exp"), dev_dir,
                                       f"ark:{ark}"])
    assert edited.exit_code != 0
    assert (f"{recorded} does not agree with the pipeline stored in {tmp_path / 'exp'}/final.pt "
            f"(file vs model: stack: {options['stack'] + 1} vs {options['stack']})") in edited.output


@pytest.mark.parametrize("strategy", ["single", "ma", "bmuf"])
@pytest.mark.parametrize("tiny,schedule", [
    (TINY_DNN, ["train.epochs=4", "train.lr=0.1"]),
    # the small LSTM needs more updates; Adam gets there in 10 short epochs
    (TINY_LSTM, ["train.epochs=10", "train.optimizer=adam", "train.lr=0.01",
                 "train.schedule=constant"]),
], ids=["dnn", "lstm"])
def test_every_strategy_learns(problem, tmp_path, tiny, schedule, strategy):
    result = train(problem, tmp_path / "exp", tiny + schedule + [f"sync.strategy={strategy}",
                                                                 "average.ema_decay=0.5"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in open(tmp_path / "exp" / "metrics.jsonl")]
    last = [r for r in records if r["type"] == "epoch"][-1]
    # 5 classes, chance about 0.25; the synthetic problem is easy to learn
    assert last["dev_acc"] > 0.6 and last["dev_acc_ema"] > 0.6, last
    assert last["dev_loss"] < records[0]["loss"]


def checkpoint_global_model(where):
    return checkpoint.load(where / "state.pt")["rule"]["global_model"]


def test_a_warm_start_begins_every_model_at_the_init_models_parameters(problem, tmp_path):
    # a model file (final.pt) and an epoch-end checkpoint's W_g: W_g, every averaged model and
    # every worker start there, before any step; the run starts at the epoch after the file's
    one = tmp_path / "one"
    base = TINY_DNN + ["average.ema_decay=0.5", "average.cumulative_start=0.0",
                       "average.last_k=2"]
    assert train(problem, one, base + ["sync.strategy=single", "train.epochs=3"]).exit_code == 0
    sources = [(one / "final.pt", 3, saved_vector(one / "final.pt")),
               (one / "checkpoints" / "epoch002-block000000", 2,
                checkpoint_global_model(one / "checkpoints" / "epoch002-block000000"))]
    assert not torch.equal(sources[0][2], sources[1][2])
    for source, epochs, want in sources:
        config = configs.resolve(None, base + ["sync.strategy=bmuf", "train.epochs=4",
                                               "dist.workers_per_process=2",
                                               f"train.init_model={source}"])
        trainer = Trainer(config, *problem, str(tmp_path / "warm"))
        try:
            trainer.setup()
            assert torch.equal(trainer.rule.global_model, want)
            assert torch.equal(trainer.local.vectors(), torch.stack([want, want]))
            for name, averager in trainer.averagers.items():
                assert torch.equal(averager.average, want), name
            assert trainer.position == (epochs, 0)
            assert trainer.progress() == pytest.approx(epochs / 4)
            file = source / "state.pt" if source.is_dir() else source
            assert trainer.regime["init_model"] == {
                "path": str(source), "epochs": epochs, "sha256": digest(file),
                "parameters_sha256": tensors_sha256(
                    [want] if source.is_dir() else checkpoint.load(file)["state_dict"].values())}
            assert trainer.regime["syncs_total"] == trainer.syncs_per_epoch * (4 - epochs)
            assert trainer.regime["frames_trained_total"] == 4 * trainer.epoch_frames
        finally:
            trainer.cleanup()


@pytest.mark.parametrize("change,message", [
    (["model.hidden_dim=8"], "model.hidden_dim: 16 in the file, 8 in this run"),
    (["features.splice=2"], "features.splice: 1 in the file, 2 in this run\n  "
                            "input dimension: 36 in the file, 60 in this run"),
    (["train.epochs=2"], "has trained 2 epochs and train.epochs is 2: none left to train"),
    (["train.init_model_epochs=1"], "records 2 epochs trained, but train.init_model_epochs is 1"),
])
def test_an_init_model_that_does_not_fit_is_refused_before_any_work(problem, tmp_path, change,
                                                                    message):
    one = tmp_path / "one"
    assert train(problem, one, TINY_DNN + ["sync.strategy=single",
                                           "train.epochs=2"]).exit_code == 0
    exp = tmp_path / "warm"
    result = train(problem, exp, TINY_DNN + ["sync.strategy=ma", "train.epochs=4",
                                             f"train.init_model={one / 'final.pt'}", *change])
    assert result.exit_code != 0 and f"train.init_model {one / 'final.pt'}" in result.output
    assert message in result.output, result.output
    assert not (exp / "checkpoints").exists()
    # `emasr regime` (train.sh's first step) refuses it too
    targets, train_dir, _ = problem
    planned = CliRunner().invoke(main, ["regime", "--set", "train.epochs=4", *sum(
        (["--set", o] for o in TINY_DNN[:-1] + [f"train.init_model={one / 'final.pt'}",
                                                *change]), []), targets, train_dir])
    assert planned.exit_code != 0 and message in planned.output, planned.output


def test_an_init_model_of_another_pdf_set_is_refused(problem, tmp_path):
    targets, train_dir, dev_dir = problem
    one = tmp_path / "one"
    assert train(problem, one, TINY_DNN + ["sync.strategy=single"]).exit_code == 0
    labels = {u: np.repeat(v, 3) for u, v in kaldiio.load_scp(os.path.join(targets,
                                                                            "pdf.scp")).items()}
    other = write_targets(str(tmp_path), labels, num_pdfs=8, name="other")
    result = CliRunner().invoke(main, ["train", *sum((["--set", o] for o in TINY_DNN + [
        "sync.strategy=ma", "train.epochs=3", f"train.init_model={one / 'final.pt'}"]), []),
        other, train_dir, dev_dir, str(tmp_path / "warm")])
    assert result.exit_code != 0
    assert (f"train.init_model {one / 'final.pt'} does not fit this run:\n  pdfs: 5 in the "
            "file, 8 in this run") in result.output, result.output


def test_a_mid_epoch_checkpoint_or_a_missing_file_is_no_init_model(problem, tmp_path):
    one = tmp_path / "one"
    assert train(problem, one, TINY_DNN + ["sync.strategy=single",
                                           "train.checkpoint_every_blocks=2"]).exit_code == 0
    mid = one / "checkpoints" / "epoch000-block000002"
    for source, message in ((mid, "a checkpoint in the middle of epoch 1 (block 2); expected an "
                                  "epoch-end checkpoint"),
                            (tmp_path / "none.pt", f"expected file {tmp_path / 'none.pt'} to "
                                                   "exist"),
                            (one / "conf.yaml", "cannot read")):
        result = train(problem, tmp_path / "warm", TINY_DNN + [
            "sync.strategy=single", "train.epochs=3", f"train.init_model={source}"])
        assert result.exit_code != 0 and message in result.output, result.output


def test_train_sh_init_model_trains_the_remaining_epochs_from_a_one_worker_run(problem,
                                                                                tmp_path):
    # one worker for 3 epochs; BMUF-2 started from its epoch-1 checkpoint trains epochs 2 and 3
    # at the rates the one worker had there: together 3 epochs of data, as regime.json says
    base = TINY_DNN + ["train.epochs=3", "train.lr=0.05", "train.final_lr=0.005",
                       "average.ema_decay=0.5"]
    one = tmp_path / "one"
    assert train(problem, one, base + ["sync.strategy=single"]).exit_code == 0
    start = one / "checkpoints" / "epoch001-block000000"
    warm = tmp_path / "warm"
    result = run_script([str(REPO / "steps" / "nnet" / "train.sh"), "--num-workers", "2",
                         "--workers-per-process", "2", "--strategy", "bmuf", "--init-model",
                         str(start), "--set-opts", " ".join(base), *problem, str(warm)])
    assert result.returncode == 0, result.stderr
    regime = json.loads((warm / "regime.json").read_text())
    assert regime["init_model"] == {
        "path": str(start), "epochs": 1, "sha256": digest(start / "state.pt"),
        "parameters_sha256": tensors_sha256([checkpoint_global_model(start)])}
    epochs = epoch_records(warm)
    assert [e["epoch"] for e in epochs] == [2, 3]
    assert regime["frames_trained_total"] == epochs[-1]["frames"] == \
        epoch_records(one)[-1]["frames"] == 3 * regime["frames_per_epoch"]
    assert regime["syncs_total"] == epochs[-1]["syncs"]
    # the schedule goes on from epoch 2: the first block's rate is the one worker's there
    first = read_metrics(warm / "metrics.jsonl").blocks[0]
    assert first["lr"] == pytest.approx(0.05 * 0.1 ** (1 / 3), rel=1e-9)
    assert checkpoint.load(warm / "final.pt")["epoch"] == 3
    assert f"in 2 epochs after 1 epoch(s) of the warm start {start}, " in \
        (warm / "log" / "regime.log").read_text()
    help_text = run_script([str(REPO / "steps" / "nnet" / "train.sh"), "--help"])
    assert "--init-model FILE|DIR" in help_text.stdout + help_text.stderr
