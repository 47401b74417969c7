"""A warm start (`train.init_model`): a training of any sync rule that starts from a model this
toolkit wrote, as BMUF's authors start parallel training from a "seed model" one worker trained.

The file is a model file (final.pt, ema.pt, any <name>.pt of a run:
emasr.nnet.trainer.final_models) or an epoch-end checkpoint (its directory
checkpoints/epochEEE-block000000, or the state.pt in it, whose W_g is the global model after epoch EEE). Its architecture (the `model`
section), input dimension, number of pdfs and feature pipeline options must be this run's: a
file that differs is refused before any work, naming the file and what differs.

The run starts where the file's training stopped: W_g, every averaged model and every worker
start at its parameters; the optimizers and the sync rule's state (BMUF's block momentum, DiLoCo's
outer momentum) start fresh. It trains epochs k + 1 .. train.epochs, k being the epochs the file
had trained (its metadata: a model file's `epoch`, a checkpoint's position; or
`train.init_model_epochs` for a file that does not say), and the learning-rate schedule goes on
from there as if the run had trained those k epochs itself (the exponential schedule's progress
starts at k / train.epochs), so that k epochs of one worker and train.epochs - k of N workers
make train.epochs epochs of data.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, fields

import torch

from emasr.io.inputs_record import file_sha256
from emasr.nnet.training import checkpoint
from emasr.nnet.workers.flat import model_to_vector, vector_to_model
from emasr.nnet.models import model_config
from emasr.nnet.sections import ConfigError

# the feature pipeline's options a warm start must share (emasr.feats.pipeline.PipelineConfig)
PIPELINE_OPTIONS = ("cmvn", "norm_vars", "stack", "splice")


@dataclass
class InitModel:
    path: str            # as the config gives it
    file: str            # the file read (a checkpoint directory's state.pt)
    sha256: str
    epochs: int | None   # the epochs its training had done (read(): known)
    model: dict          # its `model` section
    features: dict       # its feature pipeline's options
    input_dim: int
    num_pdfs: int
    state: dict | None = None            # a model file's state_dict
    vector: torch.Tensor | None = None   # or a checkpoint's W_g (emasr.nnet.workers.flat order)

    def record(self) -> dict:
        """What regime.json records of it. The file's digest changes with what else the file
        holds (a checkpoint's counters, its wall times); the parameters' digest says whether two
        runs started from the same model (a one-worker run trained again on a fresh checkout)."""
        return {"path": self.path, "sha256": self.sha256,
                "parameters_sha256": self.parameters_sha256(), "epochs": self.epochs}

    def parameters_sha256(self) -> str:
        """The sha256 of its parameters' bytes, in the file's order (a checkpoint's W_g, a model
        file's state_dict): equal for the same parameters read from the same kind of file."""
        tensors = [self.vector] if self.vector is not None else list(self.state.values())
        return tensors_sha256(tensors)

    def load_into(self, model: torch.nn.Module) -> torch.Tensor:
        """Its parameters into `model` (this run's, of the same architecture); returns the
        model's flat vector."""
        if self.state is not None:
            model.load_state_dict(self.state)
        else:
            vector_to_model(self.vector.to(next(model.parameters()).device), model)
        return model_to_vector(model)


def tensors_sha256(tensors) -> str:
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def state_file(path: str) -> str:
    """The file an init model path names: a checkpoint directory's state.pt, else the path."""
    return os.path.join(path, checkpoint.STATE) if os.path.isdir(path) else path


def checkpoint_parameters_sha256(path: str) -> str:
    """The parameters' digest of an epoch-end checkpoint (its dir or state.pt), as record() gives
    it for a warm start from there."""
    return tensors_sha256([checkpoint.load(state_file(path))["rule"]["global_model"]])


def read(train) -> InitModel | None:
    """The warm start of the `train` section (None without one), read and its epochs known."""
    path = train.init_model
    if path is None:
        return None
    file = state_file(path)
    if not os.path.isfile(file):
        raise ConfigError(f"train.init_model: expected file {file} to exist (a model file such "
                          "as final.pt or ema.pt, or an epoch-end checkpoint directory)")
    info = checkpoint.load(file)
    init = (from_checkpoint if isinstance(info, dict) and "rule" in info else
            from_model_file)(path, file, info)
    init.epochs = epochs_trained(init.epochs, train.init_model_epochs, file)
    if init.epochs >= train.epochs:
        raise ConfigError(f"train.init_model {file} has trained {init.epochs} epochs and "
                          f"train.epochs is {train.epochs}: none left to train (train.epochs "
                          "counts the warm start's epochs too)")
    return init


def expect(info, keys: tuple[str, ...], file: str, what: str) -> None:
    missing = [k for k in keys if not isinstance(info, dict) or k not in info]
    if missing:
        raise ConfigError(f"train.init_model {file}: not {what} of emasr train (missing "
                          f"{', '.join(missing)}); expected final.pt, ema.pt or another model "
                          "file of a run, or an epoch-end checkpoint")


def from_model_file(path: str, file: str, info) -> InitModel:
    expect(info, ("model_config", "input_dim", "num_pdfs", "pipeline", "state_dict"), file,
           "a model file")
    return InitModel(path, file, file_sha256(file), info.get("epoch"), info["model_config"],
                     {k: info["pipeline"].get(k) for k in PIPELINE_OPTIONS}, info["input_dim"],
                     info["num_pdfs"], state=info["state_dict"])


def from_checkpoint(path: str, file: str, info: dict) -> InitModel:
    expect(info, ("config", "position", "input_dim", "num_pdfs"), file, "a checkpoint")
    epoch, block = info["position"]
    if block != 0:
        raise ConfigError(f"train.init_model {file}: a checkpoint in the middle of epoch "
                          f"{epoch + 1} (block {block}); expected an epoch-end checkpoint "
                          "(checkpoints/epochEEE-block000000)")
    saved = info["config"]
    return InitModel(path, file, file_sha256(file), epoch, saved.get("model", {}),
                     {k: saved.get("features", {}).get(k) for k in PIPELINE_OPTIONS},
                     info["input_dim"], info["num_pdfs"],
                     vector=info["rule"]["global_model"].detach().cpu())


def epochs_trained(recorded: int | None, given: int | None, file: str) -> int:
    """The init model's epochs: its metadata's, or train.init_model_epochs for a file without
    any (both given must agree)."""
    if recorded is None and given is None:
        raise ConfigError(f"train.init_model {file} does not record how many epochs it trained; "
                          "give train.init_model_epochs")
    if recorded is not None and given is not None and recorded != given:
        raise ConfigError(f"train.init_model {file} records {recorded} epochs trained, but "
                          f"train.init_model_epochs is {given}")
    return int(recorded if recorded is not None else given)


def check(init: InitModel, config, input_dim: int, num_pdfs: int, pipeline) -> None:
    """Refuse an init model whose architecture, input dimension, pdfs or feature pipeline differ
    from this run's, naming the file and every difference."""
    try:
        saved = model_config(init.model).to_dict()
    except ConfigError as err:
        raise ConfigError(f"train.init_model {init.file}: its model section: {err}") from None
    ours = config.model.to_dict()
    differ = [f"model.{k}: {saved.get(k)!r} in the file, {ours.get(k)!r} in this run"
              for k in sorted(set(saved) | set(ours)) if saved.get(k) != ours.get(k)]
    options = {f.name: getattr(pipeline.config, f.name) for f in fields(pipeline.config)}
    differ += [f"features.{k}: {init.features[k]!r} in the file, {options[k]!r} in this run"
               for k in PIPELINE_OPTIONS if init.features[k] != options[k]]
    for what, theirs, mine in (("input dimension", init.input_dim, input_dim),
                               ("pdfs", init.num_pdfs, num_pdfs)):
        if theirs != mine:
            differ.append(f"{what}: {theirs} in the file, {mine} in this run")
    if differ:
        raise ConfigError(f"train.init_model {init.file} does not fit this run:\n  " +
                          "\n  ".join(differ))


__all__ = ["InitModel", "check", "read", "sha256"]
