"""Decoding one utterance: log-likelihoods over pdfs [T, num_pdfs] -> lattice and 1-best.

The matrix is mapped to the graph's input labels (transition ids) once per utterance by a column
gather `scaled[:, tid - 1] = acwt * loglikes[:, pdf(tid)]`, so the C++ decoder reads a plain matrix
through DecodableCtc (its column j scores label j + 1) and no Python runs per arc or frame.

Two Kaldi decoders, both Kaldi's C++ code, both returning Kaldi's raw state-level lattice pruned
at --lattice-beam, with graph and acoustic costs kept apart so that scoring can sweep the LM
weight without decoding again:
- "lattice-faster" (default): LatticeFasterDecoder from kaldi-hmm-gmm, pruned by --beam,
  --max-active and --min-active (emasr.decode.lattice_faster explains how its lattice is read);
- "lattice-simple": kaldi_decoder's LatticeSimpleDecoder, pruned by --beam only (no
  --max-active/--min-active): the reference search, slower where the likelihoods are flat.
Acoustic costs in the returned lattice are unscaled (divided by acwt again), as in Kaldi's lat.*.gz.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from emasr.decode.lattice_faster import LatticeFasterDecoder
from emasr.fst_stack import kaldi_decoder, kaldifst

DECODERS = ("lattice-faster", "lattice-simple")
# Frames between the decoders' passes that prune the lattice built so far (Kaldi's
# --prune-interval and default). The passes only drop tokens that the final pruning would drop
# too, so the lattice is the same for any interval; what changes is speed and memory, and which
# interval is fastest depends on the task (docs/decoding.md).
PRUNE_INTERVAL = 25


class DecodeError(ValueError):
    """One utterance could not be decoded; the job reports it by name and goes on."""

    def __init__(self, utt: str, kind: str, detail: str):
        super().__init__(f"utterance {utt}: {detail}")
        self.utt, self.kind = utt, kind


@dataclass
class DecodeConfig:
    beam: float = 13.0
    lattice_beam: float = 8.0
    max_active: int = 7000
    min_active: int = 200
    prune_interval: int = PRUNE_INTERVAL
    acwt: float = 0.1
    decoder: str = "lattice-faster"
    allow_partial: bool = True


@dataclass
class Hypothesis:
    utt: str
    words: list[int]
    alignment: list[int]
    graph_cost: float
    acoustic_cost: float      # unscaled: -sum of log-likelihoods along the best path
    lattice: kaldifst.Lattice  # tids : words, weights (graph cost, unscaled acoustic cost)
    num_frames: int
    reached_final: bool = True
    decoder_seconds: float = 0.0  # wall time of the C++ decoder call alone (run_decoder)


class UtteranceDecoder:
    """Decodes log-likelihood matrices against one HCLG with one TransitionModel."""

    def __init__(self, hclg: kaldifst.StdVectorFst, trans_model, config: DecodeConfig):
        if config.decoder not in DECODERS:
            raise ValueError(f"unknown decoder '{config.decoder}'; expected one of {DECODERS}")
        if config.acwt <= 0:
            raise ValueError(f"--acwt must be positive, got {config.acwt}")
        self.config = config
        self.num_pdfs = trans_model.num_pdfs
        # Entry 0 of Kaldi's table is for the unused transition id 0.
        self.tid_to_pdf = np.asarray(trans_model.transition_id_to_pdf_array()[1:], dtype=np.int64)
        self.hclg = hclg
        if config.decoder == "lattice-simple":
            self._decoder = kaldi_decoder.LatticeSimpleDecoder(
                hclg, kaldi_decoder.LatticeSimpleDecoderConfig(
                    beam=config.beam, lattice_beam=config.lattice_beam,
                    prune_interval=config.prune_interval))
        else:
            self._decoder = LatticeFasterDecoder(hclg, config.beam, config.max_active,
                                                 config.min_active, config.lattice_beam,
                                                 config.prune_interval)

    def check(self, utt: str, loglikes: np.ndarray) -> None:
        """Reject what the decoder cannot use, naming the utterance and the problem."""
        if loglikes.ndim != 2 or loglikes.shape[1] != self.num_pdfs:
            raise DecodeError(utt, "wrong-dim", f"log-likelihood matrix has shape "
                              f"{tuple(loglikes.shape)}; expected [frames, {self.num_pdfs}] "
                              "(the model's number of pdfs)")
        if loglikes.shape[0] == 0:
            raise DecodeError(utt, "empty", "log-likelihood matrix has no frames")
        if not np.isfinite(loglikes).all():
            bad = np.argwhere(~np.isfinite(loglikes))[0]
            raise DecodeError(utt, "not-finite", f"log-likelihood matrix has NaN or inf "
                              f"(first at frame {bad[0]}, pdf {bad[1]})")

    def map_to_transition_ids(self, loglikes: np.ndarray) -> np.ndarray:
        """[T, num_pdfs] -> [T, num_tids] scaled by acwt; column j is transition id j + 1."""
        scaled = np.take(loglikes, self.tid_to_pdf, axis=1)
        scaled *= np.float32(self.config.acwt)
        return np.ascontiguousarray(scaled, dtype=np.float32)

    def run_decoder(self, tid_loglikes: np.ndarray):
        """The bare decoder call on an already-mapped matrix (what bench/decode.py times)."""
        if self.config.decoder == "lattice-simple":
            self._decoder.decode(kaldi_decoder.DecodableCtc(tid_loglikes))
            return self._decoder.get_raw_lattice(use_final_probs=True)
        self._decoder.decode(tid_loglikes)
        return self._decoder.raw_lattice(use_final_probs=True)

    def decode(self, utt: str, loglikes: np.ndarray) -> Hypothesis:
        """Check, map, decode; raises DecodeError for bad input or when no token survives."""
        loglikes = np.asarray(loglikes, dtype=np.float32)
        self.check(utt, loglikes)
        tid_loglikes = self.map_to_transition_ids(loglikes)
        start = time.perf_counter()
        result = self.run_decoder(tid_loglikes)
        decoder_seconds = time.perf_counter() - start
        hyp = self._from_raw_lattice(utt, loglikes, result)
        hyp.decoder_seconds = decoder_seconds
        return hyp

    def _from_raw_lattice(self, utt: str, loglikes: np.ndarray, result) -> Hypothesis:
        ok, lattice = result
        # With no final state reached, Kaldi's GetRawLattice ends the lattice at every surviving
        # token instead (a partial traceback), which we keep only with allow_partial.
        reached_final = math.isfinite(self._decoder.final_relative_cost())
        if not reached_final and not self.config.allow_partial:
            raise DecodeError(utt, "no-final", "no surviving token reached a final state of "
                              "the graph (allow_partial is off)")
        if not ok or lattice.num_states == 0:
            raise DecodeError(utt, "no-survivors", "no token survived to the end of the "
                              "utterance (empty lattice); try a larger --beam")
        best = kaldifst.shortest_path(lattice)  # at the decoding acoustic scale
        unscale = kaldifst.lattice_scale(1.0, 1.0 / self.config.acwt)
        kaldifst.scale_lattice(unscale, lattice)
        kaldifst.scale_lattice(unscale, best)
        _, alignment, words, weight = kaldifst.get_linear_symbol_sequence(best)
        return Hypothesis(utt, list(words), list(alignment), weight.value1, weight.value2, lattice,
                          loglikes.shape[0], reached_final)
