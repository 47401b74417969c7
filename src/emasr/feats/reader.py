"""Stream a data dir's features together with the CMVN stats that belong to each utterance.

Both feature consumers use it: the network pipeline (emasr.feats.pipeline) and the GMM input
(emasr.feats.deltas.iter_gmm_feats), so per-speaker lookup (utt2spk -> cmvn.scp) has one home.
"""
from __future__ import annotations

import os
from typing import Iterable, Iterator

import numpy as np

from emasr.feats.cmvn import GLOBAL_CMVN_FILE, CmvnError, read_stats
from emasr.io.table import read_table
from emasr.kaldi.tables import read_scp

CMVN_MODES = ("speaker", "global", "none")


def _require(path: str) -> str:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"expected file {path} to exist")
    return path


def iter_feats_with_stats(data_dir: str, cmvn: str = "speaker", utts: Iterable[str] | None = None,
                          global_stats: np.ndarray | None = None
                          ) -> Iterator[tuple[str, np.ndarray, np.ndarray | None]]:
    """Yield (utt, feats [T, D] float32, stats or None) in feats.scp order (or the order of utts).

    cmvn: "speaker" reads cmvn.scp through utt2spk; "global" uses global_stats, else
    <data_dir>/global_cmvn; "none" yields None for the stats.
    """
    if cmvn not in CMVN_MODES:
        raise ValueError(f"cmvn must be one of {CMVN_MODES}, got '{cmvn}'")
    feats = read_scp(_require(os.path.join(data_dir, "feats.scp")))
    if cmvn == "speaker":
        utt2spk = read_table(_require(os.path.join(data_dir, "utt2spk")))
        speaker_stats = read_scp(_require(os.path.join(data_dir, "cmvn.scp")))
    elif cmvn == "global" and global_stats is None:
        global_stats = read_stats(_require(os.path.join(data_dir, GLOBAL_CMVN_FILE)))
    for utt in (feats.keys() if utts is None else utts):
        if utt not in feats:
            raise KeyError(f"utterance {utt} is not in {data_dir}/feats.scp")
        stats = None
        if cmvn == "speaker":
            speaker = utt2spk.get(utt)
            if speaker is None or speaker not in speaker_stats:
                raise CmvnError(f"no CMVN stats for utterance {utt} (speaker {speaker}) in "
                                f"{data_dir}/cmvn.scp")
            stats = speaker_stats[speaker]
        elif cmvn == "global":
            stats = global_stats
        yield utt, np.asarray(feats[utt], dtype=np.float32), stats
