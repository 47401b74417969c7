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

The Trainer is its parts, each a module of its own: the setup (emasr.nnet.trainer.setup: the
process, inputs, model, data, workers, sync rule and averages, schedule), an epoch's blocks of
steps and syncs (blocks), the epoch's end (epochs), the exp dir and checkpoints (checkpointing), the
model files it ends with (final_models) and metrics.jsonl (metrics_log). Each part's docstring
names what of the setup it reads.
"""
from __future__ import annotations

import logging
import os
import time

from emasr.nnet import config as configs
from emasr.nnet.trainer.blocks import Blocks
from emasr.nnet.trainer.checkpointing import Checkpointing
from emasr.nnet.trainer.epochs import Epochs
from emasr.nnet.trainer.final_models import FinalModels
from emasr.nnet.trainer.metrics_log import MetricsLog
from emasr.nnet.trainer.setup import Setup
from emasr.nnet.workers.comm import destroy_process_group

logger = logging.getLogger(__name__)


class Trainer(Setup, Blocks, Epochs, Checkpointing, FinalModels):
    """One process's training: setup(), then train() (or load_checkpoint() first, to resume),
    then cleanup()."""

    def __init__(self, config: configs.Config, targets_dir: str, train_dir: str, dev_dir: str,
                 exp_dir: str, resume: bool = False) -> None:
        self.config, self.exp_dir, self.resume = config, exp_dir, resume
        self.targets_dir, self.train_dir, self.dev_dir = targets_dir, train_dir, dev_dir
        self.metrics = MetricsLog(exp_dir)   # rank 0 writes it

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

    def write_metrics(self, record: dict) -> None:
        if self.rank == 0:
            self.metrics.write(record)

    def flush_metrics(self) -> None:
        self.metrics.flush()

    def cleanup(self) -> None:
        self.flush_metrics()   # a run stopped by an error keeps the records up to it
        destroy_process_group()


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
