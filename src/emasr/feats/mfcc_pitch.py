"""MFCC + Kaldi pitch (Kaldi's make_mfcc_pitch.sh) through kaldi-native-fbank.

Pitch is kaldi-native-fbank's port of compute-and-process-kaldi-pitch-feats (POV feature,
normalized log-pitch, delta log-pitch). The pitch tracker works on audio resampled to 4 kHz, so its
frame count can exceed the MFCC count by a frame; as Kaldi's `paste-feats --length-tolerance=2`,
the two are cut to the shorter length, and a larger difference is an error.
"""
from __future__ import annotations

import kaldi_native_fbank as knf
import numpy as np

from emasr.feats.framing import (FrameGeometry, check_audio_fits, dithered, extract_all_frames,
                                  samples_for_knf, take_dither)
from emasr.feats.kaldi_options import (ConfigError, PitchOptions, mfcc_options, pitch_options,
                                       read_kaldi_config)
from emasr.feats.wav import Audio, WavError

PASTE_LENGTH_TOLERANCE = 2


def paste_feats(parts: list[np.ndarray], source: str,
                tolerance: int = PASTE_LENGTH_TOLERANCE) -> np.ndarray:
    """Kaldi's paste-feats: concatenate dimensions, truncating to the shortest within tolerance."""
    lengths = [len(p) for p in parts]
    if max(lengths) - min(lengths) > tolerance:
        raise WavError(f"{source}: feature lengths {lengths} differ by more than {tolerance} "
                       "frames")
    shortest = min(lengths)
    return np.concatenate([p[:shortest] for p in parts], axis=1)


def check_pitch_geometry(pitch_opts: PitchOptions, pitch_config: str, geometry: FrameGeometry,
                         base_config: str) -> None:
    """Pitch and the features it is pasted to must have the same frames."""
    pitch_geometry = FrameGeometry.of(pitch_opts.extract)
    if pitch_geometry != geometry:
        raise ConfigError(f"{pitch_config} and {base_config} disagree on frame geometry "
                          f"({pitch_geometry} vs {geometry}); both feature types of "
                          "an utterance must have the same frames")


def compute_pitch(pitch_opts: PitchOptions, audio: Audio) -> np.ndarray:
    """compute-and-process-kaldi-pitch-feats on undithered audio (Kaldi's pitch has no dither)."""
    return knf.compute_and_process_kaldi_pitch(pitch_opts.extract, pitch_opts.process,
                                               samples_for_knf(audio.samples))


class MfccPitchExtractor:
    """MFCC from one config and pitch from another, with the same frame geometry, pasted."""

    feat_type = "mfcc_pitch"

    def __init__(self, mfcc_config: str, pitch_config: str):
        self.config_paths = [mfcc_config, pitch_config]
        self.mfcc_opts = mfcc_options(read_kaldi_config(mfcc_config), source=mfcc_config)
        self.pitch_opts = pitch_options(read_kaldi_config(pitch_config), source=pitch_config)
        self.geometry = FrameGeometry.of(self.mfcc_opts.frame_opts)
        self.dither = take_dither(self.mfcc_opts.frame_opts)
        check_pitch_geometry(self.pitch_opts, pitch_config, self.geometry, mfcc_config)

    @property
    def dim(self) -> int:
        return self.mfcc_opts.num_ceps + self.pitch_opts.process.dim

    def compute(self, audio: Audio, source: str = "audio") -> np.ndarray:
        check_audio_fits(audio, self.geometry, source)
        mfcc = extract_all_frames(knf.OnlineMfcc(self.mfcc_opts), audio.rate,
                                  dithered(audio.samples, self.dither, source))
        return paste_feats([mfcc, compute_pitch(self.pitch_opts, audio)], source)
