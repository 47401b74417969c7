"""An epoch's end: dev scores of the global and averaged models, newbob's verdict (a rejected
epoch's work is undone from the checkpoint it started from), the epoch record and the checkpoint
the next epoch starts from.

Reads what the setup (emasr.nnet.trainer.setup) made: config, device, comm, rank, world, model,
mode, dev_source, dev_utts, rule, averagers, schedule, lr_scale, counters; moves `position` on.
"""
from __future__ import annotations

import copy
import logging

import torch

from emasr.nnet.data import eval_batches
from emasr.nnet.workers import batch_stats, summed
from emasr.nnet.workers.flat import vector_to_model

logger = logging.getLogger(__name__)


class Epochs:
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
