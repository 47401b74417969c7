"""Network log-likelihoods for decoding: log-posterior minus log-prior, per utterance.

`emasr nnet-forward` loads <exp>/final.pt or an averaged model (ema.pt, avg.pt, lastk.pt: the
models of emasr.nnet.averages; each carries the model, the feature pipeline
and the priors, so decoding needs nothing else), runs the same feature pipeline as training and
writes a Kaldi ark of [T, num_pdfs] float32 matrices that `emasr decode-loglikes` decodes.
"""
from __future__ import annotations

import logging
import os

import click
import numpy as np
import torch

from emasr.feats.cmvn import CmvnError
from emasr.nnet.training import checkpoint
from emasr.nnet.averages import AVERAGED_MODELS, family
from emasr.nnet.config import ConfigError, DataConfig
from emasr.nnet.data import DataError
from emasr.nnet.models.input_modes import INPUT_MODES
from emasr.nnet.models import build_model

logger = logging.getLogger(__name__)


def load_model_file(path: str) -> tuple[torch.nn.Module, dict]:
    if not os.path.isfile(path):
        raise click.ClickException(f"expected file {path} to exist (train the model first; an "
                                   "averaged model such as ema.pt exists only when the training "
                                   "config kept it)")
    info = checkpoint.load(path)
    model = build_model(info["model_config"], info["input_dim"], info["num_pdfs"])
    model.load_state_dict(info["state_dict"])
    model.eval()
    return model, info


@torch.no_grad()
def log_posteriors(model: torch.nn.Module, feats: np.ndarray, data_config) -> np.ndarray:
    """[T, P] log-posteriors; a sequence model runs the same chunks (left context, delay) as in
    training."""
    return INPUT_MODES[model.input_mode].log_posteriors(model, feats, data_config)


def check_model_name(name: str) -> str:
    """final, or the name of an averaged model (ema, ema_90000, avg, lastk)."""
    if name != "final" and family(name) not in AVERAGED_MODELS:
        raise click.BadParameter(f"'{name}': expected final or an averaged model "
                                 f"({', '.join(AVERAGED_MODELS)}, or <name>_<frames>)")
    return name


def write_matrices(wspecifier: str, items) -> int:
    """Write (utt, matrix) pairs to `ark:FILE`, `ark,scp:ARK,SCP` (both atomically) or `ark:-`."""
    import kaldiio

    kind, _, target = wspecifier.partition(":")
    if kind not in ("ark", "ark,scp") or not target:
        raise click.ClickException(f"unsupported wspecifier '{wspecifier}'; expected ark:FILE, "
                                   "ark,scp:ARK,SCP or ark:-")
    if target == "-":
        count = 0
        with kaldiio.WriteHelper("ark:-") as writer:
            for utt, mat in items:
                writer(utt, mat)
                count += 1
        return count
    paths = target.split(",")
    temps = [f"{p}.tmp.{os.getpid()}" for p in paths]
    count = 0
    try:
        with kaldiio.WriteHelper(f"{kind}:{','.join(temps)}") as writer:
            for utt, mat in items:
                writer(utt, mat)
                count += 1
        if len(paths) == 2:   # the scp names the ark: point it at the final name
            with open(temps[1], encoding="utf-8") as f:
                text = f.read().replace(temps[0], paths[0])
            with open(temps[1], "w", encoding="utf-8") as f:
                f.write(text)
        for temp, path in zip(temps, paths):
            os.replace(temp, path)
    finally:
        for temp in temps:
            if os.path.exists(temp):
                os.unlink(temp)
    return count


def log_likelihoods(model_path: str, data_dir: str, apply_priors: bool = True,
                    prior_scale: float = 1.0):
    """Yield (utt, [T, P] float32 log-likelihoods) for every utterance of data_dir."""
    from emasr.feats.pipeline import FeaturePipeline

    model, info = load_model_file(model_path)
    data = DataConfig.build(info["data_config"], f"{model_path}: data_config")
    pipeline = FeaturePipeline.from_dict(info["pipeline"])
    check_recorded_pipeline(model_path, pipeline)
    priors = info["log_priors"].numpy() * prior_scale if apply_priors else 0.0
    for utt, feats in pipeline.iterate(data_dir):
        if feats.shape[1] != info["input_dim"]:
            raise DataError(f"{data_dir}/feats.scp: utterance {utt}: network input dimension "
                            f"{feats.shape[1]}, but {model_path} expects {info['input_dim']}")
        yield utt, (log_posteriors(model, feats, data) - priors).astype(np.float32)


def check_recorded_pipeline(model_path: str, pipeline) -> None:
    """The exp dir's feature_pipeline.yaml records the pipeline stored in its models: an edited one
    asks for a change decoding would not make, so it is refused, naming what differs."""
    from emasr.feats.pipeline import PIPELINE_FILE, FeaturePipeline

    recorded = os.path.join(os.path.dirname(model_path), PIPELINE_FILE)
    if not os.path.isfile(recorded):
        return
    try:
        differ = FeaturePipeline.load(recorded).differences(pipeline)
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read {recorded}: {err}") from None
    if differ:
        raise DataError(f"{recorded} does not agree with the pipeline stored in {model_path} "
                        f"(file vs model: {'; '.join(differ)}); decoding uses the model's: restore "
                        "the file, or train a model with the pipeline you want")


@click.command("nnet-forward")
@click.option("--model", "which", default="final", show_default=True,
              callback=lambda ctx, param, value: check_model_name(value),
              help="final.pt (the global model W_g) or an averaged model: ema.pt (the EMA; "
                   "ema_<frames>.pt, one of several half-lives; ema-warm*.pt, started after "
                   "BMUF's warm-up), avg.pt (cumulative average), "
                   "lastk.pt (average of the last k epochs).")
@click.option("--no-priors", is_flag=True, help="Write log-posteriors instead of log-likelihoods.")
@click.option("--prior-scale", type=float, default=1.0, show_default=True,
              help="Scale of the log-priors subtracted from the log-posteriors.")
@click.option("--num-threads", type=int, default=1, show_default=True)
@click.argument("exp_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("data_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("wspecifier")
def nnet_forward_cli(which: str, no_priors: bool, prior_scale: float, num_threads: int,
                     exp_dir: str, data_dir: str, wspecifier: str) -> None:
    """Compute network log-likelihoods (log-posterior - log-prior) for DATA_DIR.

    Uses EXP_DIR/final.pt or ema.pt, with the feature pipeline and priors stored in it, and writes
    one [frames, num_pdfs] matrix per utterance to WSPECIFIER (ark:FILE, ark,scp:ARK,SCP, ark:-),
    ready for `emasr decode-loglikes`.
    """
    torch.set_num_threads(max(1, num_threads))
    path = os.path.join(exp_dir, f"{which}.pt")
    try:
        count = write_matrices(wspecifier, log_likelihoods(path, data_dir, not no_priors,
                                                           prior_scale))
    except (DataError, checkpoint.CheckpointError, ConfigError, CmvnError) as err:
        raise click.ClickException(str(err)) from None
    except FileNotFoundError as err:   # a data dir file the pipeline reads (cmvn.scp, utt2spk)
        raise click.ClickException(str(err)) from None
    logger.info("wrote log-likelihoods of %d utterances from %s to %s", count, path, wspecifier)
