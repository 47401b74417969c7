"""Audio helpers: FFT resampling (the simulator's and speed perturbation's) and 16-bit PCM wav files.

espeak-ng speaks at 22050 Hz and AISHELL is 16 kHz (16000/22050 = 320/441). Utterances are a few
seconds long, so resampling through one FFT of the whole signal is both exact and fast in numpy
(scipy is not a dependency).
"""
from __future__ import annotations

import io
import os
import wave
from math import gcd

import numpy as np

from emasr.io.atomic import atomic_write


def next_power_of_two(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def resample(x: np.ndarray, rate_in: int, rate_out: int, rolloff_hz: float = 600.0) -> np.ndarray:
    """Resample a 1-D float signal from rate_in to rate_out through its spectrum.

    The signal is zero-padded on both sides (so the FFT's circular wrap only meets silence), its
    spectrum is cut at the lower Nyquist frequency with a raised-cosine roll-off of `rolloff_hz`
    (an anti-aliasing low-pass without ringing), and the inverse FFT is taken at the new length.
    """
    if rate_in == rate_out:
        return x.astype(np.float32)
    g = gcd(rate_in, rate_out)
    up, down = rate_out // g, rate_in // g
    pad = down * (rate_in // 20 // down + 1)           # >= 50 ms, lands on an output sample
    # A whole number of output samples, and FFT lengths (down*2^k in, up*2^k out) that are fast.
    total = down * next_power_of_two(-(-(len(x) + 2 * pad) // down))
    padded = np.zeros(total, np.float64)
    padded[pad:pad + len(x)] = x
    spectrum = np.fft.rfft(padded)
    freqs = np.fft.rfftfreq(total, 1.0 / rate_in)
    edge = min(rate_in, rate_out) / 2.0
    gain = np.clip((edge - freqs) / rolloff_hz, 0.0, 1.0)
    spectrum *= 0.5 - 0.5 * np.cos(np.pi * gain)
    out_len = total * up // down
    y = np.fft.irfft(spectrum[:out_len // 2 + 1], out_len) * (out_len / total)
    start = pad * up // down
    return y[start:start + int(np.ceil(len(x) * up / down))].astype(np.float32)


def to_int16(x: np.ndarray) -> np.ndarray:
    """Float samples in [-1, 1) to int16, clipping."""
    return np.clip(np.round(x * 32768.0), -32768, 32767).astype(np.int16)


def write_wav(path: str | os.PathLike, samples: np.ndarray, sample_rate: int) -> None:
    """Write mono 16-bit PCM atomically."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(np.ascontiguousarray(samples, dtype="<i2").tobytes())
    with atomic_write(path, "wb") as f:
        f.write(buffer.getvalue())


def read_wav(path: str | os.PathLike) -> tuple[np.ndarray, int, int]:
    """Read a 16-bit PCM wav: (int16 samples interleaved, sample rate, channels)."""
    with wave.open(os.fspath(path), "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: {8 * w.getsampwidth()}-bit samples; expected 16-bit PCM")
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return data, w.getframerate(), w.getnchannels()
