"""The Trainer's setup, in the order its parts depend on one another: the process and its workers,
the inputs (features, targets, a warm start's file), the model, the data shards, the workers'
optimizers, the sync rule and averaged models, the schedule.

What it sets on the Trainer (the loop, checkpointing and final models read them):
- process: device, rank, world (processes), comm, per_process (K), workers (N), worker_ids;
- inputs: pipeline, targets, input_dim, num_pdfs, init (a warm start's file or None),
  train_source, dev_source, dev_utts;
- model: model (the initial W_g's module), mode (the architecture's input mode);
- data: shards (this process's workers' data), group (their shared resident store or None),
  epoch_frames, syncs_per_epoch;
- workers: local (the K local models and their optimizers);
- sync: rule, packed (the sync's buffer), worker_sum, averagers, regime;
- schedule: schedule, lr_scale, position (epoch, blocks done in it), counters.
"""
from __future__ import annotations

import logging
import os

import torch

from emasr.nnet import config as configs
from emasr.nnet.averages import build_averagers, ema_decays
from emasr.nnet.data import DataError, Source, shard, utterances_with_targets, validate_targets
from emasr.nnet.data.inputs import make_pipeline, open_targets, raw_feature_dim
from emasr.nnet.data.loaders import training_data
from emasr.nnet.data.resident import ResidentData, ResidentGroup
from emasr.nnet.models import build_model
from emasr.nnet.sync import make_rule
from emasr.nnet.trainer.blocks import EXTRAS
from emasr.nnet.training import regime, warm_start
from emasr.nnet.training.schedule import LearningRateSchedule
from emasr.nnet.workers import make_workers
from emasr.nnet.workers.comm import Communicator, init_process_group, worker_device
from emasr.nnet.workers.flat import model_to_vector
from emasr.nnet.workers.precision import compile_mode, make_optimizer, set_tf32

logger = logging.getLogger(__name__)


class Setup:
    def setup(self) -> None:
        self._setup_process()
        train_utts = self._setup_inputs()
        self._setup_model()
        self._setup_data(train_utts)
        self._setup_workers()
        initial = self._setup_sync()
        self._setup_schedule()
        if self.init is not None:
            self.start_warm(initial)

    def _setup_process(self) -> None:
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

    def _setup_inputs(self) -> list[str]:
        """Features, targets and a warm start's file, checked against each other; returns the
        training utterances."""
        c = self.config
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
        return train_utts

    def _setup_model(self) -> None:
        c = self.config
        torch.manual_seed(c.train.init_seed)   # the same initial model on every rank
        self.model = build_model(c.model, self.input_dim, self.num_pdfs).to(self.device)
        if self.init is not None:   # before the workers copy it
            self.init.load_into(self.model)
        self.mode = c.architecture.mode

    def _setup_data(self, train_utts: list[str]) -> None:
        """This process's workers' shards, and the run's frames and syncs per epoch."""
        c = self.config
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

    def _setup_workers(self) -> None:
        """The K local models, each with its optimizer and dropout stream."""
        c = self.config
        seeds = [c.train.init_seed * 1000 + g for g in self.worker_ids]
        torch.manual_seed(seeds[0])   # dropout per worker (several: a stream each)
        set_tf32(self.device, c.train.tf32)
        self.local = make_workers(self.model, self._optimizer, seeds, self.device,
                                  c.train.max_grad_norm, c.data,
                                  precision=c.train.precision,
                                  compile_mode=compile_mode(c.train))

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

    def _setup_sync(self) -> torch.Tensor:
        """The sync rule started at the initial model, the sync's buffers, the averaged models
        and the regime they make; returns the initial model's vector."""
        c = self.config
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
        return initial

    def _setup_schedule(self) -> None:
        t = self.config.train
        self.schedule = LearningRateSchedule(t.schedule, t.lr, t.final_lr, t.lr_decay,
                                             t.newbob_start_halving, t.newbob_end_halving,
                                             t.min_lr)
        # Kaldi's rule for model averaging: N workers each at N x the rate
        self.lr_scale = self.workers if self.config.sync.lr_times_workers else 1
        self.position = (0, 0)   # (epoch, blocks done in it)
        self.counters = {"syncs": 0, "frames": 0.0, "seconds_compute": 0.0, "seconds_train": 0.0}

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

    def frames_per_sync(self) -> int:
        return regime.frames_per_sync(self.config, self.workers)

    def progress(self) -> float:
        """The share of the run's planned frames (epochs x one epoch's frames) processed."""
        planned = self.config.train.epochs * self.epoch_frames
        return self.counters["frames"] / planned if planned else 0.0


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
