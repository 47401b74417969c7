"""Log-mel filterbank features (Kaldi's compute-fbank-feats) through kaldi-native-fbank."""
from __future__ import annotations

import kaldi_native_fbank as knf
import numpy as np

from emasr.feats.framing import (FrameGeometry, check_audio_fits, dithered, extract_all_frames,
                                  take_dither)
from emasr.feats.kaldi_options import fbank_options, read_kaldi_config
from emasr.feats.wav import Audio


class FbankExtractor:
    """Computes Kaldi-identical fbank for whole utterances from a Kaldi-syntax config file."""

    feat_type = "fbank"

    def __init__(self, config_path: str):
        self.config_paths = [config_path]
        self.opts = fbank_options(read_kaldi_config(config_path), source=config_path)
        self.geometry = FrameGeometry.of(self.opts.frame_opts)
        self.dither = take_dither(self.opts.frame_opts)

    @property
    def dim(self) -> int:
        return self.opts.mel_opts.num_bins + int(self.opts.use_energy)

    def compute(self, audio: Audio, source: str = "audio") -> np.ndarray:
        check_audio_fits(audio, self.geometry, source)
        samples = dithered(audio.samples, self.dither, source)
        return extract_all_frames(knf.OnlineFbank(self.opts), audio.rate, samples)
