"""Feature-space MLLR (constrained MLLR) against a diagonal GMM, as Kaldi's FmllrDiagGmmAccs and
ComputeFmllrMatrixDiagGmmFull (transform/fmllr-diag-gmm.cc), for ``gmm-est-fmllr``.

The transform W = [A b] (D x (D+1)) maps a speaker's features x to y = A x + b = W x+ with
x+ = [x; 1]. Statistics from per-frame Gaussian posteriors gamma_tm within the aligned pdf
(computed on the untransformed features): the count beta, K = sum_tm gamma_tm (mu_m / var_m)
x+^T (D x (D+1)) and G_i = sum_tm gamma_tm / var_mi x+ x+^T ((D+1) x (D+1)) per dimension i.
The auxiliary function is beta log|det A| + tr(W K^T) - 1/2 sum_i w_i G_i w_i^T. Gales' row
update: with p_i the i-th row of A^-T extended by a 0, w_i = (alpha p_i + k_i) G_i^-1, where
alpha solves the quadratic beta = alpha^2 e1 + alpha e2 (e1 = p_i G_i^-1 p_i^T,
e2 = p_i G_i^-1 k_i^T), the root with the larger auxiliary function; rows in turn, 40 passes.

Kaldi's other update types (``--fmllr-update-type``), for speakers with too few frames for the
D x (D+1) parameters of a full transform: ``diag`` (A diagonal: per dimension a scale s and an
offset o, ComputeFmllrMatrixDiagGmmDiagonal) and ``offset`` (A = I, only b:
ComputeFmllrMatrixDiagGmmOffset), both in closed form. For ``diag``, row i's auxiliary function
beta log|s| + s k_ii + o k_id - 1/2 (s^2 g_ii + 2 s o g_id + o^2 g_dd) (g: G_i, d: the offset
column) is maximal over o at o = (k_id - s g_id) / g_dd; then over s where
a s^2 + b s + beta = 0 with a = g_id^2 / g_dd - g_ii (< 0) and b = k_ii - g_id k_id / g_dd, whose
positive root is s = (-b - sqrt(b^2 - 4 a beta)) / 2a. For ``offset``, o = (k_id - g_id) / g_dd.

Kaldi's rules kept: below ``--fmllr-min-count`` (500 frames) the transform stays the identity
[I 0] (improvement 0); a transform that does not increase the auxiliary function is not used.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from emasr.transform.gmm import DiagGmm, group_by_pdf

log = logging.getLogger(__name__)

MIN_COUNT = 500.0   # Kaldi's FmllrOptions defaults
NUM_ITERS = 40
UPDATE_TYPES = ("full", "diag", "offset", "none")


@dataclass
class FmllrStats:
    beta: float
    K: np.ndarray  # [D, D+1]
    G: np.ndarray  # [D, D+1, D+1]

    @classmethod
    def zeros(cls, dim: int) -> "FmllrStats":
        return cls(0.0, np.zeros((dim, dim + 1)), np.zeros((dim, dim + 1, dim + 1)))

    @property
    def dim(self) -> int:
        return self.K.shape[0]

    def accumulate(self, feats: np.ndarray, pdfs: np.ndarray, weights: np.ndarray | None,
                   gmms: list[DiagGmm], gpost_gmms: list[DiagGmm] | None = None) -> float:
        """Add frames [T, D] aligned to pdfs [T] with frame weights [T] (default 1), Kaldi's
        AccumulateForGmm per frame (a frame may come more than once, with a pdf each, as from
        lattice posteriors). With ``gpost_gmms`` (matching ``gmms`` Gaussian for Gaussian) the
        Gaussian posteriors come from them and the means and variances from ``gmms``: Kaldi's
        gmm-est-fmllr-gpost (AccumulateFromPosteriors). Returns the weighted log-likelihood of
        the frames under the model that gave the posteriors."""
        x = np.asarray(feats, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"features have dimension {x.shape[-1]}, the model {self.dim}")
        w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=np.float64)
        # Per frame: a_t = sum_m gamma mu_m/var_m and b_t = sum_m gamma / var_m (Kaldi's
        # SingleFrameStats), then K += a x+^T and G_i += b_i x+ x+^T.
        a = np.zeros_like(x)
        b = np.zeros_like(x)
        total_like = 0.0
        for pdf, frames in group_by_pdf(np.asarray(pdfs)):
            gmm = gmms[pdf]
            post, like = (gpost_gmms or gmms)[pdf].posteriors(x[frames])
            post *= w[frames, None]
            total_like += float(w[frames] @ like)
            a[frames] = post @ (gmm.means * gmm.inv_vars)
            b[frames] = post @ gmm.inv_vars
        xplus = np.hstack([x, np.ones((len(x), 1))])
        self.beta += float(w.sum())
        self.K += a.T @ xplus
        for i in range(self.dim):
            self.G[i] += (xplus * b[:, i, None]).T @ xplus
        return total_like

    def add(self, other: "FmllrStats") -> None:
        if other.K.shape != self.K.shape:
            raise ValueError(f"cannot add fMLLR statistics of dimension {other.dim} to "
                             f"{self.dim}")
        self.beta += other.beta
        self.K += other.K
        self.G += other.G


def identity_transform(dim: int) -> np.ndarray:
    """[I 0]: Kaldi's SetUnit on a D x (D+1) matrix."""
    return np.hstack([np.eye(dim), np.zeros((dim, 1))])


