"""From a decision tree to a triphone model: Kaldi's gmm-init-model.

gmm-init-model: a TransitionModel from the tree and topology, and for each pdf one Gaussian from
the tree statistics of the events the tree maps to it (a pdf without data gets the global
Gaussian, with a warning).
"""
from __future__ import annotations

import logging
from pathlib import Path

import click
import numpy as np

from emasr.gmm.estimate import write_occupancies
from emasr.gmm.mono import single_gaussian
from emasr.kaldi.model_io import KaldiModel, read_tree, write_model
from emasr.gmm.tree_stats import TreeStats, load_summed
from emasr.fst_stack import kaldi_hmm_gmm

log = logging.getLogger(__name__)
VAR_FLOOR = 0.01  # Kaldi's gmm-init-model --var-floor


def event_pdfs(tree, events: np.ndarray) -> np.ndarray:
    """The tree's pdf for each event row (pdf_class, left, centre, right); -1 if none."""
    pdfs = np.empty(len(events), dtype=np.int64)
    for i, (pdf_class, left, centre, right) in enumerate(events.tolist()):
        ok, pdf = tree.compute([left, centre, right], pdf_class)
        pdfs[i] = pdf if ok else -1
    return pdfs


def init_model(tree, topology: kaldi_hmm_gmm.HmmTopology, stats: TreeStats
               ) -> tuple[KaldiModel, np.ndarray]:
    """(model, per-pdf occupancy) initialized from the tree statistics."""
    num_pdfs = tree.num_pdfs
    pdfs = event_pdfs(tree, stats.events)
    unmapped = pdfs < 0
    if unmapped.any():
        raise ValueError(f"the tree maps no pdf to {int(unmapped.sum())} event(s), e.g. "
                         f"{stats.events[np.flatnonzero(unmapped)[0]].tolist()} (pdf class, left, "
                         "centre, right)")
    count = np.bincount(pdfs, weights=stats.count, minlength=num_pdfs)
    x = np.zeros((num_pdfs, stats.dim))
    x2 = np.zeros((num_pdfs, stats.dim))
    np.add.at(x, pdfs, stats.x)
    np.add.at(x2, pdfs, stats.x2)
    total = stats.count.sum()
    global_mean = stats.x.sum(axis=0) / total
    global_var = stats.x2.sum(axis=0) / total - np.square(global_mean)
    am = kaldi_hmm_gmm.AmDiagGmm()
    empty = 0
    for pdf in range(num_pdfs):
        if count[pdf] > 0:
            mean = x[pdf] / count[pdf]
            var = np.maximum(x2[pdf] / count[pdf] - np.square(mean), VAR_FLOOR)
        else:
            empty += 1
            mean, var = global_mean, global_var
        am.add_pdf(single_gaussian(mean, var))
    if empty:
        log.warning("%d pdf(s) have no data; they start from the global mean and variance", empty)
    return KaldiModel(kaldi_hmm_gmm.TransitionModel(tree, topology), am), count


@click.command("gmm-init-model")
@click.option("--write-occs", type=click.Path(dir_okay=False), default=None)
@click.argument("tree", type=click.Path(dir_okay=False, exists=True))
@click.argument("topo", type=click.Path(dir_okay=False, exists=True))
@click.argument("model_out", type=click.Path(dir_okay=False))
@click.argument("stats", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
def init_model_cli(write_occs, tree, topo, model_out, stats):
    """Initialize MODEL_OUT (one Gaussian per pdf) from TREE, TOPO and the tree STATS."""
    topology = kaldi_hmm_gmm.HmmTopology()
    topology.read(Path(topo).read_text())
    try:
        model, occs = init_model(read_tree(tree), topology, load_summed(list(stats)))
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    write_model(model_out, model)
    if write_occs:
        write_occupancies(write_occs, occs)
    log.info("initialized %d pdfs, %d transition ids", model.am_gmm.num_pdfs,
             model.transition_model.num_transition_ids)
