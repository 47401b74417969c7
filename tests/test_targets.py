"""make-targets on the real Kaldi yesno alignments: per-frame pdfs checked against Kaldi's own
transition model, lengths against fbank features computed from the fixture's wavs, at k=1 and
k=3; tolerance rules, pdf-level and subsampled alignment dirs, and bad input that must write
nothing."""
from __future__ import annotations

import gzip
import math
import shutil

import kaldiio
import numpy as np
import pytest

import kaldi_hmm_gmm

from conftest import REPO, YESNO, run_script
from emasr.kaldi.alignments import AlignmentError, iter_alignment_file
from emasr.ali.targets import TargetsError, load_targets, log_priors, make_targets
from emasr.feats.fbank import FbankExtractor
from emasr.feats.pipeline import FeaturePipeline, PipelineConfig
from emasr.feats.wav import read_wav_spec
from emasr.kaldi.model_io import read_tree

MONO = YESNO / "exp" / "mono"
FINAL_OCCS = [923, 31, 1525, 2627, 5418, 398, 908, 1675, 1076, 1481, 2934]


@pytest.fixture(scope="module")
def yesno_feats(tmp_path_factory):
    """A data dir with fbank features of the 31 training wavs (8 kHz) and no utt2num_frames."""
    data = tmp_path_factory.mktemp("yesno") / "train"
    data.mkdir()
    conf = data.parent / "fbank.conf"
    conf.write_text("--sample-frequency=8000\n--num-mel-bins=23\n")
    extractor = FbankExtractor(str(conf))
    wav_scp = (YESNO / "data" / "train_yesno" / "wav.scp").read_text().split("\n")
    feats, samples = {}, {}
    for line in filter(None, wav_scp):
        utt, rel = line.split()
        audio = read_wav_spec(str(YESNO / rel))
        feats[utt] = extractor.compute(audio)
        samples[utt] = len(audio.samples)
    kaldiio.save_ark(str(data / "feats.ark"), feats, scp=str(data / "feats.scp"))
    (data / "utt2spk").write_text("".join(f"{u} global\n" for u in sorted(feats)))
    for utt, matrix in feats.items():  # 25 ms windows, 10 ms shift at 8 kHz, snip_edges
        assert matrix.shape[0] == 1 + (samples[utt] - 200) // 80
    return data, feats


@pytest.fixture(scope="module")
def kaldi_tid2pdf():
    """transition id -> pdf from Kaldi's own TransitionModel (tree + topology), not our reader."""
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read((YESNO / "data" / "lang" / "topo").read_text())
    model = kaldi_hmm_gmm.TransitionModel(read_tree(MONO / "tree"), topo)
    return np.array([-1] + [model.transition_id_to_pdf(t)
                            for t in range(1, model.num_transition_ids + 1)])


@pytest.fixture(scope="module")
def kaldi_alignments():
    return dict(iter_alignment_file(MONO / "ali.1.gz"))


def frames_file(data, feats, tmp_path, changes=None):
    """A copy of the data dir with utt2num_frames (optionally altered) instead of feats.scp."""
    out = tmp_path / "data"
    out.mkdir()
    counts = {u: m.shape[0] for u, m in feats.items()}
    counts.update(changes or {})
    (out / "utt2num_frames").write_text("".join(f"{u} {n}\n" for u, n in sorted(counts.items())))
    shutil.copy(data / "utt2spk", out / "utt2spk")
    return out


