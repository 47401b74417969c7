"""The resident data path (data.loader=resident): a worker's shard in one tensor, minibatches by
index gathers. Every frame (DNN) or chunk (LSTM) once per epoch with its labels, exactly the
examples the stream loader yields; the order seeded by (seed, epoch, rank); fp16 storage; training
that learns, with virtual workers too; exact resume."""
import collections

import numpy as np
import pytest
import torch

from emasr.nnet import config as configs
from emasr.nnet.data import Source, TrainingData, make_chunks, shard, utterances_with_targets
from emasr.nnet.data.loaders import training_data
from emasr.nnet.data.resident import ResidentData, ResidentGroup, ResidentParts, splice_offsets
from emasr.nnet.data.inputs import make_pipeline, open_targets
from nnet_synthetic import DIM, NUM_PDFS, TINY_DNN, TINY_LSTM
from test_nnet_train import problem, train  # noqa: F401
from test_virtual_workers import assert_mid_epoch_resume_is_exact, records, run_ok

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RESIDENT = ["data.loader=resident"]
# the LSTM with spliced inputs too: its chunk windows are spliced by a second gather
LSTM_SPLICED = TINY_LSTM + ["features.splice=1"]


def worker_shard(problem, overrides, rank=0, workers=2):
    """(source, worker `rank`'s utterances, config, sequence model?) as the trainer makes them."""
    targets_dir, train_dir, _ = problem
    c = configs.resolve(None, overrides)
    pipeline, targets = make_pipeline(c.features), open_targets(targets_dir)
    source = Source(train_dir, targets_dir, pipeline, targets, pipeline.output_dim(DIM), NUM_PDFS)
    utts = utterances_with_targets(train_dir, targets, targets_dir, "training")
    return source, shard(utts, c.data.seed, rank, workers), c, c.model.type == "lstm"


def resident(problem, overrides, rank=0, epoch=0, **kw):
    source, utts, c, sequence = worker_shard(problem, overrides + RESIDENT)
    return list(ResidentData(source, utts, c.data, sequence, rank).minibatches(epoch, **kw))


def examples(batches):
    """The multiset of (input bytes, label bytes), one entry per frame or chunk."""
    return collections.Counter((x.numpy().tobytes(), y.numpy().tobytes())
                               for xs, ys in batches for x, y in zip(xs, ys))


def same(a, b):
    """The same minibatches, in the same order."""
    return len(a) == len(b) and all(torch.equal(x, u) and torch.equal(y, v)
                                    for (x, y), (u, v) in zip(a, b))


def test_splice_offsets_repeat_each_utterances_edge_frames():
    # utterances of 1, 2 and 6 rows, splice 2: row r's window is r + c clamped to its utterance
    lengths = np.array([1, 2, 6])
    offsets = splice_offsets(lengths, 2, torch.device("cpu"))
    assert offsets.dtype == torch.int8 and offsets.shape == (9, 5)
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)[:, None]
    last = first + np.repeat(lengths, lengths)[:, None] - 1
    rows = np.arange(9)[:, None]
    want = np.clip(rows + np.arange(-2, 3), first, last)
    np.testing.assert_array_equal(rows + offsets.numpy(), want)
    assert splice_offsets(lengths, 0, torch.device("cpu")).shape == (9, 1)


def test_dnn_minibatches_hold_every_frame_once_with_its_label(problem):
    source, utts, c, _ = worker_shard(problem, TINY_DNN)
    assert c.features.splice == 1   # spliced by offset gathers
    want = collections.Counter()
    for _, feats, labels in source.utterances(utts):   # the network's inputs, per utterance
        want.update(examples([(torch.from_numpy(feats), torch.from_numpy(labels))]))
    batches = resident(problem, TINY_DNN)
    assert examples(batches) == want and sum(want.values()) > 100
    sizes = [len(y) for _, y in batches]
    assert set(sizes[:-1]) == {16} and 0 < sizes[-1] <= 16
    assert all(x.dtype == torch.float32 and y.dtype == torch.int64 for x, y in batches)
    # the same examples as the stream loader's epoch, in another order
    stream = list(TrainingData(source, utts, c.data, False, 0).minibatches(0))
    assert examples(stream) == want
    assert not torch.equal(stream[0][0], batches[0][0])


