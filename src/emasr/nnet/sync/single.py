"""`single`: one worker, no communication. The "sync" every tau minibatches only marks the point
where the global model is read (for the EMA and for evaluation): W_g <- the local model.

With one worker that is model averaging over a single model, so the rule is MA's without the
all-reduce: when `communicates` is False the trainer neither packs the model for a collective
nor loads the restart (the worker's own model) back into it."""
from __future__ import annotations

from emasr.nnet.sections import ConfigError
from emasr.nnet.sync.ma import ModelAveraging


class NoSync(ModelAveraging):
    name = "single"
    communicates = False

    @classmethod
    def from_config(cls, sync, workers: int) -> "NoSync":
        if workers != 1:
            raise ConfigError(f"strategy 'single' trains one worker, got {workers} workers; use "
                              "--strategy ma or bmuf (or another parallel rule) for several")
        return cls()
