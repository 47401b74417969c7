"""LDA, MLLT and fMLLR (emasr.transform) on synthetic data generated through a known transform,
and Kaldi's matrix format, transform-feats and compose-transforms."""
from __future__ import annotations

import io

import kaldiio
import numpy as np
import pytest

from emasr.transform.fmllr import (FmllrStats, estimate_fmllr, fmllr_auxf,
                                   identity_transform)
from emasr.transform.gmm import DiagGmm
from emasr.transform.lda import LdaStats, estimate_lda
from emasr.kaldi.matrix_io import (TransformError, apply_transform, compose_transforms,
                                       matrix_bytes, read_matrix, read_matrix_table,
                                       write_matrix, write_matrix_table)
from emasr.transform.mllt import MlltStats, mllt_objective, mllt_update


def random_invertible(rng, dim: int, condition: float = 4.0) -> np.ndarray:
    """A random matrix with singular values between 1 and ``condition``."""
    u, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    v, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    return u @ np.diag(np.linspace(1.0, condition, dim)) @ v


def subspace_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosines of the principal angles between the row spaces of a and b (all 1: the same)."""
    qa, _ = np.linalg.qr(a.T)
    qb, _ = np.linalg.qr(b.T)
    return np.linalg.svd(qa.T @ qb, compute_uv=False)


# -- LDA --

def lda_data(rng, num_classes=5, per_class=2000, dim=6, informative=2):
    """x = B z + offset, z: class means differ in the first `informative` coordinates only,
    within-class covariance diagonal (the same for all classes). The discriminant subspace in
    x is the row space of the first `informative` rows of B^-1."""
    means = np.zeros((num_classes, dim))
    means[:, :informative] = 3.0 * rng.standard_normal((num_classes, informative))
    scales = np.linspace(0.5, 2.0, dim)
    classes = np.repeat(np.arange(num_classes), per_class)
    z = means[classes] + scales * rng.standard_normal((len(classes), dim))
    B = random_invertible(rng, dim)
    offset = rng.standard_normal(dim) * 5
    return z @ B.T + offset, classes, B, offset


def test_lda_recovers_the_discriminant_subspace():
    rng = np.random.default_rng(0)
    x, classes, B, _ = lda_data(rng)
    stats = LdaStats.zeros(5, 6)
    stats.accumulate(x[:5000], classes[:5000])
    stats.accumulate(x[5000:], classes[5000:])      # two batches sum as two jobs would
    result = estimate_lda(stats, dim=2)
    assert result.matrix.shape == (2, 6)
    cosines = subspace_cosines(result.matrix, np.linalg.inv(B)[:2])
    assert cosines.min() > 0.999, cosines
    # Two informative directions: two large eigenvalues, the others only sampling noise.
    assert result.eigenvalues[1] > 1.0 and np.all(np.abs(result.eigenvalues[2:]) < 0.01)
    assert np.all(np.diff(result.eigenvalues) <= 0)
    # Kaldi's normalisation: in the output the within-class covariance is the identity and
    # the between-class covariance is diagonal with the eigenvalues.
    full = result.full_matrix
    total, between, _, _ = stats.covariances()
    np.testing.assert_allclose(full @ (total - between) @ full.T, np.eye(6), atol=1e-9)
    np.testing.assert_allclose(full @ between @ full.T, np.diag(result.eigenvalues), atol=1e-9)


def test_lda_remove_offset_and_within_class_factor():
    rng = np.random.default_rng(1)
    x, classes, _, offset = lda_data(rng)
    stats = LdaStats.zeros(5, 6)
    stats.accumulate(x, classes)
    plain = estimate_lda(stats, dim=3)
    affine = estimate_lda(stats, dim=3, remove_offset=True)
    assert affine.matrix.shape == (3, 7)
    np.testing.assert_allclose(affine.matrix[:, :6], plain.matrix)
    projected = apply_transform(x, affine.matrix)
    np.testing.assert_allclose(projected.mean(axis=0), 0.0, atol=1e-3)
    scaled = estimate_lda(stats, dim=3, within_class_factor=0.1)
    e = plain.eigenvalues[:3]
    np.testing.assert_allclose(scaled.matrix, plain.matrix * np.sqrt((0.1 + e) / (1 + e))[:, None])


def test_lda_weights_and_bad_input():
    rng = np.random.default_rng(2)
    x, classes, _, _ = lda_data(rng, per_class=200)
    weighted = LdaStats.zeros(5, 6)
    weights = np.where(classes == 4, 0.0, 1.0)   # silence weight 0: as if class 4 were absent
    weighted.accumulate(x, classes, weights)
    absent = LdaStats.zeros(5, 6)
    absent.accumulate(x[classes != 4], classes[classes != 4])
    np.testing.assert_allclose(estimate_lda(weighted, 2).matrix, estimate_lda(absent, 2).matrix)
    with pytest.raises(ValueError, match="rank"):
        estimate_lda(weighted, dim=5)         # 5 classes: the between-class rank is at most 4
    with pytest.raises(ValueError, match="dimension 5"):
        weighted.accumulate(x[:, :5], classes)


def test_lda_stats_round_trip(tmp_path):
    stats = LdaStats.zeros(3, 2)
    stats.accumulate(np.arange(12.0).reshape(6, 2), np.array([0, 1, 2, 0, 1, 2]))
    stats.save(str(tmp_path / "lda.1.acc"))
    back = LdaStats.load(str(tmp_path / "lda.1.acc"))
    np.testing.assert_array_equal(back.second, stats.second)
    with pytest.raises(ValueError, match="not an MLLT statistics file.*kind .lda."):
        MlltStats.load(str(tmp_path / "lda.1.acc"))


# -- MLLT --

def semi_tied_data(rng, num_classes=4, per_class=4000, dim=4):
    """Classes with diagonal covariances in a hidden space z (a different variance pattern per
    class), observed as x = R^-1 z: MLLT should find R up to row order, sign and scale."""
    means = 2.0 * rng.standard_normal((num_classes, dim))
    variances = np.exp(rng.uniform(-1.5, 1.5, (num_classes, dim)))
    classes = np.repeat(np.arange(num_classes), per_class)
    z = means[classes] + np.sqrt(variances[classes]) * rng.standard_normal((len(classes), dim))
    R = random_invertible(rng, dim, condition=3.0)
    return z @ np.linalg.inv(R).T, classes, R


def class_gmms(y: np.ndarray, classes: np.ndarray) -> list[DiagGmm]:
    """One diagonal Gaussian per class, ML-estimated on y (what gmm-est would give)."""
    return [DiagGmm.from_mean_var([1.0], y[classes == c].mean(axis=0),
                                  y[classes == c].var(axis=0))
            for c in range(classes.max() + 1)]


def semi_tied_loglike(M: np.ndarray, x: np.ndarray, classes: np.ndarray) -> float:
    """Per-frame log-likelihood of x under diagonal Gaussians fitted in the space M x, with the
    Jacobian log|det M|: the quantity MLLT maximises."""
    y = x @ M.T
    total = 0.0
    for c, gmm in enumerate(class_gmms(y, classes)):
        total += gmm.log_likelihoods(y[classes == c]).sum()
    return total / len(x) + np.linalg.slogdet(M)[1]


def test_mllt_recovers_the_rotation_up_to_permutation_and_scale():
    rng = np.random.default_rng(3)
    x, classes, R = semi_tied_data(rng)
    M = np.eye(4)
    for _ in range(12):   # as train_lda_mllt.sh: re-estimate the model, then MLLT, compose
        y = x @ M.T
        stats = MlltStats.zeros(4)
        stats.accumulate(y, classes, None, class_gmms(y, classes))
        A, improvement = mllt_update(stats, num_iters=20)
        assert improvement >= -1e-6   # converged passes gain nothing (rounding)
        np.testing.assert_allclose(improvement,
                                   mllt_objective(A, stats) - mllt_objective(np.eye(4), stats),
                                   rtol=1e-6, atol=1e-6)
        M = compose_transforms(A, M)
    P = M @ np.linalg.inv(R)
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    dominant = np.abs(P).argmax(axis=1)
    assert sorted(dominant) == [0, 1, 2, 3]            # a permutation...
    assert np.abs(P).max(axis=1).min() > 0.99           # ... of scaled rows of R
    assert semi_tied_loglike(M, x, classes) > semi_tied_loglike(R, x, classes) - 1e-3
    assert semi_tied_loglike(M, x, classes) > semi_tied_loglike(np.eye(4), x, classes) + 0.1


def test_mllt_stats_match_the_definition():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((50, 3))
    pdfs = rng.integers(0, 2, 50)
    gmms = [DiagGmm.from_mean_var([0.3, 0.7], rng.standard_normal((2, 3)),
                                  np.exp(rng.standard_normal((2, 3)))) for _ in range(2)]
    weights = rng.uniform(0, 1, 50)
    stats = MlltStats.zeros(3)
    stats.accumulate(x, pdfs, weights, gmms)
    expected = np.zeros((3, 3, 3))
    beta = 0.0
    for t in range(50):   # Kaldi's AccumulateFromPosteriors, frame by frame
        gmm = gmms[pdfs[t]]
        post = gmm.posteriors(x[t:t + 1])[0][0] * weights[t]
        for m in range(2):
            d = x[t] - gmm.means[m]
            for j in range(3):
                expected[j] += post[m] * gmm.inv_vars[m, j] * np.outer(d, d)
            beta += post[m]
    np.testing.assert_allclose(stats.G, expected, rtol=1e-10)
    assert stats.beta == pytest.approx(beta)


# -- fMLLR --

def speaker_data(rng, num_pdfs=8, per_pdf=800, dim=4, kind="full"):
    """A known one-Gaussian-per-pdf model; a speaker's features x = A^-1 (y - b) with y drawn
    from it: fMLLR should find W = [A b]. kind "diag": A diagonal; "offset": A = I."""
    gmms = [DiagGmm.from_mean_var([1.0], 3.0 * rng.standard_normal(dim),
                                  np.exp(rng.uniform(-1, 1, dim))) for _ in range(num_pdfs)]
    pdfs = np.repeat(np.arange(num_pdfs), per_pdf)
    y = np.stack([gmms[p].means[0] for p in pdfs])
    y += np.sqrt(np.stack([1 / gmms[p].inv_vars[0] for p in pdfs])) * \
        rng.standard_normal(y.shape)
    A = {"full": lambda: random_invertible(rng, dim, condition=2.0),
         "diag": lambda: np.diag(rng.uniform(0.6, 1.6, dim)),
         "offset": lambda: np.eye(dim)}[kind]()
    b = rng.standard_normal(dim)
    x = (y - b) @ np.linalg.inv(A).T
    return x, pdfs, gmms, np.hstack([A, b[:, None]])


def test_fmllr_recovers_the_speaker_transform():
    rng = np.random.default_rng(5)
    x, pdfs, gmms, W_true = speaker_data(rng)
    stats = FmllrStats.zeros(4)
    stats.accumulate(x, pdfs, None, gmms)
    W, improvement = estimate_fmllr(stats)
    assert W.shape == (4, 5)
    np.testing.assert_allclose(W, W_true, atol=0.06)
    assert improvement > 0
    assert improvement == pytest.approx(fmllr_auxf(W, stats) - fmllr_auxf(identity_transform(4),
                                                                          stats))
    # A stationary point of the auxiliary function: Kaldi's FmllrAuxfGradient is zero there.
    A = W[:, :4]
    S = np.einsum("ijk,ik->ij", stats.G, W)
    gradient = stats.K - S
    gradient[:, :4] += stats.beta * np.linalg.inv(A).T
    assert np.abs(gradient).max() < 1e-6 * stats.beta
    # The adapted features are the model's again: their likelihood is that of y.
    adapted = apply_transform(x, W)
    gain = sum(gmms[p].log_likelihoods(adapted[pdfs == p]).sum() for p in range(8)) - \
        sum(gmms[p].log_likelihoods(x[pdfs == p]).sum() for p in range(8))
    assert gain > 0


@pytest.mark.parametrize("kind", ["diag", "offset"])
def test_diagonal_and_offset_fmllr_recover_their_transform(kind):
    rng = np.random.default_rng(8)
    x, pdfs, gmms, W_true = speaker_data(rng, kind=kind)
    stats = FmllrStats.zeros(4)
    stats.accumulate(x, pdfs, None, gmms)
    W, improvement = estimate_fmllr(stats, update_type=kind)
    np.testing.assert_allclose(W, W_true, atol=0.06)
    off_diagonal = W[:, :4] - np.diag(np.diag(W[:, :4]))
    assert not off_diagonal.any()
    assert improvement > 0
    assert improvement == pytest.approx(fmllr_auxf(W, stats) - fmllr_auxf(identity_transform(4),
                                                                          stats))
    # stationary in the free parameters: the offsets, and for diag the scales
    gradient = stats.K - np.einsum("ijk,ik->ij", stats.G, W)
    gradient[:, :4] += stats.beta * np.linalg.inv(W[:, :4]).T
    free = [gradient[:, 4]] + ([np.diag(gradient[:, :4])] if kind == "diag" else [])
    assert np.abs(np.concatenate(free)).max() < 1e-6 * stats.beta
    # fewer parameters than the full transform: at most its auxf improvement
    assert improvement <= estimate_fmllr(stats)[1] + 1e-6
    if kind == "offset":
        np.testing.assert_array_equal(W[:, :4], np.eye(4))


def test_fmllr_below_min_count_is_the_identity():
    rng = np.random.default_rng(6)
    x, pdfs, gmms, _ = speaker_data(rng, per_pdf=50)     # 400 frames < Kaldi's 500
    stats = FmllrStats.zeros(4)
    stats.accumulate(x, pdfs, None, gmms)
    W, improvement = estimate_fmllr(stats)
    np.testing.assert_array_equal(W, identity_transform(4))
    assert improvement == 0.0
    W, improvement = estimate_fmllr(stats, min_count=100)
    assert improvement > 0 and not np.allclose(W, identity_transform(4))
    with pytest.raises(ValueError, match="update type"):
        estimate_fmllr(stats, update_type="diag-full")


def test_fmllr_weights_zero_frames_out():
    rng = np.random.default_rng(7)
    x, pdfs, gmms, _ = speaker_data(rng, per_pdf=100)
    weights = np.where(pdfs == 0, 0.0, 1.0)          # weight-silence-post 0 for pdf 0
    weighted, dropped = FmllrStats.zeros(4), FmllrStats.zeros(4)
    weighted.accumulate(x, pdfs, weights, gmms)
    dropped.accumulate(x[pdfs != 0], pdfs[pdfs != 0], None, gmms)
    np.testing.assert_allclose(weighted.G, dropped.G)
    np.testing.assert_allclose(weighted.K, dropped.K)
    assert weighted.beta == dropped.beta == 700


# -- transform-feats, compose-transforms --

@pytest.mark.parametrize("a_cols,b_cols,b_is_affine", [
    (5, 5, False),    # linear after linear
    (6, 5, False),    # affine after linear
    (6, 6, True),     # affine after affine
    (5, 6, True),     # linear after affine: a has as many columns as b has rows
])
def test_compose_equals_applying_one_after_the_other(a_cols, b_cols, b_is_affine):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((7, 5))
    a = rng.standard_normal((3, a_cols))
    b = rng.standard_normal((5, b_cols))
    c = compose_transforms(a, b, b_is_affine)
    np.testing.assert_allclose(apply_transform(x, c), apply_transform(apply_transform(x, b), a),
                               rtol=1e-5, atol=1e-5)


def test_mismatched_transforms_are_errors_naming_the_sizes():
    with pytest.raises(TransformError, match="utt1: the transform is 3 x 7"):
        apply_transform(np.zeros((2, 5)), np.zeros((3, 7)), "utt1")
    with pytest.raises(TransformError, match="3 x 4 transform with a 5 x 5"):
        compose_transforms(np.zeros((3, 4)), np.zeros((5, 5)))


# -- Kaldi matrix files --

@pytest.mark.parametrize("binary", [True, False])
def test_matrix_files_round_trip_and_kaldiio_reads_them(tmp_path, binary):
    rng = np.random.default_rng(9)
    m = rng.standard_normal((3, 4)).astype(np.float32)
    path = tmp_path / "final.mat"
    write_matrix(path, m, binary=binary)
    np.testing.assert_array_equal(read_matrix(path), m)
    # kaldiio's reader, written independently of ours, reads the same matrix.
    np.testing.assert_array_equal(kaldiio.load_mat(str(path)), m)
    if binary:
        assert path.read_bytes()[:6] == b"\0BFM \x04"
    else:
        assert path.read_text().startswith(" [\n  ")


def test_kaldi_written_matrices_are_read(tmp_path):
    m = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    buffer = io.BytesIO()
    kaldiio.matio.write_array(buffer, m)          # Kaldi's binary Matrix<double> layout
    (tmp_path / "double.mat").write_bytes(buffer.getvalue())
    np.testing.assert_array_equal(read_matrix(tmp_path / "double.mat"), m)
    (tmp_path / "text.mat").write_text(" [\n  1 2 3 \n  4 5 6 ]\n")   # Kaldi's text writer
    np.testing.assert_array_equal(read_matrix(tmp_path / "text.mat"), [[1, 2, 3], [4, 5, 6]])
    assert matrix_bytes(m, double=True) == buffer.getvalue()


def test_matrix_tables_round_trip(tmp_path):
    tables = {"spk1": identity_transform(3), "spk2": 2 * identity_transform(3)}
    write_matrix_table(tmp_path / "trans.1", tables)
    back = read_matrix_table(f"ark:{tmp_path / 'trans.1'}")
    assert list(back) == ["spk1", "spk2"]
    np.testing.assert_array_equal(back["spk2"], tables["spk2"])


# -- the commands, on Kaldi's yesno model and alignments --

def test_gmm_model_reader_agrees_with_kaldi(yesno):
    """The NumPy GMMs read from Kaldi's own final.mdl score as Kaldi's C++ DiagGmm does."""
    from emasr.kaldi.model_io import read_model
    from emasr.transform.gmm import read_gmm_model
    path = yesno / "exp" / "mono" / "final.mdl"
    mine, kaldi = read_gmm_model(path), read_model(path)
    x = np.random.default_rng(10).standard_normal((5, 39)).astype(np.float32)
    for pdf, gmm in enumerate(mine.pdfs):
        expected = np.asarray(kaldi.am_gmm.get_pdf(pdf).log_likelihoods_matrix(x))
        np.testing.assert_allclose(gmm.log_likelihoods(x), expected, rtol=1e-5)


@pytest.fixture(scope="module")
def yesno_data(tmp_path_factory):
    from gmm_helpers import write_data_dir, yesno_mfcc_feats, yesno_texts
    return write_data_dir(tmp_path_factory.mktemp("yesno") / "train", yesno_mfcc_feats(),
                          yesno_texts())


def run_cli(args: list[str], ok: bool = True, log_file=None):
    """Run `emasr ARGS`; the log goes to log_file when given (emasr's own handlers replace
    pytest's capture)."""
    from click.testing import CliRunner
    from emasr.cli import main
    logging_args = ["--log-file", str(log_file)] if log_file else []
    result = CliRunner().invoke(main, [*logging_args, *args])
    assert (result.exit_code == 0) == ok, result.output
    return result


def test_lda_mllt_fmllr_commands_on_yesno(yesno, yesno_data, tmp_path):
    mono = yesno / "exp" / "mono"
    model, ali = str(mono / "final.mdl"), str(mono / "ali.1.gz")
    data = str(yesno_data)
    splice = ["--splice-opts", "--left-context=3 --right-context=3"]
    # LDA on spliced 13-dim MFCC (91 dims), classes the 11 pdfs: at most 10 dimensions.
    run_cli(["acc-lda", *splice, "--silence-phones", "1", model, data, ali,
             str(tmp_path / "lda.1.acc")])
    run_cli(["est-lda", "--dim", "10", str(tmp_path / "0.mat"), str(tmp_path / "lda.1.acc")])
    lda = read_matrix(tmp_path / "0.mat")
    assert lda.shape == (10, 91)
    result = run_cli(["est-lda", "--dim", "11", str(tmp_path / "x.mat"),
                      str(tmp_path / "lda.1.acc")], ok=False)
    assert "--dim=11" in result.output
    # MLLT in the mono model's space (39-dim deltas), then the means moved by it.
    run_cli(["gmm-acc-mllt", "--delta-order", "2", model, data, ali,
             str(tmp_path / "1.macc")])
    run_cli(["est-mllt", str(tmp_path / "mllt.mat"), str(tmp_path / "1.macc")],
            log_file=tmp_path / "est_mllt.log")
    assert "Overall objective function improvement for MLLT" in \
        (tmp_path / "est_mllt.log").read_text()
    mllt = read_matrix(tmp_path / "mllt.mat")
    assert mllt.shape == (39, 39) and abs(np.linalg.det(mllt)) > 0
    run_cli(["gmm-transform-means", str(tmp_path / "mllt.mat"), model, str(tmp_path / "1.mdl")])
    from emasr.kaldi.model_io import read_model
    from emasr.transform.gmm import read_gmm_model
    read_model(tmp_path / "1.mdl")   # Kaldi's C++ objects are built from the written model
    moved, original = read_gmm_model(tmp_path / "1.mdl"), read_gmm_model(model)
    np.testing.assert_allclose(moved.pdfs[3].means, original.pdfs[3].means @ mllt.T,
                               rtol=1e-3, atol=1e-3)
    # fMLLR per utterance (yesno utterances have ~600 frames, above Kaldi's min count).
    run_cli(["gmm-est-fmllr", "--delta-order", "2", "--fmllr-num-iters", "8", model, data, ali,
             str(tmp_path / "trans.1")], log_file=tmp_path / "fmllr.log")
    fmllr_log = (tmp_path / "fmllr.log").read_text().splitlines()
    assert any("Overall fMLLR auxf impr per frame" in line for line in fmllr_log)
    transforms = read_matrix_table(f"ark:{tmp_path / 'trans.1'}")
    assert len(transforms) == 31 and all(t.shape == (39, 40) for t in transforms.values())
    gains = [float(line.split("auxf-impr from fMLLR is ")[1].split(",")[0])
             for line in fmllr_log if "auxf-impr from fMLLR is" in line]
    assert len(gains) == 31 and min(gains) > 0
    # The transforms compose with the MLLT matrix per key and apply to features.
    run_cli(["compose-transforms", f"ark:{tmp_path / 'trans.1'}", str(tmp_path / "mllt.mat"),
             f"ark:{tmp_path / 'composed.1'}"])
    composed = read_matrix_table(f"ark:{tmp_path / 'composed.1'}")
    key = sorted(composed)[0]
    np.testing.assert_allclose(composed[key], compose_transforms(transforms[key], mllt),
                               rtol=1e-5, atol=1e-5)
    run_cli(["transform-feats", str(tmp_path / "0.mat"), f"scp:{data}/feats.scp",
             f"ark:{tmp_path / 'bad.ark'}"], ok=False)       # 91 columns for 13-dim features
    run_cli(["transform-feats", f"ark:{tmp_path / 'trans.1'}", f"scp:{data}/feats.scp",
             f"ark:{tmp_path / 'bad.ark'}"], ok=False)


def test_dimension_mismatch_names_the_utterance(yesno, yesno_data, tmp_path):
    mono = yesno / "exp" / "mono"
    result = run_cli(["gmm-acc-mllt", "--splice-opts", "--left-context=3 --right-context=3",
                      str(mono / "final.mdl"), str(yesno_data), str(mono / "ali.1.gz"),
                      str(tmp_path / "1.macc")], ok=False, log_file=tmp_path / "acc.log")
    assert "31 of 31 utterances skipped" in result.output
    assert "skipping utterance 0_0_0_0_1_1_1_1: features have dimension 91, the model " \
        "expects 39" in (tmp_path / "acc.log").read_text()


def test_fmllr_per_speaker_then_applied_leaves_little_to_gain(yesno, yesno_data, tmp_path):
    """One speaker ('global'): a second pass on the adapted features (--speaker-transforms)
    finds much less to improve than the first."""
    mono = yesno / "exp" / "mono"
    common = ["--delta-order", "2", "--fmllr-num-iters", "8", "--spk2utt",
              str(yesno_data / "spk2utt")]
    gains = []
    for name, extra in [("first", []),
                        ("second", ["--speaker-transforms", f"ark:{tmp_path / 'trans.first'}"])]:
        log_file = tmp_path / f"{name}.log"
        run_cli(["gmm-est-fmllr", *common, *extra, str(mono / "final.mdl"), str(yesno_data),
                 str(mono / "ali.1.gz"), str(tmp_path / f"trans.{name}")], log_file=log_file)
        line = next(x for x in log_file.read_text().splitlines() if "For speaker global" in x)
        gains.append(float(line.split("auxf-impr from fMLLR is ")[1].split(",")[0]))
    assert list(read_matrix_table(f"ark:{tmp_path / 'trans.first'}")) == ["global"]
    assert gains[0] > 0.5 and 0 <= gains[1] < 0.2 * gains[0], gains


def test_diagonal_fmllr_command_writes_a_diagonal_transform(yesno, yesno_data, tmp_path):
    mono = yesno / "exp" / "mono"
    log_file = tmp_path / "diag.log"
    run_cli(["gmm-est-fmllr", "--delta-order", "2", "--fmllr-update-type", "diag", "--spk2utt",
             str(yesno_data / "spk2utt"), str(mono / "final.mdl"), str(yesno_data),
             str(mono / "ali.1.gz"), str(tmp_path / "trans.1")], log_file=log_file)
    (W,) = read_matrix_table(f"ark:{tmp_path / 'trans.1'}").values()
    A = W[:, :-1]
    assert W.shape == (39, 40) and not (A - np.diag(np.diag(A))).any()
    assert not np.allclose(W, np.hstack([np.eye(39), np.zeros((39, 1))]))
    line = next(x for x in log_file.read_text().splitlines() if "For speaker global" in x)
    assert float(line.split("auxf-impr from fMLLR is ")[1].split(",")[0]) > 0
