"""A training's plan and records, below the loop that runs them (emasr.nnet.trainer): the regime
(syncs and data per sync, regime.json), the learning-rate schedule, the choice of each model file's
epoch, the checkpoint files, metrics.jsonl, and a warm start's model file."""
