"""Linear discriminant analysis as Kaldi's LdaEstimate (transform/lda-estimate.cc), for
``acc-lda`` and ``est-lda``.

Statistics per class c (a pdf, from the alignments): the count n_c and the sum of its frames;
over all frames, the weighted sum of x x^T. From them the total covariance T, the between-class
covariance B = sum_c n_c/n (m_c - m)(m_c - m)^T and the within-class covariance W = T - B.
With the Cholesky factor W = L L^T, the eigenvectors U of L^-1 B L^-T (descending eigenvalues)
give the full LDA matrix U^T L^-1: in its output the within-class covariance is the identity
and the between-class covariance is diagonal with those eigenvalues. The first ``dim`` rows are
the transform. Kaldi's options: ``--dim``, ``--remove-offset`` (append the column -M m so the
projected mean is zero: a dim x (D+1) affine matrix), ``--within-class-factor`` (rows scaled by
sqrt((f + e_i) / (1 + e_i))), ``--allow-large-dim``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from emasr.io.atomic import atomic_write

log = logging.getLogger(__name__)


@dataclass
class LdaStats:
    """Kaldi's LdaEstimate accumulators (float64), summable across jobs."""
    zero: np.ndarray    # [C] weighted frame count per class
    first: np.ndarray   # [C, D] weighted sum of the frames per class
    second: np.ndarray  # [D, D] weighted sum of x x^T over all frames

    @classmethod
    def zeros(cls, num_classes: int, dim: int) -> "LdaStats":
        return cls(np.zeros(num_classes), np.zeros((num_classes, dim)), np.zeros((dim, dim)))

    @property
    def num_classes(self) -> int:
        return len(self.zero)

    @property
    def dim(self) -> int:
        return self.second.shape[0]

    def accumulate(self, feats: np.ndarray, classes: np.ndarray,
                   weights: np.ndarray | None = None) -> None:
        """Add frames [T, D] of classes [T] (ints in [0, C)) with weights [T] (default 1)."""
        x = np.asarray(feats, dtype=np.float64)
        classes = np.asarray(classes, dtype=np.int64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"features have dimension {x.shape[-1]}, the LDA statistics "
                             f"{self.dim}")
        if len(classes) != len(x):
            raise ValueError(f"{len(classes)} class ids for {len(x)} frames")
        if len(classes) and (classes.min() < 0 or classes.max() >= self.num_classes):
            raise ValueError(f"class ids outside [0, {self.num_classes})")
        w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=np.float64)
        keep = w != 0
        x, classes, w = x[keep], classes[keep], w[keep]
        self.zero += np.bincount(classes, weights=w, minlength=self.num_classes)
        np.add.at(self.first, classes, w[:, None] * x)
        self.second += (x * w[:, None]).T @ x

    def add(self, other: "LdaStats") -> None:
        if other.first.shape != self.first.shape:
            raise ValueError(f"cannot add LDA statistics of {other.num_classes} classes x "
                             f"{other.dim} dims to {self.num_classes} x {self.dim}")
        self.zero += other.zero
        self.first += other.first
        self.second += other.second

    def save(self, path: str) -> None:
        with atomic_write(path, "wb", encoding=None) as f:
            np.savez(f, kind=np.array("lda"), zero=self.zero, first=self.first,
                     second=self.second)

    @classmethod
    def load(cls, path: str) -> "LdaStats":
        try:
            with np.load(path) as z:
                if str(z["kind"]) != "lda":
                    raise ValueError(f"statistics of kind '{z['kind']}'")
                return cls(z["zero"], z["first"], z["second"])
        except (OSError, KeyError, ValueError) as err:
            raise ValueError(f"{path}: not an LDA statistics file written by acc-lda "
                             f"({err})") from None

    def covariances(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Kaldi's GetStats: total covariance, between-class covariance, mean and count."""
        count = float(self.zero.sum())
        if count <= 0:
            raise ValueError("no frames in the LDA statistics")
        mean = self.first.sum(axis=0) / count
        total = self.second / count - np.outer(mean, mean)
        seen = self.zero != 0
        class_means = self.first[seen] / self.zero[seen, None]
        between = (class_means * (self.zero[seen, None] / count)).T @ class_means
        between -= np.outer(mean, mean)
        return total, between, mean, count


def sum_lda_stats(paths: list[str]) -> LdaStats:
    total = LdaStats.load(paths[0])
    for path in paths[1:]:
        try:
            total.add(LdaStats.load(path))
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    return total


@dataclass
class LdaResult:
    matrix: np.ndarray       # dim x D, or dim x (D+1) with remove_offset
    full_matrix: np.ndarray  # D x D (x (D+1)): all rows, before the dimension cut
    eigenvalues: np.ndarray  # [D] descending: between-class variance of each output row
    count: float


def estimate_lda(stats: LdaStats, dim: int = 40, remove_offset: bool = False,
                 within_class_factor: float = 1.0, allow_large_dim: bool = False) -> LdaResult:
    """Kaldi's LdaEstimate::Estimate."""
    if dim <= 0 or dim > stats.dim:
        raise ValueError(f"--dim={dim}: must be in 1..{stats.dim} (the feature dimension)")
    if dim >= stats.num_classes and not allow_large_dim:
        raise ValueError(f"--dim={dim}: the between-class covariance of {stats.num_classes} "
                         f"classes has rank < {stats.num_classes}; use a smaller --dim or "
                         "--allow-large-dim")
    total, between, mean, count = stats.covariances()
    within = total - between
    try:
        chol = np.linalg.cholesky(within)
    except np.linalg.LinAlgError:
        smooth = 1.0e-3 * np.trace(within) / len(within)
        log.info("Cholesky failed (possibly not +ve definite), so adding %g to the diagonal "
                 "and trying again", smooth)
        chol = np.linalg.cholesky(within + smooth * np.eye(len(within)))
    chol_inv = np.linalg.inv(chol)
    scaled_between = chol_inv @ between @ chol_inv.T
    eigenvalues, vectors = np.linalg.eigh((scaled_between + scaled_between.T) / 2)
    order = np.argsort(-eigenvalues, kind="stable")
    eigenvalues, vectors = eigenvalues[order], vectors[:, order]
    # A deterministic sign per row (Kaldi's SVD leaves it arbitrary): largest entry positive.
    signs = np.sign(vectors[np.abs(vectors).argmax(axis=0), np.arange(len(order))])
    vectors *= np.where(signs == 0, 1.0, signs)
    full = vectors.T @ chol_inv
    log.info("Data count is %g", count)
    log.info("LDA singular values are %s", np.array2string(eigenvalues, precision=4,
                                                            max_line_width=10 ** 6))
    log.info("Sum of all singular values is %g", eigenvalues.sum())
    log.info("Sum of selected singular values is %g", eigenvalues[:dim].sum())
    if within_class_factor != 1.0:
        variances = np.maximum(eigenvalues, 0.0)  # the between-class part of each row's variance
        scale = np.sqrt((within_class_factor + variances) / (1.0 + variances))
        full = full * scale[:, None]
    if remove_offset:
        full = np.hstack([full, -(full @ mean)[:, None]])
    return LdaResult(full[:dim].copy(), full, eigenvalues, count)
