"""How a step computes (emasr.nnet.workers.precision): bf16 autocast with fp32 master weights stays close to
fp32 (on the CPU too); the optimizer's kernels (foreach, fused) compute what torch's default does;
torch.compile of the step matches eager; every switch is checked by the config."""
import copy

import pytest
import torch

from emasr.nnet import config as configs
from emasr.nnet.models import build_model
from emasr.nnet.workers.precision import compile_mode, kept, make_optimizer
from emasr.nnet.workers import LoopWorkers, StackedWorkers
from nnet_synthetic import TINY_DNN, TINY_LSTM
from test_nnet_train import problem, saved_vector, train  # noqa: F401
from test_virtual_workers import records, run_ok

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("tiny", [
    TINY_DNN + ["sync.strategy=single"],
    TINY_DNN + ["sync.strategy=bmuf", "dist.workers_per_process=2"],   # stacked (StackedWorkers)
    TINY_LSTM + ["sync.strategy=single", "data.loader=resident"],
], ids=["dnn", "dnn-2-virtual", "lstm"])
def test_bf16_training_stays_close_to_fp32(problem, tmp_path, tiny):
    base = tiny + ["train.schedule=constant", "train.epochs=2"]
    run_ok(train(problem, tmp_path / "fp32", base), tmp_path / "fp32")
    run_ok(train(problem, tmp_path / "bf16", base + ["train.precision=bf16"]), tmp_path / "bf16")
    full, half = records(tmp_path / "fp32", "block"), records(tmp_path / "bf16", "block")
    assert len(full) == len(half) > 6
    # the same data and start: losses a few steps in within bf16's rounding, but not equal (the
    # matmuls did run in bf16)
    for a, b in zip(full[:6], half[:6]):
        assert b["loss"] == pytest.approx(a["loss"], rel=2e-2)
    assert any(a["loss"] != b["loss"] for a, b in zip(full, half))
    # the first epoch's dev loss: later, this tiny model's constant-rate trajectory is chaotic
    # enough that bf16's rounding moves where an epoch ends by more than 10% (0.40 and 0.36 after
    # the second epoch of the one-worker DNN, 0.42 and 0.68 after a third)
    firsts = records(tmp_path / "fp32", "epoch")[0], records(tmp_path / "bf16", "epoch")[0]
    assert firsts[1]["dev_loss"] == pytest.approx(firsts[0]["dev_loss"], rel=0.05)
    weights = saved_vector(tmp_path / "bf16" / "final.pt")   # fp32 master weights
    assert weights.dtype == torch.float32 and torch.isfinite(weights).all()


def tiny_workers(kind, precision="fp32", compile_mode=None, impl="default", k=1,
                 tiny=TINY_DNN):
    c = configs.resolve(None, tiny)
    torch.manual_seed(3)
    model = build_model(c.model, 12, 5)

    def sgd(params):
        return make_optimizer(lambda p, **kw: torch.optim.SGD(p, lr=0.1, momentum=0.9, **kw),
                              params, impl)
    seeds = list(range(k))
    if kind == "stacked":
        return StackedWorkers(copy.deepcopy(model), sgd, seeds, torch.device("cpu"), 0.5,
                              precision=precision, compile_mode=compile_mode)
    return LoopWorkers(copy.deepcopy(model), sgd, seeds, torch.device("cpu"), 0.5, c.data,
                       precision=precision, compile_mode=compile_mode)


def steps(count=3, k=1, rows=16):
    rng = torch.Generator().manual_seed(0)
    return [[(torch.randn(rows, 12, generator=rng), torch.randint(0, 5, (rows,), generator=rng))
             for _ in range(k)] for _ in range(count)]


def test_bf16_autocasts_the_matmuls_and_keeps_fp32_weights_and_loss():
    workers = tiny_workers("loop", precision="bf16")
    seen = []
    workers.models[0].layers[0].register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    stats = workers.step(steps(1)[0])
    assert seen == [torch.bfloat16]
    assert stats.dtype == torch.float32 and stats[0, 2] == 16   # loss per frame, correct, frames
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32
               for p in workers.models[0].parameters())


@pytest.mark.parametrize("impl", ["foreach", "fused"])
@pytest.mark.parametrize("kind,k", [("loop", 1), ("stacked", 3)])
def test_optimizer_kernels_compute_what_the_default_does(impl, kind, k):
    batches = steps(k=k)
    default, other = tiny_workers(kind, k=k), tiny_workers(kind, impl=impl, k=k)
    for step in batches:
        torch.testing.assert_close(other.step(step), default.step(step), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(other.vectors(), default.vectors(), rtol=1e-6, atol=1e-6)
    assert other.optimizer.param_groups[0][impl] is True


# reduce-overhead's CUDA graphs are the device's; on a CPU it compiles as default does, through
# the step's own marks (precision.new_step)
@pytest.mark.parametrize("kind,k,mode", [("loop", 1, "default"), ("stacked", 3, "reduce-overhead")])
def test_compiled_steps_match_eager(kind, k, mode):
    eager, compiled = tiny_workers(kind, k=k), tiny_workers(kind, k=k, compile_mode=mode)
    for step in steps(count=2, k=k):
        torch.testing.assert_close(compiled.step(step), eager.step(step), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(compiled.vectors(), eager.vectors(), rtol=1e-5, atol=1e-5)
    # the modules stay plain: their state_dicts are an eager model's
    assert compiled.state(0)["model"].keys() == eager.state(0)["model"].keys()


def test_a_steps_statistics_outlive_the_next_cuda_graph_replay():
    # under CUDA graphs the next step's replay overwrites a compiled output: LoopWorkers keep a
    # copy of the statistics they return (read once per block)
    stats = torch.tensor([1.5, 3.0, 4.0])
    assert kept(stats, None) is stats and kept(stats, "default") is stats
    copy = kept(stats, "reduce-overhead")
    assert torch.equal(copy, stats) and copy.data_ptr() != stats.data_ptr()


@pytest.mark.parametrize("setting,message", [
    ("data.loader=disk", "data.loader 'disk': expected one of stream, resident"),
    ("data.resident_dtype=bfloat16", "expected one of float32, float16"),
    ("data.resident_memory=gpu", "expected one of auto, device, host"),
    ("data.resident_part_frames=-1", "data.resident_part_frames must be >= 0"),
    ("train.precision=fp16", "train.precision 'fp16': expected one of fp32, bf16"),
    ("train.optimizer_impl=apex", "expected one of default, foreach, fused"),
    ("train.tf32=1", "'train.tf32' must be true or false"),
    ("train.compile=yes please", "'train.compile' must be true or false"),
    ("train.compile_mode=max-autotune", "expected one of default, reduce-overhead"),
])
def test_every_switch_is_checked(setting, message):
    with pytest.raises(configs.ConfigError, match=message):
        configs.resolve(None, [setting])


def test_the_defaults_compute_as_before():
    c = configs.resolve(None, [])
    assert c.data.loader == "stream" and c.train.precision == "fp32"
    assert (c.train.tf32, c.train.compile, c.train.optimizer_impl) == \
        (False, False, "default")
    assert compile_mode(c.train) is None
    # a checkpoint written before these keys existed resumes: an absent key is its default
    saved = c.to_dict()
    for section, key in (("data", "loader"), ("data", "resident_dtype"), ("train", "precision"),
                         ("train", "tf32"), ("train", "compile"), ("train", "compile_mode")):
        del saved[section][key]
    assert configs.differences(saved, c) == []
    assert configs.differences(saved, configs.resolve(None, ["train.precision=bf16"])) == \
        ["train.precision: 'fp32' -> 'bf16'"]
