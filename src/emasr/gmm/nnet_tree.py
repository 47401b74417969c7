"""The pieces of a network tree (steps/nnet/build_tree.sh, Kaldi chain's build_tree.sh) that the
GMM steps lack: tree statistics on frame-subsampled features, and transition probabilities
estimated from alignments alone.

- ``emasr nnet-acc-tree-stats`` is Kaldi's ``acc-tree-stats`` on ``... | subsample-feats --n=F``:
  the GMM features of a data dir, as the alignments' GMM read them (CMVN, deltas or splicing and
  final.mat, per-speaker transforms), then one frame per window of F, the frame convert-ali
  --frame-subsampling-factor F keeps the label of (``--subsample-at centre``: frame F // 2 of each
  window, this toolkit's stacking; ``start``: frame 0, Kaldi's subsample-feats). The alignments
  are at the subsampled rate (convert-ali's output), so features and alignment have ceil(T/F)
  frames each.
- ``emasr train-transitions`` is Kaldi's ``nnet3-am-train-transitions``: the transition model's
  maximum-likelihood update from the counts of the transition ids in alignments, written back with
  the rest of the model (the GMMs) unchanged. A network tree's model gets the transition
  probabilities of its own alignments at the network's frame rate, not its topology's initial
  ones, for the HCLG.
"""
from __future__ import annotations

import dataclasses
import logging

import click
import numpy as np

from emasr.ali.convert import SUBSAMPLE_AT
from emasr.gmm.feature_options import options_from, transform_options
from emasr.gmm.inputs import FeatureOptions, SkipCounter, alignment_problem, iter_features
from emasr.gmm.tree_stats import (TreeStats, pdf_class_of_transitions, read_csl,
                                  utterance_events, utterance_stats)

log = logging.getLogger(__name__)


def subsample_offset(factor: int, subsample_at: str) -> int:
    """The frame of each window of ``factor`` that stands for it (convert-ali's rule)."""
    if factor < 1:
        raise ValueError(f"--frame-subsampling-factor must be >= 1, got {factor}")
    if subsample_at not in SUBSAMPLE_AT:
        raise ValueError(f"--subsample-at must be one of {SUBSAMPLE_AT}, got '{subsample_at}'")
    return factor // 2 if subsample_at == "centre" else 0


def accumulate_subsampled_tree_stats(model_path: str, data_dir: str, ali_path: str,
                                     options: FeatureOptions, ci_phones: set[int],
                                     max_skipped: float) -> TreeStats:
    """acc-tree-stats over ``options``' features (``options.subsample`` included). MODEL serves
    only its transition model (a TransitionModel-only file will do): its GMMs, if any, may be of
    another feature space (build_tree.sh's mono.mdl), so all the features need is one dimension."""
    from emasr.ali.alignments import iter_alignment_file
    from emasr.gmm.transitions import load_transition_table

    table = load_transition_table(model_path)
    pdf_classes = pdf_class_of_transitions(table)
    alignments = dict(iter_alignment_file(ali_path))
    counter = SkipCounter(f"nnet-acc-tree-stats {data_dir}", max_skipped)
    parts: list[TreeStats] = []
    dim = None
    for utt, feats, problem in iter_features(data_dir, options):
        if problem is None and dim is not None and feats.shape[1] != dim:
            problem = f"features have dimension {feats.shape[1]}, the others {dim}"
        problem = problem or alignment_problem(alignments.get(utt), len(feats),
                                                table.num_transition_ids)
        if problem:
            counter.skip(utt, problem)
            continue
        dim = feats.shape[1]
        events = utterance_events(table, pdf_classes, alignments[utt], ci_phones)
        parts.append(utterance_stats(events, feats))
        if len(parts) >= 200:  # keep memory bounded: fold the parts together now and then
            parts = [TreeStats.merge(parts)]
        counter.ok()
    counter.check()
    stats = TreeStats.merge(parts)
    log.info("accumulated stats for %d events over %.0f frames (1 in %d of the features' "
             "frames)", len(stats.count), stats.count.sum(), options.subsample[0])
    return stats


@click.command("nnet-acc-tree-stats")
@click.option("--frame-subsampling-factor", "factor", type=int, default=1, show_default=True,
              help="Keep one frame in F (the alignments are at 1/F of the features' rate).")
@click.option("--subsample-at", type=click.Choice(SUBSAMPLE_AT), default="centre",
              show_default=True, help="Which frame of each window of F is kept: the centre "
              "(this toolkit's stacking) or the start (Kaldi's subsample-feats); as convert-ali.")
@click.option("--ci-phones", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Context-independent phones, colon-separated (phones/context_indep.csl).")
@click.option("--cmvn-opts", default="", help="Kaldi's cmvn_opts.")
@click.option("--delta-order", type=int, default=2, show_default=True)
@transform_options
@click.option("--max-skipped", type=float, default=0.1, show_default=True)
@click.argument("model", type=click.Path(dir_okay=False, exists=True))
@click.argument("data", type=click.Path(file_okay=False, exists=True))
@click.argument("ali", type=click.Path(dir_okay=False, exists=True))
@click.argument("stats_out", type=click.Path(dir_okay=False))
def nnet_acc_tree_stats_cli(factor, subsample_at, ci_phones, cmvn_opts, delta_order, splice_opts,
                            transform, speaker_transforms, utt2spk, max_skipped, model, data,
                            ali, stats_out):
    """Accumulate tree statistics (as acc-tree-stats) from the alignments ALI of MODEL, at 1/F
    of the rate of the features of the data dir DATA, into STATS_OUT (JOB.treeacc)."""
    try:
        options = options_from(cmvn_opts, delta_order, splice_opts, transform,
                               speaker_transforms, utt2spk)
        options = dataclasses.replace(
            options, subsample=(factor, subsample_offset(factor, subsample_at)))
        stats = accumulate_subsampled_tree_stats(model, data, ali, options,
                                                 read_csl(ci_phones), max_skipped)
    except (ValueError, RuntimeError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    stats.save(stats_out)


def transition_counts(num_transition_ids: int, alignment_files: list[str]) -> np.ndarray:
    """[num_transition_ids + 1] counts of each transition id (entry 0 unused)."""
    from emasr.ali.alignments import iter_alignment_file

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
    from emasr.gmm.kaldi_io import KaldiFormatError
    from emasr.gmm.model_io import read_model, write_model

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
