"""Single-Gaussian statistics per phonetic context, the input of tree building (Kaldi's
acc-tree-stats and sum-tree-stats).

An *event* is what the decision tree asks about, as in Kaldi with context width N=3 and central
position P=1: key -1 the pdf class (the HMM state's class), keys 0, 1, 2 the left, centre and right
phone (0 at an utterance edge). For a context-independent centre phone (silence) the left and right
phones are recorded as 0, as Kaldi's acc-tree-stats --ci-phones does, so its stats are not split by
context. Each distinct event keeps a count and the sums of x and x^2 over its frames.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import click
import numpy as np

from emasr.feats.pipeline import SUBSAMPLE_AT
from emasr.gmm.feature_options import feature_pipeline_options
from emasr.gmm.features import FeatureOptions, SkipCounter, feature_dim, iter_aligned_features
from emasr.kaldi.transitions import TransitionTable, load_transition_table
from emasr.io.atomic import atomic_write

log = logging.getLogger(__name__)

PDF_CLASS_KEY = -1
CONTEXT_WIDTH = 3
CENTRAL_POSITION = 1
EVENT_KEYS = (PDF_CLASS_KEY, 0, 1, 2)  # column order of TreeStats.events
VAR_FLOOR = 0.01  # Kaldi's acc-tree-stats --var-floor


@dataclass
class TreeStats:
    """Per-event sufficient statistics. events[i] = (pdf_class, left, centre, right)."""
    events: np.ndarray  # [n, 4] int32
    count: np.ndarray   # [n] float64
    x: np.ndarray       # [n, dim]
    x2: np.ndarray      # [n, dim]

    @classmethod
    def merge(cls, parts: list["TreeStats"]) -> "TreeStats":
        """Sum the stats of equal events (across utterances or jobs)."""
        parts = [p for p in parts if len(p.count)]
        if not parts:
            raise ValueError("no tree statistics")
        events = np.concatenate([p.events for p in parts])
        unique, inverse = np.unique(events, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        count = np.bincount(inverse, weights=np.concatenate([p.count for p in parts]),
                            minlength=len(unique))
        dim = parts[0].x.shape[1]
        x = np.zeros((len(unique), dim))
        x2 = np.zeros((len(unique), dim))
        np.add.at(x, inverse, np.concatenate([p.x for p in parts]))
        np.add.at(x2, inverse, np.concatenate([p.x2 for p in parts]))
        return cls(unique.astype(np.int32), count, x, x2)

    def save(self, path: str) -> None:
        with atomic_write(path, "wb") as f:
            np.savez(f, events=self.events, count=self.count, x=self.x, x2=self.x2)

    @classmethod
    def load(cls, path: str) -> "TreeStats":
        try:
            with np.load(path) as z:
                return cls(z["events"], z["count"], z["x"], z["x2"])
        except (OSError, KeyError, ValueError) as err:
            raise ValueError(f"{path}: not a tree statistics file written by acc-tree-stats "
                             f"({err})") from None

    @property
    def dim(self) -> int:
        return self.x.shape[1]


def pdf_class_of_transitions(table: TransitionTable) -> np.ndarray:
    """int array indexed by transition id: the pdf class the transition emits (Kaldi's
    TransitionIdToPdfClass: the self-loop pdf class for self-loops, else the forward one)."""
    classes = np.full(table.num_transition_ids + 1, -1, dtype=np.int32)
    for tid in range(1, table.num_transition_ids + 1):
        tup = table.tuples[table.id2state[tid] - 1]
        state = table.topology.entry_for(tup.phone)[tup.hmm_state]
        classes[tid] = state.self_loop_pdf_class if table.self_loop[tid] else \
            state.forward_pdf_class
    return classes


def utterance_events(table: TransitionTable, pdf_classes: np.ndarray, alignment: np.ndarray,
                     ci_phones: set[int]) -> np.ndarray:
    """[T, 4] events (pdf_class, left, centre, right) of an utterance's frames."""
    starts = table.phone_starts(alignment)
    instance = np.cumsum(starts) - 1
    phones = table.id2phone[alignment][starts]
    padded = np.concatenate([[0], phones, [0]])
    left, centre, right = padded[instance], padded[instance + 1], padded[instance + 2]
    if ci_phones:
        ci = np.isin(centre, sorted(ci_phones))
        left, right = np.where(ci, 0, left), np.where(ci, 0, right)
    return np.stack([pdf_classes[alignment], left, centre, right], axis=1).astype(np.int32)


def utterance_stats(events: np.ndarray, feats: np.ndarray) -> TreeStats:
    x = feats.astype(np.float64)
    return TreeStats.merge([TreeStats(events, np.ones(len(x)), x, np.square(x))])


