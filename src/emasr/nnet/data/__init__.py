"""Training and dev data for the networks: shards, shuffling, frames and chunks.

Features come through the one feature pipeline (emasr.feats.pipeline), targets through the targets
dir (emasr.ali.targets, pdf ids at the network frame rate). With the stream loader (TrainingData)
utterances stream from the ark files in a per-epoch order; only a bounded shuffle buffer is held in
memory, never the corpus.

Each worker owns a disjoint shard of the training utterances fixed by the seed and the number of
workers; its minibatch order depends on (seed, epoch, rank) only, so an epoch can be replayed
exactly (resume skips the minibatches already trained).

Two data paths serve the trainer (`data.loader`, LOADERS): `stream` (TrainingData, here) and
`resident` (emasr.nnet.data.resident.ResidentData: the shard loaded once into one tensor,
minibatches gathered by index on the training device).
"""
from __future__ import annotations

import logging
import math
import os
import queue
import threading
from dataclasses import dataclass
from itertools import islice
from typing import Iterable, Iterator

import numpy as np
import torch

logger = logging.getLogger(__name__)

IGNORE = -100          # label of padded chunk frames (torch's nll_loss ignore_index)
LENGTH_TOLERANCE = 2   # frames; as Kaldi allows between features and alignments


class DataError(ValueError):
    """Training data does not fit the model or the targets; the message names the file and key."""


def scp_keys(path: str) -> list[str]:
    """The keys of an scp file; a duplicated key (which kaldiio would silently collapse) is an
    error naming its lines."""
    from emasr.io.table import read_table

    return list(read_table(path))


def utterances_with_targets(data_dir: str, targets, targets_dir: str, what: str) -> list[str]:
    """The data dir's utterances that have targets, sorted; an error if there are none."""
    feats_scp = os.path.join(data_dir, "feats.scp")
    if not os.path.isfile(feats_scp):
        raise DataError(f"expected file {feats_scp} to exist")
    keys = scp_keys(feats_scp)
    have = [u for u in keys if u in targets.reader]
    if not have:
        raise DataError(f"{what} set {data_dir}: none of its {len(keys)} utterances has targets in "
                        f"{targets_dir}/pdf.scp (align it and make targets for it too)")
    if len(have) < len(keys):
        logger.warning("%s set %s: %d of %d utterances have no targets and are left out", what,
                       data_dir, len(keys) - len(have), len(keys))
    return sorted(have)


def shard(utts: list[str], seed: int, rank: int, world_size: int) -> list[str]:
    """Worker `rank`'s disjoint share of `utts` (a seeded permutation dealt round-robin)."""
    if len(utts) < world_size:
        raise DataError(f"{len(utts)} training utterances cannot be shared by {world_size} workers")
    order = np.random.default_rng(seed).permutation(len(utts))
    return [utts[i] for i in order[rank::world_size]]


@dataclass
class Source:
    """Where labelled utterances come from, and what they must look like."""
    data_dir: str
    targets_dir: str
    pipeline: object       # emasr.feats.pipeline.FeaturePipeline
    targets: object        # emasr.ali.targets.load_targets(...)
    input_dim: int
    num_pdfs: int

    def utterances(self, utts: list[str]) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
        """(utt, features [T, D] float32, pdf ids [T] int64) in the order of `utts`."""
        for utt, feats in self.pipeline.iterate(self.data_dir, utts):
            if feats.ndim != 2 or feats.shape[1] != self.input_dim:
                raise DataError(
                    f"{self.data_dir}/feats.scp: utterance {utt}: network input has dimension "
                    f"{feats.shape[-1]} after the feature pipeline, but the model expects "
                    f"{self.input_dim} (check features.dim and the pipeline settings)")
            if not np.isfinite(feats).all():   # one NaN would silently poison every model
                raise DataError(f"{self.data_dir}/feats.scp: utterance {utt} has NaN or infinite "
                                "feature values (after CMVN); fix or remove it")
            labels = np.asarray(self.targets.reader[utt]).astype(np.int64)
            check_labels(labels, self.num_pdfs, utt, self.targets_dir)
            if abs(len(labels) - len(feats)) > LENGTH_TOLERANCE:
                logger.warning("%s: %d network frames but %d targets; skipped", utt, len(feats),
                               len(labels))
                continue
            n = min(len(labels), len(feats))
            yield utt, np.ascontiguousarray(feats[:n], dtype=np.float32), labels[:n]


