"""The Trainer's exp dir and checkpoints: every rank agrees on resuming, rank 0 prepares the exp
dir, every worker writes its rank<g>.pt and rank 0 the state.pt that completes a checkpoint
(emasr.nnet.training.checkpoint: the files), and a resume or a rejected newbob epoch reads them
back.

Reads what the setup (emasr.nnet.trainer.setup) made: config, exp_dir, device, comm, rank,
workers, worker_ids, input_dim, num_pdfs, pipeline, local, rule, averagers, schedule, regime;
restores `position` and `counters`.
"""
from __future__ import annotations

import logging
import os

import torch

from emasr.nnet import config as configs
from emasr.nnet.data import DataError
from emasr.nnet.training import checkpoint, regime

logger = logging.getLogger(__name__)


class Checkpointing:
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
        self.check_resumable(where, state)
        local = self.load_training_state(where, state)
        self.schedule.load_state_dict(state["schedule"])
        self.counters = dict(state["counters"])
        self.comm.load_state_dict(state["comm"])
        self.position = tuple(state["position"])
        checkpoint.restore_rng_states(local["rng"])
        if self.rank == 0:
            self.metrics.drop_after(self.position)
        logger.info("resumed from %s (epoch %d, block %d)", where, *self.position)
        return True

    def check_resumable(self, where: str, state: dict) -> None:
        """A checkpoint resumes only the run that wrote it: its config (but RESUMABLE_CHANGES),
        its model's shape and its number of workers."""
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
