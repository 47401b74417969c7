"""The model files a training ends with: final.pt (W_g) and each averaged model's <name>.pt, at
the run's end or, under train.final_epoch best_dev_acc, each at its best dev epoch (read back from
that epoch's checkpoint); each carries the model, the feature pipeline and the priors, so decoding
needs nothing else.

Reads what the setup (emasr.nnet.trainer.setup) made: config, exp_dir, targets_dir, device, rank,
model, input_dim, num_pdfs, pipeline, targets, rule, averagers, position.
"""
from __future__ import annotations

import copy
import logging
import os
import shutil

import numpy as np
import torch

from emasr.nnet.data import DataError
from emasr.nnet.training import checkpoint
from emasr.nnet.training.metrics import read_metrics
from emasr.nnet.training.selection import GLOBAL, best_epochs
from emasr.nnet.workers.flat import vector_to_model

logger = logging.getLogger(__name__)


class FinalModels:
    def model_file(self, vector: torch.Tensor, kind: str, epoch: int) -> dict:
        model = copy.deepcopy(self.model)
        vector_to_model(vector, model)
        return {"kind": kind, "epoch": epoch, "model_config": self.config.model.to_dict(),
                "data_config": self.config.data.to_dict(), "input_dim": self.input_dim,
                "num_pdfs": self.num_pdfs, "pipeline": self.pipeline.to_dict(),
                "log_priors": torch.as_tensor(np.asarray(self.targets.log_priors), dtype=torch.float32),
                "state_dict": {k: v.cpu() for k, v in model.state_dict().items()}}

    def current_models(self) -> dict[str, torch.Tensor | None]:
        """File stem -> model vector: W_g (final) and each averaged model (None: not started)."""
        return {GLOBAL: self.rule.global_model,
                **{name: averager.average for name, averager in self.averagers.items()}}

    def final_models(self) -> dict[str, tuple[torch.Tensor | None, int]]:
        """File stem -> (model vector, the epochs it has seen), as train.final_epoch says: the
        run's end, or each model at its best dev epoch, read from that epoch's checkpoint (the
        rule and averages are loaded into this process: training is over)."""
        last = self.position[0]
        if self.config.train.final_epoch == "last":
            return {name: (vector, last) for name, vector in self.current_models().items()}
        records = read_metrics(os.path.join(self.exp_dir, "metrics.jsonl")).epochs
        chosen = best_epochs(records, list(self.current_models()))
        models = {}
        for epoch in sorted(set(chosen.values())):
            where = checkpoint.directory(self.exp_dir, epoch, 0)
            if not os.path.isfile(os.path.join(where, checkpoint.STATE)):
                raise DataError(f"train.final_epoch best_dev_acc chose epoch {epoch}, but its "
                                f"checkpoint {where} is missing; it holds the models to write")
            state = checkpoint.load(os.path.join(where, checkpoint.STATE), self.device)
            self.rule.load_state_dict(state["rule"])
            for name, averager in self.averagers.items():
                averager.load_state_dict(state["averages"][name])
            models.update({name: (vector, epoch) for name, vector in self.current_models().items()
                           if chosen.get(name) == epoch})
        return models

    def write_final_models(self) -> None:
        if self.rank != 0:
            return
        self.flush_metrics()   # the epoch records best_dev_acc reads
        written = []
        for name, (vector, epoch) in self.final_models().items():
            if vector is not None:
                kind = "global" if name == GLOBAL else name
                checkpoint.save(self.model_file(vector, kind, epoch),
                                os.path.join(self.exp_dir, f"{name}.pt"))
                written.append(f"{name}.pt (epoch {epoch})")
        prior = os.path.join(self.targets_dir, "prior.vec")
        if os.path.isfile(prior):
            shutil.copyfile(prior, os.path.join(self.exp_dir, "prior.vec"))
        logger.info("wrote to %s: %s", self.exp_dir, ", ".join(written))
