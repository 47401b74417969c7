"""Kaldi matrices on disk (``final.mat``, ``0.mat``) and tables of them (``trans.JOB``), plus
the two operations every transform step needs: applying a transform to features
(Kaldi's transform-feats) and composing two transforms (compose-transforms).

A single-matrix file is what Kaldi's ``WriteKaldiObject`` writes: in binary ``\\0B`` then ``FM``
(or ``DM``), the int32 row and column counts and the raw rows; in text `` [`` then one line per
row and ``]`` (emasr.kaldi.io has the token rules). Tables (``ark:trans.1``, scp) go through
kaldiio, as the feature archives do.

A transform of a D-dimensional feature is linear (R x D: y = A x) or affine (R x (D+1):
y = A x + b, the offset in the last column), as Kaldi decides it by the number of columns.
"""
from __future__ import annotations

import os

import kaldiio
import numpy as np

from emasr.kaldi.io import KaldiFormatError, KaldiReader, KaldiWriter
from emasr.kaldi.tables import read_archive
from emasr.io.atomic import atomic_write


class TransformError(ValueError):
    """A transform does not fit the features or the other transform; the message says which."""


def read_matrix(path: str | os.PathLike) -> np.ndarray:
    """A Kaldi matrix file (binary or text), as float64."""
    reader = KaldiReader.open(path)
    matrix = reader.read_float_matrix(f"the matrix in {os.fspath(path)}")
    if not reader.at_end():
        raise reader.error("unexpected data after the matrix (not a single-matrix file?)")
    return matrix.astype(np.float64)


def matrix_bytes(matrix: np.ndarray, binary: bool = True, double: bool = False) -> bytes:
    """Kaldi's serialization of one matrix: Matrix<float> by default (BaseFloat, as Kaldi's
    binaries write transforms), Matrix<double> when ``double``."""
    matrix = np.asarray(matrix)
    if matrix.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {matrix.shape}")
    writer = KaldiWriter(binary)
    writer.write_float_matrix(matrix.astype(np.float64 if double else np.float32))
    return writer.getvalue()


def write_matrix(path: str | os.PathLike, matrix: np.ndarray, binary: bool = True,
                 double: bool = False) -> None:
    """Write a Kaldi matrix file atomically (temporary name, then rename)."""
    data = matrix_bytes(matrix, binary, double)
    with atomic_write(os.fspath(path), "wb", encoding=None) as f:
        f.write(data)


def is_table_specifier(name: str) -> bool:
    """Kaldi's rule: 'ark:...' / 'scp:...' (with options such as 'ark,s,cs:') name a table."""
    prefix, colon, _ = name.partition(":")
    return bool(colon) and prefix.split(",")[0] in ("ark", "scp")


def read_matrix_table(rspecifier: str) -> dict[str, np.ndarray]:
    """All matrices of a Kaldi table (``ark:trans.1``, ``scp:x.scp``), keyed, as float64."""
    try:
        return {key: np.asarray(value, dtype=np.float64) for key, value in read_archive(rspecifier)}
    except (OSError, ValueError, KaldiFormatError) as err:
        raise TransformError(f"could not read the matrix table {rspecifier}: {err}") from None


def write_matrix_table(ark_path: str | os.PathLike, matrices: dict[str, np.ndarray]) -> None:
    """A binary Kaldi archive of float matrices (as gmm-est-fmllr writes ``ark:trans.JOB``),
    written atomically, keys in the order given."""
    ark_path = os.fspath(ark_path)
    with atomic_write(ark_path, "wb", encoding=None) as f:
        for key, matrix in matrices.items():
            if not key or " " in key:
                raise ValueError(f"bad key '{key}' for {ark_path}")
            f.write(key.encode("utf-8") + b" ")
            kaldiio.matio.write_array(f, np.asarray(matrix, dtype=np.float32))


def apply_transform(feats: np.ndarray, transform: np.ndarray, what: str = "features"
                    ) -> np.ndarray:
    """Kaldi's transform-feats for one utterance: [T, D] -> [T, R], y = A x (+ b).

    The transform is R x D (linear) or R x (D+1) (affine, offset last); any other width is an
    error naming ``what`` (e.g. the utterance).
    """
    feats = np.asarray(feats)
    rows, cols = transform.shape
    dim = feats.shape[1]
    if cols == dim:
        out = feats.astype(np.float64) @ transform.T
    elif cols == dim + 1:
        out = feats.astype(np.float64) @ transform[:, :dim].T + transform[:, dim]
    else:
        raise TransformError(f"{what}: the transform is {rows} x {cols}, which fits neither "
                             f"linear ({dim} columns) nor affine ({dim + 1} columns) use on "
                             f"{dim}-dimensional features")
    return out.astype(np.float32)


def compose_transforms(a: np.ndarray, b: np.ndarray, b_is_affine: bool = False) -> np.ndarray:
    """Kaldi's ComposeTransforms: the transform c that applies b first, then a (c = a b).

    If a has one column more than b has rows, a is affine and b is extended to a square
    affine matrix first: with the row [0 ... 0 1] when b is affine (``b_is_affine``), else with
    a zero column and that row (b linear). The result is affine exactly when b is, or when a is
    and b is linear.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise TransformError("compose-transforms: empty transform")
    if a.shape[1] == b.shape[0]:
        return a @ b
    if a.shape[1] == b.shape[0] + 1:
        rows, cols = b.shape
        if b_is_affine:
            extended = np.zeros((rows + 1, cols))
            extended[:rows] = b
            extended[rows, cols - 1] = 1.0
        else:
            extended = np.zeros((rows + 1, cols + 1))
            extended[:rows, :cols] = b
            extended[rows, cols] = 1.0
        return a @ extended
    raise TransformError(f"compose-transforms: cannot compose a {a.shape[0]} x {a.shape[1]} "
                         f"transform with a {b.shape[0]} x {b.shape[1]} one (a needs as many "
                         "columns as b has rows, or one more when a is affine)")
