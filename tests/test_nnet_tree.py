"""The networks' own tree, as Kaldi's chain recipes build it: Kaldi's yesno lang dir copied with the
one-frame topology (utils/prepare_lang_nnet.sh), Kaldi's 3-state 10 ms alignments (exp/mono, read
in place) through steps/nnet/build_tree.sh --frame-subsampling-factor 3 into a network tree at
30 ms, then make_targets.sh, mkgraph.sh, a tiny network trained by steps/nnet/train.sh and decoded
by steps/nnet/decode.sh; the files meet through emasr check-compatible."""
from __future__ import annotations

import shutil

import kaldi_native_fbank as knf
import kaldiio
import numpy as np
import pytest

from conftest import REPO, YESNO, run_script
from emasr.kaldi.alignments import iter_alignment_file
from emasr.ali.convert import split_phones
from emasr.feats.cmvn import sum_stats
from emasr.feats.framing import extract_all_frames
from emasr.feats.kaldi_options import mfcc_options, read_kaldi_config
from emasr.feats.wav import read_wav_spec
from emasr.gmm.features import FeatureOptions, iter_features, subsample_frames
from emasr.kaldi.transitions import load_transition_table
from emasr.io.table import read_table, write_table

MONO = YESNO / "exp" / "mono"
LANG = YESNO / "data" / "lang_test_tg"
STACK = 3


def ok(args, **kwargs):
    result = run_script([str(a) for a in args], cwd=REPO, **kwargs)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def yesno_data(root, name):
    """A data dir of the fixture's wavs with 13-dim MFCC (Kaldi's yesno mfcc.conf), one speaker."""
    data = root / name
    data.mkdir(parents=True)
    opts = mfcc_options({**read_kaldi_config(YESNO / "conf" / "mfcc.conf"), "dither": "0"})
    wavs = {u: p for u, p in read_table(YESNO / f"data/{name}/wav.scp").items()
            if p.endswith(".wav")}
    feats = {u: extract_all_frames(knf.OnlineMfcc(opts), 8000,
                                   read_wav_spec(str(YESNO / p)).samples) for u, p in wavs.items()}
    kaldiio.save_ark(str(root / f"{name}.ark"), feats, scp=str(data / "feats.scp"))
    kaldiio.save_ark(str(root / f"{name}_cmvn.ark"), {"global": sum_stats(feats.values())},
                     scp=str(data / "cmvn.scp"))
    write_table(data / "utt2spk", {u: "global" for u in wavs})
    write_table(data / "spk2utt", {"global": " ".join(sorted(wavs))})
    write_table(data / "text", {u: " ".join("YES" if b == "1" else "NO" for b in u.split("_"))
                                for u in wavs})
    return data, feats


@pytest.fixture(scope="module")
def tree_dir(tmp_path_factory):
    """prepare_lang_nnet.sh, then build_tree.sh at factor 3 from Kaldi's exp/mono."""
    root = tmp_path_factory.mktemp("nnet_tree")
    train, feats = yesno_data(root, "train_yesno")
    ok(["utils/prepare_lang_nnet.sh", LANG, root / "lang_nnet"])
    ok(["steps/nnet/build_tree.sh", "--frame-subsampling-factor", STACK, "--tree-thresh", 50,
        "--context-opts", "--context-width=3 --central-position=1",
        40, train, root / "lang_nnet", MONO, root / "tree"])
    return root, train, feats


def test_nnet_lang_is_the_lang_with_the_skip_topology(tree_dir):
    root, _, _ = tree_dir
    lang = root / "lang_nnet"
    copied = sorted(p.relative_to(lang) for p in lang.rglob("*") if p.is_file()
                    and p.relative_to(lang).parts[0] != "tmp")  # mkgraph's cache may be there
    assert copied == sorted(p.relative_to(LANG) for p in LANG.rglob("*") if p.is_file())
    for path in copied:
        if str(path) != "topo":
            assert (lang / path).read_bytes() == (LANG / path).read_bytes(), path
    topo = (lang / "topo").read_text()
    assert topo != (LANG / "topo").read_text()
    # every phone passes in one frame: state 0 of Y/N (3 states) and of SIL (5) reach the final one
    assert "<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.166667 <Transition> 2 " \
           "0.166667 <Transition> 3 0.166667 </State>" in topo
    assert "<Transition> 5 0.1875 </State>" in topo


