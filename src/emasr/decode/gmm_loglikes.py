"""Per-frame GMM log-likelihoods over pdfs, [T, num_pdfs], from a Kaldi AmDiagGmm.

Kaldi's DecodableAmDiagGmm computes, per pdf, log sum_g exp(gconst_g + mu_g'S_g x - x'S_g x / 2)
with S_g the diagonal inverse variance (gconst holds the log weight and normaliser). Here all
Gaussians of all pdfs are evaluated at once as two matrix products, then summed per pdf with a
log-sum-exp over each pdf's block of Gaussians, so the whole utterance costs a few BLAS calls
instead of one call per (frame, pdf).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emasr.kaldi.model_io import am_gmm_arrays


@dataclass
class StackedGmms:
    gconsts: np.ndarray        # [G]
    means_invvars: np.ndarray  # [G, D]
    inv_vars: np.ndarray       # [G, D]
    starts: np.ndarray         # [num_pdfs], index of each pdf's first Gaussian
    dim: int

    @property
    def num_pdfs(self) -> int:
        return len(self.starts)


def stack_gmms(am_gmm) -> StackedGmms:
    """All Gaussians of an AmDiagGmm in pdf order, as float64 arrays."""
    gmms = am_gmm_arrays(am_gmm)
    sizes = [len(g.weights) for g in gmms]
    return StackedGmms(
        gconsts=np.concatenate([g.gconsts for g in gmms]).astype(np.float64),
        means_invvars=np.concatenate([g.means_invvars for g in gmms]).astype(np.float64),
        inv_vars=np.concatenate([g.inv_vars for g in gmms]).astype(np.float64),
        starts=np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
        dim=gmms[0].means_invvars.shape[1] if gmms else 0)


def gmm_loglikes(gmms: StackedGmms, feats: np.ndarray) -> np.ndarray:
    """[T, D] features -> [T, num_pdfs] float32 log-likelihoods."""
    if feats.ndim != 2 or feats.shape[1] != gmms.dim:
        raise ValueError(f"features have shape {tuple(feats.shape)}; the GMMs expect dimension "
                         f"{gmms.dim} (check the delta order, final.mat and feature type)")
    x = feats.astype(np.float64)
    per_gauss = gmms.gconsts + x @ gmms.means_invvars.T - 0.5 * (x * x) @ gmms.inv_vars.T
    peak = np.maximum.reduceat(per_gauss, gmms.starts, axis=1)
    peak_per_gauss = np.repeat(peak, np.diff(np.append(gmms.starts, per_gauss.shape[1])), axis=1)
    total = np.add.reduceat(np.exp(per_gauss - peak_per_gauss), gmms.starts, axis=1)
    return (peak + np.log(total)).astype(np.float32)
