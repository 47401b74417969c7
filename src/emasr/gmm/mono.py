"""A flat-start monophone model (Kaldi's gmm-init-mono).

Every pdf starts as one Gaussian with the global mean and variance of a data subset; the tree is a
monophone tree in which the phones of one line of ``phones/sets.int`` share their pdfs (Kaldi's
--shared-phones); the transition model starts from the topology's probabilities.
"""
from __future__ import annotations

import logging
from pathlib import Path

import click
import numpy as np

from emasr.gmm.features import FeatureOptions, iter_features
from emasr.kaldi.model_io import KaldiModel, write_model, write_tree
from emasr.gmm.training_graphs import read_int_sets
from emasr.fst_stack import kaldi_hmm_gmm

log = logging.getLogger(__name__)
VARIANCE_FLOOR = 1e-3  # guards a constant feature dimension in a tiny subset


def single_gaussian(mean: np.ndarray, var: np.ndarray) -> kaldi_hmm_gmm.DiagGmm:
    """A one-component DiagGmm (built through its setters: its pickling is broken in 1.1.4)."""
    gmm = kaldi_hmm_gmm.DiagGmm(1, len(mean))
    gmm.set_weights(np.ones(1, dtype=np.float32))
    gmm.set_invvars_and_means((1.0 / np.maximum(var, VARIANCE_FLOOR))[None, :].astype(np.float32),
                              mean[None, :].astype(np.float32))
    gmm.compute_gconsts()
    return gmm


def global_mean_var(data_dir: str, options: FeatureOptions, num_utts: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of the features of the first ``num_utts`` usable utterances."""
    total, total_sq, frames, used = None, None, 0, 0
    for utt, feats, problem in iter_features(data_dir, options):
        if problem:
            log.warning("skipping utterance %s: %s", utt, problem)
        if problem or feats is None or len(feats) == 0:
            continue
        x = feats.astype(np.float64)
        if total is not None and x.shape[1] != len(total):
            log.warning("skipping utterance %s: dimension %d, expected %d", utt, x.shape[1],
                        len(total))
            continue
        total = x.sum(axis=0) if total is None else total + x.sum(axis=0)
        total_sq = np.square(x).sum(axis=0) if total_sq is None else \
            total_sq + np.square(x).sum(axis=0)
        frames += len(x)
        used += 1
        if used >= num_utts:
            break
    if total is None:
        raise ValueError(f"{data_dir}: no usable features to initialize the model from")
    mean = total / frames
    return mean, total_sq / frames - np.square(mean)


def init_mono(topology: kaldi_hmm_gmm.HmmTopology, shared_phones: list[list[int]] | None,
              mean: np.ndarray, var: np.ndarray):
    """(KaldiModel, tree) of a flat-start monophone system."""
    num_classes = topology.get_phone_to_num_pdf_classes()
    if shared_phones:
        covered = sorted(p for s in shared_phones for p in s)
        if covered != sorted(topology.phones):
            raise ValueError("the shared-phones sets must cover exactly the topology's phones")
        tree = kaldi_hmm_gmm.monophone_context_dependency_shared(shared_phones, num_classes)
    else:
        tree = kaldi_hmm_gmm.monophone_context_dependency(list(topology.phones), num_classes)
    am = kaldi_hmm_gmm.AmDiagGmm()
    for _ in range(tree.num_pdfs):
        am.add_pdf(single_gaussian(mean, var))
    return KaldiModel(kaldi_hmm_gmm.TransitionModel(tree, topology), am), tree


@click.command("gmm-init-mono")
@click.option("--shared-phones", type=click.Path(dir_okay=False, exists=True), default=None,
              help="phones/sets.int: the phones of a line share their pdfs.")
@click.option("--num-utts", type=int, default=10, show_default=True,
              help="Initialize the Gaussians from this many utterances.")
@click.option("--cmvn-opts", default="", help="Kaldi's cmvn_opts.")
@click.option("--delta-order", type=int, default=2, show_default=True)
@click.argument("topo", type=click.Path(dir_okay=False, exists=True))
@click.argument("data", type=click.Path(file_okay=False, exists=True))
@click.argument("model_out", type=click.Path(dir_okay=False))
@click.argument("tree_out", type=click.Path(dir_okay=False))
def init_mono_cli(shared_phones, num_utts, cmvn_opts, delta_order, topo, data, model_out,
                  tree_out):
    """Write a flat-start monophone MODEL_OUT (0.mdl) and TREE_OUT for the topology TOPO, with
    Gaussians from the global statistics of the data dir DATA."""
    topology = kaldi_hmm_gmm.HmmTopology()
    topology.read(open(topo).read())
    try:
        mean, var = global_mean_var(data, FeatureOptions.parse(cmvn_opts, delta_order), num_utts)
        sets = read_int_sets(Path(shared_phones)) if shared_phones else None
        model, tree = init_mono(topology, sets, mean, var)
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    log.info("initialized %d pdfs of dimension %d, %d transition ids", tree.num_pdfs, len(mean),
             model.transition_model.num_transition_ids)
    write_model(model_out, model)
    write_tree(tree_out, tree)
