"""`single`: one worker, no communication. The "sync" every tau minibatches only marks the point
where the global model is read (for the EMA and for evaluation): W_g <- the local model.

With one worker that is model averaging over a single model, so the rule is MA's without the
all-reduce: when `communicates` is False the trainer neither packs the model for a collective
nor loads the restart (the worker's own model) back into it."""
from __future__ import annotations

from emasr.nnet.sync.ma import ModelAveraging


class NoSync(ModelAveraging):
    name = "single"
    communicates = False
