"""The writer of a training's metrics.jsonl (rank 0; the format and its reader:
emasr.nnet.training.metrics). Records are held and appended at most every METRICS_EVERY_SECONDS,
at every checkpoint and at the end: opening the file for each block's record alone costs more than
the record."""
from __future__ import annotations

import json
import os
import time

METRICS_EVERY_SECONDS = 10.0


def recorded_by(record: dict, position: tuple[int, int]) -> bool:
    """Whether a metrics record describes work done before `position` (epoch, blocks done in it);
    records count epochs from 1, positions from 0."""
    epoch, block = position
    if record["type"] == "epoch":
        return record["epoch"] <= epoch
    return (record["epoch"] - 1, record["block"]) <= (epoch, block)


class MetricsLog:
    def __init__(self, exp_dir: str) -> None:
        self.path = os.path.join(exp_dir, "metrics.jsonl")
        self.pending: list[str] = []   # records not yet in metrics.jsonl
        self.written = time.monotonic()

    def write(self, record: dict) -> None:
        self.pending.append(json.dumps(record) + "\n")
        if time.monotonic() - self.written >= METRICS_EVERY_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Append the pending records to metrics.jsonl (records a checkpoint does not contain are
        dropped again at resume: drop_after)."""
        if self.pending:
            with open(self.path, "a", encoding="utf-8") as f:
                f.writelines(self.pending)
            self.pending.clear()
        self.written = time.monotonic()

    def drop_after(self, position: tuple[int, int]) -> None:
        """Forget the records of work the checkpoint does not contain (a run killed after it
        logged them), so the resumed run's records are not doubled."""
        from emasr.io.atomic import atomic_write

        if not os.path.isfile(self.path):
            return
        with open(self.path, encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
        keep = [line for line in lines if recorded_by(json.loads(line), position)]
        if len(keep) != len(lines):
            with atomic_write(self.path) as f:
                f.writelines(keep)