def accumulate_tree_stats(model_path: str, data_dir: str, ali_path: str,
                          options: FeatureOptions, ci_phones: set[int],
                          max_skipped: float) -> TreeStats:
    """Tree statistics of ALI over ``options``' features (``options.subsample`` included: the
    alignments are then at 1/F of the features' rate, convert-ali's output). As Kaldi's
    acc-tree-stats, MODEL serves only its transition model (a TransitionModel-only file will do):
    the features of an LDA system (train_lda_mllt.sh) or of a network tree (nnet/build_tree.sh)
    are in another space than the GMMs of the alignments' model, if it has any."""
    table = load_transition_table(model_path)
    pdf_classes = pdf_class_of_transitions(table)
    counter = SkipCounter(f"acc-tree-stats {data_dir}", max_skipped)
    parts: list[TreeStats] = []
    dim = feature_dim(data_dir, options)[0]
    for _, feats, ali in iter_aligned_features(data_dir, options, ali_path, dim,
                                               table.num_transition_ids, counter):
        parts.append(utterance_stats(utterance_events(table, pdf_classes, ali, ci_phones), feats))
        if len(parts) >= 200:  # keep memory bounded: fold the parts together now and then
            parts = [TreeStats.merge(parts)]
        counter.ok()
    counter.check()
    stats = TreeStats.merge(parts)
    log.info("accumulated stats for %d events over %.0f frames (1 in %d of the features' "
             "frames)", len(stats.count), stats.count.sum(), options.subsample[0])
    return stats


def subsample_offset(factor: int, subsample_at: str) -> int:
    """The frame of each window of ``factor`` that stands for it (convert-ali's rule)."""
    if factor < 1:
        raise ValueError(f"--frame-subsampling-factor must be >= 1, got {factor}")
    if subsample_at not in SUBSAMPLE_AT:
        raise ValueError(f"--subsample-at must be one of {SUBSAMPLE_AT}, got '{subsample_at}'")
    return factor // 2 if subsample_at == "centre" else 0


def read_csl(path: str | None) -> set[int]:
    if not path:
        return set()
    with open(path, encoding="utf-8") as f:
        return {int(x) for x in f.read().strip().split(":") if x}


@click.command("acc-tree-stats")
@click.option("--ci-phones", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Context-independent phones, colon-separated (phones/context_indep.csl).")
@feature_pipeline_options()
@click.option("--frame-subsampling-factor", "factor", type=int, default=1, show_default=True,
              help="Keep one frame in F, after every other stage (Kaldi chain's "
              "subsample-feats): the alignments are at 1/F of the features' rate.")
@click.option("--subsample-at", type=click.Choice(SUBSAMPLE_AT), default="centre",
              show_default=True, help="Which frame of each window of F is kept: the centre "
              "(this toolkit's stacking) or the start (Kaldi's subsample-feats); as convert-ali.")
@click.option("--max-skipped", type=float, default=0.1, show_default=True)
@click.argument("model", type=click.Path(dir_okay=False, exists=True))
@click.argument("data", type=click.Path(file_okay=False, exists=True))
@click.argument("ali", type=click.Path(dir_okay=False, exists=True))
@click.argument("stats_out", type=click.Path(dir_okay=False))
def acc_tree_stats_cli(ci_phones, features, factor, subsample_at, max_skipped, model, data,
                       ali, stats_out):
    """Accumulate single-Gaussian stats per (pdf class, left, centre, right phone) from the
    alignments ALI of data dir DATA made with MODEL, into STATS_OUT (JOB.treeacc). The features
    need not have MODEL's dimension (LDA features, a network tree's); MODEL's transition model
    is all that is read of it."""
    try:
        features = dataclasses.replace(
            features, subsample=(factor, subsample_offset(factor, subsample_at)))
        stats = accumulate_tree_stats(model, data, ali, features, read_csl(ci_phones),
                                      max_skipped)
    except (ValueError, RuntimeError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    stats.save(stats_out)


def load_summed(paths: list[str]) -> TreeStats:
    return TreeStats.merge([TreeStats.load(p) for p in paths])


@click.command("sum-tree-stats")
@click.argument("stats_out", type=click.Path(dir_okay=False))
@click.argument("stats_in", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
def sum_tree_stats_cli(stats_out, stats_in):
    """Sum the tree statistics of several jobs (STATS_IN) into STATS_OUT (treeacc)."""
    try:
        stats = load_summed(list(stats_in))
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    stats.save(stats_out)
    log.info("summed %d file(s): %d events, %.0f frames", len(stats_in), len(stats.count),
             stats.count.sum())
