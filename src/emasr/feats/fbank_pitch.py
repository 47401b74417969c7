"""Fbank + Kaldi pitch (Kaldi's steps/make_fbank_pitch.sh), pasted as compute-fbank-feats and
compute-and-process-kaldi-pitch-feats piped into `paste-feats --length-tolerance=2`."""
from __future__ import annotations

import numpy as np

from emasr.feats.fbank import FbankExtractor
from emasr.feats.kaldi_options import pitch_options, read_kaldi_config
from emasr.feats.mfcc_pitch import check_pitch_geometry, compute_pitch, paste_feats
from emasr.feats.wav import Audio


class FbankPitchExtractor:
    """Fbank from one config and pitch from another, with the same frame geometry, pasted."""

    feat_type = "fbank_pitch"

    def __init__(self, fbank_config: str, pitch_config: str):
        self.fbank = FbankExtractor(fbank_config)
        self.config_paths = [fbank_config, pitch_config]
        self.geometry = self.fbank.geometry
        self.pitch_opts = pitch_options(read_kaldi_config(pitch_config), source=pitch_config)
        check_pitch_geometry(self.pitch_opts, pitch_config, self.geometry, fbank_config)

    @property
    def dim(self) -> int:
        return self.fbank.dim + self.pitch_opts.process.dim

    def compute(self, audio: Audio, source: str = "audio") -> np.ndarray:
        fbank = self.fbank.compute(audio, source)  # checks the rate and length
        return paste_feats([fbank, compute_pitch(self.pitch_opts, audio)], source)