def check_labels(labels: np.ndarray, num_pdfs: int, utt: str, targets_dir: str) -> None:
    if labels.size and (labels.max() >= num_pdfs or labels.min() < 0):
        bad = int(labels.max() if labels.max() >= num_pdfs else labels.min())
        raise DataError(f"{targets_dir}/pdf.scp: utterance {utt} has pdf id {bad}, but the model "
                        f"has {num_pdfs} outputs (ids 0..{num_pdfs - 1})")


def validate_targets(targets, utts: list[str], num_pdfs: int, targets_dir: str) -> dict[str, int]:
    """Check every pdf id of `utts` before training starts (targets are small next to features);
    returns each utterance's number of target frames."""
    lengths = {}
    for utt in utts:
        labels = np.asarray(targets.reader[utt])
        check_labels(labels, num_pdfs, utt, targets_dir)
        lengths[utt] = len(labels)
    return lengths


def check_target_frames(lengths: dict[str, int], data_dir: str, targets, targets_dir: str,
                        stack: int) -> None:
    """Before any training (emasr regime, run by train.sh): the training utterances' targets
    must have frames, at the network frame rate. Targets at another frame-subsampling factor
    would fail every utterance's length check inside the trainer (each is skipped, then no
    worker has a minibatch), and zero frames would plan a regime of nothing."""
    if targets.subsampling_factor != stack:
        raise DataError(f"{targets_dir}/frame_subsampling_factor is {targets.subsampling_factor} "
                        f"but features.stack is {stack}; expected targets at the network frame "
                        f"rate (steps/nnet/make_targets.sh --frame-subsampling-factor {stack})")
    if sum(lengths.values()) == 0:
        raise DataError(f"{targets_dir}/pdf.scp: the {len(lengths)} training utterances of "
                        f"{data_dir} have no target frames; expected each utterance's pdfs at the "
                        "network frame rate (steps/nnet/make_targets.sh)")
    path = os.path.join(data_dir, "utt2num_frames")
    if not os.path.isfile(path):
        return
    from emasr.io.table import read_table

    frames = {utt: int(n) for utt, n in read_table(path).items()}
    misfit = [u for u in lengths if u in frames
              and abs(lengths[u] - math.ceil(frames[u] / stack)) > LENGTH_TOLERANCE]
    if len(misfit) * 2 > len(lengths):   # a few are skipped in training, as Kaldi does
        utt = misfit[0]
        raise DataError(f"{targets_dir}/pdf.scp: {len(misfit)} of the {len(lengths)} training "
                        f"utterances have targets that do not fit their features, e.g. {utt}: "
                        f"{lengths[utt]} target frames for {frames[utt]} feature frames in "
                        f"{path} (expected {math.ceil(frames[utt] / stack)} at features.stack "
                        f"{stack}, within {LENGTH_TOLERANCE}); targets made at another frame "
                        "rate? (steps/nnet/make_targets.sh --frame-subsampling-factor)")