def fmllr_auxf(W: np.ndarray, stats: FmllrStats) -> float:
    """Kaldi's FmllrAuxFuncDiagGmm: beta log|det A| + tr(W K^T) - 1/2 sum_i w_i G_i w_i^T."""
    dim = stats.dim
    sign, logdet = np.linalg.slogdet(W[:, :dim])
    if sign == 0:
        return -np.inf
    return (stats.beta * logdet + float(np.sum(W * stats.K))
            - 0.5 * float(np.einsum("ij,ijk,ik->", W, stats.G, W)))


def _update_row(W: np.ndarray, A_inv: np.ndarray, row: int, G_inv: np.ndarray, k: np.ndarray,
                beta: float) -> None:
    """Kaldi's FmllrInnerUpdate: row ``row`` of W in place; ``A_inv``, the inverse of W's
    square part, is kept up to date (Sherman-Morrison: the row changes by a rank-one term)."""
    dim = W.shape[0]
    cofactor = np.zeros(dim + 1)
    cofactor[:dim] = A_inv[:, row]             # row ``row`` of A^-T
    p_ginv = G_inv @ cofactor
    e1 = p_ginv @ cofactor
    e2 = p_ginv @ k
    discriminant = np.sqrt(e2 * e2 + 4 * e1 * beta)
    roots = ((-e2 + discriminant) / (2 * e1), (-e2 - discriminant) / (2 * e1))
    auxf = [beta * np.log(abs(r * e1 + e2)) - 0.5 * r * r * e1 for r in roots]
    alpha = roots[0] if auxf[0] > auxf[1] else roots[1]
    new_row = G_inv @ (alpha * cofactor + k)
    rank_one_row_update(A_inv, row, new_row[:dim] - W[row, :dim])
    W[row] = new_row


def rank_one_row_update(A_inv: np.ndarray, row: int, delta: np.ndarray) -> None:
    """A_inv becomes the inverse of A + e_row delta^T (Sherman-Morrison), in place."""
    column = A_inv[:, row].copy()
    A_inv -= np.outer(column, delta @ A_inv) / (1.0 + delta @ column)


def compute_fmllr_full(stats: FmllrStats, start: np.ndarray | None = None,
                       num_iters: int = NUM_ITERS) -> tuple[np.ndarray, float]:
    """Kaldi's ComputeFmllrMatrixDiagGmmFull: (W, auxf improvement); W is ``start`` (default
    identity) when the auxiliary function does not increase."""
    dim = stats.dim
    old = identity_transform(dim) if start is None else np.array(start, dtype=np.float64)
    G_inv = np.linalg.inv(stats.G)
    new = old.copy()
    for _ in range(num_iters):
        A_inv = np.linalg.inv(new[:, :dim])    # exact once per pass, updated within it
        for row in range(dim):
            _update_row(new, A_inv, row, G_inv[row], stats.K[row], stats.beta)
    old_auxf, new_auxf = fmllr_auxf(old, stats), fmllr_auxf(new, stats)
    improvement = new_auxf - old_auxf
    log.debug("fMLLR objf improvement is %g per frame over %g frames",
              improvement / (stats.beta + 1e-10), stats.beta)
    if improvement < 0 and not np.isclose(new_auxf, old_auxf, rtol=1e-6):
        log.warning("not applying the fMLLR transform change: the objective function did not "
                    "increase")
        return old, 0.0
    return new, improvement


def compute_fmllr_diagonal(stats: FmllrStats, offset_only: bool = False) -> tuple[np.ndarray, float]:
    """Kaldi's ComputeFmllrMatrixDiagGmmDiagonal (or, with ``offset_only``, ...Offset) from the
    identity: (W, auxf improvement), the identity when the auxiliary function does not increase."""
    dim = stats.dim
    rows = np.arange(dim)
    g_ii, g_id, g_dd = stats.G[rows, rows, rows], stats.G[rows, rows, dim], stats.G[rows, dim, dim]
    k_ii, k_id = stats.K[rows, rows], stats.K[rows, dim]
    if offset_only:
        scale = np.ones(dim)
    else:
        a = g_id ** 2 / g_dd - g_ii
        b = k_ii - g_id * k_id / g_dd
        scale = (-b - np.sqrt(b * b - 4 * a * stats.beta)) / (2 * a)
    W = identity_transform(dim)
    W[rows, rows] = scale
    W[:, dim] = (k_id - scale * g_id) / g_dd
    improvement = fmllr_auxf(W, stats) - fmllr_auxf(identity_transform(dim), stats)
    if improvement < 0:
        log.warning("not applying the fMLLR transform change: the objective function did not "
                    "increase")
        return identity_transform(dim), 0.0
    return W, improvement


def estimate_fmllr(stats: FmllrStats, update_type: str = "full", min_count: float = MIN_COUNT,
                   num_iters: int = NUM_ITERS) -> tuple[np.ndarray, float]:
    """Kaldi's FmllrDiagGmmAccs::Update from the identity, as gmm-est-fmllr calls it:
    (the D x (D+1) transform, the auxf improvement, not divided by the count)."""
    if update_type not in UPDATE_TYPES:
        raise ValueError(f"unknown fMLLR update type '{update_type}': expected one of "
                         f"{', '.join(UPDATE_TYPES)}")
    identity = identity_transform(stats.dim)
    if stats.beta <= min_count:
        log.warning("not updating fMLLR since below min-count: count is %g", stats.beta)
        return identity, 0.0
    if update_type == "none":
        return identity, 0.0
    if update_type in ("diag", "offset"):
        return compute_fmllr_diagonal(stats, offset_only=update_type == "offset")
    return compute_fmllr_full(stats, identity, num_iters)
