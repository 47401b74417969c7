"""Block-synchronous data-parallel training (one process per worker, started by torchrun).

Every worker trains its local model on its own shard for a block of tau minibatches; then one
all-reduce gives the mean of the local models (plus a few numbers piggybacked on the same vector:
whether any worker has another minibatch, and the block's loss, accuracy and frame sums); the sync
rule turns it into the global model W_g and the point the workers restart from; the averaged
models (the EMA and its controls, emasr.nnet.averages) follow W_g. Every worker trains every
minibatch of its shard each epoch, so one worker and N workers train the same frames: the epoch's
last blocks run until the longest shard is done, each worker training the minibatches it has left
and sitting out the steps it has none for (its model goes into the mean as it is). The learning
rate follows train.schedule (emasr.nnet.training.schedule), set before every block from the
frames all workers have processed; a newbob epoch that does not lower the dev loss is rejected and training
resumes from the state the epoch started from. A warm start (train.init_model,
emasr.nnet.training.warm_start) starts every model at a file's parameters and the run at the
epoch after the ones the file trained.

A process may hold several workers (`dist.workers_per_process` K, emasr.nnet.workers): the N = K x
processes workers are numbered rank * K + k, the sync first averages a process's K local models,
and every rule counts N workers.
"""
from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import time
from itertools import islice, zip_longest

import numpy as np
import torch

from emasr.nnet.training import checkpoint, regime, warm_start
from emasr.nnet import config as configs
from emasr.nnet.workers.comm import (Communicator, destroy_process_group, init_process_group,
                                     worker_device)
from emasr.nnet.data import (DataError, Source, eval_batches, shard, utterances_with_targets,
                             validate_targets)
from emasr.nnet.data.inputs import make_pipeline, open_targets, raw_feature_dim
from emasr.nnet.data.loaders import training_data
from emasr.nnet.workers.flat import model_to_vector, vector_to_model
from emasr.nnet.models import build_model
from emasr.nnet.averages import build_averagers, ema_decays
from emasr.nnet.data.resident import ResidentData, ResidentGroup
from emasr.nnet.workers.precision import compile_mode, make_optimizer, set_tf32
from emasr.nnet.training.schedule import LearningRateSchedule
from emasr.nnet.training.metrics import read_metrics
from emasr.nnet.training.selection import GLOBAL, best_epochs
from emasr.nnet.sync import make_rule
from emasr.nnet.workers import batch_stats, make_workers, summed

logger = logging.getLogger(__name__)

EXTRAS = 5   # piggybacked on the sync vector: [another minibatch ready, loss sum, correct,
             # labelled frames, the minibatches' frames (a sequence's chunks x chunk frames)]
METRICS_EVERY_SECONDS = 10.0   # metrics.jsonl records are appended at most this often (and at
                               # every checkpoint and the end): opening the file for each block's
                               # record alone costs more than the record


def recorded_by(record: dict, position: tuple[int, int]) -> bool:
    """Whether a metrics record describes work done before `position` (epoch, blocks done in it);
    records count epochs from 1, positions from 0."""
    epoch, block = position
    if record["type"] == "epoch":
        return record["epoch"] <= epoch
    return (record["epoch"] - 1, record["block"]) <= (epoch, block)


