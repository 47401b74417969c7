"""Virtual workers (dist.workers_per_process K): K workers in each of P processes train exactly as
K x P real workers (one process each) with the same shards and seeds, for every sync rule and the
EMA; a virtual-worker run resumes exactly; steps/nnet/train.sh keeps --num-workers counting
workers."""
import copy
import json

import pytest
import torch

from emasr.nnet import config as configs
from emasr.nnet.workers.flat import mean_to_vector
from emasr.nnet.models import build_model
from emasr.nnet.workers import LoopWorkers, StackedWorkers, can_stack
from conftest import REPO, run_script
from nnet_synthetic import TINY_DNN, TINY_LSTM
from test_nnet_train import (interrupt_after, problem, saved_vector,  # noqa: F401
                             state_dicts_equal, train)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Everything that counts workers: BMUF's eta = 1 - 1/N, the EMA's half life in frames of all
# workers, the exponential schedule's processed frames, MA's N x rate; plus each worker's own
# dropout stream and gradient clipping.
PER_WORKER = ["model.dropout=0.2", "train.max_grad_norm=0.5"]
DNN_BMUF = TINY_DNN + PER_WORKER + ["sync.strategy=bmuf", "sync.nesterov=true",
                                    "sync.warmup_blocks=1", "average.ema_half_life_frames=200",
                                    "average.cumulative_start=0.0", "train.epochs=2"]
DNN_MA = TINY_DNN + PER_WORKER + ["sync.strategy=ma", "sync.lr_times_workers=true",
                                  "average.ema_decay=0.5", "data.minibatch_frames=8",
                                  "train.lr=0.02", "train.epochs=2"]
# DiLoCo: AdamW inside each worker (its state the worker's own), Nesterov SGD outside
DNN_DILOCO = TINY_DNN + PER_WORKER + ["sync.strategy=diloco", "train.optimizer=adamw",
                                      "train.lr=0.01", "average.ema_half_life_frames=200",
                                      "train.epochs=2"]
LSTM_BMUF = TINY_LSTM + PER_WORKER + ["sync.strategy=bmuf", "sync.nesterov=false",
                                      "average.ema_decay=0.7", "train.epochs=2"]


def train_sh(problem, exp, workers, per_process, overrides):  # noqa: F811
    targets, train_dir, dev_dir = problem
    return run_script([str(REPO / "steps" / "nnet" / "train.sh"), "--num-workers", str(workers),
                       "--workers-per-process", str(per_process), "--set-opts",
                       " ".join(overrides), targets, train_dir, dev_dir, str(exp)])


def run_ok(result, exp):
    log = exp / "log" / "train.log"
    detail = getattr(result, "stderr", None) or getattr(result, "output", "")
    code = getattr(result, "returncode", getattr(result, "exit_code", None))
    assert code == 0, detail + (log.read_text()[-3000:] if log.exists() else "")


def records(exp, kind):
    return [r for r in map(json.loads, open(exp / "metrics.jsonl")) if r["type"] == kind]


def assert_same_trajectory(a, b, models):
    """final.pt and the averaged models to float tolerance; every block's loss, accuracy, rate
    and frame count, and every epoch's dev scores."""
    for name in models:
        torch.testing.assert_close(saved_vector(a / name), saved_vector(b / name), rtol=0,
                                   atol=1e-5, msg=name)
    blocks_a, blocks_b = records(a, "block"), records(b, "block")
    assert len(blocks_a) == len(blocks_b) > 4
    for ra, rb in zip(blocks_a, blocks_b):
        assert (ra["epoch"], ra["block"], ra["syncs"], ra["frames"]) == \
            (rb["epoch"], rb["block"], rb["syncs"], rb["frames"])
        for key in ("loss", "frame_acc", "lr"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-6), (key, ra, rb)
    for ra, rb in zip(records(a, "epoch"), records(b, "epoch")):
        for key in [k for k in ra if k.startswith("dev_")]:
            assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-6), key


