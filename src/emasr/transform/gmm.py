"""What the transform estimators need of a GMM-HMM: each pdf's diagonal GMM as NumPy arrays,
its Gaussian posteriors, and per-frame pdf ids and weights from alignments.

The model is read without kaldi-hmm-gmm: the TransitionModel as emasr.kaldi.transitions parses it
(for the transition id -> pdf and -> phone maps) and the AmDiagGmm as emasr.kaldi.model_io's
arrays. Frame weights are Kaldi's ``ali-to-post | weight-silence-post W $silphonelist``: 1 per
frame, W for frames of a silence phone.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from emasr.kaldi.io import KaldiReader
from emasr.kaldi.model_io import GmmArrays, read_am_gmm_arrays
from emasr.kaldi.transitions import TransitionTable, read_transition_table


@dataclass
class DiagGmm:
    """One pdf: weights [M], means [M, D], inverse variances [M, D] (float64)."""
    weights: np.ndarray
    means: np.ndarray
    inv_vars: np.ndarray

    @classmethod
    def from_arrays(cls, arrays: GmmArrays) -> "DiagGmm":
        inv_vars = arrays.inv_vars.astype(np.float64)
        return cls(arrays.weights.astype(np.float64),
                   arrays.means_invvars.astype(np.float64) / inv_vars, inv_vars)

    @classmethod
    def from_mean_var(cls, weights, means, variances) -> "DiagGmm":
        return cls(np.asarray(weights, np.float64), np.atleast_2d(np.asarray(means, np.float64)),
                   1.0 / np.atleast_2d(np.asarray(variances, np.float64)))

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def log_likelihoods(self, x: np.ndarray) -> np.ndarray:
        """[T, D] -> [T, M]: log w_m + log N(x; mu_m, diag(var_m)), as Kaldi's LogLikelihoods."""
        with np.errstate(divide="ignore"):
            log_weights = np.log(self.weights)
        gconsts = (log_weights - 0.5 * self.dim * math.log(2 * math.pi)
                   + 0.5 * np.log(self.inv_vars).sum(axis=1)
                   - 0.5 * (self.means ** 2 * self.inv_vars).sum(axis=1))
        x = np.asarray(x, dtype=np.float64)
        return (gconsts + x @ (self.means * self.inv_vars).T
                - 0.5 * (x ** 2) @ self.inv_vars.T)

    def posteriors(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gaussian posteriors [T, M] and the frames' log-likelihoods [T]."""
        loglikes = self.log_likelihoods(x)
        frame = np.logaddexp.reduce(loglikes, axis=1)
        return np.exp(loglikes - frame[:, None]), frame


@dataclass
class GmmModel:
    """A Kaldi ``final.mdl`` as the estimators use it."""
    transitions: TransitionTable
    pdfs: list[DiagGmm]

    @property
    def dim(self) -> int:
        return self.pdfs[0].dim

    def frame_pdfs(self, alignment: np.ndarray) -> np.ndarray:
        return self.transitions.id2pdf[alignment].astype(np.int64)

    def frame_weights(self, alignment: np.ndarray, silence_phones: frozenset[int] = frozenset(),
                      silence_weight: float = 1.0) -> np.ndarray:
        """1 per frame, ``silence_weight`` for frames of the silence phones."""
        weights = np.ones(len(alignment))
        if silence_phones and silence_weight != 1.0:
            phones = self.transitions.id2phone[alignment]
            weights[np.isin(phones, sorted(silence_phones))] = silence_weight
        return weights


def read_gmm_model(path: str | os.PathLike) -> GmmModel:
    """Read a Kaldi GMM model file (binary or text); it must have its AmDiagGmm part."""
    reader = KaldiReader.open(path)
    table = read_transition_table(reader)
    if reader.at_end():
        raise ValueError(f"{os.fspath(path)}: the model has no GMMs (a transition model only)")
    gmms = read_am_gmm_arrays(reader)
    if len(gmms) != table.num_pdfs:
        raise ValueError(f"{os.fspath(path)}: the transition model uses {table.num_pdfs} pdfs, "
                         f"the GMM part has {len(gmms)}")
    return GmmModel(table, [DiagGmm.from_arrays(g) for g in gmms])


def parse_phone_list(csl: str) -> frozenset[int]:
    """Kaldi's colon-separated phone list (``phones/silence.csl``: '1:2:3'); '' is none."""
    try:
        return frozenset(int(p) for p in csl.replace(",", ":").split(":") if p.strip())
    except ValueError:
        raise ValueError(f"bad phone list '{csl}': expected integers separated by ':'") from None


def group_by_pdf(pdfs: np.ndarray):
    """(pdf, frame indices) for each pdf present, in pdf order."""
    order = np.argsort(pdfs, kind="stable")
    boundaries = np.flatnonzero(np.diff(pdfs[order])) + 1
    for frames in np.split(order, boundaries):
        if len(frames):
            yield int(pdfs[frames[0]]), frames
