"""Audio input as Kaldi reads it: wav.scp entries (`utt path` or `utt command |`), 16-bit PCM RIFF.

Samples come back as float32 holding the raw 16-bit values (not divided by 32768), which is what
Kaldi's feature code and its dither of 1.0 assume. Every problem raises WavError with a message that
names the source and what was expected, so a feature job can log it and move on to the next
utterance.
"""
from __future__ import annotations

import os
import struct
import subprocess
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from emasr.io.table import read_table

WAVE_FORMAT_PCM = 1
WAVE_FORMAT_EXTENSIBLE = 0xFFFE
# A writer that streams into a pipe cannot know the data size; sox and others then write 0 or -1.
UNKNOWN_SIZES = (0, 0xFFFFFFFF)


class WavError(ValueError):
    """Audio that cannot be used; the message names the source and the problem."""


@dataclass
class Audio:
    rate: int
    samples: np.ndarray  # float32, raw 16-bit magnitudes, mono

    @property
    def duration(self) -> float:
        return len(self.samples) / self.rate


def _chunks(data: bytes, source: str) -> Iterator[tuple[bytes, int, int]]:
    """Yield (chunk id, declared size, payload offset) for the chunks after the RIFF header."""
    pos = 12
    while pos + 8 <= len(data):
        chunk_id, size = struct.unpack_from("<4sI", data, pos)
        yield chunk_id, size, pos + 8
        if chunk_id == b"data":
            return
        pos += 8 + size + (size & 1)  # chunks are padded to an even length
    raise WavError(f"{source}: no 'data' chunk found (file is truncated or not a WAV file)")


def _parse_fmt(data: bytes, offset: int, size: int, source: str) -> tuple[int, int]:
    if size < 16 or offset + 16 > len(data):
        raise WavError(f"{source}: 'fmt ' chunk is too short ({size} bytes)")
    tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", data, offset)
    if tag == WAVE_FORMAT_EXTENSIBLE and size >= 40:
        tag = struct.unpack_from("<H", data, offset + 24)[0]  # sub-format GUID starts with it
    if tag != WAVE_FORMAT_PCM or bits != 16:
        raise WavError(f"{source}: format tag {tag} with {bits} bits per sample; "
                       "expected 16-bit PCM (format 1)")
    if channels != 1:
        raise WavError(f"{source}: {channels} channels; expected mono audio "
                       "(convert it, e.g. `sox in.wav -c 1 out.wav`, or through sox in wav.scp)")
    return rate, channels


def parse_wav(data: bytes, source: str, streamed: bool = False) -> Audio:
    """Parse a complete RIFF/WAVE byte string. `streamed`: data sizes 0 and -1 mean 'to the end'."""
    if len(data) == 0:
        raise WavError(f"{source}: empty file (zero bytes)")
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise WavError(f"{source}: not a RIFF/WAVE file (first bytes {data[:12]!r})")
    rate = None
    for chunk_id, size, offset in _chunks(data, source):
        if chunk_id == b"fmt ":
            rate, _ = _parse_fmt(data, offset, size, source)
        elif chunk_id == b"data":
            if rate is None:
                raise WavError(f"{source}: 'data' chunk before the 'fmt ' chunk")
            available = len(data) - offset
            if streamed and size in UNKNOWN_SIZES:
                size = available - (available & 1)
            if size > available:
                raise WavError(f"{source}: truncated: header declares {size} bytes of audio "
                               f"but only {available} are present")
            if size % 2:
                raise WavError(f"{source}: odd data size {size} for 16-bit samples")
            if size == 0:
                raise WavError(f"{source}: zero-length audio (no samples)")
            samples = np.frombuffer(data, dtype="<i2", count=size // 2, offset=offset)
            return Audio(rate, samples.astype(np.float32))
    raise AssertionError("unreachable: _chunks raises when there is no data chunk")


def read_wav_spec(spec: str, source: str = "") -> Audio:
    """Read one wav.scp value: a file path, or a shell command ending in '|'."""
    spec = spec.strip()
    label = source or spec
    if spec.endswith("|"):
        command = spec[:-1]
        proc = subprocess.run(command, shell=True, capture_output=True)
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise WavError(f"{label}: command '{command}' failed with status {proc.returncode}: "
                           + " | ".join(err))
        return parse_wav(proc.stdout, label, streamed=True)
    if not os.path.isfile(spec):
        raise WavError(f"{label}: no such file '{spec}'")
    with open(spec, "rb") as f:
        return parse_wav(f.read(), label)


@dataclass
class Segment:
    recording: str
    start: float
    end: float  # seconds; -1 means to the end of the recording


def read_segments(path: str) -> dict[str, Segment]:
    """Kaldi `segments`: `utt recording start end` per line."""
    segments = {}
    for utt, rest in read_table(path).items():
        fields = rest.split()
        if len(fields) != 3:
            raise WavError(f"{path}: line for '{utt}': expected 'utt recording start end'")
        segments[utt] = Segment(fields[0], float(fields[1]), float(fields[2]))
    return segments


# extract-segments' tolerance: a segment may end up to this far past the recording's end.
MAX_OVERSHOOT_SECONDS = 0.5


def cut_segment(audio: Audio, seg: Segment, utt: str) -> Audio:
    """Cut a segment as Kaldi's extract-segments does (sample index = int(time * rate))."""
    total = len(audio.samples)
    start = int(seg.start * audio.rate)
    end = total if seg.end == -1 else int(seg.end * audio.rate)
    if end > total:
        if (end - total) / audio.rate > MAX_OVERSHOOT_SECONDS:
            raise WavError(f"segment {utt}: ends at {seg.end} s but recording {seg.recording} "
                           f"is only {audio.duration:.3f} s long")
        end = total
    if start >= end:
        raise WavError(f"segment {utt}: empty ({seg.start} to {seg.end} s)")
    return Audio(audio.rate, audio.samples[start:end])


def iter_utterance_audio(wav_scp: str, segments: str | None = None
                         ) -> Iterator[tuple[str, Audio | WavError]]:
    """Yield (utt, Audio) in table order, or (utt, WavError) for audio that cannot be read."""
    recordings = read_table(wav_scp)
    if segments is None:
        for utt, spec in recordings.items():
            try:
                yield utt, read_wav_spec(spec, f"{utt} ({spec})")
            except WavError as err:
                yield utt, err
        return
    cached: tuple[str, Audio | WavError] | None = None  # segments of one recording are adjacent
    for utt, seg in read_segments(segments).items():
        if cached is None or cached[0] != seg.recording:
            if seg.recording not in recordings:
                yield utt, WavError(f"segment {utt}: recording '{seg.recording}' "
                                    f"is not in {wav_scp}")
                continue
            spec = recordings[seg.recording]
            try:
                cached = (seg.recording, read_wav_spec(spec, f"{seg.recording} ({spec})"))
            except WavError as err:
                cached = (seg.recording, err)
        audio = cached[1]
        try:
            yield utt, audio if isinstance(audio, WavError) else cut_segment(audio, seg, utt)
        except WavError as err:
            yield utt, err
