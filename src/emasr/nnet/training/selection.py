"""Which epoch's model a training writes as its model files (`train.final_epoch`):

- ``last`` (the default; Kaldi nnet3's): every model file holds the state at the run's end.
- ``best_dev_acc``: each model file (final.pt, the global model W_g; each averaged model's own
  file) holds that model as it was at the end of the epoch where its own dev frame accuracy was
  highest, the earliest of ties: the number of epochs chosen on dev, per model, from one run of
  `train.epochs`. A model that overfits after epoch 6 and one still climbing at 12 both get their
  best, which is what a parity test of BMUF-N against one worker needs (each trained to its own
  convergence). The epoch-end checkpoints hold every model's state, so nothing is retrained.

The dev frame accuracies are the epoch records of `<exp>/metrics.jsonl` (`dev_acc`,
`dev_acc_<name>`, read by emasr.nnet.training.metrics); the epoch each file is from is in the file
(`epoch`) and the training log.
"""
from __future__ import annotations

FINAL_EPOCHS = ("last", "best_dev_acc")

GLOBAL = "final"   # the global model's file stem; an averaged model's is its name


def accuracy_key(name: str) -> str:
    """The epoch record's key of model `name`'s dev frame accuracy."""
    return "dev_acc" if name == GLOBAL else f"dev_acc_{name}"


def best_epochs(records: list[dict], names: list[str]) -> dict[str, int]:
    """For each model of `names`, the epoch (counted from 1) of `records` (epoch records in
    order) whose dev frame accuracy is highest, the earliest of ties; a model no epoch scored
    (an average not yet started at any epoch end) is left out."""
    chosen = {}
    for name in names:
        key = accuracy_key(name)
        scored = [(record[key], -int(record["epoch"])) for record in records if key in record]
        if scored:
            chosen[name] = -max(scored)[1]
    return chosen