@pytest.mark.parametrize("overrides,models", [
    (DNN_BMUF, ["final.pt", "ema.pt", "avg.pt"]),
    (LSTM_BMUF, ["final.pt", "ema.pt"]),
    # the resident data path: each virtual worker holds its own shard, as a real worker does
    (DNN_BMUF + ["data.loader=resident", "data.resident_dtype=float16"], ["final.pt", "ema.pt"]),
    (DNN_DILOCO, ["final.pt", "ema.pt"]),
], ids=["dnn-bmuf", "lstm-bmuf", "dnn-bmuf-resident", "dnn-diloco"])
def test_two_virtual_workers_in_one_process_match_two_real_workers(problem, tmp_path, overrides,
                                                                   models):
    real, virtual = tmp_path / "real", tmp_path / "virtual"
    run_ok(train_sh(problem, real, 2, 1, overrides), real)
    run_ok(train(problem, virtual, overrides + ["dist.workers_per_process=2"]), virtual)
    assert_same_trajectory(real, virtual, models)
    assert records(virtual, "epoch")[-1]["bytes_reduced"] == 0   # nothing left the process


def test_two_by_two_virtual_workers_match_four_real_workers(problem, tmp_path):
    real, virtual = tmp_path / "real", tmp_path / "virtual"
    run_ok(train_sh(problem, real, 4, 1, DNN_MA), real)
    run_ok(train_sh(problem, virtual, 4, 2, DNN_MA), virtual)
    assert_same_trajectory(real, virtual, ["final.pt", "ema.pt"])
    # 2 processes all-reduce the same vector 4 processes did: the model plus 4 numbers
    last = records(virtual, "epoch")[-1]
    assert last["bytes_reduced"] == records(real, "epoch")[-1]["bytes_reduced"]


def assert_mid_epoch_resume_is_exact(problem, tmp_path, base):
    """Train `base` (checkpoints every 3 blocks, an EMA) in a/ and in b/; b/ interrupted after
    its first mid-epoch checkpoint and resumed must end as a/ did. Returns that checkpoint."""
    run_ok(train(problem, tmp_path / "a", base), tmp_path / "a")
    run_ok(train(problem, tmp_path / "b", base), tmp_path / "b")
    interrupt_after(tmp_path / "b", "epoch000-block000003", ["final.pt", "ema.pt"])
    run_ok(train(problem, tmp_path / "b", base, resume=True), tmp_path / "b")
    for name in ("final.pt", "ema.pt"):
        assert state_dicts_equal(tmp_path / "a" / name, tmp_path / "b" / name), name
    assert [(r["loss"], r["lr"]) for r in records(tmp_path / "a", "block")] == \
        [(r["loss"], r["lr"]) for r in records(tmp_path / "b", "block")]
    return tmp_path / "b" / "checkpoints" / "epoch000-block000003"


@pytest.mark.parametrize("tiny", [TINY_DNN, TINY_LSTM], ids=["dnn-stacked", "lstm-loop"])
def test_resume_of_virtual_workers_is_exact(problem, tmp_path, tiny):
    base = tiny + PER_WORKER + ["sync.strategy=bmuf", "average.ema_decay=0.9",
                                "dist.workers_per_process=2", "train.epochs=2",
                                "train.checkpoint_every_blocks=3"]
    kept = assert_mid_epoch_resume_is_exact(problem, tmp_path, base)
    files = sorted(p.name for p in kept.iterdir())
    assert files == ["rank0.pt", "rank1.pt", "state.pt"]   # one file per virtual worker


def tiny_model(tiny, **extra):
    c = configs.resolve(None, tiny + [f"model.{k}={v}" for k, v in extra.items()])
    torch.manual_seed(3)
    return build_model(c.model, 12, 5), c