def test_build_tree_writes_a_network_tree_at_30_ms(tree_dir):
    root, _, feats = tree_dir
    tree = root / "tree"
    assert (tree / "frame_subsampling_factor").read_text().split() == [str(STACK)]
    assert (tree / "num_jobs").read_text().split() == ["1"]
    assert (tree / "phones.txt").read_bytes() == (LANG / "phones.txt").read_bytes()
    new = load_transition_table(tree / "final.mdl")
    assert new.num_pdfs > 11  # the monophone system's 11, split on context
    old = load_transition_table(MONO / "final.mdl")
    source = dict(iter_alignment_file(MONO / "ali.1.gz"))
    converted = dict(iter_alignment_file(tree / "ali.1.gz"))
    assert sorted(converted) == sorted(source) == sorted(feats)
    for utt, ali in converted.items():
        assert len(ali) == -(-len(feats[utt]) // STACK)  # ceil(T/3): the stacked features' length
        new_phones = [s.phone for s in split_phones(new, ali)]  # a path through the new HMMs
        assert new_phones == [s.phone for s in split_phones(old, source[utt])]
    # the transition probabilities were estimated from these 30 ms alignments
    log = (tree / "log" / "train_transitions.log").read_text()
    assert "transition update" in log
    assert (tree / "final.mdl").read_bytes() != (tree / "1.mdl").read_bytes()


def test_tree_stats_features_are_subsampled_like_the_labels(tree_dir):
    _, train, feats = tree_dir
    utt = sorted(feats)[0]
    full = dict((u, f) for u, f, _ in iter_features(str(train), FeatureOptions(), [utt]))[utt]
    sub = dict((u, f) for u, f, _ in iter_features(str(train), FeatureOptions(subsample=(3, 1)),
                                                    [utt]))[utt]
    assert len(sub) == -(-len(full) // 3)
    index = np.minimum(np.arange(len(sub)) * 3 + 1, len(full) - 1)
    np.testing.assert_array_equal(sub, full[index])
    np.testing.assert_array_equal(subsample_frames(np.arange(7)[:, None], 3, 1)[:, 0], [1, 4, 6])


@pytest.mark.slow
def test_kaldi_3_state_alignments_train_and_decode_a_network(tree_dir, monkeypatch):
    """Kaldi's exp/mono -> network tree -> targets, graph, a trained and
    decoded network; targets, tree and graph checked to belong together at every boundary."""
    monkeypatch.setenv("EMASR_NUM_THREADS", "1")
    root, train, _ = tree_dir
    tree, targets, graph, nnet = (root / n for n in ("tree", "targets", "graph", "nnet"))
    ok(["steps/nnet/make_targets.sh", tree, train, targets])  # the factor: tree's, 3
    assert (targets / "frame_subsampling_factor").read_text().split() == [str(STACK)]
    assert (targets / "num_pdfs").read_text().split() == [str(load_transition_table(
        tree / "final.mdl").num_pdfs)]
    ok(["utils/mkgraph.sh", root / "lang_nnet", tree, graph])
    ok(["emasr", "check-compatible", "--targets", targets, "--model", tree / "final.mdl",
        "--tree", tree / "tree", "--graph", graph])
    # targets with the same number of pdfs from another tree are refused
    other = root / "other_targets"
    shutil.copytree(targets, other)
    (other / "tree.sha256").write_text("0" * 64 + "\n")
    bad = run_script(["emasr", "check-compatible", "--targets", str(other), "--tree",
                      str(tree / "tree")], cwd=REPO)
    assert bad.returncode != 0 and "pdfs of another tree" in bad.stderr

    test, _ = yesno_data(root, "test_yesno")
    ok(["steps/nnet/train.sh", "--strategy", "single", "--trans-mdl", tree / "final.mdl",
        "--set-opts", "model.hidden_layers=2 model.hidden_dim=64 features.splice=1 "
        "features.norm_vars=true data.minibatch_frames=64 train.epochs=2 train.optimizer=adam "
        "train.lr=0.003", targets, train, train, nnet])
    decode = nnet / "decode_test"
    ok(["steps/nnet/decode.sh", "--nj", "1", graph, test, decode])
    hyps = {}
    for line in open(decode / "hyp.1.txt", encoding="utf-8"):
        utt, _, words = line.strip().partition(" ")
        hyps[utt] = words
    truth = read_table(test / "text")
    assert sorted(hyps) == sorted(truth)
    correct = sum(hyps[u] == truth[u] for u in truth)
    assert correct >= 20, (correct, hyps)
    best = (decode / "scoring_kaldi" / "best_wer").read_text().split()
    assert best[0] == "%WER" and float(best[1]) <= 5.0, best  # measured: 0.00 [ 0 / 232 ]