@pytest.mark.parametrize("k", [1, 3])
def test_kaldi_alignments_become_targets(yesno_feats, kaldi_tid2pdf, kaldi_alignments, tmp_path, k):
    data, feats = yesno_feats
    summary = make_targets(MONO, data, tmp_path / "targets", subsampling_factor=k)
    assert summary.written == 31 and not summary.skipped and summary.never_seen == []
    targets = load_targets(tmp_path / "targets")
    assert targets.num_pdfs == 11 and targets.subsampling_factor == k
    pipeline = FeaturePipeline(PipelineConfig(cmvn="none", stack=k))
    total = 0
    for utt, tids in kaldi_alignments.items():
        got = targets.reader[utt]
        assert got.dtype == np.int32
        # the network's input for this utterance has exactly as many frames as its targets
        assert len(got) == pipeline.transform(feats[utt], None).shape[0] == math.ceil(
            feats[utt].shape[0] / k)
        assert len(tids) == feats[utt].shape[0]  # Kaldi's alignment covers every 10 ms frame
        centres = np.minimum(np.arange(len(got)) * k + k // 2, len(tids) - 1)
        assert np.array_equal(got, kaldi_tid2pdf[tids][centres])
        total += len(got)
    assert targets.counts.sum() == total == summary.frames
    if k == 1:  # Kaldi's own occupancies of its last training pass over these alignments
        assert targets.counts.tolist() == FINAL_OCCS
    np.testing.assert_allclose(targets.log_priors, np.log(targets.counts / total), rtol=1e-6)
    assert (tmp_path / "targets" / "frame_subsampling_factor").read_text() == f"{k}\n"


def test_priors_count_only_the_training_utterances(yesno_feats, kaldi_tid2pdf,
                                                   kaldi_alignments, tmp_path):
    data, _ = yesno_feats
    train = tmp_path / "train"
    train.mkdir()
    chosen = sorted(kaldi_alignments)[:10]   # the "training set"; the other 21 are "dev"
    (train / "utt2spk").write_text("".join(f"{u} global\n" for u in chosen))
    summary = make_targets(MONO, data, tmp_path / "targets", 1, priors_from=train)
    targets = load_targets(tmp_path / "targets")
    assert summary.written == 31 and summary.prior_utts == 10   # targets for all, priors for 10
    counts = np.bincount(np.concatenate([kaldi_tid2pdf[kaldi_alignments[u]] for u in chosen]),
                         minlength=11)
    assert summary.prior_frames == counts.sum() < targets.counts.sum()
    np.testing.assert_allclose(targets.log_priors, np.log(counts / counts.sum()), rtol=1e-6)
    # a pdf that training never saw gets Kaldi nnet1's sqrt(FLT_MAX): it can never win a frame
    unseen = log_priors(np.array([3, 0, 1]), 5e-6)
    assert unseen[1] > 1e18 and unseen[0] == pytest.approx(np.log(0.75))
    assert "prior_utterances 10" in (tmp_path / "targets" / "summary").read_text()
    (train / "utt2spk").write_text("nobody global\n")
    with pytest.raises(TargetsError, match="none of the utterances"):
        make_targets(MONO, data, tmp_path / "none", 1, priors_from=train)
    assert not (tmp_path / "none").exists()


def test_pdf_alignments_and_their_own_num_pdfs(yesno_feats, kaldi_tid2pdf, kaldi_alignments,
                                               tmp_path):
    data, _ = yesno_feats
    ali = tmp_path / "pdf_ali"
    ali.mkdir()
    pdfs = {u: kaldi_tid2pdf[t].astype(np.int32) for u, t in kaldi_alignments.items()}
    kaldiio.save_ark(str(ali / "ali.1"), pdfs)  # binary, not gzipped
    (ali / "num_pdfs").write_text("11\n")
    make_targets(ali, data, tmp_path / "from_pdfs", 3, ali_type="pdf")
    make_targets(MONO, data, tmp_path / "from_tids", 3)
    for name in ("pdf_counts", "prior.vec", "num_pdfs"):
        assert (tmp_path / "from_pdfs" / name).read_text() == \
               (tmp_path / "from_tids" / name).read_text()
    a, b = load_targets(tmp_path / "from_pdfs"), load_targets(tmp_path / "from_tids")
    assert all(np.array_equal(a.reader[u], b.reader[u]) for u in pdfs)


def test_alignments_already_at_the_network_rate(yesno_feats, kaldi_tid2pdf, kaldi_alignments,
                                                tmp_path):
    data, feats = yesno_feats
    ali = tmp_path / "lfr_ali"
    ali.mkdir()
    pipeline = FeaturePipeline(PipelineConfig(cmvn="none", stack=3))
    lfr = {u: pipeline.subsample_labels(kaldi_tid2pdf[t]).astype(np.int32)
           for u, t in kaldi_alignments.items()}
    first = sorted(lfr)[0]
    lfr[first] = lfr[first][:-1]  # one frame short: within the tolerance of 1
    with gzip.open(ali / "ali.1.gz", "wb") as f:
        kaldiio.save_ark(f, lfr)
    (ali / "frame_subsampling_factor").write_text("3\n")
    (ali / "num_pdfs").write_text("11\n")
    make_targets(ali, data, tmp_path / "t", 3, ali_type="pdf")
    got = load_targets(tmp_path / "t").reader
    assert len(got[first]) == math.ceil(feats[first].shape[0] / 3)
    assert got[first][-1] == got[first][-2]  # padded by repeating the last label
    with pytest.raises(TargetsError, match="frame_subsampling_factor is 3"):
        make_targets(ali, data, tmp_path / "t1", 1, ali_type="pdf")


def test_length_tolerance_and_the_loss_limit(yesno_feats, tmp_path):
    data, feats = yesno_feats
    utts = sorted(feats)
    changes = {utts[0]: feats[utts[0]].shape[0] + 2,   # within Kaldi's 2 frames: kept
               utts[1]: feats[utts[1]].shape[0] + 3}   # past it: skipped
    frames = frames_file(data, feats, tmp_path, changes)
    with pytest.raises(TargetsError, match=r"1 of 31 utterances .* \(3\.2%\).*more than the "
                                           r"allowed 2%.*length mismatch.*nothing written"):
        make_targets(MONO, frames, tmp_path / "targets", 3)
    assert not (tmp_path / "targets").exists()
    summary = make_targets(MONO, frames, tmp_path / "targets", 3, max_lost=0.05)
    assert summary.written == 30 and list(summary.skipped) == [utts[1]]
    skipped = (tmp_path / "targets" / "skipped").read_text()
    assert skipped.startswith(f"{utts[1]} length mismatch: alignment has ")
    assert "ali.1.gz" in skipped
    targets = load_targets(tmp_path / "targets")
    assert len(targets.reader[utts[0]]) == math.ceil(changes[utts[0]] / 3)
    assert utts[1] not in targets.reader
    assert "skipped_length_mismatch 1" in (tmp_path / "targets" / "summary").read_text()


def test_unmatched_utterances_are_listed(yesno_feats, tmp_path):
    data, feats = yesno_feats
    utts = sorted(feats)
    frames = frames_file(data, feats, tmp_path, {"zz_extra_utt": 500})
    text = (frames / "utt2num_frames").read_text().replace(f"{utts[2]} ", "dropped_utt ", 1)
    (frames / "utt2num_frames").write_text("".join(sorted(text.splitlines(True))))
    summary = make_targets(MONO, frames, tmp_path / "t", 1, max_lost=0.1)
    assert summary.skipped == {utts[2]: "no features", "dropped_utt": "no alignment",
                               "zz_extra_utt": "no alignment"}
    assert summary.feature_utts == 32 and summary.written == 30


def _ali_copy(tmp_path, edit=None, model=True):
    ali = tmp_path / "ali"
    ali.mkdir()
    text = gzip.decompress((MONO / "ali.1.gz").read_bytes()).decode()
    (ali / "ali.1.gz").write_bytes(gzip.compress((edit(text) if edit else text).encode()))
    if model:
        shutil.copy(MONO / "final.mdl", ali / "final.mdl")
    return ali


def _previous_run(yesno_feats, tmp_path):
    """A complete targets dir from an earlier run, which a failing run must leave untouched."""
    out = tmp_path / "targets"
    make_targets(MONO, yesno_feats[0], out, 3)
    return out, {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


def test_transition_id_beyond_the_model(yesno_feats, tmp_path):
    out, before = _previous_run(yesno_feats, tmp_path)
    ali = _ali_copy(tmp_path, lambda t: t.replace(" 16 18 ", " 16 31 ", 1))
    with pytest.raises(AlignmentError, match=r"ali\.1\.gz: utterance 0_0_0_0_1_1_1_1: transition "
                                             r"id 31 at frame 7 is outside the model's 1\.\.30"):
        make_targets(ali, yesno_feats[0], out, 3)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_pdf_id_beyond_num_pdfs(yesno_feats, tmp_path):
    ali = tmp_path / "pdf_ali"
    ali.mkdir()
    kaldiio.save_ark(str(ali / "ali.1"), {"0_0_0_0_1_1_1_1": np.array([0, 3, 11], np.int32)})
    with pytest.raises(AlignmentError, match=r"ali\.1: utterance 0_0_0_0_1_1_1_1: pdf id 11 at "
                                             r"frame 2 is outside 0\.\.10"):
        make_targets(ali, yesno_feats[0], tmp_path / "t", 3, ali_type="pdf", num_pdfs=11)
    assert not (tmp_path / "t").exists()


def test_truncated_gzip_names_file_and_last_utterance(yesno_feats, tmp_path):
    out, before = _previous_run(yesno_feats, tmp_path)
    ali = _ali_copy(tmp_path)
    data = (ali / "ali.1.gz").read_bytes()
    (ali / "ali.1.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(AlignmentError, match=r"ali\.1\.gz: damaged or truncated alignment file, "
                                             r"after utterance \S+ \(\d+ read\)"):
        make_targets(ali, yesno_feats[0], out, 3)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_alignment_dir_without_model(yesno_feats, tmp_path):
    ali = _ali_copy(tmp_path, model=False)
    with pytest.raises(AlignmentError, match=r"expected file \S+/ali/final\.mdl to exist"):
        make_targets(ali, yesno_feats[0], tmp_path / "t", 3)
    (ali / "num_jobs").write_text("2\n")
    shutil.copy(MONO / "final.mdl", ali / "final.mdl")
    with pytest.raises(AlignmentError, match=r"expected file \S+/ali\.2\.gz to exist"):
        make_targets(ali, yesno_feats[0], tmp_path / "t", 3)
    assert not (tmp_path / "t").exists()


def test_make_targets_script(yesno_feats, tmp_path):
    data, _ = yesno_feats
    out = tmp_path / "exp" / "targets"
    result = run_script(["steps/nnet/make_targets.sh", "--frame-subsampling-factor", "3",
                         str(MONO), str(data), str(out)], cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "wrote targets to" in result.stdout and "(31 utterances)" in result.stdout
    assert load_targets(out).subsampling_factor == 3
    assert "utterances_written 31" in (out / "log" / "make_targets.log").read_text()
    empty = tmp_path / "empty_ali"
    empty.mkdir()
    result = run_script(["steps/nnet/make_targets.sh", str(empty), str(data), str(out)],
                        cwd=REPO)
    assert result.returncode != 0 and f"expected file {empty}/final.mdl to exist" in result.stderr