def test_lstm_minibatches_hold_every_chunk_once(problem):
    source, utts, c, _ = worker_shard(problem, LSTM_SPLICED)
    d = c.data
    want = collections.Counter()
    for _, feats, labels in source.utterances(utts):
        x, y = make_chunks(feats, labels, d.chunk_frames, d.left_context, d.output_delay)
        want.update(examples([(torch.from_numpy(x), torch.from_numpy(y))]))
    batches = resident(problem, LSTM_SPLICED)
    assert examples(batches) == want and sum(want.values()) > 20
    assert batches[0][0].shape[1:] == (2 + 5 + 1, 3 * DIM * 3) and batches[0][1].shape[1:] == (5,)
    assert any((y == -100).any() for _, y in batches)   # chunks running past an utterance's end


@pytest.mark.parametrize("tiny", [TINY_DNN, LSTM_SPLICED], ids=["dnn", "lstm"])
def test_the_order_depends_on_seed_epoch_and_rank_only(problem, tiny):
    first = resident(problem, tiny)
    again = resident(problem, tiny)
    assert same(first, again)
    for other in (resident(problem, tiny, epoch=1), resident(problem, tiny, rank=1)):
        assert examples(other) == examples(first)   # the same shard, in another order
        assert not torch.equal(other[0][0], first[0][0])
    # resuming skips permutation slices: the same minibatches from the skipped one on
    assert same(resident(problem, tiny, skip=3), first[3:])


PARTS = ["data.resident_part_frames=40"]   # a shard of 8 utterances of 10-20 network frames


def in_parts(problem, tiny, epoch=0, **kw):
    source, utts, c, sequence = worker_shard(problem, tiny + RESIDENT + PARTS)
    data = training_data("resident", source, utts, c.data, sequence, 0, torch.device("cpu"))
    assert isinstance(data, ResidentParts)
    return data, list(data.minibatches(epoch, **kw))


@pytest.mark.parametrize("tiny", [TINY_DNN, LSTM_SPLICED], ids=["dnn", "lstm"])
def test_a_shard_in_parts_gives_every_example_once_an_epoch(problem, tiny):
    data, first = in_parts(problem, tiny)
    parts = data.parts(0)
    frames = dict(zip(data.utts, data.lengths))
    assert len(parts) >= 3 and sorted(u for part in parts for u in part) == sorted(data.utts)
    assert all(sum(frames[u] for u in part) <= 40 or len(part) == 1 for part in parts)
    # the whole shard's examples, each once, part by part: each part's minibatches are full but
    # its last
    assert examples(first) == examples(resident(problem, tiny))
    short = [len(y) for _, y in first if len(y) < max(len(y) for _, y in first)]
    assert 0 < len(short) <= len(parts)
    _, again = in_parts(problem, tiny)
    assert same(first, again)
    other, later = in_parts(problem, tiny, epoch=1)
    assert other.parts(1) != parts and examples(later) == examples(first)
    # the next epoch's first part was loaded while this one's last trained: the same minibatches
    assert data.ahead[0] == 1 and data.ahead[1].result().utts == other.parts(1)[0]
    assert same(list(data.minibatches(1)), later) and data.ahead[0] == 2
    # resuming skips whole parts by their minibatch counts, then slices of the part it is in
    for skip in (1, 4, len(first) - 1):
        assert same(in_parts(problem, tiny, skip=skip)[1], first[skip:])


def test_float16_storage_rounds_the_inputs_to_fp16(problem):
    full = resident(problem, TINY_DNN)
    half = resident(problem, TINY_DNN + ["data.resident_dtype=float16"])
    for (x32, y32), (x16, y16) in zip(full, half):   # the same order: the seed decides it
        assert torch.equal(y16, y32) and x16.dtype == torch.float32
        assert torch.equal(x16, x32.half().float())
        assert (x16 - x32).abs().max() <= 2 ** -11 * x32.abs().max()
    assert not all(torch.equal(a[0], b[0]) for a, b in zip(full, half))


def dev_results(exp):
    return records(exp, "epoch")[-1]


@pytest.mark.parametrize("extra", [
    ["sync.strategy=single", "train.epochs=4"],
    # each virtual worker on its own shard, half the updates of one worker per epoch
    ["sync.strategy=bmuf", "dist.workers_per_process=2", "train.epochs=6"],
], ids=["single", "bmuf-2-virtual"])
def test_training_with_the_resident_loader_learns(problem, tmp_path, extra):
    base = TINY_DNN + extra + ["train.lr=0.1", "average.ema_decay=0.5"]
    run_ok(train(problem, tmp_path / "stream", base), tmp_path / "stream")
    run_ok(train(problem, tmp_path / "resident", base + RESIDENT), tmp_path / "resident")
    stream, ours = dev_results(tmp_path / "stream"), dev_results(tmp_path / "resident")
    # 5 classes, chance about 0.25: both learn the problem, along different trajectories
    assert ours["dev_acc"] > 0.6 and ours["dev_acc_ema"] > 0.6, ours
    assert ours["dev_loss"] < records(tmp_path / "resident", "block")[0]["loss"]
    assert abs(ours["dev_acc"] - stream["dev_acc"]) < 0.2, (ours, stream)
    assert ours["frames"] == stream["frames"]   # the same frames per epoch (every full block)
    assert ours["dev_loss"] != stream["dev_loss"]


