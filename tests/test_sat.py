"""Speaker-adaptive training (tri3): lattice posteriors (lattice-to-post), fMLLR from posteriors,
the SI alignment model's statistics (gmm-acc-stats-twofeats, gmm-est --update-flags), and
steps/train_sat.sh + align_fmllr.sh + decode_fmllr.sh on the Kaldi yesno data split into two
pseudo-speakers."""
from __future__ import annotations

import re
import shutil
import struct

import kaldiio
import numpy as np
import pytest

from conftest import REPO, YESNO, run_script
from emasr.kaldi.alignments import iter_alignment_file
from emasr.ali.posterior import Posterior, read_posteriors, write_posteriors
from emasr.kaldi.lattice_io import (LatticeArcs, LatticeArchiveWriter, LatticeFormatError,
                                     read_lattices, to_kaldifst)
from emasr.decode.lattice_post import forward_backward
from emasr.gmm.accumulate import GmmStats
from emasr.transform.gmm import read_gmm_model
from emasr.kaldi.matrix_io import read_matrix_table, write_matrix_table
from gmm_helpers import LANG, MONO, write_data_dir, yesno_mfcc_feats, yesno_texts

STEPS = REPO / "steps"
SILENCE = (LANG / "phones" / "silence.csl").read_text().strip()


def lattice(arcs: list[tuple], finals: dict[int, tuple[float, float]]) -> LatticeArcs:
    """(src, dst, transition id, word, graph cost, acoustic cost) arcs, start state 0."""
    table = np.array(arcs, dtype=np.float64)
    ints = table[:, :4].astype(np.int64)
    return LatticeArcs(ints[:, 0], ints[:, 1], ints[:, 2], ints[:, 3], table[:, 4], table[:, 5],
                       finals, 0, int(ints[:, :2].max()) + 1)


def run_cli(args: list[str], ok: bool = True, log_file=None):
    from click.testing import CliRunner
    from emasr.cli import main
    logging_args = ["--log-file", str(log_file)] if log_file else []
    result = CliRunner().invoke(main, [*logging_args, *[str(a) for a in args]])
    assert (result.exit_code == 0) == ok, result.output
    return result


def run_ok(args, cwd):
    result = run_script([str(a) for a in args], cwd=cwd)
    assert result.returncode == 0, \
        f"{args[0]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


# -- posteriors --

def test_single_path_lattice_gives_its_path_with_posterior_one():
    # frame 0: tid 3; an epsilon arc with a word; frames 1, 2: tid 5
    single = lattice([(0, 1, 3, 0, 0.5, 2.0), (1, 2, 0, 7, 1.0, 0.0), (2, 3, 5, 0, 0.0, 3.0),
                      (3, 4, 5, 0, 0.0, 1.0)], {4: (0.2, 0.0)})
    post, like = forward_backward(single, acoustic_scale=0.1)
    assert post.num_frames == 3 and post.frames.tolist() == [0, 1, 2]
    assert post.ids.tolist() == [3, 5, 5]
    np.testing.assert_allclose(post.weights, 1.0, rtol=1e-12)
    assert like == pytest.approx(-(0.5 + 1.0 + 0.2 + 0.1 * 6.0))


def test_posteriors_sum_to_one_per_frame_and_follow_the_costs():
    # two paths: tids 1 2 (acoustic 2) and 4 2 (acoustic 3), graph costs 0
    diamond = lattice([(0, 1, 1, 0, 0.0, 1.0), (0, 2, 4, 0, 0.0, 2.0), (1, 3, 2, 9, 0.0, 1.0),
                       (2, 3, 2, 9, 0.0, 1.0)], {3: (0.0, 0.0)})
    post, like = forward_backward(diamond, acoustic_scale=0.5)
    p = np.exp(-1.0) / (np.exp(-1.0) + np.exp(-1.5))
    frames = post.frame_lists()
    assert [i for i, _ in frames[0]] == [1, 4] and frames[1] == [(2, 1.0)]
    np.testing.assert_allclose([w for _, w in frames[0]], [p, 1 - p])
    np.testing.assert_allclose(post.frame_totals(), 1.0)
    assert like == pytest.approx(np.logaddexp(-1.0, -1.5))
    # an epsilon arc that skips a frame on one path: not a decoder's (time-synchronous) lattice
    with pytest.raises(LatticeFormatError, match="frames 0 and 1"):
        forward_backward(lattice([(0, 1, 1, 0, 0, 0), (0, 1, 0, 0, 0, 0)], {1: (0.0, 0.0)}))


