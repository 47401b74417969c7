"""Plain MFCC (Kaldi's compute-mfcc-feats, steps/make_mfcc.sh) through kaldi-native-fbank.

The first feature step of most Kaldi recipes (yesno, WSJ, Librispeech GMMs): 13 cepstra from 23
mel bins by default, options from a Kaldi-syntax config such as the recipe's conf/mfcc.conf.
"""
from __future__ import annotations

import kaldi_native_fbank as knf
import numpy as np

from emasr.feats.framing import (FrameGeometry, check_audio_fits, dithered, extract_all_frames,
                                  take_dither)
from emasr.feats.kaldi_options import mfcc_options, read_kaldi_config
from emasr.feats.wav import Audio


class MfccExtractor:
    """Computes Kaldi-identical MFCC for whole utterances from a Kaldi-syntax config file."""

    feat_type = "mfcc"

    def __init__(self, config_path: str):
        self.config_paths = [config_path]
        self.opts = mfcc_options(read_kaldi_config(config_path), source=config_path)
        self.geometry = FrameGeometry.of(self.opts.frame_opts)
        self.dither = take_dither(self.opts.frame_opts)

    @property
    def dim(self) -> int:
        return self.opts.num_ceps

    def compute(self, audio: Audio, source: str = "audio") -> np.ndarray:
        check_audio_fits(audio, self.geometry, source)
        samples = dithered(audio.samples, self.dither, source)
        return extract_all_frames(knf.OnlineMfcc(self.opts), audio.rate, samples)
