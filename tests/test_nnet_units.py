"""Network training pieces without processes: config resolution, models, data sharding, shuffling
and chunking, the LR schedules, the averaged models."""
import numpy as np
import pytest
import torch

from emasr.nnet import config as configs
from emasr.nnet.data import IGNORE, make_chunks, shard, shuffled_batches
from emasr.nnet.workers.flat import model_to_vector, vector_to_model
from emasr.nnet.models import build_model
from emasr.nnet.averages import (CumulativeAverage, ExponentialMovingAverage, LastEpochsAverage,
                                 build_averagers, family, kept_models)
from emasr.nnet.training.schedule import LearningRateSchedule
from emasr.nnet.training.selection import best_epochs
from emasr.nnet.workers import batch_stats, correct_frames, summed
from conftest import REPO


def test_config_layers_defaults_file_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  type: lstm\n  hidden_size: 64\ntrain:\n  lr: 0.5\n")
    c = configs.resolve(str(path), ["train.lr=0.25", "average.ema_decay=0.99", "model.proj_size=16"])
    assert c.model.to_dict() == {"type": "lstm", "num_layers": 3, "hidden_size": 64,
                                 "proj_size": 16, "dropout": 0.0}
    assert c.train.lr == 0.25 and c.average.ema_decay == 0.99
    assert c.train.momentum == configs.TrainConfig().momentum
    # every value has its type once resolved: an int given for a float is a float
    assert isinstance(configs.resolve(None, ["train.lr=1"]).train.lr, float)


def test_moved_keys_and_misspelt_sections_are_named():
    with pytest.raises(configs.ConfigError, match=r"'sync.ema_decay' is now 'average.ema_decay'"):
        configs.resolve(None, ["sync.ema_decay=0.9"])
    with pytest.raises(configs.ConfigError, match=r"unknown configuration key 'trian'"):
        configs.resolve(None, ["trian.lr=0.1"])
    with pytest.raises(configs.ConfigError, match=r"'average.ema_half_life_frames\[1\]' must be "
                                                 r"a number"):
        configs.resolve(None, ["average.ema_half_life_frames=[1000, fast]"])
    # a saved conf.yaml of the old layout is read with the key where it went
    old = {"sync": {"strategy": "bmuf", "ema_half_life_frames": 5000}}
    assert configs.from_saved(old).average.ema_half_life_frames == 5000.0


def test_config_rejects_unknown_keys_and_bad_values():
    with pytest.raises(configs.ConfigError, match="train.lrr"):
        configs.resolve(None, ["train.lrr=1"])
    with pytest.raises(configs.ConfigError, match="sync.strategy"):
        configs.resolve(None, ["sync.strategy=async"])
    with pytest.raises(configs.ConfigError, match="not both"):
        configs.resolve(None, ["average.ema_decay=0.9", "average.ema_half_life_frames=1000"])
    with pytest.raises(configs.ConfigError, match="max_grad_norm"):
        configs.resolve(None, ["train.max_grad_norm=-1"])
    with pytest.raises(configs.ConfigError, match="hidden_size"):   # an LSTM key on a DNN
        configs.resolve(None, ["model.hidden_size=3"])
    # a value of the wrong type names its key and what was expected
    with pytest.raises(configs.ConfigError, match=r"'train.lr' must be a number .* got 'fast'"):
        configs.resolve(None, ["train.lr=fast"])
    with pytest.raises(configs.ConfigError, match=r"'train.final_lr' must be a number"):
        configs.resolve(None, ["train.final_lr=low"])
    with pytest.raises(configs.ConfigError, match=r"'sync.nesterov' must be true or false"):
        configs.resolve(None, ["sync.nesterov=3"])
    # YAML 1.1 reads 1e-3 as a string: it is the number it says
    assert configs.resolve(None, ["train.lr=1e-3"]).train.lr == 0.001


