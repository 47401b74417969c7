"""The device-resident data path (`data.loader: resident`): a worker's shard is loaded once, and
every minibatch is one index gather from it, on the training device.

Memory layout. The shard's utterances (in the shard's order) go through the feature pipeline up to
stacking (CMVN, stacking: one row per network frame) into one contiguous tensor `feats` [F, D] of
`data.resident_dtype` (float32, or float16: half the memory, inputs rounded to fp16) and one
`labels` [F] (int64); utterance u holds rows starts[u] .. ends[u] - 1. Splicing happens at gather
time, by each row's offsets clamped to its utterance (`offsets` [F, 2s + 1], int8, made once):
exactly the pipeline's splice_frames (edge frames repeated), in a store 2s + 1 times smaller than
the spliced inputs.

Placement (`data.resident_memory`): `device`, the training device; `host`, host memory (on a GPU
the gathered minibatches are pinned and copied without waiting, in a background thread, as the
stream loader's); `auto`, the training device when the shard takes at most DEVICE_SHARE of the
device's free memory when it is loaded (a process's virtual workers' shards together, in one store:
ResidentGroup), else the host. On a CPU all three are the same plain memory.

Minibatches. DNN: numpy.random.default_rng([seed, epoch, rank, 2]) permutes the shard's F frame
indices, and each minibatch is the next slice of data.minibatch_frames of them: one gather of their
spliced input windows, one of their labels. LSTM: the chunk table (utterance u's ceil(T_u / chunk)
chunks, each a start row) is permuted likewise, data.chunks_per_minibatch chunks a minibatch; a
chunk's input window is rows start - left .. start + chunk + delay - 1 clamped to its utterance, its
labels are IGNORE past the utterance's end (as emasr.nnet.data.make_chunks makes them). The last
minibatch of an epoch may be short. No Python runs per frame or chunk, and the shuffle is global
over the shard (the stream loader's is bounded by its buffer), so the two loaders' trajectories
differ; each is deterministic for (seed, epoch, rank).

Resume: minibatches(epoch, skip) starts at slice `skip` of the same permutation, so nothing before
the resume point is gathered.

A shard that fits neither the GPU nor the host (`data.resident_part_frames` N > 0, ResidentParts)
goes through memory in parts: each epoch cuts a permutation of its utterances into parts of at
most N frames, and each part is a ResidentData of its own, loaded in a background thread while the
part before it trains, its examples permuted and gathered as a whole shard's are.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
from typing import Iterator

import numpy as np
import torch

from emasr.nnet.data import IGNORE, Source, prefetch

logger = logging.getLogger(__name__)

# Storage dtypes of the resident features (data.resident_dtype; the config check reads both).
RESIDENT_DTYPES = {"float32": torch.float32, "float16": torch.float16}
RESIDENT_MEMORY = ("auto", "device", "host")
DEVICE_SHARE = 0.5   # auto: the largest share of a GPU's free memory a shard may take


def unspliced(source: Source) -> Source:
    """The same source with the pipeline stopped before splicing (network frames, stacked)."""
    from emasr.feats.pipeline import FeaturePipeline

    pipeline = source.pipeline
    context = 2 * int(pipeline.config.splice) + 1
    plain = FeaturePipeline(dataclasses.replace(pipeline.config, splice=0), pipeline.global_stats)
    return dataclasses.replace(source, pipeline=plain, input_dim=source.input_dim // context)


def concatenate(pieces: list[torch.Tensor], shape: tuple, dtype: torch.dtype,
                device: torch.device) -> torch.Tensor:
    """One tensor of `shape` on `device` from row blocks (copied in place: no second host copy)."""
    out = torch.empty(shape, dtype=dtype, device=device)
    row = 0
    for piece in pieces:
        out[row:row + len(piece)].copy_(piece)
        row += len(piece)
    return out


def splice_offsets(lengths: np.ndarray, splice: int, device: torch.device) -> torch.Tensor:
    """[F, 2s + 1] (int8): row r's splice offsets c = -s .. s clamped to its utterance's rows,
    clamp(r + c, first, last) - r, so that r + offsets[r] are its input window with the edge
    frames repeated. A gather then needs no utterance lookup (a searchsorted, two gathers and
    two clamps per minibatch, each a kernel launch on a GPU), for 2s + 1 bytes a frame: 5 for
    splice 2, against 240 of its fp16 features at 120 dims."""
    if splice > 127:
        raise ValueError(f"features.splice {splice}: the resident loader splices at most 127 "
                         "frames either side")
    lengths = torch.from_numpy(lengths).to(device)
    ends = torch.cumsum(lengths, 0)
    rows = torch.arange(int(ends[-1]) if len(ends) else 0, device=device)
    back = rows - torch.repeat_interleave(ends - lengths, lengths)   # rows before it, in its utt
    ahead = torch.repeat_interleave(ends, lengths) - 1 - rows        # rows after it
    offsets = torch.zeros(len(rows), 2 * splice + 1, dtype=torch.int8, device=device)
    for c in range(1, splice + 1):
        offsets[:, splice - c] = -back.clamp(max=c)
        offsets[:, splice + c] = ahead.clamp(max=c)
    return offsets


def gather(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """table[index] for an index of any shape, as one index_select (several times faster than
    advanced indexing on a CPU)."""
    return table.index_select(0, index.reshape(-1)).view(*index.shape, *table.shape[1:])


class ResidentData:
    """One worker's shard in one tensor; its minibatches for an epoch are index gathers."""

    def __init__(self, source: Source, utts: list[str], data_config, sequence: bool,
                 rank: int, device: torch.device | str = "cpu", part: int | None = None) -> None:
        self.source, self.utts, self.config = source, utts, data_config
        self.sequence, self.rank, self.device = sequence, rank, resolved(device)
        self.part = part   # ResidentParts' part number: its own permutations
        self.dtype = RESIDENT_DTYPES[data_config.resident_dtype]
        self.splice = int(source.pipeline.config.splice)
        self.feats: torch.Tensor | None = None   # loaded on first use (load())

    # -- loading ----------------------------------------------------------------------------
    def placement(self, nbytes: int) -> torch.device:
        memory = self.config.resident_memory
        if self.device.type != "cuda" or memory == "device":
            return self.device
        if memory == "host":
            return torch.device("cpu")
        free, _ = torch.cuda.mem_get_info(self.device)
        return self.device if nbytes <= DEVICE_SHARE * free else torch.device("cpu")

    def load(self) -> None:
        """Read the shard once (the feature pipeline, checks and all, as the stream loader)."""
        if self.feats is not None:
            return
        whose = f"worker {self.rank}" + ("" if self.part is None else f", part {self.part}")
        self.attach(*self.fill(*self.pieces(), whose))

    def fill(self, feats: list[torch.Tensor], labels: list[torch.Tensor],
             whose: str) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        """One store of utterances' pieces (pieces()), placed by data.resident_memory: features
        [F, D], labels [F] and the utterances' lengths (`whose` names them in the log)."""
        lengths = np.array([len(y) for y in labels], dtype=np.int64)
        frames, dim = int(lengths.sum()), self.frame_dim
        nbytes = frames * (dim * self.dtype.itemsize + 8 + 2 * self.splice + 1)   # + offsets
        store = self.placement(nbytes)
        logger.info("%s: %d frames (%d utterances) resident on %s as %s, %.1f MB", whose, frames,
                    len(lengths), store, self.dtype, nbytes / 1e6)
        return (concatenate(feats, (frames, dim), self.dtype, store),
                concatenate(labels, (frames,), torch.int64, store), lengths)

    @property
    def frame_dim(self) -> int:
        """The stored (unspliced) frame's dimension."""
        return self.source.input_dim // (2 * self.splice + 1)

    def pieces(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Each utterance's network frames (stacked, not spliced; in the storage dtype) and
        labels, in host memory."""
        feats, labels = [], []
        for _, x, y in unspliced(self.source).utterances(self.utts):
            feats.append(torch.from_numpy(x).to(self.dtype))
            labels.append(torch.from_numpy(y))
        return feats, labels

    def attach(self, feats: torch.Tensor, labels: torch.Tensor, lengths: np.ndarray,
               offsets: torch.Tensor | None = None) -> None:
        """Hold `feats` [F, D] and `labels` [F] (a store of its own or rows of a group's,
        ResidentGroup, which passes its rows of `offsets`, splice_offsets) with utterances of
        `lengths` rows each, and index them."""
        self.store, self.feats, self.labels = feats.device, feats, labels
        self.offsets = (splice_offsets(lengths, self.splice, self.store) if offsets is None
                        else offsets)
        ends = np.cumsum(lengths)
        starts = ends - lengths
        self.starts = torch.from_numpy(starts).to(self.store)
        self.ends = torch.from_numpy(ends).to(self.store)
        if self.sequence:
            chunk = self.config.chunk_frames
            counts = -(-lengths // chunk)
            utt = np.repeat(np.arange(len(lengths)), counts)
            first = np.repeat(np.cumsum(counts) - counts, counts)   # each utterance's first chunk
            self.chunk_utt = torch.from_numpy(utt).to(self.store)
            self.chunk_start = torch.from_numpy(starts[utt] + (np.arange(len(utt)) - first) * chunk
                                                ).to(self.store)
            self.window = torch.arange(-self.config.left_context,
                                       chunk + self.config.output_delay, device=self.store)
            self.positions = torch.arange(chunk, device=self.store)

    @property
    def examples(self) -> int:
        """Frames (DNN) or chunks (LSTM) of the shard, each one example per epoch."""
        self.load()
        return len(self.chunk_start) if self.sequence else len(self.labels)

    # -- gathers ----------------------------------------------------------------------------
    def inputs(self, rows: torch.Tensor) -> torch.Tensor:
        """Spliced network inputs [..., (2s + 1) x D] (float32) of `rows`."""
        if not self.splice:
            return gather(self.feats, rows).float()
        window = rows.unsqueeze(-1) + gather(self.offsets, rows)   # int8 offsets: int64 rows
        return gather(self.feats, window).flatten(-2).float()

    def frames(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """DNN examples: inputs [B, D'] and labels [B] of frame rows [B]."""
        return self.inputs(rows), gather(self.labels, rows)

    def chunks(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """LSTM examples: inputs [B, left + chunk + delay, D'] and labels [B, chunk] of chunks."""
        start, utt = gather(self.chunk_start, ids).unsqueeze(1), gather(self.chunk_utt, ids)
        lo, hi = gather(self.starts, utt).unsqueeze(1), (gather(self.ends, utt) - 1).unsqueeze(1)
        window = torch.minimum(torch.maximum(start + self.window, lo), hi)
        x = self.inputs(window)
        positions = start + self.positions
        y = torch.where(positions <= hi, gather(self.labels, torch.minimum(positions, hi)), IGNORE)
        return x, y

    # -- an epoch ---------------------------------------------------------------------------
    def order(self, epoch: int) -> torch.Tensor:
        """The epoch's permutation of the examples, on the store's device."""
        key = [self.config.seed, epoch, self.rank, 2]
        rng = np.random.default_rng(key if self.part is None else key + [self.part])
        return torch.from_numpy(rng.permutation(self.examples)).to(self.store)

    @property
    def batch_size(self) -> int:
        """Examples per minibatch: frames (DNN) or chunks (LSTM)."""
        return self.config.chunks_per_minibatch if self.sequence else self.config.minibatch_frames

    def examples_of(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.chunks(ids) if self.sequence else self.frames(ids)

    def minibatches(self, epoch: int, skip: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The epoch's minibatches from the `skip`-th on."""
        self.load()
        batch, order = self.batch_size, self.order(epoch)
        batches = (self.examples_of(order[i:i + batch])
                   for i in range(skip * batch, len(order), batch))
        if self.store == self.device:   # gathered where they are trained: nothing to copy
            yield from batches
        else:   # a host store for a GPU: gather and pin in a thread, copied without waiting
            yield from prefetch((x.pin_memory(), y.pin_memory()) for x, y in batches)


def resolved(device: torch.device | str) -> torch.device:
    """The device with its index, as a tensor's .device (a bare "cuda" is the current GPU)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


class ResidentParts:
    """A worker's shard that fits neither the GPU nor the host (data.resident_part_frames N > 0):
    each epoch, a permutation of its utterances (numpy.random.default_rng([seed, epoch, rank, 3]))
    is cut into parts of at most N frames (a longer utterance is a part alone), and each part is a
    ResidentData, permuted and gathered as a whole shard is (its own permutation per part). A
    background thread loads the next part while one trains, and once the last part of an epoch
    is reached the next epoch's first part (so no epoch waits for a load but the first; the last
    epoch loads one part it does not use): at most three parts are in memory (training, loaded,
    loading). The epoch's examples are the shard's, each once; its minibatches are each part's, a
    part's last one short.

    Resume skips whole parts by their minibatch counts, which are known once a part is read (the
    pipeline may drop an utterance whose features and targets disagree in length): the parts
    before the resume point are read again, but nothing of them is gathered or trained."""

    def __init__(self, source: Source, utts: list[str], data_config, sequence: bool,
                 rank: int, device: torch.device | str = "cpu") -> None:
        self.source, self.utts, self.config = source, utts, data_config
        # the GPU resolved here, not in the loading thread (whose current device is the first)
        self.sequence, self.rank, self.device = sequence, rank, resolved(device)
        self.part_frames = data_config.resident_part_frames
        self.lengths: np.ndarray | None = None   # target frames per utterance, read once
        self.ahead: tuple[int, concurrent.futures.Future] | None = None   # (epoch, its 1st part)

    def load(self) -> None:
        """Nothing to load ahead: the parts are read as an epoch reaches them."""

    def parts(self, epoch: int) -> list[list[str]]:
        """The epoch's parts: consecutive runs of a permutation of the utterances, each at most
        data.resident_part_frames target frames (a longer utterance alone)."""
        if self.lengths is None:
            self.lengths = np.array([len(self.source.targets.reader[u]) for u in self.utts])
        rng = np.random.default_rng([self.config.seed, epoch, self.rank, 3])
        parts, frames = [], 0
        for i in rng.permutation(len(self.utts)):
            if not parts or frames + self.lengths[i] > self.part_frames:
                parts.append([])
                frames = 0
            parts[-1].append(self.utts[i])
            frames += int(self.lengths[i])
        return parts

    def loaded(self, number: int, utts: list[str]) -> ResidentData:
        part = ResidentData(self.source, utts, self.config, self.sequence, self.rank, self.device,
                            part=number)
        part.load()
        return part

    def load_ahead(self, epoch: int) -> None:
        """Start loading `epoch`'s first part in a thread of its own (a daemon: a run that ends
        does not wait for it)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        utts = self.parts(epoch)[0]

        def load() -> None:
            try:
                future.set_result(self.loaded(0, utts))
            except BaseException as err:  # noqa: BLE001 (raised where the part is used)
                future.set_exception(err)

        threading.Thread(target=load, daemon=True, name="resident-part-ahead").start()
        self.ahead = (epoch, future)

    def minibatches(self, epoch: int, skip: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The epoch's minibatches from the `skip`-th on, part by part."""
        utts_of = self.parts(epoch)
        ahead, self.ahead = self.ahead, None
        first = ahead[1] if ahead is not None and ahead[0] == epoch else None
        parts = prefetch((first.result() if i == 0 and first is not None else self.loaded(i, utts)
                          for i, utts in enumerate(utts_of)), depth=1)
        for i, part in enumerate(parts):
            if i == len(utts_of) - 1:
                self.load_ahead(epoch + 1)
            count = -(-part.examples // part.batch_size)
            if skip >= count:
                skip -= count
                continue
            yield from part.minibatches(epoch, skip)
            skip = 0


class StepBatches(list):
    """One step's minibatches of a process's K workers: K pairs (x, y). `stacked`: the same as
    one pair of [K, B, ...] tensors, when they came from one gather (the pairs are its slices)."""

    def __init__(self, batches, stacked: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        super().__init__(batches)
        self.stacked = stacked


def from_stacked(x: torch.Tensor, y: torch.Tensor) -> StepBatches:
    return StepBatches(zip(x.unbind(0), y.unbind(0)), (x, y))


class ResidentGroup:
    """The resident shards of one process's K workers (dist.workers_per_process) in one store, so
    that a step's K minibatches are one gather whatever K. A gather is about twenty tensor
    operations, each a kernel launch on a GPU; K workers gathering apart made it K times that,
    at K = 8 as many operations per step as the workers' batched step itself (bench/train.py
    (i)).

    Each shard keeps its own view of its rows (its minibatches() are unchanged), and worker k's
    example i is example base[k] + i of the group's joint tables. Step i holds minibatch i of
    every worker, exactly what each shard's minibatches() yields, until the longest shard's run
    out (a shard that has run out has None there, as the trainer's steps over separate streams
    do); a step where some worker's minibatch is its short last one, or none, is gathered worker
    by worker."""

    def __init__(self, shards: list[ResidentData]) -> None:
        self.shards = shards
        self.joint: ResidentData | None = None   # the group's tables over all rows

    def load(self) -> None:
        if self.joint is not None:
            return
        first = self.shards[0]
        pieces = [shard.pieces() for shard in self.shards]
        counts = [len(labels) for _, labels in pieces]   # utterances per shard
        feats, labels, lengths = first.fill([x for xs, _ in pieces for x in xs],
                                            [y for _, ys in pieces for y in ys],
                                            f"workers {first.rank}-{self.shards[-1].rank}")
        del pieces
        self.joint = ResidentData(first.source, [u for shard in self.shards for u in shard.utts],
                                  first.config, first.sequence, first.rank, first.device)
        self.joint.attach(feats, labels, lengths)
        self.base, row, example = [], 0, 0
        for shard, n in zip(self.shards, np.split(lengths, np.cumsum(counts)[:-1])):
            rows = int(n.sum())
            shard.attach(feats[row:row + rows], labels[row:row + rows], n,
                         self.joint.offsets[row:row + rows])
            self.base.append(example)
            row, example = row + rows, example + shard.examples

    def steps(self, epoch: int, skip: int = 0) -> Iterator[StepBatches]:
        """The epoch's steps from the `skip`-th on."""
        self.load()
        joint, count = self.joint, len(self.shards)
        batch, orders = joint.batch_size, [shard.order(epoch) for shard in self.shards]
        full = min(len(order) for order in orders) // batch   # steps where every minibatch is full
        # those steps' examples, worker k's in row k (the joint tables' ids): a step is one slice
        ids = torch.stack([order[:full * batch] + base for order, base in zip(orders, self.base)])

        def gathered() -> Iterator[StepBatches]:
            for i in range(skip, max(-(-len(order) // batch) for order in orders)):
                if i < full:
                    x, y = joint.examples_of(ids[:, i * batch:(i + 1) * batch].reshape(-1))
                    yield from_stacked(x.view(count, batch, *x.shape[1:]),
                                       y.view(count, batch, *y.shape[1:]))
                else:   # None: that worker's shard has run out (it sits the step out)
                    yield StepBatches(shard.examples_of(order[i * batch:(i + 1) * batch])
                                      if i * batch < len(order) else None
                                      for shard, order in zip(self.shards, orders))

        if joint.store == joint.device:
            yield from gathered()
        else:   # a host store for a GPU: gather and pin in a thread, as minibatches() does
            yield from prefetch(pinned(step) for step in gathered())


def pinned(step: StepBatches) -> StepBatches:
    if step.stacked is not None:
        return from_stacked(*(t.pin_memory() for t in step.stacked))
    return StepBatches(None if batch is None else tuple(t.pin_memory() for t in batch)
                       for batch in step)
