"""Kaldi's utils/data/get_utt2dur.sh: `utt seconds` for every utterance of a data dir.

Where the duration comes from, in Kaldi's order: `segments` (end - start; an end of -1 means the
end of the recording, whose length is then read), else the audio of `wav.scp` (a file's WAV header
gives it without reading the samples; a `command |` entry is run and its output counted), else
`utt2num_frames` or `feats.scp` times the frame shift. An existing `utt2dur` with one line per
utterance is kept, as Kaldi keeps it.
"""
from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import click

from emasr.feats.wav import WavError, read_segments, read_wav_spec
from emasr.io.datadir import DataDirError
from emasr.io.table import read_table, write_table
from emasr.log import progress

log = logging.getLogger(__name__)

HEADER_BYTES = 1 << 16  # the fmt and data chunk headers of any normal WAV file fit in this


def format_seconds(seconds: float) -> str:
    """Durations as Kaldi's awk writes them (6 significant digits: 6.18, 12.3457)."""
    return f"{seconds:.6g}"


def _header_duration(path: str) -> float | None:
    """Seconds from a WAV file's header alone, or None when the header does not tell (then the
    whole file is read). The declared data size is checked against the file size."""
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, rate, block = 12, None, None
    while pos + 8 <= len(head):
        chunk_id, size = struct.unpack_from("<4sI", head, pos)
        if chunk_id == b"fmt " and pos + 8 + 16 <= len(head):
            _, channels, rate, _, block, _ = struct.unpack_from("<HHIIHH", head, pos + 8)
        elif chunk_id == b"data":
            available = os.path.getsize(path) - (pos + 8)
            if rate is None or not block or size > available:
                return None  # let the full reader name what is wrong
            return size / block / rate
        pos += 8 + size + (size & 1)
    return None


def audio_duration(spec: str, source: str) -> float:
    """Duration in seconds of one wav.scp entry (path or `command |`)."""
    spec = spec.strip()
    if not spec.endswith("|") and os.path.isfile(spec):
        seconds = _header_duration(spec)
        if seconds is not None:
            return seconds
    return read_wav_spec(spec, source).duration


def durations_from_audio(data: Path) -> dict[str, float]:
    wav_scp = read_table(data / "wav.scp")
    recordings: dict[str, float] = {}
    segments = read_segments(str(data / "segments")) if (data / "segments").is_file() else None
    needed = wav_scp if segments is None else {
        s.recording: wav_scp.get(s.recording) for s in segments.values() if s.end == -1}
    for reco, spec in progress(needed.items(), total=len(needed), desc="utt2dur", logger=log):
        if spec is None:
            raise DataDirError(f"{data}/segments: recording '{reco}' is not in {data}/wav.scp")
        recordings[reco] = audio_duration(spec, f"{data}/wav.scp: {reco} ({spec})")
    if segments is None:
        return recordings
    return {utt: (recordings[s.recording] if s.end == -1 else s.end) - s.start
            for utt, s in segments.items()}


def durations_from_frames(data: Path, frame_shift: float | None) -> dict[str, float]:
    if frame_shift is None:
        shift_file = data / "frame_shift"
        frame_shift = float(shift_file.read_text().strip()) if shift_file.is_file() else 0.01
    if (data / "utt2num_frames").is_file():
        frames = {u: int(n) for u, n in read_table(data / "utt2num_frames").items()}
    else:
        from emasr.kaldi.tables import read_archive

        frames = {utt: len(matrix) for utt, matrix in read_archive(f"scp:{data / 'feats.scp'}")}
    return {utt: n * frame_shift for utt, n in frames.items()}


def utterance_durations(data: str | os.PathLike, frame_shift: float | None = None
                        ) -> dict[str, float]:
    """Durations of every utt2spk utterance of `data`, from a complete utt2dur if there is one,
    else from segments, wav.scp or the features (nothing is written)."""
    data = Path(data)
    utts = read_table(data / "utt2spk")
    existing = data / "utt2dur"
    if existing.is_file():
        table = read_table(existing)
        if set(table) == set(utts):
            return {u: float(table[u]) for u in utts}
    if (data / "wav.scp").is_file():
        durations = durations_from_audio(data)
    elif (data / "feats.scp").is_file():
        durations = durations_from_frames(data, frame_shift)
    else:
        raise DataDirError(f"{data}: expected wav.scp, segments or feats.scp to get durations from")
    missing = [u for u in utts if u not in durations]
    if missing:
        raise DataDirError(f"{data}: no duration for {len(missing)} of {len(utts)} utterances "
                           f"(first: {missing[0]}); expected every utt2spk utterance in "
                           "wav.scp or segments")
    return {u: durations[u] for u in utts}


def get_utt2dur(data: str | os.PathLike, frame_shift: float | None = None) -> dict[str, float]:
    """Write `data/utt2dur` unless it is there with one line per utterance; return the durations."""
    data = Path(data)
    target = data / "utt2dur"
    if target.is_file() and set(read_table(target)) == set(read_table(data / "utt2spk")):
        log.info("%s already exists with the expected length; not recomputing it", target)
        return utterance_durations(data, frame_shift)
    durations = utterance_durations(data, frame_shift)
    write_table(target, {u: format_seconds(d) for u, d in durations.items()})
    log.info("wrote %s (%d utterances, %.1f s)", target, len(durations), sum(durations.values()))
    return durations


@click.command("get-utt2dur")
@click.option("--frame-shift", type=float, default=None,
              help="Seconds per frame when durations come from feats.scp (default: "
                   "<data>/frame_shift, else 0.01).")
@click.argument("data", type=click.Path(exists=True, file_okay=False))
def get_utt2dur_cli(frame_shift, data):
    """Write DATA/utt2dur (Kaldi's utils/data/get_utt2dur.sh)."""
    from emasr.io.table import TableError

    try:
        get_utt2dur(data, frame_shift)
    except (DataDirError, TableError, WavError) as err:
        raise click.ClickException(str(err)) from None
    except OSError as err:
        raise click.ClickException(f"{err.filename}: {err.strerror}") from None