def chunk_indices(num_frames: int, chunk: int, left: int, delay: int) -> np.ndarray:
    """Frame indices [n_chunks, left + chunk + delay] of each chunk's input window; windows that
    run off either end repeat the edge frame."""
    n_chunks = -(-num_frames // chunk)
    width = left + chunk + delay
    idx = np.arange(n_chunks)[:, None] * chunk + np.arange(width)[None, :] - left
    return np.clip(idx, 0, num_frames - 1)


def make_chunks(feats: np.ndarray, labels: np.ndarray | None, chunk: int, left: int,
                delay: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Chunk inputs [n, left+chunk+delay, D] and labels [n, chunk] (IGNORE past the end).
    Output position left + delay + m of chunk i predicts the label of frame i*chunk + m."""
    idx = chunk_indices(len(feats), chunk, left, delay)
    if labels is None:
        return feats[idx], None
    flat = np.full(idx.shape[0] * chunk, IGNORE, dtype=np.int64)
    flat[:len(labels)] = labels
    return feats[idx], flat.reshape(-1, chunk)


def shuffled_batches(items: Iterable[tuple[np.ndarray, np.ndarray]], batch: int, buffer: int,
                     rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Shuffle examples (rows of x and y) within a bounded buffer and cut them into minibatches.

    Whenever the buffer holds `buffer` examples it is shuffled and all full minibatches leave; the
    remainder stays and mixes with the next utterances. The last minibatch may be smaller."""
    xs, ys, held = [], [], 0
    for x, y in items:
        xs.append(x)
        ys.append(y)
        held += len(x)
        if held >= buffer:
            x_all, y_all = np.concatenate(xs), np.concatenate(ys)
            order = rng.permutation(held)
            full = held // batch * batch
            for start in range(0, full, batch):
                take = order[start:start + batch]
                yield x_all[take], y_all[take]
            rest = order[full:]
            xs, ys, held = [x_all[rest]], [y_all[rest]], len(rest)
    if held:
        x_all, y_all = np.concatenate(xs), np.concatenate(ys)
        order = rng.permutation(held)
        for start in range(0, held, batch):
            take = order[start:start + batch]
            yield x_all[take], y_all[take]


def prefetch(items: Iterator, depth: int = 8) -> Iterator:
    """Run `items` in a background thread, `depth` ahead: reading and shuffling overlap training
    (numpy and kaldiio release the GIL for the heavy parts). Order and errors are preserved; if the
    consumer stops early the thread ends at its next put."""
    buffer: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        buffer.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            buffer.put(("end", None))
        except BaseException as err:  # noqa: BLE001 (handed to the consumer, raised there)
            buffer.put(("error", err))

    thread = threading.Thread(target=produce, daemon=True, name="minibatch-prefetch")
    thread.start()
    try:
        while True:
            kind, value = buffer.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()


class TrainingData:
    """One worker's minibatches for one epoch: frames (DNN) or chunks (LSTM)."""

    def __init__(self, source: Source, utts: list[str], data_config, sequence: bool,
                 rank: int, pin_memory: bool = False) -> None:
        self.source, self.utts, self.config = source, utts, data_config
        self.sequence, self.rank = sequence, rank
        # page-locked minibatches (for a GPU): their copies to the device can then be queued
        # without waiting, so the host prepares the next minibatch while the GPU computes
        self.pin_memory = pin_memory

    def _examples(self, order: list[str]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        c = self.config
        for _, feats, labels in self.source.utterances(order):
            if self.sequence:
                yield make_chunks(feats, labels, c.chunk_frames, c.left_context,
                                  c.output_delay)
            else:
                yield feats, labels

    def minibatches(self, epoch: int,
                    skip: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The epoch's minibatches from the `skip`-th on (those before it are read and shuffled,
        to reach the same buffer state, but not turned into tensors)."""
        seed = self.config.seed
        order_rng = np.random.default_rng([seed, epoch, self.rank, 0])
        order = [self.utts[i] for i in order_rng.permutation(len(self.utts))]
        shuffle_rng = np.random.default_rng([seed, epoch, self.rank, 1])
        if self.sequence:
            batch, buffer = self.config.chunks_per_minibatch, self.config.shuffle_buffer_chunks
        else:
            batch, buffer = self.config.minibatch_frames, self.config.shuffle_buffer_frames
        batches = shuffled_batches(self._examples(order), int(batch), int(buffer), shuffle_rng)
        batches = islice(batches, skip, None)
        tensors = ((torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches)
        if self.pin_memory:   # in the prefetch thread, like the reading and shuffling
            tensors = ((x.pin_memory(), y.pin_memory()) for x, y in tensors)
        yield from prefetch(tensors)


def eval_batches(source: Source, utts: list[str], data_config,
                 sequence: bool) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Dev minibatches in a fixed order: one utterance (all its frames or chunks) per batch."""
    for _, feats, labels in source.utterances(utts):
        if sequence:
            x, y = make_chunks(feats, labels, data_config.chunk_frames,
                               data_config.left_context, data_config.output_delay)
        else:
            x, y = feats, labels
        yield torch.from_numpy(x), torch.from_numpy(y)
