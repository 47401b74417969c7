"""LDA+MLLT (tri2) and the GMM feature pipeline it brings: steps/train_lda_mllt.sh on the Kaldi
yesno data, then align_si.sh and decode.sh reading its final.mat; the pipeline's stages (splice,
final.mat, per-speaker transforms) and its dimension check before any work."""
from __future__ import annotations

import re
import shutil

import kaldiio
import numpy as np
import pytest

from conftest import REPO, YESNO, run_script
from emasr.kaldi.alignments import iter_alignment_file
from emasr.feats.cmvn import apply_cmvn
from emasr.gmm.features import (FeatureOptions, check_model_dim, feature_dim, iter_features,
                                splice_feats)
from emasr.kaldi.matrix_io import read_matrix, write_matrix, write_matrix_table
from gmm_helpers import LANG, MONO, write_data_dir, yesno_mfcc_feats, yesno_texts

STEPS = REPO / "steps"
SPLICE = "--left-context=3 --right-context=3"


def run_ok(args, cwd):
    result = run_script([str(a) for a in args], cwd=cwd)
    assert result.returncode == 0, \
        f"{args[0]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def yesno_train(tmp_path_factory):
    return write_data_dir(tmp_path_factory.mktemp("yesno") / "train", yesno_mfcc_feats(),
                          yesno_texts())


# -- the pipeline --

def test_pipeline_is_cmvn_splice_transform_then_speaker_transform(yesno_train, tmp_path):
    rng = np.random.default_rng(0)
    lda = rng.standard_normal((10, 92))              # affine: 91 spliced dims + offset
    write_matrix(tmp_path / "final.mat", lda)
    utts = sorted(yesno_texts())
    # one transform keyed by the speaker ('global'), another keyed by an utterance
    speaker = np.hstack([np.eye(10) * 2.0, np.ones((10, 1))])
    write_matrix_table(tmp_path / "trans.spk", {"global": speaker})
    write_matrix_table(tmp_path / "trans.utt", {u: speaker * 0.5 for u in utts})
    raw = dict(kaldiio.load_scp(str(yesno_train / "feats.scp")).items())
    stats = kaldiio.load_scp(str(yesno_train / "cmvn.scp"))["global"]
    utt = utts[3]
    expected = splice_feats(apply_cmvn(raw[utt], stats, False), 3, 3) @ lda[:, :91].T + lda[:, 91]
    for table, scale in (("trans.spk", 1.0), ("trans.utt", 0.5)):
        options = FeatureOptions(delta_order=0, splice_opts=SPLICE,
                                 transform=str(tmp_path / "final.mat"),
                                 speaker_transforms=f"ark:{tmp_path / table}")
        got = {u: f for u, f, _ in iter_features(str(yesno_train), options, [utt])}
        np.testing.assert_allclose(got[utt], scale * (expected @ speaker[:, :10].T
                                                      + speaker[:, 10]), rtol=1e-4, atol=1e-3)
    dim, chain = feature_dim(str(yesno_train), options)
    assert dim == 10
    assert chain == (f"{yesno_train}/feats.scp (13) -> splice -3..+3 (91) -> "
                     f"{tmp_path}/final.mat (10) -> ark:{tmp_path}/trans.utt (10)")
    # deltas, the default pipeline: 13 -> 39
    assert feature_dim(str(yesno_train), FeatureOptions())[0] == 39


def test_model_of_another_dimension_fails_before_any_work(yesno_train, tmp_path):
    write_matrix(tmp_path / "wrong_input.mat", np.ones((39, 118)))  # for 16-dim MFCC+pitch
    write_matrix(tmp_path / "wrong_output.mat", np.ones((40, 91)))
    mono = str(MONO / "final.mdl")                                   # 39-dim
    for name, words in (("wrong_input.mat", ["39 x 118", "13", "splice -3..+3 (91)"]),
                        ("wrong_output.mat", ["expects 39-dimensional", "40-dimensional",
                                              "final.mdl"])):
        options = FeatureOptions(delta_order=0, splice_opts=SPLICE,
                                 transform=str(tmp_path / name))
        with pytest.raises(ValueError) as err:
            check_model_dim(mono, 39, str(yesno_train), options)
        assert name in str(err.value) and all(w in str(err.value) for w in words), err.value


