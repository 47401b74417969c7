"""Read a network exp dir's metrics.jsonl (written by emasr.nnet.trainer.metrics_log, rank 0;
read back by the trainer for train.final_epoch and by the report).

One JSON object per line: `{"type": "block", "epoch", "block", "loss", "frame_acc", "lr", <totals>}`
after every sync, and `{"type": "epoch", "epoch", "lr", "next_lr", "dev_loss", "dev_acc",
["dev_loss_ema", "dev_acc_ema",] <totals>}` after every epoch, where <totals> are the running
`syncs, frames, bytes_reduced` (per worker), `seconds_compute, seconds_comm, seconds_train`.
A resumed run appends records again for the blocks after its checkpoint; the last record for an
(epoch, block) wins, so the curves show the run that produced the final model.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from emasr.io.table import read_lines


class MetricsError(ValueError):
    """metrics.jsonl is malformed; the message names the file and line."""


@dataclass
class TrainingMetrics:
    path: str
    epochs: list[dict] = field(default_factory=list)   # sorted by epoch
    blocks: list[dict] = field(default_factory=list)   # sorted by (epoch, block)

    @property
    def final(self) -> dict:
        """The last epoch record ({} before the first epoch ended)."""
        return self.epochs[-1] if self.epochs else {}

    def frames_per_second(self) -> float | None:
        final = self.final
        seconds = final.get("seconds_train") or 0.0
        return final["frames"] / seconds if seconds > 0 and final.get("frames") else None


def read_metrics(path: str) -> TrainingMetrics:
    epochs: dict[int, dict] = {}
    blocks: dict[tuple[int, int], dict] = {}
    for number, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise MetricsError(f"{path}:{number}: not a JSON object ({err.msg})") from None
        kind = record.get("type") if isinstance(record, dict) else None
        try:
            if kind == "epoch":
                epochs[int(record["epoch"])] = record
            elif kind == "block":
                blocks[(int(record["epoch"]), int(record["block"]))] = record
        except (KeyError, TypeError, ValueError):
            raise MetricsError(f"{path}:{number}: a '{kind}' record needs integer 'epoch'"
                               f"{' and block' if kind == 'block' else ''}") from None
    return TrainingMetrics(os.fspath(path), [epochs[k] for k in sorted(epochs)],
                           [blocks[k] for k in sorted(blocks)])
