"""A tiny synthetic, learnable training problem for the network tests: a data dir (feats.scp/ark,
cmvn.scp, utt2spk, spk2utt) and a targets dir in the interface-3 layout, written with kaldiio.

Each utterance is a sequence of pdf segments; a raw frame is its pdf's mean vector plus noise, so a
network can learn the mapping. Targets are at the network frame rate: the pdf of the frame at the
centre of each stacked window, index min(t*k + k//2, T-1).
"""
from __future__ import annotations

import math
import os

import kaldiio
import numpy as np

NUM_PDFS = 5
DIM = 4
STACK = 3


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def make_corpus(root, name="train", speakers=4, utts_per_speaker=4, seed=0, dim=DIM,
                num_pdfs=NUM_PDFS, min_frames=30, max_frames=60):
    """Write root/<name> (a data dir); returns {utt: pdf labels at the 10 ms frame rate}."""
    rng = np.random.default_rng(seed)
    means = np.random.default_rng(12345).normal(scale=2.0, size=(num_pdfs, dim))
    data = os.path.join(root, name)
    os.makedirs(data, exist_ok=True)
    feats, labels, utt2spk = {}, {}, {}
    for s in range(speakers):
        spk = f"{name}spk{s}"
        offset = rng.normal(size=dim)   # a speaker offset that CMVN removes
        for u in range(utts_per_speaker):
            utt = f"{spk}-utt{u:02d}"
            frames = int(rng.integers(min_frames, max_frames + 1))
            pdfs = np.repeat(rng.integers(0, num_pdfs, size=frames), rng.integers(3, 9, size=frames))
            pdfs = pdfs[:frames]
            feats[utt] = (means[pdfs] + offset + 0.3 * rng.normal(size=(frames, dim))).astype(np.float32)
            labels[utt], utt2spk[utt] = pdfs, spk
    kaldiio.save_ark(os.path.join(data, "feats.ark"), feats, scp=os.path.join(data, "feats.scp"))
    stats = {}
    for spk in sorted(set(utt2spk.values())):
        mats = np.concatenate([feats[u] for u in sorted(feats) if utt2spk[u] == spk]).astype(np.float64)
        stat = np.zeros((2, dim + 1))
        stat[0, :dim], stat[0, dim] = mats.sum(0), len(mats)
        stat[1, :dim] = (mats ** 2).sum(0)
        stats[spk] = stat
    kaldiio.save_ark(os.path.join(data, "cmvn.ark"), stats, scp=os.path.join(data, "cmvn.scp"))
    write_lines(os.path.join(data, "utt2spk"), [f"{u} {utt2spk[u]}" for u in sorted(utt2spk)])
    write_lines(os.path.join(data, "spk2utt"),
                [f"{s} " + " ".join(u for u in sorted(utt2spk) if utt2spk[u] == s)
                 for s in sorted(set(utt2spk.values()))])
    return labels


def network_rate(labels, k=STACK):
    n = math.ceil(len(labels) / k)
    return labels[np.minimum(np.arange(n) * k + k // 2, len(labels) - 1)]


def write_targets(root, labels, num_pdfs=NUM_PDFS, k=STACK, name="targets"):
    """Write root/<name> in the interface-3 layout for all utterances in `labels`."""
    out = os.path.join(root, name)
    os.makedirs(out, exist_ok=True)
    pdfs = {u: network_rate(labels[u], k).astype(np.int32) for u in sorted(labels)}
    kaldiio.save_ark(os.path.join(out, "pdf.1.ark"), pdfs, scp=os.path.join(out, "pdf.scp"))
    # counts cover num_pdfs entries even when (in bad-input tests) the ids go beyond it
    counts = np.bincount(np.concatenate(list(pdfs.values())), minlength=num_pdfs)[:num_pdfs]
    priors = np.log(np.maximum(counts / counts.sum(), 1e-8))
    write_lines(os.path.join(out, "num_pdfs"), [str(num_pdfs)])
    write_lines(os.path.join(out, "frame_subsampling_factor"), [str(k)])
    write_lines(os.path.join(out, "pdf_counts"), ["[ " + " ".join(map(str, counts)) + " ]"])
    write_lines(os.path.join(out, "prior.vec"),
                ["[ " + " ".join(f"{p:.6f}" for p in priors) + " ]"])
    return out


def make_problem(root, seed=0, train_speakers=4, utts_per_speaker=4):
    """Train and dev data dirs plus one targets dir covering both; returns their paths."""
    labels = make_corpus(root, "train", train_speakers, utts_per_speaker, seed=seed)
    labels.update(make_corpus(root, "dev", 2, 3, seed=seed + 100))
    targets = write_targets(root, labels)
    return targets, os.path.join(root, "train"), os.path.join(root, "dev")


TINY_DNN = ["model.hidden_layers=2", "model.hidden_dim=16", "features.splice=1",
            "data.minibatch_frames=16", "data.shuffle_buffer_frames=64", "sync.block_size=2",
            "train.lr=0.05", "train.epochs=1"]
TINY_LSTM = ["model.type=lstm", "model.num_layers=2", "model.hidden_size=16", "model.proj_size=8",
             "features.splice=0", "data.chunk_frames=5", "data.left_context=2",
             "data.output_delay=1", "data.chunks_per_minibatch=4", "data.shuffle_buffer_chunks=16",
             "sync.block_size=2", "train.lr=0.05", "train.epochs=1"]
