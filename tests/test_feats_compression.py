"""The fast compressed-matrix encoder writes exactly kaldiio's bytes, which kaldiio reads back."""
from __future__ import annotations

import io

import kaldiio
import kaldiio.matio
import numpy as np
import pytest

from emasr.feats.ark import ArkScpWriter
from emasr.feats.compression import compress_speech_feature


def kaldiio_bytes(matrix):
    buffer = io.BytesIO()
    kaldiio.matio.write_array(buffer, matrix, compression_method=1)
    return buffer.getvalue()[2:]  # after "\0B"


def matrices():
    rng = np.random.default_rng(7)
    yield (rng.standard_normal((498, 80)) * 3 + 10).astype(np.float32)  # fbank-like
    yield rng.standard_normal((9, 3)).astype(np.float32)  # the fewest rows it handles
    ties = rng.integers(0, 3, size=(50, 16)).astype(np.float32)  # many equal values
    ties[:, 0] = 5.0  # a constant column
    yield ties
    yield np.full((12, 4), -2.5, dtype=np.float32)  # a constant matrix
    yield (rng.standard_normal((37, 40)) * 1e4).astype(np.float32)  # a wide range


@pytest.mark.parametrize("matrix", list(matrices()), ids=lambda m: f"{m.shape}")
def test_bytes_equal_kaldiio(matrix):
    assert compress_speech_feature(matrix) == kaldiio_bytes(matrix)


def test_ark_round_trip_with_compression(tmp_path):
    rng = np.random.default_rng(0)
    feats = {"a": rng.standard_normal((100, 80)).astype(np.float32),
             "b": rng.standard_normal((5, 80)).astype(np.float32)}  # too short: two-byte CM2
    with ArkScpWriter(str(tmp_path / "f.ark"), str(tmp_path / "f.scp"), compress=True) as writer:
        for key, matrix in feats.items():
            writer.write(key, matrix)
    back = kaldiio.load_scp(str(tmp_path / "f.scp"))
    for key, matrix in feats.items():
        np.testing.assert_allclose(back[key], matrix, atol=0.05)
    with ArkScpWriter(str(tmp_path / "g.ark"), str(tmp_path / "g.scp"), compress=True) as writer:
        writer.write("a", feats["a"])
    expected = b"a \0B" + kaldiio_bytes(feats["a"])
    assert (tmp_path / "g.ark").read_bytes() == expected
