"""From a decision tree to a triphone model: Kaldi's gmm-init-model and convert-ali.

gmm-init-model: a TransitionModel from the tree and topology, and for each pdf one Gaussian from
the tree statistics of the events the tree maps to it (a pdf without data gets the global
Gaussian, with a warning).

convert-ali: rewrites alignments made with an old model (e.g. the monophones) for a new model with
the same topology: every phone instance keeps its HMM-state path, and each transition id becomes
the new model's id for the same (phone, HMM state, transition), with the pdfs the new tree gives
that phone in its context (left and right phone of the alignment, 0 at the edges).
"""
from __future__ import annotations

import logging
from pathlib import Path

import click
import numpy as np

from emasr.ali.alignments import iter_alignment_file
from emasr.gmm.align import AlignmentWriter
from emasr.gmm.estimate import write_occupancies
from emasr.gmm.mono import single_gaussian
from emasr.gmm.model_io import KaldiModel, read_model, read_tree, transition_table, write_model
from emasr.gmm.transitions import TransitionTable
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


class AlignmentConverter:
    """Maps transition ids of an old model to a new model and tree, phone by phone."""

    def __init__(self, old: TransitionTable, new: TransitionTable, tree):
        if old.topology.to_text() != new.topology.to_text():
            raise ValueError("the old and new models have different topologies")
        self.old, self.new, self.tree = old, new, tree
        self.new_state = {(t.phone, t.hmm_state, t.forward_pdf, t.self_loop_pdf): i
                          for i, t in enumerate(new.tuples, 1)}
        self.old_states: dict[int, list[tuple[int, object]]] = {}
        for tstate, tup in enumerate(old.tuples, 1):
            self.old_states.setdefault(tup.phone, []).append((tstate, tup))
        self.cache: dict[tuple[int, int, int], dict[int, int]] = {}

    def phone_map(self, left: int, phone: int, right: int) -> dict[int, int]:
        """old transition id -> new transition id for a phone in this context."""
        key = (left, phone, right)
        if key in self.cache:
            return self.cache[key]
        mapping = {}
        entry = self.old.topology.entry_for(phone)
        for tstate, tup in self.old_states[phone]:
            state = entry[tup.hmm_state]
            pdfs = []
            for pdf_class in (state.forward_pdf_class, state.self_loop_pdf_class):
                ok, pdf = self.tree.compute([left, phone, right], pdf_class)
                if not ok:
                    raise ValueError(f"the new tree has no pdf for phone {phone} in context "
                                     f"({left}, {right}), pdf class {pdf_class}")
                pdfs.append(pdf)
            new_tstate = self.new_state[(phone, tup.hmm_state, pdfs[0], pdfs[1])]
            for offset, old_tid in enumerate(range(self.old.state2id[tstate],
                                                   self.old.state2id[tstate + 1])):
                mapping[old_tid] = int(self.new.state2id[new_tstate]) + offset
        self.cache[key] = mapping
        return mapping

    def convert(self, alignment: np.ndarray) -> np.ndarray:
        starts = np.flatnonzero(self.old.phone_starts(alignment))
        ends = np.append(starts[1:], len(alignment))
        phones = self.old.id2phone[alignment[starts]]
        padded = np.concatenate([[0], phones, [0]])
        out = np.empty_like(alignment)
        for i, (start, end) in enumerate(zip(starts, ends)):
            mapping = self.phone_map(int(padded[i]), int(padded[i + 1]), int(padded[i + 2]))
            out[start:end] = [mapping[int(t)] for t in alignment[start:end]]
        return out


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


@click.command("convert-ali")
@click.argument("old_model", type=click.Path(dir_okay=False, exists=True))
@click.argument("new_model", type=click.Path(dir_okay=False, exists=True))
@click.argument("new_tree", type=click.Path(dir_okay=False, exists=True))
@click.argument("ali_in", type=click.Path(dir_okay=False, exists=True))
@click.argument("ali_out", type=click.Path(dir_okay=False))
def convert_ali_cli(old_model, new_model, new_tree, ali_in, ali_out):
    """Convert the alignments ALI_IN of OLD_MODEL to NEW_MODEL and NEW_TREE (same topology)."""
    try:
        converter = AlignmentConverter(transition_table(read_model(old_model)),
                                       transition_table(read_model(new_model)),
                                       read_tree(new_tree))
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    writer = AlignmentWriter(ali_out)
    done, ok = 0, False
    try:
        for utt, alignment in iter_alignment_file(ali_in):
            writer.write(utt, converter.convert(alignment))
            done += 1
        ok = True
    except (ValueError, KeyError) as err:
        raise click.ClickException(f"{ali_in}: utterance {done + 1}: {err}") from None
    finally:
        writer.close(ok)
    log.info("converted %d alignments", done)