def test_align_si_with_a_final_mat_of_the_wrong_input_dimension_names_it(yesno_train, tmp_path):
    model_dir = tmp_path / "exp" / "bad"
    model_dir.mkdir(parents=True)
    for name in ("final.mdl", "tree"):
        shutil.copy(MONO / name, model_dir / name)
    write_matrix(model_dir / "final.mat", np.eye(39, 92))   # 39 x 92: takes 91 or 92 dims
    (model_dir / "splice_opts").write_text("--left-context=4 --right-context=4\n")  # 117 dims
    result = run_script([str(STEPS / "align_si.sh"), "--nj", "1", str(yesno_train), str(LANG),
                         str(model_dir), str(tmp_path / "exp" / "bad_ali")], cwd=tmp_path)
    assert result.returncode == 1
    assert f"{model_dir}/final.mat is a 39 x 92 transform" in result.stderr, result.stderr
    assert "splice -4..+4 (117)" in result.stderr
    assert not (tmp_path / "exp" / "bad_ali" / "ali.1.gz").exists()
    result = run_script(["emasr", "feat-to-dim", "--splice-opts", SPLICE, "--transform",
                         str(model_dir / "final.mat"), str(yesno_train)], cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "39"


def test_usage_and_missing_inputs(tmp_path):
    result = run_script([str(STEPS / "train_lda_mllt.sh")], cwd=tmp_path)
    assert result.returncode == 1 and "Usage:" in result.stderr
    result = run_script([str(STEPS / "train_lda_mllt.sh"), "10", "100"] + ["nowhere"] * 4,
                        cwd=tmp_path)
    assert result.returncode == 1 and "expected file nowhere/" in result.stderr


# -- train_lda_mllt.sh, align_si.sh, decode.sh --

def update_likes(exp_dir) -> dict[int, float]:
    likes = {}
    for path in exp_dir.glob("log/update.*.log"):
        match = re.search(r"avg like per frame = ([-\d.]+)", path.read_text())
        likes[int(path.name.split(".")[1])] = float(match.group(1))
    return likes


@pytest.mark.slow  # about 40 short jobs (1 min on a quiet 2-core machine, 11 under load)
def test_yesno_lda_mllt_train_align_decode(tmp_path):
    for subset in ("train_yesno", "test_yesno"):
        write_data_dir(tmp_path / "data" / subset, yesno_mfcc_feats(subset, dither=1.0),
                       yesno_texts(subset))
    # From Kaldi's own monophone alignments. The LDA classes are their 11 pdfs, so at most 10
    # dimensions: the between-class covariance of C classes has rank C - 1 (and with silence
    # weighted 0, as Kaldi's script does, only the 6 pdfs of 'Y' and 'N' have frames: rank 5;
    # rows 6-10 are within-class whitened directions the GMMs can still model).
    result = run_ok([STEPS / "train_lda_mllt.sh", "--dim", 10, "--num-iters", 12,
                     "--mllt-iters", "2 4 6", "--realign-iters", "5 9", "--max-iter-inc", 8,
                     "--tree-thresh", 100, 20, 200, "data/train_yesno", LANG, MONO, "exp/tri2"],
                    tmp_path)
    tri2 = tmp_path / "exp" / "tri2"
    assert "pass 6: estimating MLLT" in result.stdout
    assert (tri2 / "splice_opts").read_text().strip() == SPLICE
    assert (tri2 / "cmvn_opts").exists() and not (tri2 / "delta_order").exists()
    assert (tri2 / "final.mat").resolve().name == "6.mat"
    lda, final = read_matrix(tri2 / "0.mat"), read_matrix(tri2 / "final.mat")
    assert lda.shape == final.shape == (10, 91)
    # final.mat = MLLT_6 MLLT_4 MLLT_2 LDA: the MLLT part is a well-conditioned 10 x 10 rotation
    # and scaling, not the identity
    mllt = final @ np.linalg.pinv(lda)
    np.testing.assert_allclose(mllt @ lda, final, atol=1e-5)
    assert np.abs(mllt - np.eye(10)).max() > 0.1 and np.linalg.cond(mllt) < 10
    likes = update_likes(tri2)
    assert sorted(likes) == list(range(1, 12))
    # The likelihood rises over the run (not pass by pass: a pass after MLLT rotated the means,
    # a realignment or a mix-up may dip); measured -13.77 at pass 1, -13.12 at 13.
    assert likes[11] > likes[1] + 0.3, likes
    assert likes[11] >= max(likes.values()) - 0.1, likes
    result = run_ok([STEPS / "align_si.sh", "--nj", 1, "data/train_yesno", LANG, "exp/tri2",
                     "exp/tri2_ali"], tmp_path)
    assert "(lda features)" in result.stdout
    ali_dir = tmp_path / "exp" / "tri2_ali"
    assert (ali_dir / "final.mat").read_bytes() == (tri2 / "final.mat").read_bytes()
    assert (ali_dir / "splice_opts").read_text() == (tri2 / "splice_opts").read_text()
    assert not (ali_dir / "delta_order").exists()
    assert "--transform exp/tri2/final.mat" in (ali_dir / "log" / "align.1.log").read_text()
    alignments = dict(iter_alignment_file(ali_dir / "ali.1.gz"))
    assert len(alignments) == 31
    # The ali dir is itself a model dir with final.mat: aligning with it gives the same result.
    run_ok([STEPS / "align_si.sh", "--nj", 1, "data/train_yesno", LANG, "exp/tri2_ali",
            "exp/tri2_ali2"], tmp_path)
    again = dict(iter_alignment_file(tmp_path / "exp" / "tri2_ali2" / "ali.1.gz"))
    assert all(np.array_equal(again[u], alignments[u]) for u in alignments)
    run_ok([REPO / "utils" / "mkgraph.sh", YESNO / "data" / "lang_test_tg", "exp/tri2",
            "exp/tri2/graph"], tmp_path)
    run_ok([STEPS / "decode.sh", "--nj", 1, "exp/tri2/graph", "data/test_yesno",
            "exp/tri2/decode_test"], tmp_path)
    decode_log = (tri2 / "decode_test" / "log" / "decode.1.log").read_text()
    assert "--transform exp/tri2/final.mat" in decode_log
    best = min(float(re.search(r"%WER ([\d.]+)", p.read_text()).group(1))
               for p in (tri2 / "decode_test").glob("wer_*"))
    assert best <= 5.0, best


def test_align_si_applies_per_speaker_transforms_of_a_transform_dir(yesno_train, tmp_path):
    """--transform-dir <dir> (trans.JOB keyed by speaker): identity transforms leave the
    alignments as they are; a dir of other num_jobs is refused, naming it."""
    trans_dir = tmp_path / "exp" / "fmllr"
    trans_dir.mkdir(parents=True)
    write_matrix_table(trans_dir / "trans.1", {"global": np.eye(39, 40)})   # [I 0]
    (trans_dir / "num_jobs").write_text("1\n")
    for name, extra in (("plain", []), ("adapted", ["--transform-dir", str(trans_dir)])):
        run_ok([STEPS / "align_si.sh", "--nj", 1, *extra, yesno_train, LANG, MONO,
                f"exp/{name}_ali"], tmp_path)
    log = (tmp_path / "exp" / "adapted_ali" / "log" / "align.1.log").read_text()
    assert f"--speaker-transforms ark:{trans_dir}/trans.1" in log
    plain, adapted = (dict(iter_alignment_file(tmp_path / "exp" / f"{n}_ali" / "ali.1.gz"))
                      for n in ("plain", "adapted"))
    assert len(plain) == 31 and all(np.array_equal(plain[u], adapted[u]) for u in plain)
    (trans_dir / "num_jobs").write_text("2\n")
    result = run_script([str(STEPS / "align_si.sh"), "--nj", "1", "--transform-dir",
                         str(trans_dir), str(yesno_train), str(LANG), str(MONO),
                         str(tmp_path / "exp" / "x_ali")], cwd=tmp_path)
    assert result.returncode == 1 and f"--transform-dir {trans_dir} has num_jobs '2'" \
        in result.stderr