@pytest.mark.parametrize("override, message", [
    ("train.epochs=0", "train.epochs must be >= 1, got 0"),
    ("train.epochs=-1", "train.epochs must be >= 1, got -1"),
    ("train.lr=-0.1", "train.lr must be > 0, got -0.1"),
    ("train.momentum=1.0", r"train.momentum must be in \[0, 1\), got 1.0"),
    ("data.minibatch_frames=0", "data.minibatch_frames must be >= 1, got 0"),
    ("dist.timeout_s=0", "dist.timeout_s must be > 0, got 0"),
    ("sync.block_size=0", "sync.block_size must be >= 1, got 0"),
    ("train.final_epoch=best", "train.final_epoch 'best': expected one of last, best_dev_acc"),
    ("average.ema_half_life_frames=0.5",
     r"average.ema_half_life_frames must be at least 1 frame .*, got \[0.5\]"),
])
def test_config_refuses_degenerate_values(override, message):
    with pytest.raises(configs.ConfigError, match=message):
        configs.resolve(None, [override])


def test_config_differences_ignore_resumable_keys():
    a = configs.resolve(None, [])
    b = configs.resolve(None, ["train.epochs=99", "train.lr=0.3"])
    assert configs.differences(a.to_dict(), b) == ["train.lr: 0.1 -> 0.3"]


@pytest.mark.parametrize("name", ["dnn", "lstm"])
def test_shipped_configs_resolve(name):
    c = configs.resolve(str(REPO / "conf" / "nnet" / f"{name}.yaml"))
    assert c.model.type == name and c.architecture.name == name


def test_models_output_log_posteriors():
    dnn = build_model({"type": "dnn", "hidden_layers": 2, "hidden_dim": 8, "activation": "sigmoid",
                       "norm": "layernorm", "dropout": 0.0}, 6, 5)
    out = dnn(torch.randn(7, 6))
    assert out.shape == (7, 5)
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(7))
    lstm = build_model({"type": "lstm", "num_layers": 2, "hidden_size": 8, "proj_size": 4,
                        "dropout": 0.0}, 6, 5)
    assert lstm.lstm.proj_size == 4
    out = lstm(torch.randn(3, 9, 6))
    assert out.shape == (3, 9, 5)
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(3, 9))


def test_lstm_is_unidirectional():
    lstm = build_model({"type": "lstm", "num_layers": 2, "hidden_size": 8, "proj_size": 4,
                        "dropout": 0.0}, 3, 2)
    x = torch.randn(1, 10, 3)
    y = x.clone()
    y[0, 6:] += 5.0   # change the future only
    torch.testing.assert_close(lstm(x)[0, :6], lstm(y)[0, :6])


def test_flat_vector_round_trip_includes_batchnorm_statistics():
    model = build_model({"type": "dnn", "hidden_layers": 1, "hidden_dim": 4, "activation": "relu",
                         "norm": "batchnorm", "dropout": 0.0}, 3, 2)
    vector = model_to_vector(model)
    assert vector.numel() == sum(p.numel() for p in model.parameters()) + 2 * 4
    vector_to_model(torch.arange(vector.numel(), dtype=torch.float32), model)
    assert torch.equal(model_to_vector(model), torch.arange(vector.numel(), dtype=torch.float32))
    buffer = torch.zeros(vector.numel() + 2)   # written in place: the sync's reused buffer
    model_to_vector(model, out=buffer[:-2])
    assert torch.equal(buffer[:-2], torch.arange(vector.numel(), dtype=torch.float32))


def test_batch_stats_count_correct_and_labelled_frames():
    log_probs = torch.tensor([[0.0, -1.0, -2.0], [-3.0, -1.0, -1.0], [-1.0, -2.0, 0.0],
                              [0.0, -1.0, -1.0]]).log_softmax(-1).requires_grad_()
    labels = torch.tensor([0, 2, 1, IGNORE])
    # frame 0 right, frame 1 tied at the top (counts), frame 2 wrong, frame 3 unlabelled
    assert correct_frames(log_probs, labels).tolist() == [True, True, False, False]
    loss, stats = batch_stats(log_probs, labels)
    want = -(log_probs[0, 0] + log_probs[1, 2] + log_probs[2, 1]) / 3   # per labelled frame
    assert torch.allclose(loss, want) and loss.requires_grad and not stats.requires_grad
    assert stats.tolist() == pytest.approx([float(want), 2.0, 3.0])
    # minibatches' stats add up to the loss sum; one without a labelled frame adds nothing
    nothing, unlabelled = batch_stats(log_probs, torch.full((4,), IGNORE))
    assert unlabelled[0].isnan() and unlabelled[1:].tolist() == [0.0, 0.0]
    nothing.backward()   # NaN, but it adds nothing to the gradients
    assert log_probs.grad is not None and not log_probs.grad.any()
    assert summed([stats, unlabelled, stats]) == pytest.approx([6 * float(want), 4.0, 6.0])
    stacked = correct_frames(log_probs.detach().expand(2, 4, 3), labels.expand(2, 4))
    assert stacked.sum(1).tolist() == [2, 2]   # [K, rows, P], as the stacked workers use it