def test_lattice_to_post_writes_kaldi_posterior_archives(tmp_path):
    diamond = lattice([(0, 1, 1, 0, 0.0, 1.0), (0, 2, 4, 0, 0.0, 2.0), (1, 3, 2, 9, 0.0, 1.0),
                       (2, 3, 2, 9, 0.0, 1.0)], {3: (0.0, 0.0)})
    with LatticeArchiveWriter(str(tmp_path / "lat.1.gz")) as writer:
        writer.write("utt1", to_kaldifst(diamond))
    run_cli(["lattice-to-post", "--acoustic-scale", 0.5, tmp_path / "lat.1.gz",
             tmp_path / "post.1.gz"])
    [(utt, post)] = list(read_posteriors(tmp_path / "post.1.gz"))
    expected, _ = forward_backward(diamond, acoustic_scale=0.5)
    assert utt == "utt1" and post.num_frames == 2
    np.testing.assert_allclose(post.weights, expected.weights, rtol=1e-6)
    # Kaldi's binary PosteriorHolder layout: size byte 4 before every int32 and float32
    write_posteriors(tmp_path / "post.ark", [("u", Posterior.from_frame_lists([[(7, 0.25)],
                                                                                []]))])
    assert (tmp_path / "post.ark").read_bytes() == (
        b"u \0B" + struct.pack("<bibibibf", 4, 2, 4, 1, 4, 7, 4, 0.25) + struct.pack("<bi", 4, 0))
    # and Kaldi's text form
    (tmp_path / "post.txt").write_text("a [ 12 0.6 14 0.4 ] [ 12 1 ]\nb [ ]\n")
    posts = dict(read_posteriors(tmp_path / "post.txt"))
    assert posts["a"].frame_lists() == [[(12, 0.6), (14, 0.4)], [(12, 1.0)]]
    assert posts["b"].num_frames == 1 and posts["b"].frame_lists() == [[]]


# -- fMLLR from posteriors, the alignment model's statistics --

def pass_likes(stdout: str) -> dict[int, float]:
    """Each pass's likelihood of the unadapted features (with the transforms' logdet)."""
    return {int(m.group(1)): float(m.group(2)) for m in
            re.finditer(r"pass (\d+) done: avg like per frame = [-\d.]+, \+ logdet [-\d.]+ = "
                        r"([-\d.]+)", stdout)}


@pytest.fixture(scope="module")
def yesno_two_speakers(tmp_path_factory):
    return write_data_dir(tmp_path_factory.mktemp("yesno") / "train", yesno_mfcc_feats(),
                          yesno_texts(), num_speakers=2)