class Trainer:
    def __init__(self, config: configs.Config, targets_dir: str, train_dir: str, dev_dir: str,
                 exp_dir: str, resume: bool = False) -> None:
        self.config, self.exp_dir, self.resume = config, exp_dir, resume
        self.targets_dir, self.train_dir, self.dev_dir = targets_dir, train_dir, dev_dir
        self.metrics_pending: list[str] = []   # records not yet in metrics.jsonl (rank 0)
        self.metrics_written = time.monotonic()

    # -- setup ------------------------------------------------------------------------------
    def setup(self) -> None:
        c = self.config
        self.device = worker_device(c.dist.device)
        self.rank, self.world = init_process_group(c.dist.backend, c.dist.timeout_s,
                                                   self.device)
        self.comm = Communicator(self.world, self.rank, c.dist.timeout_s)
        self.agree_on_resume()
        # N workers, K in each process: worker rank * K + k is the real worker of that index
        self.per_process = c.dist.workers_per_process
        self.workers = self.per_process * self.world
        self.worker_ids = [self.rank * self.per_process + k for k in range(self.per_process)]
        check_worker_count(self.per_process)
        self.pipeline = make_pipeline(c.features, self.train_dir)
        self.targets = open_targets(self.targets_dir)
        stack = c.features.stack
        if self.targets.subsampling_factor != stack:
            raise DataError(f"{self.targets_dir}/frame_subsampling_factor is "
                            f"{self.targets.subsampling_factor} but features.stack is {stack}; "
                            "targets must be at the network frame rate")
        self.input_dim = self._input_dim()
        self.num_pdfs = self.targets.num_pdfs
        # a warm start's file, checked against this run before any work
        self.init = warm_start.read(c.train)
        if self.init is not None:
            warm_start.check(self.init, c, self.input_dim, self.num_pdfs, self.pipeline)
        self.train_source = Source(self.train_dir, self.targets_dir, self.pipeline, self.targets,
                                   self.input_dim, self.num_pdfs)
        self.dev_source = Source(self.dev_dir, self.targets_dir, self.pipeline, self.targets,
                                 self.input_dim, self.num_pdfs)
        train_utts = utterances_with_targets(self.train_dir, self.targets, self.targets_dir, "training")
        self.dev_utts = utterances_with_targets(self.dev_dir, self.targets, self.targets_dir, "dev")
        torch.manual_seed(c.train.init_seed)   # the same initial model on every rank
        self.model = build_model(c.model, self.input_dim, self.num_pdfs).to(self.device)
        if self.init is not None:   # before the workers copy it
            self.init.load_into(self.model)
        self.mode = c.architecture.mode
        self.shards = [training_data(c.data.loader, self.train_source,
                                     shard(train_utts, c.data.seed, g, self.workers),
                                     c.data, self.mode.sequence, g, self.device)
                       for g in self.worker_ids]
        # K resident shards: one store, one gather per step for all K (shards held whole)
        self.group = (ResidentGroup(self.shards) if self.per_process > 1 and
                      all(isinstance(data, ResidentData) for data in self.shards) else None)
        own = [u for data in self.shards for u in data.utts]
        lengths = validate_targets(self.targets, own + self.dev_utts[self.rank::self.world],
                                   self.num_pdfs, self.targets_dir)
        # the frames of one epoch over all workers (the shards' sum): the exponential schedule
        # and the cumulative average measure the run's progress against epochs x this
        frames = torch.tensor([float(sum(lengths[u] for u in own))],
                              dtype=torch.float64, device=self.device)
        self.epoch_frames = int(self.comm.all_reduce(frames, "training frames").item())
        # an epoch ends when the longest shard is done: the most syncs of any shard
        syncs = torch.tensor([float(max(regime.shard_syncs(c, [lengths[u] for u in data.utts])
                                        for data in self.shards))], device=self.device)
        self.syncs_per_epoch = int(self.comm.all_reduce(
            syncs, "syncs per epoch", op=torch.distributed.ReduceOp.MAX).item())
        seeds = [c.train.init_seed * 1000 + g for g in self.worker_ids]
        torch.manual_seed(seeds[0])   # dropout per worker (several: a stream each)
        set_tf32(self.device, c.train.tf32)
        self.local = make_workers(self.model, self._optimizer, seeds, self.device,
                                  c.train.max_grad_norm, c.data,
                                  precision=c.train.precision,
                                  compile_mode=compile_mode(c.train))
        self.rule = make_rule(c.sync, self.workers)
        initial = model_to_vector(self.model)
        self.rule.start(initial)
        # the sync's buffer (pack): [model vector, extras], kept for the whole run
        self.packed = torch.empty(initial.numel() + EXTRAS, dtype=torch.float32, device=self.device)
        # K > 1: the K local models are summed in float64 before their mean is rounded to fp32
        self.worker_sum = (torch.empty(initial.numel(), dtype=torch.float64, device=self.device)
                           if self.per_process > 1 else None)
        self.averagers = build_averagers(c, self.frames_per_sync())
        self.regime = regime.compute(c, self.workers, self.epoch_frames,
                                     ema_decays(self.averagers), regime.hardware(self.device),
                                     self.syncs_per_epoch,
                                     None if self.init is None else self.init.record())
        if self.rank == 0:
            logger.info("regime: %s", regime.describe(self.regime))
            if regime.warning(self.regime):
                logger.warning("%s", regime.warning(self.regime))
        t = c.train
        self.schedule = LearningRateSchedule(t.schedule, t.lr, t.final_lr, t.lr_decay,
                                             t.newbob_start_halving, t.newbob_end_halving,
                                             t.min_lr)
        # Kaldi's rule for model averaging: N workers each at N x the rate
        self.lr_scale = self.workers if c.sync.lr_times_workers else 1
        self.position = (0, 0)   # (epoch, blocks done in it)
        self.counters = {"syncs": 0, "frames": 0.0, "seconds_compute": 0.0, "seconds_train": 0.0}
        if self.init is not None:
            self.start_warm(initial)

    def start_warm(self, initial: torch.Tensor) -> None:
        """Go on from the init model's epochs: the run starts at the epoch after them, the
        schedule at their frames (counted at this run's frames per epoch), and every averaged
        model at the init model (W_g and the workers already are)."""
        epochs = self.init.epochs
        self.position = (epochs, 0)
        self.counters["frames"] = float(epochs * self.epoch_frames)
        for averager in self.averagers.values():
            averager.seed(initial, self.progress())
        if self.rank == 0:
            logger.info("warm start from %s (%d epochs trained, sha256 %s): training epochs %d "
                        "to %d", self.init.file, epochs, self.init.sha256[:12], epochs + 1,
                        self.config.train.epochs)

    def _input_dim(self) -> int:
        expected = self.config.features.dim
        raw = raw_feature_dim(self.train_dir)
        if expected is not None and expected != raw:
            raise DataError(f"{self.train_dir}/feats.scp: features have dimension {raw}, but the "
                            f"config says features.dim={expected}")
        return int(self.pipeline.output_dim(raw))

    def _optimizer(self, params) -> torch.optim.Optimizer:
        t = self.config.train

        def factory(params, **kernels):
            if t.optimizer == "adam":
                return torch.optim.Adam(params, lr=t.lr, weight_decay=t.weight_decay, **kernels)
            if t.optimizer == "adamw":
                return torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay, **kernels)
            return torch.optim.SGD(params, lr=t.lr, momentum=t.momentum,
                                   weight_decay=t.weight_decay, **kernels)
        return make_optimizer(factory, params, t.optimizer_impl)

    def frames_per_sync(self) -> int:
        return regime.frames_per_sync(self.config, self.workers)

    def progress(self) -> float:
        """The share of the run's planned frames (epochs x one epoch's frames) processed."""
        planned = self.config.train.epochs * self.epoch_frames
        return self.counters["frames"] / planned if planned else 0.0

    # -- training ---------------------------------------------------------------------------
    def train(self) -> None:
        self.prepare_exp_dir()
        if self.schedule.needs_initial_loss:
            # newbob compares the first epoch with the initial model (nnet1's cross-validation
            # pre-run); a rejected first epoch returns to the checkpoint written here
            self.schedule.set_initial_loss(self.evaluate(self.rule.global_model)[0])
            self.save_checkpoint()
        epochs = self.config.train.epochs
        while self.position[0] < epochs and not self.schedule.stopped:
            epoch, start_block = self.position
            start = time.perf_counter()
            self.run_epoch(epoch, start_block)
            self.counters["seconds_train"] += time.perf_counter() - start
            self.end_epoch(epoch)
        self.write_final_models()
        self.flush_metrics()

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

    # -- evaluation and epoch end -------------------------------------------------------------
    def evaluate(self, vector: torch.Tensor) -> tuple[float, float]:
        """Dev loss per frame and frame accuracy of the model with state `vector` (all ranks
        evaluate a share of the dev set; one small all-reduce adds the sums)."""
        model = copy.deepcopy(self.model)
        vector_to_model(vector, model)
        model.eval()
        batches = eval_batches(self.dev_source, self.dev_utts[self.rank::self.world],
                               self.config.data, self.mode.sequence)
        with torch.no_grad():
            stats = [batch_stats(self.mode.aligned(model(x.to(self.device)), self.config.data),
                                 y.to(self.device))[1] for x, y in batches]
        sums = torch.tensor(summed(stats) if stats else [0.0] * 3,   # (a rank may have none)
                            dtype=torch.float64, device=self.device)
        if self.world > 1:
            sums = self.comm.all_reduce(sums, "dev evaluation sums")
        loss_sum, correct, frames = sums.tolist()
        return loss_sum / max(frames, 1.0), correct / max(frames, 1.0)

    def end_epoch(self, epoch: int) -> None:
        """Dev scores of the global and averaged models; newbob's verdict (a rejected epoch's
        work is undone); the epoch record; the checkpoint the next epoch starts from."""
        lr = self.current_lr
        dev_loss, dev_acc = self.evaluate(self.rule.global_model)
        decision = self.schedule.end_epoch(dev_loss)
        record = {"type": "epoch", "epoch": epoch + 1, "lr": lr, "accepted": decision.accepted}
        if decision.accepted:
            for averager in self.averagers.values():
                averager.end_epoch(self.rule.global_model)
        else:
            record["dev_loss_rejected"], record["dev_acc_rejected"] = dev_loss, dev_acc
            self.restore_epoch_start(epoch)
            dev_loss, dev_acc = self.evaluate(self.rule.global_model)
        record["dev_loss"], record["dev_acc"] = dev_loss, dev_acc
        for name, averager in self.averagers.items():
            if averager.average is not None:
                record[f"dev_loss_{name}"], record[f"dev_acc_{name}"] = \
                    self.evaluate(averager.average)
        record.update(self.totals())
        # the rate the workers use next, scaled as `lr` is (times N under sync.lr_times_workers)
        next_lr = decision.lr * self.lr_scale
        record["next_lr"], record["stop"] = next_lr, decision.stop
        if decision.improvement is not None:
            record["dev_loss_improvement"] = decision.improvement
        self.write_metrics(record)
        if self.rank == 0:
            averages = "".join(f"; {name} acc {record[f'dev_acc_{name}']:.4f}"
                               for name in self.averagers if f"dev_acc_{name}" in record)
            logger.info("epoch %d%s: dev loss %.4f acc %.4f%s; lr %g -> %g%s", epoch + 1,
                        "" if decision.accepted else " rejected (restored its start)", dev_loss,
                        dev_acc, averages, lr, next_lr, "; stopping" if decision.stop else "")
        self.position = (epoch + 1, 0)
        self.save_checkpoint()

    def totals(self) -> dict:
        return {"syncs": self.counters["syncs"], "frames": self.counters["frames"],
                "bytes_reduced": self.comm.bytes_reduced,
                "seconds_compute": self.counters["seconds_compute"],
                "seconds_comm": self.comm.seconds,
                "seconds_train": self.counters.get("seconds_train", 0.0)}

    def log_block(self, epoch: int, index: int, stats: list[float]) -> None:
        loss_sum, correct, frames = stats
        self.write_metrics({"type": "block", "epoch": epoch + 1, "block": index,
                            "loss": loss_sum / max(frames, 1.0), "frame_acc": correct / max(frames, 1.0),
                            "lr": self.current_lr, **self.totals()})

    def write_metrics(self, record: dict) -> None:
        if self.rank == 0:
            self.metrics_pending.append(json.dumps(record) + "\n")
            if time.monotonic() - self.metrics_written >= METRICS_EVERY_SECONDS:
                self.flush_metrics()

    def flush_metrics(self) -> None:
        """Append the pending records to metrics.jsonl (records a checkpoint does not contain are
        dropped again at resume: drop_metrics_after)."""
        if self.metrics_pending:
            with open(os.path.join(self.exp_dir, "metrics.jsonl"), "a", encoding="utf-8") as f:
                f.writelines(self.metrics_pending)
            self.metrics_pending.clear()
        self.metrics_written = time.monotonic()

    # -- exp dir, checkpoints, final models -------------------------------------------------------
    def agree_on_resume(self) -> None:
        """Every rank resumes when any does. Across nodes, torchrun counts a restart only on the
        agents whose workers failed: a node whose workers were restarted because another node's
        failed starts them with TORCHELASTIC_RESTART_COUNT 0, and its rank 0 would otherwise
        start afresh (removing the checkpoints) while the others resume."""
        flag = torch.tensor([1.0 if self.resume else 0.0])
        self.comm.all_reduce(flag, "resume agreement", op=torch.distributed.ReduceOp.MAX)
        self.resume = bool(flag.item())

    def prepare_exp_dir(self) -> None:
        if self.rank == 0:
            os.makedirs(self.exp_dir, exist_ok=True)
            if self.resume:
                checkpoint.check_writable(self.exp_dir)
            else:
                checkpoint.start_afresh(self.exp_dir)
            configs.save(self.config, os.path.join(self.exp_dir, "conf.yaml"))
            regime.write(self.regime, self.exp_dir)
            self.pipeline.save(os.path.join(self.exp_dir, "feature_pipeline.yaml"))
        self.comm.barrier("exp dir setup")

    def global_state(self) -> dict:
        return {"config": self.config.to_dict(), "world_size": self.workers, "position": self.position,
                "input_dim": self.input_dim, "num_pdfs": self.num_pdfs,
                "rule": self.rule.state_dict(),
                "averages": {name: a.state_dict() for name, a in self.averagers.items()},
                "schedule": self.schedule.state_dict(), "counters": dict(self.counters),
                "comm": self.comm.state_dict()}

    def save_checkpoint(self) -> None:
        """rank<g>.pt for each worker g of this process (its local model, optimizer, RNGs; a
        virtual worker's dropout stream too), then state.pt."""
        self.flush_metrics()   # the records of the work it contains are on disk before it
        where = checkpoint.directory(self.exp_dir, *self.position)
        for k, g in enumerate(self.worker_ids):
            state = self.local.state(k)
            checkpoint.save({"model": state["model"], "optimizer": state["optimizer"],
                             "rng": {**checkpoint.rng_states(), "stream": state["stream"]}},
                            os.path.join(where, f"rank{g}.pt"))
        # every rank's file is in place before state.pt marks the checkpoint complete
        self.comm.barrier("checkpoint files")
        if self.rank == 0:
            checkpoint.save(self.global_state(), os.path.join(where, checkpoint.STATE))
            logger.info("wrote checkpoint %s", where)
        self.comm.barrier("checkpoint complete")

    def load_checkpoint(self) -> bool:
        """Restore the latest complete checkpoint; False if there is none."""
        where = checkpoint.latest(self.exp_dir)
        if where is None:
            return False
        state = checkpoint.load(os.path.join(where, checkpoint.STATE), self.device)
        changed = configs.differences(state["config"], self.config)
        if changed:
            raise configs.ConfigError(f"cannot resume from {where}: the configuration differs "
                                      "from the checkpoint's:\n  " + "\n  ".join(changed))
        if (state["input_dim"], state["num_pdfs"]) != (self.input_dim, self.num_pdfs):
            raise configs.ConfigError(
                f"cannot resume from {where}: its model has input dimension {state['input_dim']} "
                f"and {state['num_pdfs']} pdfs; the data give {self.input_dim} and {self.num_pdfs}")
        if state["world_size"] != self.workers:
            raise configs.ConfigError(f"cannot resume from {where}: it was written by "
                                      f"{state['world_size']} workers, this run has {self.workers}")
        local = self.load_training_state(where, state)
        self.schedule.load_state_dict(state["schedule"])
        self.counters = dict(state["counters"])
        self.comm.load_state_dict(state["comm"])
        self.position = tuple(state["position"])
        checkpoint.restore_rng_states(local["rng"])
        if self.rank == 0:
            self.drop_metrics_after(self.position)
        logger.info("resumed from %s (epoch %d, block %d)", where, *self.position)
        return True

    def load_training_state(self, where: str, state: dict, streams: bool = True) -> dict:
        """The models, optimizers, sync rule and averages of checkpoint `where` (state.pt already
        read); returns the file of this process's first worker (its RNG states are the
        process's). Without `streams` the workers' dropout streams go on as they are."""
        files = [checkpoint.load(os.path.join(where, f"rank{g}.pt"), self.device)
                 for g in self.worker_ids]
        self.local.load_states([{"model": f["model"], "optimizer": f["optimizer"],
                                 "stream": f["rng"].get("stream") if streams else None}
                                for f in files])
        self.rule.load_state_dict(state["rule"])
        for name, averager in self.averagers.items():
            averager.load_state_dict(state["averages"][name])
        return files[0]

    def restore_epoch_start(self, epoch: int) -> None:
        """Undo a rejected epoch: the training state of the checkpoint it started from. The
        schedule (its halved rate), the counters (the work was done) and the RNGs go on."""
        where = checkpoint.directory(self.exp_dir, epoch, 0)
        if not os.path.isfile(os.path.join(where, checkpoint.STATE)):
            raise DataError(f"newbob rejected epoch {epoch + 1}, but the checkpoint it started "
                            f"from, {where}, is missing; it is needed to restore the model")
        self.load_training_state(where, checkpoint.load(os.path.join(where, checkpoint.STATE),
                                                        self.device), streams=False)

    def drop_metrics_after(self, position: tuple[int, int]) -> None:
        """Forget the metrics records of work the checkpoint does not contain (a run killed after
        it logged them), so the resumed run's records are not doubled."""
        from emasr.io.atomic import atomic_write

        path = os.path.join(self.exp_dir, "metrics.jsonl")
        if not os.path.isfile(path):
            return
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
        keep = [line for line in lines if recorded_by(json.loads(line), position)]
        if len(keep) != len(lines):
            with atomic_write(path) as f:
                f.writelines(keep)

    def model_file(self, vector: torch.Tensor, kind: str, epoch: int) -> dict:
        model = copy.deepcopy(self.model)
        vector_to_model(vector, model)
        return {"kind": kind, "epoch": epoch, "model_config": self.config.model.to_dict(),
                "data_config": self.config.data.to_dict(), "input_dim": self.input_dim,
                "num_pdfs": self.num_pdfs, "pipeline": self.pipeline.to_dict(),
                "log_priors": torch.as_tensor(np.asarray(self.targets.log_priors), dtype=torch.float32),
                "state_dict": {k: v.cpu() for k, v in model.state_dict().items()}}

    def current_models(self) -> dict[str, torch.Tensor | None]:
        """File stem -> model vector: W_g (final) and each averaged model (None: not started)."""
        return {GLOBAL: self.rule.global_model,
                **{name: averager.average for name, averager in self.averagers.items()}}

    def final_models(self) -> dict[str, tuple[torch.Tensor | None, int]]:
        """File stem -> (model vector, the epochs it has seen), as train.final_epoch says: the
        run's end, or each model at its best dev epoch, read from that epoch's checkpoint (the
        rule and averages are loaded into this process: training is over)."""
        last = self.position[0]
        if self.config.train.final_epoch == "last":
            return {name: (vector, last) for name, vector in self.current_models().items()}
        records = read_metrics(os.path.join(self.exp_dir, "metrics.jsonl")).epochs
        chosen = best_epochs(records, list(self.current_models()))
        models = {}
        for epoch in sorted(set(chosen.values())):
            where = checkpoint.directory(self.exp_dir, epoch, 0)
            if not os.path.isfile(os.path.join(where, checkpoint.STATE)):
                raise DataError(f"train.final_epoch best_dev_acc chose epoch {epoch}, but its "
                                f"checkpoint {where} is missing; it holds the models to write")
            state = checkpoint.load(os.path.join(where, checkpoint.STATE), self.device)
            self.rule.load_state_dict(state["rule"])
            for name, averager in self.averagers.items():
                averager.load_state_dict(state["averages"][name])
            models.update({name: (vector, epoch) for name, vector in self.current_models().items()
                           if chosen.get(name) == epoch})
        return models

    def write_final_models(self) -> None:
        if self.rank != 0:
            return
        self.flush_metrics()   # the epoch records best_dev_acc reads
        written = []
        for name, (vector, epoch) in self.final_models().items():
            if vector is not None:
                kind = "global" if name == GLOBAL else name
                checkpoint.save(self.model_file(vector, kind, epoch),
                                os.path.join(self.exp_dir, f"{name}.pt"))
                written.append(f"{name}.pt (epoch {epoch})")
        prior = os.path.join(self.targets_dir, "prior.vec")
        if os.path.isfile(prior):
            shutil.copyfile(prior, os.path.join(self.exp_dir, "prior.vec"))
        logger.info("wrote to %s: %s", self.exp_dir, ", ".join(written))

    def cleanup(self) -> None:
        self.flush_metrics()   # a run stopped by an error keeps the records up to it
        destroy_process_group()


def check_worker_count(per_process: int) -> None:
    """steps/nnet/train.sh --num-workers counts workers: it exports their number on this node,
    which must be workers_per_process x the processes torchrun started here."""
    expected = os.environ.get("EMASR_NUM_WORKERS")
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if expected is not None and int(expected) != per_process * local:
        raise configs.ConfigError(
            f"--num-workers {expected} counts workers, but this node runs {local} process(es) of "
            f"dist.workers_per_process={per_process} = {per_process * local} workers; give "
            "steps/nnet/train.sh --workers-per-process K (processes = N / K)")


def run(config: configs.Config, targets_dir: str, train_dir: str, dev_dir: str, exp_dir: str,
        resume: bool) -> None:
    # torchrun --max-restarts: a restarted worker group continues from the last complete checkpoint
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    trainer = Trainer(config, targets_dir, train_dir, dev_dir, exp_dir, resume or restart > 0)
    try:
        trainer.setup()
        if restart:
            logger.info("worker group restart %d: resuming from the latest complete checkpoint",
                        restart)
        if trainer.resume and not trainer.load_checkpoint():
            logger.info("--resume: no checkpoint in %s/checkpoints; starting from scratch", exp_dir)
        trainer.train()
    finally:
        trainer.cleanup()