@pytest.mark.parametrize("norm", ["none", "layernorm"])
def test_stacked_step_is_k_independent_workers(norm):
    # three batched steps of 3 stacked DNNs (dropout, clipping, which the first step's gradient
    # norm of 0.54 triggers, SGD momentum, a short minibatch) against 3 real workers' steps,
    # each on its own global RNG seeded as the stream is
    model, c = tiny_model(TINY_DNN, dropout=0.3, norm=norm)
    assert can_stack(model)
    seeds = [1000, 1001, 1002]

    def sgd(params):
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)

    stacked = StackedWorkers(copy.deepcopy(model), sgd, seeds, torch.device("cpu"), 0.2)
    rng = torch.Generator().manual_seed(0)
    steps = [[(torch.randn(n, 12, generator=rng), torch.randint(0, 5, (n,), generator=rng))
              for n in (16, 16, 9)] for _ in range(3)]
    stacked.train()
    got = [stacked.step(batches) for batches in steps]
    for k, seed in enumerate(seeds):
        torch.manual_seed(seed)
        one = LoopWorkers(copy.deepcopy(model), sgd, [seed], torch.device("cpu"), 0.2, c.data)
        one.train()
        for batches, stats in zip(steps, got):
            torch.testing.assert_close(one.step([batches[k]])[0], stats[k], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(one.vectors()[0], stacked.vectors()[k], rtol=0, atol=1e-6)
        state = stacked.state(k)
        assert state["optimizer"]["state"].keys() == one.state(0)["optimizer"]["state"].keys()
        torch.testing.assert_close(state["optimizer"]["state"][0]["momentum_buffer"],
                                   one.state(0)["optimizer"]["state"][0]["momentum_buffer"],
                                   rtol=0, atol=1e-6)
    # the state of each worker goes back into a fresh stack unchanged
    again = StackedWorkers(copy.deepcopy(model), sgd, [7, 8, 9], torch.device("cpu"), 0.2)
    again.load_states([stacked.state(k) for k in range(3)])
    assert torch.equal(again.vectors(), stacked.vectors())
    assert all(torch.equal(a.get_state(), b.get_state())
               for a, b in zip(again.streams, stacked.streams))


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_a_worker_without_a_minibatch_sits_the_step_out(optimizer):
    # at an epoch's end a shorter shard has run out (None) while the others train theirs: in the
    # stack and in the loop that worker's parameters, optimizer state (SGD's momentum with weight
    # decay would move them on a zero gradient) and dropout stream stay as they were, and every
    # worker ends as a real worker that took only its own steps (AdamW: its own step count)
    model, c = tiny_model(TINY_DNN, dropout=0.3)
    seeds = [1000, 1001, 1002]

    def make(params):
        if optimizer == "sgd":
            return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=0.01)
        return torch.optim.AdamW(params, lr=0.01)

    rng = torch.Generator().manual_seed(0)
    steps = [[(torch.randn(n, 12, generator=rng), torch.randint(0, 5, (n,), generator=rng))
              for n in (16, 16, 16)] for _ in range(4)]
    steps[2][1] = None                  # worker 1 has run out
    steps[3][1:] = [None, None]         # then worker 2 as well: worker 0 trains alone
    stacked = StackedWorkers(copy.deepcopy(model), make, seeds, torch.device("cpu"), 0.2)
    loop = LoopWorkers(copy.deepcopy(model), make, seeds, torch.device("cpu"), 0.2, c.data)
    got = [stacked.step(batches) for batches in steps]
    looped = [loop.step(batches) for batches in steps]
    assert torch.equal(got[3][1:], torch.zeros(2, 3)) and torch.equal(looped[3][1:],
                                                                       torch.zeros(2, 3))
    for k, seed in enumerate(seeds):
        torch.manual_seed(seed)
        one = LoopWorkers(copy.deepcopy(model), make, [seed], torch.device("cpu"), 0.2, c.data)
        for batches, stats in zip(steps, got):
            if batches[k] is not None:
                torch.testing.assert_close(one.step([batches[k]])[0], stats[k], rtol=1e-5,
                                           atol=1e-5)
        for workers in (stacked, loop):
            torch.testing.assert_close(one.vectors()[0], workers.vectors()[k], rtol=0, atol=1e-6)
            state, want = workers.state(k)["optimizer"]["state"], one.state(0)["optimizer"]["state"]
            assert state.keys() == want.keys()
            for i in want:
                for key, value in want[i].items():
                    torch.testing.assert_close(state[i][key], value, rtol=0, atol=1e-6,
                                               msg=f"worker {k} {key}")
            assert torch.equal(workers.state(k)["stream"] if workers is stacked else
                               loop.streams[k].get_state(), torch.get_rng_state())
    # the states go back into a fresh stack unchanged
    again = StackedWorkers(copy.deepcopy(model), make, [7, 8, 9], torch.device("cpu"), 0.2)
    again.load_states([stacked.state(k) for k in range(3)])
    assert torch.equal(again.vectors(), stacked.vectors())
    for k in range(3):
        assert again.state(k)["optimizer"]["state"].keys() == \
            stacked.state(k)["optimizer"]["state"].keys()


