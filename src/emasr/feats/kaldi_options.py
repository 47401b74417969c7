"""Kaldi feature config files (`--num-mel-bins=80`, `# comment`) -> kaldi-native-fbank options.

A config is read exactly as Kaldi's ParseOptions::ReadConfigFile reads it: everything after `#` is
a comment, blank lines are skipped, every other line must be `--name=value` (or `--name` for a
boolean true). Option names are Kaldi's (`compute-fbank-feats --help`); defaults are Kaldi's too,
which differ from kaldi-native-fbank's in one place that matters: Kaldi's dither is 1.0 on raw
16-bit sample values. An option Kaldi has but we do not implement is an error, not silently ignored.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import kaldi_native_fbank as knf


class ConfigError(ValueError):
    """A feature config file is malformed or names an unsupported option."""


def read_kaldi_config(path: str | os.PathLike) -> dict[str, str]:
    """Read `--name=value` lines into a dict (booleans given as `--name` become "true")."""
    path = os.fspath(path)
    options: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if not line.startswith("--") or " " in line.split("=", 1)[0]:
                raise ConfigError(f"{path}:{number}: expected '--name=value', got '{line}'")
            name, sep, value = line[2:].partition("=")
            options[name.replace("_", "-")] = value.strip() if sep else "true"
    return options


def _bool(text: str) -> bool:
    low = text.lower()
    if low in ("true", "t", "1"):
        return True
    if low in ("false", "f", "0"):
        return False
    raise ValueError(f"expected true or false, got '{text}'")


# Kaldi option name -> (attribute path in the knf options object, parser)
Setter = tuple[str, Callable[[str], object]]

FRAME_OPTIONS: dict[str, Setter] = {
    "sample-frequency": ("frame_opts.samp_freq", float),
    "frame-length": ("frame_opts.frame_length_ms", float),
    "frame-shift": ("frame_opts.frame_shift_ms", float),
    "dither": ("frame_opts.dither", float),
    "preemphasis-coefficient": ("frame_opts.preemph_coeff", float),
    "remove-dc-offset": ("frame_opts.remove_dc_offset", _bool),
    "window-type": ("frame_opts.window_type", str),
    "round-to-power-of-two": ("frame_opts.round_to_power_of_two", _bool),
    "blackman-coeff": ("frame_opts.blackman_coeff", float),
    "snip-edges": ("frame_opts.snip_edges", _bool),
    "num-mel-bins": ("mel_opts.num_bins", int),
    "low-freq": ("mel_opts.low_freq", float),
    "high-freq": ("mel_opts.high_freq", float),
    "vtln-low": ("mel_opts.vtln_low", float),
    "vtln-high": ("mel_opts.vtln_high", float),
    "debug-mel": ("mel_opts.debug_mel", _bool),
    "use-energy": ("use_energy", _bool),
    "energy-floor": ("energy_floor", float),
    "raw-energy": ("raw_energy", _bool),
    "htk-compat": ("htk_compat", _bool),
}
FBANK_OPTIONS: dict[str, Setter] = {
    **FRAME_OPTIONS,
    "use-log-fbank": ("use_log_fbank", _bool),
    "use-power": ("use_power", _bool),
}
MFCC_OPTIONS: dict[str, Setter] = {
    **FRAME_OPTIONS,
    "num-ceps": ("num_ceps", int),
    "cepstral-lifter": ("cepstral_lifter", float),
}
PITCH_OPTIONS: dict[str, Setter] = {
    "sample-frequency": ("samp_freq", float),
    "frame-length": ("frame_length_ms", float),
    "frame-shift": ("frame_shift_ms", float),
    "preemphasis-coefficient": ("preemph_coeff", float),
    "min-f0": ("min_f0", float),
    "max-f0": ("max_f0", float),
    "soft-min-f0": ("soft_min_f0", float),
    "penalty-factor": ("penalty_factor", float),
    "lowpass-cutoff": ("lowpass_cutoff", float),
    "resample-frequency": ("resample_freq", float),
    "delta-pitch": ("delta_pitch", float),
    "nccf-ballast": ("nccf_ballast", float),
    "nccf-ballast-online": ("nccf_ballast_online", _bool),
    "lowpass-filter-width": ("lowpass_filter_width", int),
    "upsample-filter-width": ("upsample_filter_width", int),
    "max-frames-latency": ("max_frames_latency", int),
    "frames-per-chunk": ("frames_per_chunk", int),
    "simulate-first-pass-online": ("simulate_first_pass_online", _bool),
    "recompute-frame": ("recompute_frame", int),
    "snip-edges": ("snip_edges", _bool),
}
PROCESS_PITCH_OPTIONS: dict[str, Setter] = {
    "pitch-scale": ("pitch_scale", float),
    "pov-scale": ("pov_scale", float),
    "pov-offset": ("pov_offset", float),
    "delta-pitch-scale": ("delta_pitch_scale", float),
    "delta-pitch-noise-stddev": ("delta_pitch_noise_stddev", float),
    "normalization-left-context": ("normalization_left_context", int),
    "normalization-right-context": ("normalization_right_context", int),
    "delta-window": ("delta_window", int),
    "delay": ("delay", int),
    "add-pov-feature": ("add_pov_feature", _bool),
    "add-normalized-log-pitch": ("add_normalized_log_pitch", _bool),
    "add-delta-pitch": ("add_delta_pitch", _bool),
    "add-raw-log-pitch": ("add_raw_log_pitch", _bool),
}
# Kaldi's defaults where kaldi-native-fbank's differ (knf expects samples scaled to [-1, 1]).
KALDI_FRAME_DEFAULTS = {"dither": "1.0"}


def _set(target: object, dotted: str, value: object) -> None:
    *parents, leaf = dotted.split(".")
    for name in parents:  # nested option structs are returned by reference
        target = getattr(target, name)
    setattr(target, leaf, value)


def apply_options(target: object, options: dict[str, str], table: dict[str, Setter],
                  source: str) -> None:
    """Set every option of `options` on `target` through `table`; unknown names are an error."""
    for name, text in options.items():
        if name not in table:
            raise ConfigError(f"{source}: option --{name} is not supported "
                              f"(supported: {', '.join('--' + n for n in sorted(table))})")
        attribute, parse = table[name]
        try:
            _set(target, attribute, parse(text))
        except ValueError as err:
            raise ConfigError(f"{source}: bad value for --{name}: {err}") from None


def fbank_options(options: dict[str, str], source: str = "fbank config") -> knf.FbankOptions:
    opts = knf.FbankOptions()
    apply_options(opts, {**KALDI_FRAME_DEFAULTS, **options}, FBANK_OPTIONS, source)
    return opts


def mfcc_options(options: dict[str, str], source: str = "mfcc config") -> knf.MfccOptions:
    opts = knf.MfccOptions()
    apply_options(opts, {**KALDI_FRAME_DEFAULTS, **options}, MFCC_OPTIONS, source)
    return opts


@dataclass
class PitchOptions:
    """Kaldi's compute-and-process-kaldi-pitch-feats options: extraction plus post-processing."""

    extract: knf.PitchExtractionOptions
    process: knf.ProcessPitchOptions


def pitch_options(options: dict[str, str], source: str = "pitch config") -> PitchOptions:
    extract, process = knf.PitchExtractionOptions(), knf.ProcessPitchOptions()
    extract_part = {k: v for k, v in options.items() if k not in PROCESS_PITCH_OPTIONS}
    process_part = {k: v for k, v in options.items() if k in PROCESS_PITCH_OPTIONS}
    apply_options(extract, extract_part, PITCH_OPTIONS, source)
    apply_options(process, process_part, PROCESS_PITCH_OPTIONS, source)
    return PitchOptions(extract, process)
