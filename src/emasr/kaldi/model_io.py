"""Kaldi model files: ``final.mdl`` (TransitionModel then AmDiagGmm) and ``tree``, binary or text.

kaldi-hmm-gmm has Kaldi's classes but no Kaldi-format read/write for TransitionModel and AmDiagGmm,
so the formats are implemented here (emasr.kaldi.io, emasr.kaldi.transitions) and the live
objects are built from the parsed content:

- the TransitionModel from its tuples, topology and numbering (computed as Kaldi's
  ComputeDerived does), with the derived non-self-loop probabilities recomputed by Kaldi's own
  code so they are bit-identical to what Kaldi would hold;
- each DiagGmm from weights, inverse variances and means; its gconsts are recomputed, as Kaldi's
  DiagGmm::Read does ("safer than trusting the read gconsts");
- the tree (ContextDependency) from Kaldi's binary serialization, which kaldi-hmm-gmm accepts; a
  text tree is first re-encoded to binary token by token.

Interface (agreed with the other helpers): KaldiModel, read_model, write_model, read_tree,
transition_to_pdf.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

import kaldi_hmm_gmm  # first of the FST stack, as emasr.fst_stack requires; it loads nothing else

from emasr.kaldi.io import KaldiFormatError, KaldiReader, KaldiWriter
from emasr.kaldi.transitions import (HmmState, Topology, TransitionTable, TransitionTuple,
                                   read_transition_table, write_transition_table)
from emasr.io.atomic import atomic_write

__all__ = ["KaldiModel", "KaldiFormatError", "read_model", "write_model", "read_tree",
           "write_tree", "tree_from_text", "transition_to_pdf", "transition_table",
           "read_am_gmm_arrays"]


@dataclass
class KaldiModel:
    """A Kaldi GMM model file's content as live kaldi_hmm_gmm objects."""
    transition_model: kaldi_hmm_gmm.TransitionModel
    am_gmm: kaldi_hmm_gmm.AmDiagGmm | None


@dataclass
class GmmArrays:
    """One DiagGmm's parameters as Kaldi stores them (means multiplied by inverse variances)."""
    gconsts: np.ndarray        # [num_gauss], may be empty when the file omits them
    weights: np.ndarray        # [num_gauss]
    means_invvars: np.ndarray  # [num_gauss, dim]
    inv_vars: np.ndarray       # [num_gauss, dim]


# -- reading --

def read_model(path: str | os.PathLike) -> KaldiModel:
    """Read a Kaldi ``final.mdl`` (binary or text). The AmDiagGmm part is optional (None)."""
    reader = KaldiReader.open(path)
    table = read_transition_table(reader)
    am_gmm = None
    if not reader.at_end():
        gmms = read_am_gmm_arrays(reader)
        _check_pdf_count(reader, table, gmms)
        am_gmm = build_am_gmm(gmms)
    return KaldiModel(build_transition_model(table), am_gmm)


def read_am_gmm_arrays(reader: KaldiReader) -> list[GmmArrays]:
    """The AmDiagGmm object: ``<DIMENSION> d <NUMPDFS> n`` then n DiagGmm objects."""
    reader.expect_token("<DIMENSION>")
    dim = reader.read_int("the feature dimension")
    reader.expect_token("<NUMPDFS>")
    num_pdfs = reader.read_int("the number of pdfs")
    if num_pdfs <= 0 or dim <= 0:
        raise reader.error(f"bad AmDiagGmm header: dimension {dim}, {num_pdfs} pdfs")
    gmms = []
    for pdf in range(num_pdfs):
        gmm = _read_diag_gmm(reader, pdf)
        if gmm.means_invvars.shape[1] != dim:
            raise reader.error(f"pdf {pdf} has dimension {gmm.means_invvars.shape[1]}, the "
                               f"model says {dim}")
        gmms.append(gmm)
    return gmms


def _read_diag_gmm(reader: KaldiReader, pdf: int) -> GmmArrays:
    reader.expect_token("<DiagGMM>", "<DiagGMMBegin>")
    gconsts = np.zeros(0, dtype=np.float32)
    if reader.expect_token("<GCONSTS>", "<WEIGHTS>") == "<GCONSTS>":
        gconsts = reader.read_float_vector(f"the gconsts of pdf {pdf}")
        reader.expect_token("<WEIGHTS>")
    weights = reader.read_float_vector(f"the weights of pdf {pdf}")
    reader.expect_token("<MEANS_INVVARS>")
    means_invvars = reader.read_float_matrix(f"the means of pdf {pdf}")
    reader.expect_token("<INV_VARS>")
    inv_vars = reader.read_float_matrix(f"the inverse variances of pdf {pdf}")
    reader.expect_token("</DiagGMM>", "<DiagGMMEnd>")
    num_gauss = len(weights)
    shapes_agree = means_invvars.shape[0] == num_gauss and inv_vars.shape == means_invvars.shape
    if num_gauss == 0 or not shapes_agree:
        raise reader.error(f"pdf {pdf}: {num_gauss} weights, means {means_invvars.shape}, "
                           f"inverse variances {inv_vars.shape} do not agree")
    if not np.all(inv_vars > 0):
        raise reader.error(f"pdf {pdf}: inverse variances must be positive")
    return GmmArrays(gconsts.astype(np.float32), weights.astype(np.float32),
                     means_invvars.astype(np.float32), inv_vars.astype(np.float32))


