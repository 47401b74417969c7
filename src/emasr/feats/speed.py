"""Speed perturbation of audio, as `sox ... speed F` does it in Kaldi's perturb_data_dir_speed.sh.

Speed F plays the recording F times faster: tempo and pitch both change and a recording of N
samples becomes about N / F samples at the same sample rate. That is resampling from F * rate to
rate, done here with the simulator's band-limited FFT resampler (emasr.feats.audio.resample), so
sox is not needed. `emasr speed-perturb-wav` is the command that wav.scp pipes call.
"""
from __future__ import annotations

import io
import sys
import wave
from fractions import Fraction

import click
import numpy as np

from emasr.feats.audio import resample
from emasr.feats.wav import Audio, WavError, parse_wav, read_wav_spec

# The anti-aliasing roll-off, as a fraction of the lower Nyquist frequency: 3% keeps all but the
# top of the band (at 8 kHz, speed 1.1: flat to 3.5 kHz, nothing above 3.64 kHz).
ROLLOFF_FRACTION = 0.03


def speed_ratio(factor: float) -> Fraction:
    """The factor as a small fraction (0.9 -> 9/10), so the resampling rates are integers."""
    if not 0.1 <= factor <= 10:
        raise ValueError(f"speed factor {factor} is outside [0.1, 10]")
    return Fraction(str(factor)).limit_denominator(1000)


def perturb_speed(audio: Audio, factor: float) -> Audio:
    """The audio played `factor` times faster, at the same sample rate (sox's `speed` effect)."""
    ratio = speed_ratio(factor)
    if ratio == 1:
        return audio
    rate_in, rate_out = audio.rate * ratio.numerator, audio.rate * ratio.denominator
    rolloff = ROLLOFF_FRACTION * min(rate_in, rate_out) / 2
    samples = resample(audio.samples.astype(np.float64), rate_in, rate_out, rolloff_hz=rolloff)
    return Audio(audio.rate, samples)


def wav_bytes(audio: Audio) -> bytes:
    """Mono 16-bit PCM RIFF bytes (samples rounded and clipped to the 16-bit range)."""
    pcm = np.clip(np.round(audio.samples), -32768, 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(audio.rate))
        w.writeframes(pcm.tobytes())
    return buffer.getvalue()


def _read_input(path: str) -> Audio:
    if path == "-":
        return parse_wav(sys.stdin.buffer.read(), "stdin", streamed=True)
    return read_wav_spec(path)


@click.command("speed-perturb-wav")
@click.option("--factor", type=float, required=True, help="Speed factor, e.g. 0.9 or 1.1.")
@click.argument("input_wav", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("output_wav", metavar="OUT", type=click.Path(dir_okay=False, allow_dash=True))
def speed_perturb_wav_cli(factor, input_wav, output_wav):
    """Write IN played FACTOR times faster to OUT (`-`: stdin/stdout), as `sox IN OUT speed F`.

    16-bit mono PCM in and out. wav.scp entries made by utils/data/perturb_data_dir_speed.sh
    call it, e.g. `emasr speed-perturb-wav --factor 0.9 a.wav - |`.
    """
    try:
        data = wav_bytes(perturb_speed(_read_input(input_wav), factor))
    except (WavError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    if output_wav == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    from emasr.io.atomic import atomic_write

    with atomic_write(output_wav, "wb") as f:
        f.write(data)
