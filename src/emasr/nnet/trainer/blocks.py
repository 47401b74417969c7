"""An epoch's blocks: up to tau steps of this process's workers, then one sync.

Every worker trains every minibatch of its shard each epoch: the epoch's last blocks run until the
longest shard is done, each worker training the minibatches it has left and sitting out the steps
it has none for (its model goes into the mean as it is). A sync is one all-reduce of [the process's
mean model, EXTRAS numbers piggybacked on it]; the rule turns the mean into W_g and the restart,
and the averaged models follow W_g.

Reads what the setup (emasr.nnet.trainer.setup) made: config, device, comm, world, workers,
per_process, worker_ids, shards, group, local, rule, packed, worker_sum, averagers, schedule,
lr_scale, counters; moves `position` on.
"""
from __future__ import annotations

import time
from itertools import islice, zip_longest

import numpy as np
import torch

from emasr.nnet.data import DataError
from emasr.nnet.workers import summed

EXTRAS = 5   # piggybacked on the sync vector: [another minibatch ready, loss sum, correct,
             # labelled frames, the minibatches' frames (a sequence's chunks x chunk frames)]


class Blocks:
    @property
    def current_lr(self) -> float:
        return float(self.local.optimizer.param_groups[0]["lr"])

    def set_lr(self) -> None:
        """The schedule's rate at the run's progress (times N under sync.lr_times_workers)."""
        self.local.set_lr(self.schedule.lr_at(self.progress()) * self.lr_scale)

    def run_epoch(self, epoch: int, start_block: int) -> None:
        tau = self.config.sync.block_size
        # from the resume point on: the same epoch's data order, the minibatches before it
        # skipped; step i holds every worker's minibatch i, until the longest shard is done (a
        # worker whose shard has run out has None there: it sits the step out)
        if self.group is not None:
            steps = self.group.steps(epoch, skip=start_block * tau)
        else:
            steps = zip_longest(*[data.minibatches(epoch, skip=start_block * tau)
                                  for data in self.shards])

        def next_block():   # up to tau steps of this process's workers (none: it is done)
            return list(islice(steps, tau))

        block = next_block()
        ready = self.first_block_ready(epoch, block, start_block)
        self.local.train()   # evaluation runs on copies: the workers stay in training mode
        index = start_block
        every = self.config.train.checkpoint_every_blocks
        while ready:
            self.set_lr()
            stats, seconds = self.train_block(block)
            block = next_block()
            ready, mean_stats = self.sync(bool(block), stats)
            index += 1
            if not np.isfinite(mean_stats[0]):   # every rank sees the same mean: all stop here
                raise DataError(
                    f"training diverged: the loss of epoch {epoch + 1} block {index} is "
                    f"{mean_stats[0]} (lr {self.current_lr:g}); lower train.lr or sync.block_lr "
                    "and resume from a checkpoint before it, or start again")
            self.counters["seconds_compute"] += seconds
            self.position = (epoch, index)
            self.log_block(epoch, index, mean_stats)
            if every and index % every == 0:
                self.save_checkpoint()

    def first_block_ready(self, epoch: int, block: list, start_block: int) -> bool:
        """Whether the epoch has a block to train from `start_block` on. At its start every
        worker must have a minibatch: a shard that gives none has nothing to train (every
        utterance of it skipped), which stops every rank with the same error."""
        if start_block > 0:   # resumed mid-epoch: any worker with a minibatch left
            return self.all_ready(bool(block), torch.distributed.ReduceOp.MAX)
        empty = ([g for g, batch in zip(self.worker_ids, block[0]) if batch is None] if block
                 else self.worker_ids)
        if not self.all_ready(not empty, torch.distributed.ReduceOp.MIN):
            mine = f" (worker {', '.join(map(str, empty))} here)" if empty else ""
            raise DataError(f"epoch {epoch + 1}: a worker's shard gave no training minibatch"
                            f"{mine}: every worker needs data (were its utterances skipped for "
                            "their lengths? fewer workers or more utterances)")
        return True

    def all_ready(self, ready: bool, op) -> bool:
        flag = torch.tensor([1.0 if ready else 0.0], device=self.device)
        self.comm.all_reduce(flag, "first-block check", op=op)
        return bool(flag.item() > 0.5)

    def train_block(self, block: list) -> tuple[list[float], float]:
        """Up to tau steps of the process's workers (block[i][k]: worker k's minibatch i, None
        where it sits out; no step at all once all of them are done); returns the workers' mean
        [loss sum, correct frames, labelled frames, minibatch frames] and the seconds taken."""
        if not block:
            return [0.0, 0.0, 0.0, 0.0], 0.0
        start = time.perf_counter()
        k = self.per_process
        # a sequence's minibatch frames are its chunks x chunk frames: read from the shapes
        frames = float(sum(batch[1].numel() for step in block for batch in step
                           if batch is not None))
        # each step's stats are added up once per block, not at every step
        stats = [self.local.step(step) for step in block]
        loss_sum, correct, labelled = summed(stats)   # the block's one wait for the device
        return [loss_sum / k, correct / k, labelled / k, frames / k], time.perf_counter() - start

    def pack(self, next_ready: bool, stats: list[float]) -> torch.Tensor:
        """[the mean of this process's local models, extras] (its share of the all-reduce), in one
        buffer reused by every sync: allocating model-sized vectors anew costs page faults at
        every sync."""
        average = self.packed[:-EXTRAS]
        self.local.mean(average, self.worker_sum)   # one worker: its model's vector
        self.packed[-EXTRAS:].copy_(torch.tensor([1.0 if next_ready else 0.0, *stats]))
        return self.packed

    def sync(self, next_ready: bool, stats: list[float]) -> tuple[bool, list[float]]:
        """One all-reduce of [model vector, extras] (each process's mean over its workers, so the
        result is the mean over all N); the rule and the EMA take it from there. Returns whether
        any worker has another minibatch, and the block's [loss sum, correct, labelled frames]
        (means over the workers)."""
        packed = self.pack(next_ready, stats)
        if self.rule.communicates:
            self.comm.mean(packed)   # in place
        average, extras = packed[:-EXTRAS], packed[-EXTRAS:].tolist()
        restart = self.rule.step(average)
        if self.rule.communicates:   # `single`: the restart is the worker's own model already
            self.local.load_vector(restart)
        self.counters["syncs"] += 1
        self.counters["frames"] += round(extras[3] * self.workers)   # whole frames (float32)
        progress = self.progress()
        # a block shorter than tau steps of every worker (an epoch's end) has its share of a
        # full sync's frames: the EMA decays by it
        share = min(1.0, extras[4] * self.workers / self.frames_per_sync())
        for averager in self.averagers.values():
            averager.update(self.rule.global_model, progress, share)
        ready = extras[0] > 0.5 / self.world   # the mean of 0/1 flags: any
        return ready, extras[1:4]

    def log_block(self, epoch: int, index: int, stats: list[float]) -> None:
        loss_sum, correct, frames = stats
        self.write_metrics({"type": "block", "epoch": epoch + 1, "block": index,
                            "loss": loss_sum / max(frames, 1.0), "frame_acc": correct / max(frames, 1.0),
                            "lr": self.current_lr, **self.totals()})