def _check_pdf_count(reader: KaldiReader, table: TransitionTable, gmms: list[GmmArrays]) -> None:
    if len(gmms) != table.num_pdfs:
        raise KaldiFormatError(f"{reader.name}: the transition model uses {table.num_pdfs} pdfs "
                               f"but the AmDiagGmm has {len(gmms)}")


# -- building live objects --

def build_topology(topology: Topology) -> kaldi_hmm_gmm.HmmTopology:
    """A kaldi_hmm_gmm HmmTopology, through Kaldi's own text parser (and its Check)."""
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(topology.to_text())
    return topo


def build_transition_model(table: TransitionTable) -> kaldi_hmm_gmm.TransitionModel:
    """A kaldi_hmm_gmm TransitionModel holding exactly the table's tuples and log-probs."""
    import _kaldi_hmm_gmm  # the Tuple class is not re-exported by the package

    tuples = [_kaldi_hmm_gmm.TransitionModelTuple(t.phone, t.hmm_state, t.forward_pdf,
                                                 t.self_loop_pdf) for t in table.tuples]
    placeholder = [0.0] * (table.num_transition_states + 1)
    id2pdf = table.id2pdf.tolist()
    id2pdf[0] = 0  # Kaldi leaves the unused entry 0 zero-initialized
    model = kaldi_hmm_gmm.TransitionModel.__new__(kaldi_hmm_gmm.TransitionModel)
    model.__setstate__((tuples, build_topology(table.topology), table.state2id.tolist(),
                        table.id2state.tolist(), id2pdf, table.num_pdfs,
                        [float(x) for x in table.log_probs], placeholder))
    # An MLE update whose every state is below the minimum count changes no probability but
    # recomputes the non-self-loop log-probs with Kaldi's own ComputeDerivedOfProbs.
    config = kaldi_hmm_gmm.MleTransitionUpdateConfig()
    config.mincount = float("inf")
    model.mle_update(model.init_stats(), config)
    return model


def build_am_gmm(gmms: list[GmmArrays]) -> kaldi_hmm_gmm.AmDiagGmm:
    am_gmm = kaldi_hmm_gmm.AmDiagGmm()
    for arrays in gmms:
        num_gauss, dim = arrays.means_invvars.shape
        gmm = kaldi_hmm_gmm.DiagGmm(num_gauss, dim)
        gmm.set_weights(arrays.weights)
        # Kaldi stores means times inverse variances; its setter multiplies them back.
        gmm.set_invvars_and_means(arrays.inv_vars, arrays.means_invvars / arrays.inv_vars)
        gmm.compute_gconsts()
        am_gmm.add_pdf(gmm)
    return am_gmm


# -- reading back from live objects --

def transition_table(model: KaldiModel | kaldi_hmm_gmm.TransitionModel) -> TransitionTable:
    """The pure-Python transition table of a live TransitionModel (or KaldiModel)."""
    tm = model.transition_model if isinstance(model, KaldiModel) else model
    tuples = [TransitionTuple(*t.__getstate__()) for t in tm.tuples]
    topo_phones, phone2idx, entries = tm.topo.__getstate__()
    topology = Topology(list(topo_phones), list(phone2idx),
                        [[_hmm_state(s) for s in entry] for entry in entries])
    return TransitionTable(topology, tuples, np.asarray(tm.log_probs, dtype=np.float32))


def _hmm_state(state) -> HmmState:
    forward, self_loop, arcs = state.__getstate__()
    return HmmState(forward, self_loop, tuple((int(d), float(p)) for d, p in arcs))


def transition_to_pdf(model: KaldiModel | kaldi_hmm_gmm.TransitionModel | TransitionTable
                      ) -> np.ndarray:
    """int32 array indexed by transition id giving its pdf id (entry 0 unused, set to -1)."""
    if isinstance(model, TransitionTable):
        return model.id2pdf.copy()
    tm = model.transition_model if isinstance(model, KaldiModel) else model
    table = np.asarray(tm.id2pdf_id, dtype=np.int32).copy()
    table[0] = -1
    return table


def am_gmm_arrays(am_gmm: kaldi_hmm_gmm.AmDiagGmm) -> list[GmmArrays]:
    out = []
    for pdf in range(am_gmm.num_pdfs):
        gmm = am_gmm.get_pdf(pdf)
        if not gmm.valid_gconsts:
            gmm.compute_gconsts()
        out.append(GmmArrays(np.asarray(gmm.gconsts, dtype=np.float32).ravel(),
                             np.asarray(gmm.weights, dtype=np.float32).ravel(),
                             np.asarray(gmm.means_invvars, dtype=np.float32),
                             np.asarray(gmm.inv_vars, dtype=np.float32)))
    return out