@pytest.mark.parametrize("tiny,extra", [(TINY_DNN, {}), (TINY_DNN, {"norm": "batchnorm"}),
                                         (TINY_LSTM, {}), (TINY_LSTM, {"dropout": 0.2})])
def test_the_sync_takes_the_mean_of_the_k_models_in_float64(tiny, extra):
    # what a process of K workers contributes to the all-reduce: the K vectors' mean in float64,
    # rounded once (the stacked DNN and LSTMP, and the loop's models with batchnorm statistics
    # and an LSTM with dropout)
    model, c = tiny_model(tiny, **extra)
    workers = (StackedWorkers if can_stack(model) else LoopWorkers)(
        model, lambda p: torch.optim.SGD(p, lr=0.1), [1, 2, 3], torch.device("cpu"), 0.0,
        data_config=c.data)
    rng = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for column in workers.columns():
            for k, tensor in enumerate(column):
                tensor.add_(torch.randn(tensor.shape, generator=rng) * 10.0 ** (k - 1))
    vectors = workers.vectors()
    assert not torch.equal(vectors[0], vectors[1])
    size = vectors.shape[1]
    want = vectors.double().mean(0).float()
    means = [workers.mean, lambda *a: mean_to_vector(workers.columns(), *a)]
    if can_stack(model):   # what a GPU runs: one float64 reduction per stacked parameter
        means.append(workers.mean_by_rows)
    for mean in means:
        out = torch.empty(size)
        mean(out, torch.empty(size, dtype=torch.float64))
        assert torch.equal(out, want)
        with pytest.raises(ValueError,
                           match=f"the models have {size} values, the vector {size + 1}"):
            mean(torch.empty(size + 1), torch.empty(size + 1, dtype=torch.float64))


def test_batchnorm_and_an_lstm_with_dropout_run_as_a_loop():
    assert not can_stack(tiny_model(TINY_LSTM, dropout=0.2)[0])
    assert not can_stack(tiny_model(TINY_DNN, norm="batchnorm")[0])


@pytest.mark.parametrize("value,message", [
    ("0", "integer >= 1"), ("1.5", "must be an integer"), ("true", "must be an integer"),
    ("two", "must be an integer"),
])
def test_workers_per_process_must_be_a_positive_integer(value, message):
    with pytest.raises(configs.ConfigError, match=message):
        configs.resolve(None, [f"dist.workers_per_process={value}"])


def test_single_strategy_has_one_worker():
    with pytest.raises(configs.ConfigError, match="single trains one worker"):
        configs.resolve(None, ["sync.strategy=single", "dist.workers_per_process=2"])


def test_train_sh_counts_workers_not_processes(problem, tmp_path):
    result = train_sh(problem, tmp_path / "exp", 3, 2, TINY_DNN)
    assert result.returncode != 0
    assert "--num-workers 3 is not a multiple of --workers-per-process 2" in result.stderr
    # K given twice, differently
    targets, train_dir, dev_dir = problem
    twice = run_script([str(REPO / "steps" / "nnet" / "train.sh"), "--num-workers", "4",
                        "--workers-per-process", "2", "--set-opts", "dist.workers_per_process=4",
                        targets, train_dir, dev_dir, str(tmp_path / "exp")])
    assert twice.returncode != 0 and "differ" in twice.stderr


def test_a_config_that_changes_the_worker_count_is_an_error(problem, tmp_path, monkeypatch):
    # train.sh exports N; K from a config file would otherwise make K x N workers
    monkeypatch.setenv("EMASR_NUM_WORKERS", "1")
    result = train(problem, tmp_path / "exp", TINY_DNN + ["dist.workers_per_process=2"])
    assert result.exit_code != 0
    assert "--num-workers 1 counts workers" in result.output
    assert "--workers-per-process" in result.output