def test_fmllr_from_one_hot_posteriors_equals_fmllr_from_alignments(yesno_two_speakers,
                                                                     tmp_path):
    data, model, ali = yesno_two_speakers, MONO / "final.mdl", MONO / "ali.1.gz"
    write_posteriors(tmp_path / "post.1.gz", ((utt, Posterior.from_alignment(a))
                                              for utt, a in iter_alignment_file(ali)))
    common = ["--delta-order", 2, "--fmllr-num-iters", 8, "--spk2utt", data / "spk2utt",
              "--silence-phones", SILENCE, "--silence-weight", 0.0]
    run_cli(["gmm-est-fmllr", *common, model, data, ali, tmp_path / "trans.ali"])
    run_cli(["gmm-est-fmllr", *common, "--post", model, data, tmp_path / "post.1.gz",
             tmp_path / "trans.post"], log_file=tmp_path / "post.log")
    # the model as its own Gaussian-posterior model: the same statistics
    run_cli(["gmm-est-fmllr", *common, "--post", "--gpost-model", model, model, data,
             tmp_path / "post.1.gz", tmp_path / "trans.gpost"])
    by_ali, by_post, by_gpost = (read_matrix_table(f"ark:{tmp_path / name}")
                                 for name in ("trans.ali", "trans.post", "trans.gpost"))
    assert sorted(by_ali) == ["spk1", "spk2"]
    for speaker in by_ali:
        assert np.abs(by_ali[speaker] - np.eye(39, 40)).max() > 0.05   # a real transform
        np.testing.assert_allclose(by_post[speaker], by_ali[speaker], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(by_gpost[speaker], by_ali[speaker], rtol=1e-4, atol=1e-4)
    gains = re.findall(r"auxf-impr from fMLLR is ([-\d.e]+)", (tmp_path / "post.log").read_text())
    assert len(gains) == 2 and min(float(g) for g in gains) > 0


def test_twofeats_statistics_are_of_the_unadapted_features(yesno_two_speakers, tmp_path):
    """Posteriors from the adapted features, sums of x from the unadapted: by linearity the
    adapted features' sums are A x + b occupancy. gmm-est --update-flags mv then keeps the
    weights and transitions."""
    data, model, ali = yesno_two_speakers, MONO / "final.mdl", MONO / "ali.1.gz"
    rng = np.random.default_rng(3)
    trans = {spk: np.hstack([np.eye(39) * scale + 0.02 * rng.standard_normal((39, 39)),
                             0.1 * rng.standard_normal((39, 1))])
             for spk, scale in (("spk1", 0.9), ("spk2", 1.1))}
    write_matrix_table(tmp_path / "trans.1", trans)
    adapted = ["--speaker-transforms", f"ark:{tmp_path / 'trans.1'}"]
    run_cli(["gmm-acc-stats-ali", *adapted, model, data, ali, tmp_path / "adapted.acc"])
    run_cli(["gmm-acc-stats-twofeats", *adapted, model, data, ali, tmp_path / "two.acc"])
    run_cli(["gmm-acc-stats-twofeats", model, data, ali, tmp_path / "x.acc"], ok=False)
    one, two = GmmStats.load(tmp_path / "adapted.acc"), GmmStats.load(tmp_path / "two.acc")
    np.testing.assert_allclose(two.occupancy, one.occupancy, rtol=1e-6)
    np.testing.assert_array_equal(two.transitions, one.transitions)
    assert two.log_like == pytest.approx(one.log_like)
    # one speaker's transform for all: the sums are linear in the features only per speaker,
    # so compare with a table holding spk1's transform under both speakers
    write_matrix_table(tmp_path / "trans.same", {"spk1": trans["spk1"], "spk2": trans["spk1"]})
    same = ["--speaker-transforms", f"ark:{tmp_path / 'trans.same'}"]
    run_cli(["gmm-acc-stats-ali", *same, model, data, ali, tmp_path / "same.acc"])
    run_cli(["gmm-acc-stats-twofeats", *same, model, data, ali, tmp_path / "same2.acc"])
    a, b = trans["spk1"][:, :39], trans["spk1"][:, 39]
    adapted_sums, si = GmmStats.load(tmp_path / "same.acc"), GmmStats.load(tmp_path / "same2.acc")
    np.testing.assert_allclose(si.x @ a.T + si.occupancy[:, None] * b, adapted_sums.x,
                               rtol=1e-3, atol=1e-2)
    run_cli(["gmm-est", "--update-flags", "mv", "--remove-low-count-gaussians", "false", model,
             tmp_path / "si.mdl", tmp_path / "two.acc"])
    before, after = read_gmm_model(model), read_gmm_model(tmp_path / "si.mdl")
    np.testing.assert_array_equal(after.transitions.log_probs, before.transitions.log_probs)
    assert [len(p.weights) for p in after.pdfs] == [len(p.weights) for p in before.pdfs]
    np.testing.assert_allclose(after.pdfs[2].weights, before.pdfs[2].weights, rtol=1e-6)
    assert np.abs(after.pdfs[2].means - before.pdfs[2].means).max() > 0.01
    run_cli(["gmm-est", "--update-flags", "mq", model, tmp_path / "bad.mdl",
             tmp_path / "two.acc"], ok=False)


def short_sat_run(data, cwd, *options):
    """train_sat.sh from Kaldi's yesno monophones: 3 passes, fMLLR on pass 2, silence counted."""
    return run_ok([STEPS / "train_sat.sh", "--silence-weight", 1.0, "--num-iters", 3,
                   "--fmllr-iters", 2, "--realign-iters", "", "--max-iter-inc", 2,
                   "--tree-thresh", 100, "--tree-min-count", 20, *options, 20, 200, data, LANG,
                   MONO, "exp/tri3"], cwd)


def test_an_fmllr_pass_raises_the_likelihood_by_at_least_its_auxf_improvement(
        yesno_two_speakers, tmp_path):
    """With silence counted (weight 1), the pass that re-estimates fMLLR gains, in likelihood
    of the unadapted features (adapted likelihood + log-determinant), at least the auxiliary
    function's improvement: the same model and alignments, and EM's bound."""
    result = short_sat_run(yesno_two_speakers, tmp_path)
    likes = pass_likes(result.stdout)
    gain = float(re.search(r"pass 2 done: .*fMLLR auxf improvement ([-\d.]+)",
                           result.stdout).group(1))
    assert gain > 0.5, result.stdout
    assert likes[2] - likes[1] >= gain - 2e-3, (likes, gain)
    assert "--fmllr-min-count" not in result.stderr


def test_speakers_below_the_min_count_keep_the_identity_and_are_warned_of(yesno_two_speakers,
                                                                          tmp_path):
    """Kaldi's --fmllr-min-count: a speaker with fewer frames gets no transform (as every
    one-utterance pseudo-speaker of the simulated corpus at 500), and the step says so."""
    result = short_sat_run(yesno_two_speakers, tmp_path, "--fmllr-min-count", 100000)
    assert "initial fMLLR auxf improvement per frame: 0.0000" in result.stdout
    assert "pass 2 done: " in result.stdout and "improvement 0.0000 per frame" in result.stdout
    assert "WARNING gmm_feats.sh:" in result.stderr, result.stderr
    assert "2 of 2 speakers have at most --fmllr-min-count 100000 frames" in result.stderr
    transforms = sorted((tmp_path / "exp" / "tri3").glob("trans.*"))
    assert transforms
    for trans in transforms:
        for matrix in read_matrix_table(f"ark:{trans}").values():
            np.testing.assert_array_equal(matrix, np.eye(39, 40))


def test_train_sat_refuses_an_ali_dir_whose_transforms_miss_a_job(yesno_two_speakers,
                                                                  tmp_path):
    ali_dir = tmp_path / "exp" / "tri_ali"
    ali_dir.mkdir(parents=True)
    for name in ("final.mdl", "tree", "ali.1.gz"):
        shutil.copy(MONO / name, ali_dir / name)
    shutil.copy(MONO / "ali.1.gz", ali_dir / "ali.2.gz")
    (ali_dir / "num_jobs").write_text("2\n")
    write_matrix_table(ali_dir / "trans.1", {"spk1": np.eye(39, 40)})
    result = run_script([str(STEPS / "train_sat.sh"), "20", "200", str(yesno_two_speakers),
                         str(LANG), str(ali_dir), str(tmp_path / "exp" / "tri3")], cwd=tmp_path)
    assert result.returncode == 1
    assert f"expected file {ali_dir}/trans.2 to exist ({ali_dir} has num_jobs 2)" \
        in result.stderr, result.stderr
    assert not (tmp_path / "exp" / "tri3").exists()
    for script in ("train_sat.sh", "align_fmllr.sh", "decode_fmllr.sh"):
        result = run_script([str(STEPS / script)], cwd=tmp_path)
        assert result.returncode == 1 and "Usage:" in result.stderr


# -- train_sat.sh, align_fmllr.sh, decode_fmllr.sh --

def best_wer(decode_dir) -> float:
    return min(float(re.search(r"%WER ([\d.]+)", p.read_text()).group(1))
               for p in decode_dir.glob("wer_*"))


@pytest.mark.slow  # about 70 short jobs: 50 s of wall time, 25 s of CPU on a loaded 2-core machine
def test_yesno_sat_train_align_decode(tmp_path):
    for subset in ("train_yesno", "test_yesno"):
        write_data_dir(tmp_path / "data" / subset, yesno_mfcc_feats(subset, dither=1.0),
                       yesno_texts(subset), num_speakers=2)
    # From Kaldi's monophone alignments (delta features, no transforms: train_sat.sh estimates
    # the first ones from them).
    result = run_ok([STEPS / "train_sat.sh", "--num-iters", 8, "--fmllr-iters", "2 4",
                     "--realign-iters", "3 6", "--max-iter-inc", 6, "--tree-thresh", 100,
                     "--tree-min-count", 20, 20, 200, "data/train_yesno", LANG, MONO,
                     "exp/tri3"], tmp_path)
    tri3 = tmp_path / "exp" / "tri3"
    assert "estimating the initial fMLLR transforms" in result.stdout
    gains = [float(g) for g in re.findall(r"fMLLR auxf improvement ([-\d.]+)", result.stdout)]
    assert len(gains) == 2 and min(gains) > 0, result.stdout
    likes = pass_likes(result.stdout)
    assert sorted(likes) == list(range(1, 8)) and likes[7] > likes[1], likes
    trans = read_matrix_table(f"ark:{tri3 / 'trans.1'}")           # Kaldi's archive format
    assert sorted(trans) == ["spk1", "spk2"]
    with kaldiio.ReadHelper(f"ark:{tri3 / 'trans.1'}") as reader:
        assert all(m.shape == (39, 40) and m.dtype == np.float32 for _, m in reader)
    sat, alimdl = read_gmm_model(tri3 / "final.mdl"), read_gmm_model(tri3 / "final.alimdl")
    assert [len(p.weights) for p in alimdl.pdfs] == [len(p.weights) for p in sat.pdfs]
    assert (tri3 / "delta_order").read_text().strip() == "2" and not (tri3 / "final.mat").exists()

    result = run_ok([STEPS / "align_fmllr.sh", "--nj", 2, "data/train_yesno", LANG, "exp/tri3",
                     "exp/tri3_ali"], tmp_path)
    ali_dir = tmp_path / "exp" / "tri3_ali"
    assert "final.alimdl" in (ali_dir / "log" / "align_pass1.1.log").read_text()
    assert "--gpost-model" in (ali_dir / "log" / "fmllr.1.log").read_text()
    assert [sorted(read_matrix_table(f"ark:{ali_dir / f'trans.{n}'}")) for n in (1, 2)] == \
        [["spk1"], ["spk2"]]
    alignments = {}
    for n in (1, 2):
        alignments.update(iter_alignment_file(ali_dir / f"ali.{n}.gz"))
    trained = dict(iter_alignment_file(tri3 / "ali.1.gz"))
    assert len(alignments) == 31
    agree = np.mean([np.mean(alignments[u] == trained[u]) for u in trained])
    assert agree > 0.8, agree
    # An fMLLR alignment dir carries its transforms: train_sat.sh starts from them.
    result = run_ok([STEPS / "train_sat.sh", "--num-iters", 3, "--fmllr-iters", "2",
                     "--realign-iters", "", "--max-iter-inc", 2, "--tree-thresh", 100,
                     "--tree-min-count", 20, 20, 200, "data/train_yesno", LANG, "exp/tri3_ali",
                     "exp/tri3b"], tmp_path)
    assert "using the transforms of exp/tri3_ali as the starting transforms" in result.stdout

    run_ok([REPO / "utils" / "mkgraph.sh", YESNO / "data" / "lang_test_tg", "exp/tri3",
            "exp/tri3/graph"], tmp_path)
    result = run_ok([STEPS / "decode_fmllr.sh", "--nj", 2, "exp/tri3/graph", "data/test_yesno",
                     "exp/tri3/decode_test"], tmp_path)
    decode, si = tri3 / "decode_test", tmp_path / "exp" / "tri3" / "decode_test.si"
    assert "final.alimdl" in (si / "log" / "decode.1.log").read_text()
    first, second = (float(re.search(rf"{k}-pass fMLLR auxf improvement per frame: ([-\d.]+)",
                                     result.stdout).group(1)) for k in ("first", "second"))
    assert first > 0 and 0 <= second < first, result.stdout
    assert sorted(read_matrix_table(f"ark:{decode / 'trans.2'}")) == ["spk2"]
    assert "--speaker-transforms ark:exp/tri3/decode_test/trans.1" in \
        (decode / "log" / "acoustic_rescore.1.log").read_text()
    assert best_wer(decode) <= 3.0 and best_wer(si) <= 5.0, (best_wer(decode), best_wer(si))
    # Lattice posteriors of a decoder's lattice sum to 1 per frame.
    for utt, arcs in list(read_lattices(str(si / "lat.1.gz")))[:3]:
        post, _ = forward_backward(arcs, acoustic_scale=0.083333)
        np.testing.assert_allclose(post.frame_totals(), 1.0, atol=1e-4)
    # Rescoring with the decoding's own model and features gives the decoder's acoustic costs.
    run_cli(["gmm-rescore-lattice", "--cmvn-opts", "", "--delta-order", 2,
             tri3 / "final.alimdl", si / "lat.2.gz", tmp_path / "data/test_yesno/split2/2",
             tmp_path / "rescored.gz"])
    for (utt, old), (_, new) in zip(read_lattices(str(si / "lat.2.gz")),
                                    read_lattices(str(tmp_path / "rescored.gz"))):
        np.testing.assert_allclose(new.acoustic, old.acoustic, rtol=1e-4, atol=1e-2)
    # Inputs that do not agree fail before any work, naming the dir.
    result = run_script([str(STEPS / "decode_fmllr.sh"), "--nj", "1", "--si-dir", str(si),
                         "exp/tri3/graph", "data/test_yesno", "exp/tri3/decode_x"], cwd=tmp_path)
    assert result.returncode == 1 and f"--si-dir {si} has num_jobs '2'" in result.stderr
    result = run_script([str(STEPS / "decode.sh"), "--nj", "1", "--transform-dir", str(decode),
                         "exp/tri3/graph", "data/test_yesno", "exp/tri3/decode_y"], cwd=tmp_path)
    assert result.returncode == 1 and f"--transform-dir {decode} has num_jobs '2'" \
        in result.stderr
    result = run_script([str(STEPS / "align_si.sh"), "--nj", "2", "data/train_yesno", str(LANG),
                         "exp/tri3", "exp/tri3_si_ali"], cwd=tmp_path)
    assert result.returncode == 0 and "is a speaker-adapted (SAT) system" in result.stderr
