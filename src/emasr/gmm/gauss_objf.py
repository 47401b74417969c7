"""The clustering objective of tree building: the log-likelihood of data under one diagonal
Gaussian fitted to it (Kaldi's GaussClusterable::Objf), vectorized over many clusters.

For n frames with sums x and x^2: var = x2/n - (x/n)^2, floored at var_floor, and
objf = -0.5 * n * (D * (1 + log(2 pi)) + sum(log var)). Splitting a cluster gains
objf(yes) + objf(no) - objf(all) >= 0; merging two costs the same amount.
"""
from __future__ import annotations

import numpy as np

LOG_2PI = float(np.log(2 * np.pi))


def gauss_objf(count: np.ndarray, x: np.ndarray, x2: np.ndarray, var_floor: float = 0.01
               ) -> np.ndarray:
    """Objective of each cluster: count [...], x and x2 [..., D] -> [...] (0 where count is 0)."""
    count = np.asarray(count, dtype=np.float64)
    safe = np.where(count > 0, count, 1.0)[..., None]
    mean = x / safe
    var = np.maximum(x2 / safe - np.square(mean), var_floor)
    dim = x.shape[-1]
    objf = -0.5 * count * (dim * (1.0 + LOG_2PI) + np.log(var).sum(axis=-1))
    return np.where(count > 0, objf, 0.0)
