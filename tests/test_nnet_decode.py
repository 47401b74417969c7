"""Network decoding end to end: train a tiny DNN on features generated from a toy grammar's pdf
sequences, then steps/nnet/decode.sh (nnet-forward over splits -> decode-loglikes) recovers the
sentences."""
import os

import kaldiio
import numpy as np
import pytest

from conftest import REPO, run_script
from decode_toylang import GRAMMAR, LEXICON, SENTENCES, make_lang, monophone_model, pdf_sequence
from emasr.decode.graph import make_graph
from emasr.kaldi.model_io import KaldiModel, write_model
from nnet_synthetic import write_lines

DIM, STACK = 6, 3


def write_data(root, name, lang, trans_model, utts, seed):
    """A data dir whose 10 ms frames are their pdf's mean plus noise; returns network-rate pdfs."""
    rng = np.random.default_rng(seed)
    means = np.random.default_rng(99).normal(scale=2.0, size=(trans_model.num_pdfs, DIM))
    data = os.path.join(root, name)
    os.makedirs(data, exist_ok=True)
    feats, pdfs, text, utt2spk = {}, {}, {}, {}
    for i in range(utts):
        spk = f"spk{i % 2}"
        utt = f"{spk}-{name}{i:03d}"
        utt2spk[utt] = spk
        sentence = SENTENCES[i % 2]
        phones = [lang.phones["SIL"]] + [lang.phones[p] for w in sentence.split()
                                         for p in LEXICON[w]] + [lang.phones["SIL"]]
        seq = np.array(pdf_sequence(trans_model, phones, frames_per_state=int(rng.integers(2, 4))))
        raw = np.repeat(seq, STACK)
        feats[utt] = (means[raw] + 0.5 * rng.normal(size=(len(raw), DIM))).astype(np.float32)
        pdfs[utt], text[utt] = seq.astype(np.int32), sentence
    kaldiio.save_ark(os.path.join(data, "feats.ark"), feats, scp=os.path.join(data, "feats.scp"))
    speakers = sorted(set(utt2spk.values()))
    cmvn = {}
    for spk in speakers:
        frames = np.concatenate([feats[u] for u in sorted(feats) if utt2spk[u] == spk])
        stats = np.zeros((2, DIM + 1))
        stats[0, :DIM], stats[0, DIM] = frames.sum(0), len(frames)
        stats[1, :DIM] = (frames.astype(np.float64) ** 2).sum(0)
        cmvn[spk] = stats
    kaldiio.save_ark(os.path.join(data, "cmvn.ark"), cmvn, scp=os.path.join(data, "cmvn.scp"))
    write_lines(os.path.join(data, "utt2spk"), [f"{u} {utt2spk[u]}" for u in sorted(feats)])
    write_lines(os.path.join(data, "spk2utt"),
                [f"{s} " + " ".join(u for u in sorted(feats) if utt2spk[u] == s) for s in speakers])
    write_lines(os.path.join(data, "text"), [f"{u} {text[u]}" for u in sorted(text)])
    return pdfs, text


def write_targets_dir(out, pdfs, num_pdfs):
    os.makedirs(out, exist_ok=True)
    kaldiio.save_ark(os.path.join(out, "pdf.1.ark"), dict(sorted(pdfs.items())),
                     scp=os.path.join(out, "pdf.scp"))
    counts = np.bincount(np.concatenate(list(pdfs.values())), minlength=num_pdfs)
    priors = np.log(np.maximum(counts / counts.sum(), 1e-5))
    write_lines(os.path.join(out, "num_pdfs"), [str(num_pdfs)])
    write_lines(os.path.join(out, "frame_subsampling_factor"), [str(STACK)])
    write_lines(os.path.join(out, "pdf_counts"), ["[ " + " ".join(map(str, counts)) + " ]"])
    write_lines(os.path.join(out, "prior.vec"), ["[ " + " ".join(f"{p:.6f}" for p in priors) + " ]"])


@pytest.mark.slow
def test_trained_network_decodes_the_toy_grammar(tmp_path, monkeypatch):
    monkeypatch.setenv("EMASR_NUM_THREADS", "1")
    lang = make_lang(str(tmp_path / "lang"), LEXICON, GRAMMAR)
    trans_model, ctx_dep = monophone_model(lang.lang_dir)
    make_graph(lang.lang_dir, str(tmp_path / "graph"), trans_model, ctx_dep)
    train_pdfs, _ = write_data(str(tmp_path), "train", lang, trans_model, 24, seed=1)
    test_pdfs, truth = write_data(str(tmp_path), "test", lang, trans_model, 6, seed=2)
    write_targets_dir(str(tmp_path / "targets"), {**train_pdfs, **test_pdfs}, trans_model.num_pdfs)
    write_model(str(tmp_path / "final.mdl"), KaldiModel(trans_model, None))
    exp = tmp_path / "exp"
    result = run_script([str(REPO / "steps/nnet/train.sh"), "--strategy", "single",
                         "--ema-decay", "0.5", "--trans-mdl", str(tmp_path / "final.mdl"),
                         "--set-opts", "model.hidden_layers=2 model.hidden_dim=32 features.splice=1 "
                         "data.minibatch_frames=32 sync.block_size=2 train.epochs=4 train.lr=0.1",
                         str(tmp_path / "targets"), str(tmp_path / "train"), str(tmp_path / "test"),
                         str(exp)])
    assert result.returncode == 0, result.stdout + result.stderr + \
        (exp / "log" / "train.log").read_text()
    for which in ("final", "ema"):
        check_decode(tmp_path, exp, which, truth)


def check_decode(tmp_path, exp, which, truth):
    decode = exp / f"decode_test_{which}"
    result = run_script([str(REPO / "steps/nnet/decode.sh"), "--nj", "2", "--model", which,
                         "--skip-scoring", "true", "--keep-loglikes", "true",
                         str(tmp_path / "graph"), str(tmp_path / "test"), str(decode)])
    logs = "".join(p.read_text() for p in sorted(decode.glob("log/*.log")))
    assert result.returncode == 0, result.stdout + result.stderr + logs
    hyps = {}
    for job in (1, 2):
        assert (decode / f"lat.{job}.gz").is_file()
        for line in open(decode / f"hyp.{job}.txt", encoding="utf-8"):
            utt, _, words = line.strip().partition(" ")
            hyps[utt] = words
    assert sorted(hyps) == sorted(truth)
    assert sum(hyps[u] == truth[u] for u in truth) >= 5, (hyps, truth)
    assert len(list(decode.glob("loglikes.*.scp"))) == 2
