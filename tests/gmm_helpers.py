"""Helpers of the GMM tests: the Kaldi yesno training data with 13-dim MFCC (Kaldi's yesno
features, undithered) and CMVN, so that Kaldi's own model in the fixture can score it."""
from __future__ import annotations

from pathlib import Path

import kaldi_native_fbank as knf
import kaldiio

from conftest import YESNO
from emasr.feats.cmvn import cmvn_stats
from emasr.feats.framing import dithered, extract_all_frames
from emasr.feats.kaldi_options import mfcc_options, read_kaldi_config
from emasr.feats.wav import read_wav_spec

MONO = YESNO / "exp" / "mono"
LANG = YESNO / "data" / "lang"


def yesno_mfcc_feats(subset: str = "train_yesno", dither: float = 0.0) -> dict:
    """13-dim MFCC of the yesno recordings; undithered by default, or with Kaldi's default
    dither 1.0 as its recipe computed them (seeded per utterance: the same on every call)."""
    options = mfcc_options(read_kaldi_config(YESNO / "conf" / "mfcc.conf"))
    options.frame_opts.dither = 0.0
    feats = {}
    for line in (YESNO / "data" / subset / "wav.scp").read_text().splitlines():
        utt, rel = line.split()
        if utt.startswith("README"):  # the fixture's test set lists the corpus README files
            continue
        audio = read_wav_spec(str(YESNO / rel))
        feats[utt] = extract_all_frames(knf.OnlineMfcc(options), audio.rate,
                                        dithered(audio.samples, dither, utt))
    return feats


def write_data_dir(data: Path, feats: dict, texts: dict[str, str], num_speakers: int = 1
                   ) -> Path:
    """A data dir with feats.scp, cmvn.scp (per speaker), text, utt2spk, spk2utt: one speaker
    ("global"), or ``num_speakers`` pseudo-speakers spk1, spk2, .. taking the sorted utterances
    in contiguous blocks (so that utt2spk sorts by speaker too, as Kaldi requires)."""
    data.mkdir(parents=True, exist_ok=True)
    kaldiio.save_ark(str(data / "feats.ark"), feats, scp=str(data / "feats.scp"))
    dims = {f.shape[1] for f in feats.values()}
    dim = min(dims, key=lambda d: -sum(f.shape[1] == d for f in feats.values()))
    utts = sorted(feats)
    speaker = {u: "global" if num_speakers == 1 else f"spk{1 + i * num_speakers // len(utts)}"
               for i, u in enumerate(utts)}
    spk2utt: dict[str, list[str]] = {}
    for utt in utts:
        spk2utt.setdefault(speaker[utt], []).append(utt)
    stats = {spk: sum(cmvn_stats(feats[u]) for u in members if feats[u].shape[1] == dim)
             for spk, members in spk2utt.items()}
    kaldiio.save_ark(str(data / "cmvn.ark"), stats, scp=str(data / "cmvn.scp"))
    (data / "text").write_text("".join(f"{u} {texts[u]}\n" for u in utts))
    (data / "utt2spk").write_text("".join(f"{u} {speaker[u]}\n" for u in utts))
    (data / "spk2utt").write_text("".join(f"{spk} {' '.join(members)}\n"
                                          for spk, members in spk2utt.items()))
    return data


def yesno_texts(subset: str = "train_yesno") -> dict[str, str]:
    lines = (YESNO / "data" / subset / "text").read_text().splitlines()
    return dict(line.split(None, 1) for line in lines)