def test_shards_are_disjoint_cover_and_depend_on_seed():
    utts = [f"u{i:03d}" for i in range(23)]
    shards = [shard(utts, 5, r, 4) for r in range(4)]
    assert sorted(sum(shards, [])) == utts
    assert all(len(s) in (5, 6) for s in shards)
    assert shard(utts, 5, 0, 4) == shards[0] and shard(utts, 6, 0, 4) != shards[0]


def test_shuffled_batches_emit_every_example_once_with_bounded_buffer():
    items = [(np.full((n, 1), i, np.float32), np.arange(n) + 100 * i) for i, n in
             enumerate([7, 3, 12, 5, 9])]
    batches = list(shuffled_batches(iter(items), 4, 10, np.random.default_rng(0)))
    ys = np.concatenate([y for _, y in batches])
    assert sorted(ys) == sorted(np.concatenate([y for _, y in items]))
    assert all(len(y) == 4 for _, y in batches[:-1]) and 1 <= len(batches[-1][1]) <= 4
    # x and y stay paired through the shuffle
    assert all((x[:, 0] == y // 100).all() for x, y in batches)
    again = list(shuffled_batches(iter(items), 4, 10, np.random.default_rng(0)))
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(batches, again))


def test_chunks_map_outputs_to_labels_with_context_and_delay():
    feats = np.arange(7, dtype=np.float32)[:, None]
    labels = np.arange(7) + 10
    x, y = make_chunks(feats, labels, chunk=3, left=2, delay=1)
    assert x.shape == (3, 6, 1) and y.shape == (3, 3)
    # chunk 1 covers frames 3..5; its window starts 2 frames earlier and ends 1 frame later
    assert x[1, :, 0].tolist() == [1, 2, 3, 4, 5, 6]
    # output position left + delay + m of chunk i sees frame i*3 + m + delay as its newest input
    assert x[1, 2 + 1 + 0, 0] == 3 + 1
    assert y.tolist() == [[10, 11, 12], [13, 14, 15], [16, IGNORE, IGNORE]]
    assert x[0, :, 0].tolist() == [0, 0, 0, 1, 2, 3]    # left edge repeated
    assert x[2, :, 0].tolist() == [4, 5, 6, 6, 6, 6]    # right edge repeated


def test_newbob_rejects_a_worse_epoch_halves_on_a_plateau_and_stops():
    # nnet1's train_scheduler.sh: start halving under 1% relative gain, stop under 0.1%
    s = LearningRateSchedule("newbob", 0.8, factor=0.5, start_halving=0.01, end_halving=0.001)
    s.set_initial_loss(2.0)
    steps = [s.end_epoch(loss) for loss in [1.0, 1.1, 0.995, 0.99, 0.9899]]
    assert [d.accepted for d in steps] == [True, False, True, True, True]
    # 1.1 is rejected: no gain over 1.0, so halving starts; then 0.5% and 0.5% keep halving; the
    # last epoch gains 0.01%, under the end threshold: training stops there
    assert [d.lr for d in steps] == [0.8, 0.4, 0.2, 0.1, 0.1]
    assert [d.stop for d in steps] == [False, False, False, False, True]
    assert s.best_loss == 0.9899 and steps[1].improvement == 0.0
    again = LearningRateSchedule("newbob", 0.8)
    again.load_state_dict(s.state_dict())
    assert again.stopped and again.lr == 0.1 and again.best_loss == 0.9899


def test_exponential_decay_reaches_the_final_rate_at_the_planned_frames():
    e = LearningRateSchedule("exponential", 0.1, final_lr=0.001)
    assert e.lr_at(0.0) == pytest.approx(0.1)
    assert e.lr_at(0.5) == pytest.approx(0.01)          # geometric: half way is the mean in log
    assert e.lr_at(1.0) == pytest.approx(0.001)
    assert e.lr_at(1.7) == pytest.approx(0.001)         # frames past the plan stay at the end
    assert LearningRateSchedule("exponential", 0.2).lr_at(1.0) == pytest.approx(0.02)  # lr / 10
    assert LearningRateSchedule("constant", 0.2).lr_at(0.9) == 0.2
    decision = e.end_epoch(5.0)
    assert decision.accepted and not decision.stop


def test_a_linear_decay_anneals_to_its_final_rate_zero_included():
    from emasr.nnet import config as configs

    line = LearningRateSchedule("linear", 0.1, final_lr=0.0)
    assert [line.lr_at(p) for p in (0.0, 0.25, 1.0, 1.5)] == pytest.approx([0.1, 0.075, 0.0, 0.0])
    assert LearningRateSchedule("linear", 0.2).lr_at(0.5) == pytest.approx(0.11)   # to lr / 10
    configs.resolve(None, ["train.schedule=linear", "train.final_lr=0"])
    with pytest.raises(configs.ConfigError, match=r"train.final_lr must be in \(0, train.lr = "
                                                   r"0.1\] for the exponential schedule, got 0"):
        configs.resolve(None, ["train.lr=0.1", "train.final_lr=0"])


def test_best_epochs_per_model_earliest_of_ties_and_none_for_a_model_never_scored():
    records = [{"epoch": 1, "dev_acc": 0.4},
               {"epoch": 2, "dev_acc": 0.6, "dev_acc_ema": 0.5},
               {"epoch": 3, "dev_acc": 0.6, "dev_acc_ema": 0.7}]
    assert best_epochs(records, ["final", "ema", "avg"]) == {"final": 2, "ema": 3}


def test_cumulative_average_of_a_known_sequence_from_its_start_point():
    avg = CumulativeAverage(start=0.5)
    for progress, value in [(0.0, 100.0), (0.4, 50.0), (0.5, 1.0), (0.7, 2.0), (0.9, 6.0)]:
        avg.update(torch.full((3,), value), progress)
    torch.testing.assert_close(avg.average, torch.full((3,), 3.0))   # (1 + 2 + 6) / 3
    restored = CumulativeAverage(0.0)
    restored.load_state_dict(avg.state_dict())
    restored.update(torch.full((3,), 7.0), 1.0)
    torch.testing.assert_close(restored.average, torch.full((3,), 4.0))


def test_a_short_block_decays_the_ema_by_its_frames_and_a_warm_start_seeds_the_averages():
    # half-life 1000 frames at 400 frames a full sync: a last block of 100 frames (share 0.25)
    # weighs its W_g by 1 - 0.5 ** (100 / 1000), as the same frames in full syncs would
    [ema] = build_averagers(configs.resolve(None, ["average.ema_half_life_frames=1000"]),
                            400).values()
    ema.update(torch.zeros(1))
    ema.update(torch.ones(1), share=0.25)
    torch.testing.assert_close(ema.average, torch.full((1,), 1 - 0.5 ** 0.1))
    ema.update(torch.full((1,), 2.0))          # a full sync: alpha itself
    torch.testing.assert_close(ema.average,
                               torch.full((1,), (1 - 0.5 ** 0.1) * 0.5 ** 0.4 +
                                          2 * (1 - 0.5 ** 0.4)))
    # a warm start: the EMA and the averages begun by then start at the init model; the
    # cumulative average not yet begun, and the EMA's twin after BMUF's warm-up, do not
    init = torch.full((1,), 5.0)
    seeded = {"ema": build_averagers(configs.resolve(None, ["average.ema_decay=0.5"]), 1)["ema"],
              "avg": CumulativeAverage(0.25), "late": CumulativeAverage(0.75),
              "lastk": LastEpochsAverage(2), "twin": ExponentialMovingAverage(0.5, start=3)}
    for averager in seeded.values():
        averager.seed(init, 0.5)
    assert [a.average for a in seeded.values()] == [init, init, None, init, None]
    seeded["ema"].update(torch.full((1,), 1.0))
    seeded["avg"].update(torch.full((1,), 1.0), 0.6)
    torch.testing.assert_close(seeded["ema"].average, torch.full((1,), 3.0))
    torch.testing.assert_close(seeded["avg"].average, torch.full((1,), 3.0))


def test_last_k_average_of_known_epochs():
    lastk = LastEpochsAverage(2)
    assert lastk.average is None
    for value in [1.0, 2.0, 10.0]:
        lastk.update(torch.full((2,), 99.0))      # syncs do not count, only epoch ends
        lastk.end_epoch(torch.full((2,), value))
    torch.testing.assert_close(lastk.average, torch.full((2,), 6.0))   # (2 + 10) / 2
    again = LastEpochsAverage(2)
    again.load_state_dict(lastk.state_dict())
    torch.testing.assert_close(again.average, lastk.average)


def test_averaged_models_are_registered_once_and_follow_the_config():
    config = configs.resolve(None, ["average.ema_decay=0.9", "average.last_k=3"])
    assert kept_models(config.average) == ["ema", "lastk"]
    assert set(build_averagers(config, 100)) == {"ema", "lastk"}
    # several half-lives: one EMA each, named by its half-life in frames
    several = configs.resolve(None, ["average.ema_half_life_frames=[3e4, 90000]"])
    assert kept_models(several.average) == ["ema_30000", "ema_90000"]
    decays = {n: a.decay for n, a in build_averagers(several, 100).items()}
    assert decays == pytest.approx({"ema_30000": 0.5 ** (100 / 3e4),
                                    "ema_90000": 0.5 ** (100 / 9e4)})
    with pytest.raises(configs.ConfigError, match="name the same model"):
        configs.resolve(None, ["average.ema_half_life_frames=[1000, 1000.2]"])
    with pytest.raises(configs.ConfigError, match="cumulative_start"):
        configs.resolve(None, ["average.cumulative_start=1.5"])


def test_each_ema_gets_a_twin_started_after_bmufs_warm_up():
    bmuf = ["sync.strategy=bmuf", "sync.warmup_blocks=3", "average.ema_after_warmup=true"]
    config = configs.resolve(None, bmuf + ["average.ema_half_life_frames=[3e4, 90000]"])
    assert kept_models(config.average) == ["ema_30000", "ema_90000", "ema-warm_30000",
                                           "ema-warm_90000"]
    averagers = build_averagers(config, 100)
    assert family("ema-warm_30000") == "ema-warm"
    assert averagers["ema-warm_30000"].decay == averagers["ema_30000"].decay
    assert (averagers["ema_30000"].start, averagers["ema-warm_30000"].start) == (0, 3)
    # the twin skips the warm-up's syncs and starts from the first W_g after them
    twin = averagers["ema-warm_30000"]
    for value in range(1, 6):
        twin.update(torch.full((1,), float(value)))
    alpha = twin.decay
    expected = alpha * 4.0 + (1 - alpha) * 5.0
    torch.testing.assert_close(twin.average, torch.full((1,), expected))
    with pytest.raises(configs.ConfigError, match="set the EMA too"):
        configs.resolve(None, bmuf)
    with pytest.raises(configs.ConfigError, match="BMUF with a warm-up"):
        configs.resolve(None, ["sync.strategy=bmuf", "average.ema_decay=0.9",
                               "average.ema_after_warmup=true"])
    with pytest.raises(configs.ConfigError, match="BMUF with a warm-up"):
        configs.resolve(None, ["sync.strategy=ma", "sync.warmup_blocks=3", "average.ema_decay=0.9",
                               "average.ema_after_warmup=true"])


def test_workers_share_gpus_through_gloo_and_nccl_needs_one_gpu_each(monkeypatch):
    from emasr.nnet.workers.comm import choose_backend, worker_device

    with pytest.raises(configs.ConfigError, match="dist.device"):
        configs.resolve(None, ["dist.device=gpu"])
    assert worker_device("cpu").type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert worker_device("auto").type == "cpu"
    with pytest.raises(configs.ConfigError, match="sees no GPU"):
        worker_device("cuda")
    assert choose_backend("auto", torch.device("cpu")) == "gloo"
    # a node with 2 GPUs: worker 3 of 4 takes GPU 1 and the 4 workers share through gloo
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert worker_device("auto") == torch.device("cuda", 1)
    assert choose_backend("auto", torch.device("cuda", 1)) == "gloo"
    with pytest.raises(configs.ConfigError, match="one GPU per worker.*4 worker.*2 GPU"):
        choose_backend("nccl", torch.device("cuda", 1))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert choose_backend("auto", torch.device("cuda", 1)) == "nccl"
    assert choose_backend("gloo", torch.device("cuda", 1)) == "gloo"
