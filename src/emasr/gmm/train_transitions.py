"""``emasr train-transitions``, Kaldi's ``nnet3-am-train-transitions``: the transition model's
maximum-likelihood update from the counts of the transition ids in alignments, written back with
the rest of the model (the GMMs, if any) unchanged. A network tree (steps/nnet/build_tree.sh) gets
the transition probabilities of its own alignments at the network's frame rate, not its
topology's initial ones, for the HCLG.
"""
from __future__ import annotations

import logging

import click
import numpy as np

log = logging.getLogger(__name__)


def transition_counts(num_transition_ids: int, alignment_files: list[str]) -> np.ndarray:
    """[num_transition_ids + 1] counts of each transition id (entry 0 unused)."""
    from emasr.kaldi.alignments import iter_alignment_file

    counts = np.zeros(num_transition_ids + 1)
    utts = 0
    for path in alignment_files:
        for utt, ali in iter_alignment_file(path):
            if len(ali) and (ali.min() < 1 or ali.max() > num_transition_ids):
                raise ValueError(f"{path}: utterance {utt}: transition ids outside the model's "
                                 f"1..{num_transition_ids}: the alignments are of another model")
            counts += np.bincount(ali, minlength=num_transition_ids + 1)
            utts += 1
    if utts == 0:
        raise ValueError(f"no alignments in {', '.join(alignment_files)}")
    return counts


@click.command("train-transitions")
@click.argument("model_in", type=click.Path(dir_okay=False, exists=True))
@click.argument("ali", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@click.argument("model_out", type=click.Path(dir_okay=False))
def train_transitions_cli(model_in, ali, model_out):
    """Re-estimate the transition probabilities of MODEL_IN from the alignments ALI... (Kaldi's
    nnet3-am-train-transitions), into MODEL_OUT; the GMMs, if any, are kept."""
    from emasr.fst_stack import kaldi_hmm_gmm
    from emasr.kaldi.io import KaldiFormatError
    from emasr.kaldi.model_io import read_model, write_model

    try:
        model = read_model(model_in)
        counts = transition_counts(model.transition_model.num_transition_ids, list(ali))
        objf, count = model.transition_model.mle_update(
            counts, kaldi_hmm_gmm.MleTransitionUpdateConfig())
    except (ValueError, KaldiFormatError) as err:
        raise click.ClickException(str(err)) from None
    log.info("transition update: %.5f log-like improvement per frame over %.0f frames",
             objf / max(count, 1.0), count)
    write_model(model_out, model)