@pytest.mark.parametrize("tiny", [
    TINY_DNN + ["sync.strategy=single"],
    LSTM_SPLICED + ["sync.strategy=bmuf", "dist.workers_per_process=2"],
    TINY_DNN + ["sync.strategy=bmuf", "dist.workers_per_process=2"] + PARTS,
], ids=["dnn-single", "lstm-bmuf-2-virtual", "dnn-bmuf-2-virtual-in-parts"])
def test_resume_of_a_resident_run_is_exact(problem, tmp_path, tiny):
    base = tiny + RESIDENT + ["average.ema_decay=0.9", "model.dropout=0.2", "train.epochs=2",
                              "train.checkpoint_every_blocks=3"]
    assert_mid_epoch_resume_is_exact(problem, tmp_path, base)
    # where the shard lives may change on resume; the loader may not
    moved = train(problem, tmp_path / "b", base + ["data.resident_memory=host", "train.epochs=3"],
                  resume=True)
    run_ok(moved, tmp_path / "b")
    changed = train(problem, tmp_path / "b", tiny + ["train.epochs=4"], resume=True)
    assert changed.exit_code != 0 and "data.loader: 'resident' -> 'stream'" in changed.output


def test_the_shard_is_loaded_once_into_one_tensor(problem):
    source, utts, c, _ = worker_shard(problem, TINY_DNN + RESIDENT)
    data = ResidentData(source, utts, c.data, False, 0)
    frames = [sum(len(y) for _, y in data.minibatches(0))]
    where = data.feats.data_ptr()
    frames += [sum(len(y) for _, y in data.minibatches(epoch)) for epoch in (1, 2)]
    assert data.feats.data_ptr() == where and frames == [len(data.labels)] * 3
    assert data.feats.is_contiguous() and data.feats.shape == (len(data.labels), 3 * DIM)
    np.testing.assert_array_equal(data.ends.numpy()[:-1], data.starts.numpy()[1:])


@pytest.mark.parametrize("tiny", [TINY_DNN, LSTM_SPLICED], ids=["dnn", "lstm"])
def test_a_group_of_shards_gathers_every_workers_minibatch_at_once(problem, tiny):
    # 3 virtual workers' shards in one store: step i is minibatch i of each worker as its own
    # shard yields it, until the longest shard's run out (None where a shard has run out); full
    # steps come as one [K, B, ...] gather
    def shards():
        return [ResidentData(*worker_shard(problem, tiny + RESIDENT, rank, 3)[:2],
                             worker_shard(problem, tiny + RESIDENT)[2].data,
                             tiny is LSTM_SPLICED, rank) for rank in range(3)]

    group, apart = ResidentGroup(shards()), shards()
    steps = list(group.steps(epoch=1))
    alone = [list(shard.minibatches(1)) for shard in apart]
    assert len(steps) == max(len(batches) for batches in alone) >= 3
    for i, step in enumerate(steps):
        assert len(step) == 3
        for got, batches in zip(step, alone):
            if i >= len(batches):
                assert got is None
                continue
            assert torch.equal(got[0], batches[i][0]) and torch.equal(got[1], batches[i][1])
        full = all(batch is not None and len(batch[1]) == apart[0].batch_size for batch in step)
        assert (step.stacked is not None) == full
        if full:
            assert step.stacked[0].shape[:2] == (3, apart[0].batch_size)
    assert steps[-1].stacked is None   # the shortest shard ends in a short minibatch here
    # the shards are views of the group's one store; a resumed epoch skips whole steps
    store = group.joint.feats.untyped_storage().data_ptr()
    assert all(shard.feats.untyped_storage().data_ptr() == store for shard in group.shards)
    resumed = list(group.steps(epoch=1, skip=2))
    assert len(resumed) == len(steps) - 2
    assert all((a[k] is None and b[k] is None) or torch.equal(a[k][0], b[k][0])
               for a, b in zip(resumed, steps[2:]) for k in range(3))

