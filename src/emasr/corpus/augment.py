"""Acoustic degradation of a clean synthesized utterance, driven by one random generator.

Order, as in a room and a device: speech -> reverberation -> additive noise (babble and coloured
noise at a random SNR) -> channel colouring -> level. Every knob lives in `AugmentConfig`; the
simulator exposes each one as a command-line option and docs/corpus.md documents the defaults.
Nothing here moves the speech in time (the room impulse response has its direct path at lag 0), so
the synthesizer's phone timings stay valid for the degraded audio.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emasr.feats.audio import next_power_of_two


@dataclass
class AugmentConfig:
    clean_fraction: float = 0.1      # share of utterances with no added noise
    snr_min: float = 0.0             # dB; the SNR of a noisy utterance is uniform in [min, max]
    snr_max: float = 20.0
    babble_talkers_min: int = 3      # babble = this many other talkers at once (uniform in range)
    babble_talkers_max: int = 6
    reverb_prob: float = 0.5         # share of utterances passed through a synthetic room
    rt60_min: float = 0.2            # s; reverberation time uniform in [min, max]
    rt60_max: float = 0.8
    drr_min: float = 0.0             # dB; direct-to-reverberant ratio uniform in [min, max]
    drr_max: float = 10.0
    channel_order: int = 6           # cepstral order of the random channel response
    channel_db: float = 4.0          # max magnitude (dB) of each cepstral term
    band_limit_prob: float = 0.3     # share of utterances through a telephone-like band (300 Hz-3.4..7 kHz)
    level_min: float = -35.0         # dBFS; output RMS level uniform in [min, max]
    level_max: float = -15.0


def speech_power(x: np.ndarray, frame: int = 320) -> float:
    """Mean power over active 20 ms frames (within 30 dB of the loudest): silence does not count."""
    num = max(1, len(x) // frame)
    energies = (x[:num * frame].reshape(num, frame) ** 2).mean(axis=1)
    active = energies[energies > energies.max() * 1e-3]
    return float(active.mean()) if len(active) else 1e-10


def reverberate(x: np.ndarray, rt60: float, drr_db: float, sample_rate: int,
                rng: np.random.Generator) -> np.ndarray:
    """Convolve with an exponentially decaying noise tail behind a unit direct path at lag 0."""
    length = int(rt60 * sample_rate)
    t = np.arange(1, length) / sample_rate
    tail = rng.standard_normal(length - 1) * np.exp(-6.908 * t / rt60)   # -60 dB at t = rt60
    tail *= np.sqrt(10 ** (-drr_db / 10) / max(np.sum(tail ** 2), 1e-12))
    rir = np.concatenate([[1.0], tail])
    size = 1 << int(np.ceil(np.log2(len(x) + len(rir))))
    y = np.fft.irfft(np.fft.rfft(x, size) * np.fft.rfft(rir, size), size)[:len(x)]
    return y.astype(np.float32)


def coloured_noise(length: int, exponent: float, sample_rate: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Gaussian noise with power spectrum ~ 1/f^exponent (0 white, 1 pink, 2 brown), unit power."""
    size = next_power_of_two(length)                 # fast FFT; the surplus is cut off
    spectrum = rng.standard_normal(size // 2 + 1) + 1j * rng.standard_normal(size // 2 + 1)
    freqs = np.maximum(np.fft.rfftfreq(size, 1.0 / sample_rate), 50.0)
    y = np.fft.irfft(spectrum * freqs ** (-exponent / 2), size)[:length]
    return (y / (np.std(y) + 1e-12)).astype(np.float32)


def babble(length: int, clips: list[np.ndarray], talkers: int, rng: np.random.Generator) -> np.ndarray:
    """Sum of `talkers` babble clips (each at unit power, random start, looped), unit power."""
    out = np.zeros(length, np.float32)
    for index in rng.choice(len(clips), size=min(talkers, len(clips)), replace=False):
        clip = clips[index]
        start = int(rng.integers(len(clip)))
        looped = np.resize(np.roll(clip, -start), length)
        out += looped / np.sqrt(speech_power(looped) + 1e-12)
    return out / (np.std(out) + 1e-12)


def channel_response(num_bins: int, order: int, max_db: float, band: tuple[float, float] | None,
                     sample_rate: int, rng: np.random.Generator) -> np.ndarray:
    """A random smooth magnitude response: a low-order cepstrum (cosine series in log-frequency)."""
    freqs = np.linspace(0, sample_rate / 2, num_bins)
    k = np.arange(1, order + 1)
    coarse = np.linspace(0, 1, 257)   # the response is smooth: evaluate coarsely, interpolate
    db = (rng.uniform(-max_db, max_db, order) / k) @ np.cos(np.pi * np.outer(k, coarse))
    gain = 10 ** (np.interp(freqs / freqs[-1], coarse, db) / 20)
    if band is not None:
        low, high = band
        gain *= np.clip((freqs - low * 0.7) / (low * 0.3), 0, 1) * np.clip((high - freqs) / 300 + 1, 0, 1)
    return gain


def degrade(clean: np.ndarray, babble_clips: list[np.ndarray], config: AugmentConfig,
            sample_rate: int, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """The degraded utterance and a record of what was done (for analysis and the docs)."""
    record: dict = {}
    x = clean.astype(np.float32)
    if rng.random() < config.reverb_prob:
        record["rt60"] = round(float(rng.uniform(config.rt60_min, config.rt60_max)), 3)
        record["drr_db"] = round(float(rng.uniform(config.drr_min, config.drr_max)), 2)
        x = reverberate(x, record["rt60"], record["drr_db"], sample_rate, rng)
    if rng.random() >= config.clean_fraction:
        snr = float(rng.uniform(config.snr_min, config.snr_max))
        share = float(rng.random()) if babble_clips else 0.0   # babble share of the noise power
        talkers = int(rng.integers(config.babble_talkers_min, config.babble_talkers_max + 1))
        exponent = float(rng.uniform(0.0, 2.0))
        noise = np.sqrt(1 - share) * coloured_noise(len(x), exponent, sample_rate, rng)
        if share > 0:
            noise += np.sqrt(share) * babble(len(x), babble_clips, talkers, rng)
        x = x + noise * np.sqrt(speech_power(x) / 10 ** (snr / 10))
        record.update(snr_db=round(snr, 2), babble_share=round(share, 3), babble_talkers=talkers,
                      noise_exponent=round(exponent, 3))
    band = None
    if rng.random() < config.band_limit_prob:
        band = (300.0, float(rng.uniform(3400.0, 7000.0)))
        record["band_hz"] = [300, round(band[1])]
    size = next_power_of_two(len(x))
    response = channel_response(size // 2 + 1, config.channel_order, config.channel_db, band,
                                sample_rate, rng)
    x = np.fft.irfft(np.fft.rfft(x, size) * response, size)[:len(x)].astype(np.float32)
    level = float(rng.uniform(config.level_min, config.level_max))
    x *= 10 ** (level / 20) / (np.sqrt(np.mean(x ** 2)) + 1e-12)
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    if peak > 0.98:                   # limit rather than clip: keep the waveform undistorted
        x *= 0.98 / peak
    record["level_dbfs"] = round(level, 2)
    return x, record
