"""Maximum likelihood linear transform (MLLT, a global semi-tied covariance) as Kaldi's
MlltAccs (transform/mllt.cc), for ``gmm-acc-mllt`` and ``est-mllt``.

Statistics, from per-frame Gaussian posteriors gamma_tm within the aligned pdf of a diagonal
GMM in the current feature space: the count beta = sum gamma and, for each dimension i,
G_i = sum_t sum_m gamma_tm / var_mi (x_t - mu_m)(x_t - mu_m)^T.
The update maximises beta log|det A| - 1/2 sum_i a_i G_i a_i^T over the square matrix A (rows
a_i) by Gales' row-by-row update ("Semi-tied covariance matrices for hidden Markov models",
eq. 22): with c_i the i-th row of A^-T (the cofactors, up to a constant),
a_i = sqrt(beta / (c_i G_i^-1 c_i^T)) c_i G_i^-1, each row in turn, 200 passes as Kaldi.
Each step cannot decrease the objective (an increase is an error, as in Kaldi). The new
feature transform is A times the previous one (compose-transforms A prev), and the model means
are transformed with A (gmm-transform-means); the variances come from the next re-estimation.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from emasr.io.atomic import atomic_write
from emasr.transform.fmllr import rank_one_row_update
from emasr.transform.gmm import DiagGmm, group_by_pdf

log = logging.getLogger(__name__)

NUM_ITERS = 200  # Kaldi's MlltAccs::Update (a constant there)


@dataclass
class MlltStats:
    beta: float
    G: np.ndarray  # [D, D, D]: G[i] is the D x D statistic of dimension i

    @classmethod
    def zeros(cls, dim: int) -> "MlltStats":
        return cls(0.0, np.zeros((dim, dim, dim)))

    @property
    def dim(self) -> int:
        return self.G.shape[0]

    def accumulate(self, feats: np.ndarray, pdfs: np.ndarray, weights: np.ndarray | None,
                   gmms: list[DiagGmm]) -> float:
        """Add frames [T, D] aligned to pdfs [T] with frame weights [T] (default 1): Kaldi's
        AccumulateFromGmm per frame, computed per pdf over all its frames at once (pass many
        utterances together: the cost per pdf is M D^3). Returns the weighted log-likelihood."""
        x = np.asarray(feats, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"features have dimension {x.shape[-1]}, the MLLT statistics "
                             f"{self.dim}")
        w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=np.float64)
        total_like = 0.0
        for pdf, frames in group_by_pdf(np.asarray(pdfs)):
            frames = frames[w[frames] != 0]
            if not len(frames):
                continue
            gmm = gmms[pdf]
            xs = x[frames]
            post, like = gmm.posteriors(xs)
            post *= w[frames, None]
            total_like += float(w[frames] @ like)
            occ = post.sum(axis=0)                          # [M]
            first = post.T @ xs                             # [M, D]
            second = np.stack([(xs * post[:, m, None]).T @ xs for m in range(len(occ))])
            mu = gmm.means
            # sum_t gamma (x - mu)(x - mu)^T per Gaussian, from its moments.
            cross = first[:, :, None] * mu[:, None, :]
            scatter = (second - cross - cross.transpose(0, 2, 1)
                       + occ[:, None, None] * mu[:, :, None] * mu[:, None, :])
            self.G += np.tensordot(gmm.inv_vars.T, scatter, axes=1)
            self.beta += float(occ.sum())
        return total_like

    def add(self, other: "MlltStats") -> None:
        if other.G.shape != self.G.shape:
            raise ValueError(f"cannot add MLLT statistics of dimension {other.dim} to "
                             f"{self.dim}")
        self.beta += other.beta
        self.G += other.G

    def save(self, path: str) -> None:
        with atomic_write(path, "wb", encoding=None) as f:
            np.savez(f, kind=np.array("mllt"), beta=np.array(self.beta), G=self.G)

    @classmethod
    def load(cls, path: str) -> "MlltStats":
        try:
            with np.load(path) as z:
                if str(z["kind"]) != "mllt":
                    raise ValueError(f"statistics of kind '{z['kind']}'")
                return cls(float(z["beta"]), z["G"])
        except (OSError, KeyError, ValueError) as err:
            raise ValueError(f"{path}: not an MLLT statistics file written by gmm-acc-mllt "
                             f"({err})") from None


def sum_mllt_stats(paths: list[str]) -> MlltStats:
    total = MlltStats.load(paths[0])
    for path in paths[1:]:
        try:
            total.add(MlltStats.load(path))
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    return total


def mllt_objective(matrix: np.ndarray, stats: MlltStats) -> float:
    """beta log|det A| - 1/2 sum_i a_i G_i a_i^T (the auxiliary function, up to a constant)."""
    _, logdet = np.linalg.slogdet(matrix)
    quadratic = np.einsum("ij,ijk,ik->", matrix, stats.G, matrix)
    return stats.beta * logdet - 0.5 * quadratic


def mllt_update(stats: MlltStats, matrix: np.ndarray | None = None,
                num_iters: int = NUM_ITERS) -> tuple[np.ndarray, float]:
    """Kaldi's MlltAccs::Update from ``matrix`` (default identity, as est-mllt): the new
    square transform and the objective improvement (not divided by the count)."""
    dim, beta = stats.dim, stats.beta
    if beta < 10 * dim:
        log.warning("MLLT update: %s count %g", "very small" if beta > 2 * dim else
                    "insufficient", beta)
    A = np.eye(dim) if matrix is None else np.array(matrix, dtype=np.float64)
    if A.shape != (dim, dim):
        raise ValueError(f"MLLT update: the starting matrix is {A.shape}, expected "
                         f"{dim} x {dim}")
    G_inv = np.linalg.inv(stats.G)
    total_impr = 0.0
    for p in range(num_iters):
        A_inv = np.linalg.inv(A)   # exact once per pass, updated row by row within it
        for i in range(dim):
            cofactor = A_inv[:, i].copy()   # row i of A^-T
            before = _row_objective(A[i], cofactor, stats.G[i], beta)
            direction = G_inv[i] @ cofactor
            new_row = np.sqrt(beta / (cofactor @ direction)) * direction
            rank_one_row_update(A_inv, i, new_row - A[i])
            A[i] = new_row
            after = _row_objective(A[i], cofactor, stats.G[i], beta)
            if after < before - abs(before) * 1e-5:
                raise RuntimeError("objective decrease in the MLLT update (bad statistics?)")
            total_impr += after - before
        if p < 10 or p % 10 == 0:
            log.debug("MLLT objective improvement per frame by iteration %d is %g over %g "
                      "frames", p, total_impr / beta, beta)
    log.info("MLLT objective improvement per frame is %.6g over %g frames",
             total_impr / max(beta, 1e-10), beta)
    return A, total_impr


def _row_objective(row: np.ndarray, cofactor: np.ndarray, G: np.ndarray, beta: float) -> float:
    return beta * np.log(abs(row @ cofactor)) - 0.5 * row @ G @ row


def transform_means(gmms: list[DiagGmm], transform: np.ndarray) -> list[DiagGmm]:
    """Kaldi's gmm-transform-means: mu -> A mu (+ b); weights and variances unchanged."""
    dim = gmms[0].dim
    rows, cols = transform.shape
    if rows != dim or cols not in (dim, dim + 1):
        raise ValueError(f"gmm-transform-means: a {rows} x {cols} transform does not fit "
                         f"{dim}-dimensional means (expected {dim} x {dim} or {dim} x {dim + 1})")
    out = []
    for gmm in gmms:
        means = gmm.means @ transform[:, :dim].T
        if cols == dim + 1:
            means = means + transform[:, dim]
        out.append(DiagGmm(gmm.weights.copy(), means, gmm.inv_vars.copy()))
    return out
