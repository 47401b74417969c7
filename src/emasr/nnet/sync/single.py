"""`single`: one worker, no communication. The "sync" every tau minibatches only marks the point
where the global model is read (for the EMA and for evaluation): W_g <- the local model.

With one worker that is model averaging over a single model, so the rule is MA's without the
all-reduce (the trainer skips the collective when `communicates` is False)."""
from __future__ import annotations

from emasr.nnet.sync.ma import ModelAveraging


class NoSync(ModelAveraging):
    name = "single"
    communicates = False