# -- writing --

def model_bytes(model: KaldiModel, binary: bool = True) -> bytes:
    writer = KaldiWriter(binary)
    write_transition_table(writer, transition_table(model))
    if model.am_gmm is not None:
        write_am_gmm_arrays(writer, am_gmm_arrays(model.am_gmm))
    return writer.getvalue()


def write_am_gmm_arrays(writer: KaldiWriter, gmms: list[GmmArrays]) -> None:
    writer.write_token("<DIMENSION>")
    writer.write_int(gmms[0].means_invvars.shape[1] if gmms else 0)
    writer.write_token("<NUMPDFS>")
    writer.write_int(len(gmms))
    for gmm in gmms:
        writer.write_token("<DiagGMM>")
        writer.newline()
        writer.write_token("<GCONSTS>")
        writer.write_float_vector(gmm.gconsts)
        writer.write_token("<WEIGHTS>")
        writer.write_float_vector(gmm.weights)
        writer.write_token("<MEANS_INVVARS>")
        writer.write_float_matrix(gmm.means_invvars)
        writer.write_token("<INV_VARS>")
        writer.write_float_matrix(gmm.inv_vars)
        writer.write_token("</DiagGMM>")
        writer.newline()


def write_model(path: str | os.PathLike, model: KaldiModel, binary: bool = True) -> None:
    """Write ``final.mdl`` in Kaldi's format, atomically (temporary name, then rename)."""
    data = model_bytes(model, binary)
    with atomic_write(path, "wb") as f:
        f.write(data)


# -- trees --

def read_tree(path: str | os.PathLike) -> kaldi_hmm_gmm.ContextDependency:
    """Read a Kaldi tree file (ContextDependency), binary or text."""
    return tree_from_reader(KaldiReader.open(path))


def tree_from_text(text: str, name: str = "<tree text>") -> kaldi_hmm_gmm.ContextDependency:
    """A ContextDependency from a Kaldi text tree (as emasr.gmm.build_tree writes it)."""
    return tree_from_reader(KaldiReader(text.encode("utf-8"), name))


def tree_from_reader(reader: KaldiReader) -> kaldi_hmm_gmm.ContextDependency:
    if reader.binary:
        payload = reader.data[reader.pos:]
        _check_tree_structure(KaldiReader(reader.data, reader.name))
    else:
        writer = KaldiWriter(binary=True)
        _copy_tree(reader, writer)
        payload = writer.getvalue()[2:]
    tree = kaldi_hmm_gmm.ContextDependency.__new__(kaldi_hmm_gmm.ContextDependency)
    # kaldi-hmm-gmm pickles a tree as its Kaldi binary serialization (no header), as signed bytes.
    tree.__setstate__((np.frombuffer(payload, dtype=np.int8).tolist(),))
    return tree


def write_tree(path: str | os.PathLike, tree: kaldi_hmm_gmm.ContextDependency,
               binary: bool = True) -> None:
    """Write a Kaldi tree file atomically (binary, or text through Kaldi's own text writer)."""
    if binary:
        data = b"\0B" + np.asarray(tree.__getstate__()[0], dtype=np.int8).tobytes()
    else:
        data = str(tree).encode("utf-8")
    with atomic_write(path, "wb") as f:
        f.write(data)


def _check_tree_structure(reader: KaldiReader) -> None:
    """Walk a binary tree once so that a damaged file fails here with a position, not in C++."""
    _copy_tree(reader, KaldiWriter(binary=True))


def _copy_tree(reader: KaldiReader, writer: KaldiWriter) -> None:
    """Re-encode a ContextDependency object token by token (text -> binary or a check pass)."""
    writer.write_token(reader.expect_token("ContextDependency"))
    writer.write_int(reader.read_int("the context width"))
    writer.write_int(reader.read_int("the central position"))
    writer.write_token(reader.expect_token("ToPdf"))
    _copy_event_map(reader, writer)
    writer.write_token(reader.expect_token("EndContextDependency"))
    if not reader.at_end():
        raise reader.error("unexpected data after EndContextDependency")


def _copy_event_map(reader: KaldiReader, writer: KaldiWriter) -> None:
    kind = reader.expect_token("NULL", "CE", "TE", "SE")
    writer.write_token(kind)
    if kind == "CE":
        writer.write_int(reader.read_int("a leaf (pdf id)"))
    elif kind == "TE":
        writer.write_int(reader.read_int("a table key"))
        size = reader.read_int("a table size")
        writer.write_int(size, unsigned=True)
        writer.write_token(reader.expect_token("("))
        for _ in range(size):
            _copy_event_map(reader, writer)
        writer.write_token(reader.expect_token(")"))
    elif kind == "SE":
        writer.write_int(reader.read_int("a split key"))
        writer.write_int_vector(reader.read_int_vector("a question's phone set"))
        writer.write_token(reader.expect_token("{"))
        _copy_event_map(reader, writer)
        _copy_event_map(reader, writer)
        writer.write_token(reader.expect_token("}"))
