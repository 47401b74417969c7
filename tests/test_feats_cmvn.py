"""CMVN stats in Kaldi's layout, applying them, per-speaker/global/fake writing, and deltas."""
from __future__ import annotations

import kaldiio
import numpy as np
import pytest
from click.testing import CliRunner

from emasr.cli import main
from emasr.feats.ark import ArkScpWriter
from emasr.feats.cmvn import CmvnError, apply_cmvn, cmvn_stats, fake_stats, read_stats
from emasr.feats.deltas import add_deltas, iter_gmm_feats


def test_stats_layout_by_hand():
    feats = np.array([[1.0, 2.0], [3.0, -4.0], [5.0, 6.0]], dtype=np.float32)
    stats = cmvn_stats(feats)
    assert stats.dtype == np.float64 and stats.shape == (2, 3)
    # row 0: sums, then the count; row 1: sums of squares, then 0
    np.testing.assert_array_equal(stats, [[9.0, 4.0, 3.0], [35.0, 56.0, 0.0]])


def test_apply_cmvn_by_hand():
    feats = np.array([[1.0, 2.0], [3.0, -4.0], [5.0, 6.0]], dtype=np.float32)
    stats = cmvn_stats(feats)
    np.testing.assert_allclose(apply_cmvn(feats, stats), [[-2, 2 / 3], [0, -16 / 3], [2, 14 / 3]],
                               rtol=1e-6)
    normed = apply_cmvn(feats, stats, norm_vars=True)
    np.testing.assert_allclose(normed.mean(axis=0), 0, atol=1e-6)
    np.testing.assert_allclose(normed.std(axis=0), 1, rtol=1e-5)
    # fake stats: CMVN is the identity
    np.testing.assert_array_equal(apply_cmvn(feats, fake_stats(2), norm_vars=True), feats)


def test_apply_cmvn_rejects_bad_stats():
    feats = np.zeros((4, 3), dtype=np.float32)
    with pytest.raises(CmvnError, match="do not fit features of dim 3"):
        apply_cmvn(feats, np.zeros((2, 3)))
    with pytest.raises(CmvnError, match="insufficient stats"):
        apply_cmvn(feats, np.zeros((2, 4)))


def make_data_dir(tmp_path, speakers=(("spkA", 2), ("spkB", 1)), dim=4):
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(1)
    feats, utt2spk, spk2utt = {}, [], []
    for speaker, count in speakers:
        utts = [f"{speaker}-u{i}" for i in range(count)]
        spk2utt.append(f"{speaker} {' '.join(utts)}\n")
        for i, utt in enumerate(utts):
            feats[utt] = (rng.standard_normal((10 + 7 * i, dim)) * 3 + 5).astype(np.float32)
            utt2spk.append(f"{utt} {speaker}\n")
    with ArkScpWriter(str(data / "raw.ark"), str(data / "feats.scp")) as writer:
        for utt in sorted(feats):
            writer.write(utt, feats[utt])
    (data / "utt2spk").write_text("".join(sorted(utt2spk)))
    (data / "spk2utt").write_text("".join(spk2utt))
    return data, feats


def test_per_speaker_stats_command(tmp_path):
    data, feats = make_data_dir(tmp_path)
    result = CliRunner().invoke(main, ["compute-cmvn-stats", str(data), str(tmp_path / "cmvn")])
    assert result.exit_code == 0, result.output
    stats = kaldiio.load_scp(str(data / "cmvn.scp"))
    assert sorted(stats) == ["spkA", "spkB"]
    both = np.concatenate([feats["spkA-u0"], feats["spkA-u1"]]).astype(np.float64)
    np.testing.assert_allclose(stats["spkA"][0, :4], both.sum(axis=0), rtol=1e-10)
    np.testing.assert_allclose(stats["spkA"][1, :4], (both ** 2).sum(axis=0), rtol=1e-10)
    assert stats["spkA"][0, 4] == 27 and stats["spkA"][1, 4] == 0
    assert stats["spkA"].dtype == np.float64  # written as a Kaldi double matrix ("DM")
    assert b"DM " in (tmp_path / "cmvn" / "cmvn_data.ark").read_bytes()[:20]


def test_fake_and_global_stats(tmp_path):
    data, feats = make_data_dir(tmp_path)
    assert CliRunner().invoke(main, ["compute-cmvn-stats", "--fake", str(data)]).exit_code == 0
    for stats in kaldiio.load_scp(str(data / "cmvn.scp")).values():
        np.testing.assert_array_equal(stats, fake_stats(4))
    assert (data / "data" / "cmvn_data.scp").is_file()  # Kaldi's default cmvn dir: <data>/data
    assert CliRunner().invoke(main, ["compute-cmvn-stats", "--global", str(data)]).exit_code == 0
    everything = np.concatenate(list(feats.values())).astype(np.float64)
    stats = read_stats(str(data / "global_cmvn"))
    np.testing.assert_allclose(stats[0, :4], everything.sum(axis=0), rtol=1e-10)
    assert stats[0, 4] == len(everything) == 10 + 17 + 10


def test_deltas_match_kaldi_formula_by_hand():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 3)).astype(np.float32)
    out = add_deltas(x)  # order 2, window 2
    assert out.shape == (7, 9)

    def delta(seq):  # Kaldi: sum_{j=-2..2} j * x[clamp(t+j)] / (2 * (1 + 4))
        T = len(seq)
        return np.array([sum(j * seq[min(max(t + j, 0), T - 1)] for j in range(-2, 3)) / 10.0
                         for t in range(T)])

    # Kaldi's second order is the order-1 window convolved with itself, applied to the
    # clamped input (not the delta of the already-clamped delta sequence).
    w1 = np.arange(-2, 3) / 10.0
    w2 = np.convolve(w1, w1)
    clamp = lambda t: min(max(t, 0), 6)  # noqa: E731
    delta2 = np.array([[sum(w2[j + 4] * x[clamp(t + j), d] for j in range(-4, 5))
                        for d in range(3)] for t in range(7)])
    np.testing.assert_allclose(out[:, :3], x)
    np.testing.assert_allclose(out[:, 3:6], np.stack([delta(x[:, d]) for d in range(3)], 1),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[:, 6:9], delta2, rtol=1e-5, atol=1e-6)


def test_gmm_features_apply_speaker_cmvn_then_deltas(tmp_path):
    data, feats = make_data_dir(tmp_path)
    CliRunner().invoke(main, ["compute-cmvn-stats", str(data)], catch_exceptions=False)
    got = dict(iter_gmm_feats(str(data)))
    spk_stats = kaldiio.load_scp(str(data / "cmvn.scp"))["spkA"]
    expected = add_deltas(apply_cmvn(feats["spkA-u1"], spk_stats))
    np.testing.assert_allclose(got["spkA-u1"], expected, rtol=1e-6)
    assert got["spkB-u0"].shape == (10, 12)


def test_add_deltas_command_reads_and_writes_kaldi_tables(tmp_path):
    data, feats = make_data_dir(tmp_path)
    out = tmp_path / "deltas.ark"
    result = CliRunner().invoke(main, ["add-deltas", f"scp:{data / 'feats.scp'}", f"ark:{out}"])
    assert result.exit_code == 0, result.output
    written = dict(kaldiio.load_ark(str(out)))
    assert sorted(written) == sorted(feats)
    np.testing.assert_allclose(written["spkB-u0"], add_deltas(feats["spkB-u0"]), rtol=1e-6)
