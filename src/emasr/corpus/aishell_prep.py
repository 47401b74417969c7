"""AISHELL-1 data preparation: the corpus tree -> Kaldi data dirs data/{train,dev,test}.

Behaves like Kaldi's egs/aishell/s5/local/aishell_data_prep.sh, on the real corpus and on the
simulated one alike:
- every `*.wav` under <wav-dir> belongs to the split named by its path (`.../wav/train/...`);
- the utterance id is the file name without `.wav` (BAC009S0002W0122), the speaker is the name of the
  folder that holds it (S0002);
- only utterances with a transcript line are kept; everything is written sorted (C locale).

Bad input (decided here, documented in docs/lang.md):
- a transcript line with digits, Latin letters or other non-Chinese characters: error naming the
  file and line (the lexicon has no pronunciation for them, so training would silently degrade);
- a transcript line with an id but no words: skipped, with a count in the log;
- an empty transcript file, a duplicate utterance id, a split with no transcribed wav: error;
- a wav that is not 16-bit mono at the expected rate (16 kHz): error naming the file;
- a wav without a transcript line: skipped, with a count in the log (as Kaldi does).
"""
from __future__ import annotations

import logging
import os
import wave
from pathlib import Path

import click

from emasr.io.datadir import DataDir, write_data_dir
from emasr.io.table import TableError, read_lines
from emasr.lang.pinyin import is_chinese_char

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")


class CorpusError(ValueError):
    """The corpus on disk is not what AISHELL data prep expects; the message says where and why."""


def read_transcript(path: str | os.PathLike) -> dict[str, str]:
    """AISHELL transcript `utt word word ...` -> {utt: 'word word ...'} (words single-spaced)."""
    path = os.fspath(path)
    transcripts: dict[str, str] = {}
    empty = 0
    for number, line in enumerate(read_lines(path), 1):
        fields = line.split()
        if not fields:
            continue
        utt, words = fields[0], fields[1:]
        if not words:
            empty += 1
            continue
        bad = sorted({c for word in words for c in word if not is_chinese_char(c)})
        if bad:
            raise CorpusError(f"{path}:{number}: utterance {utt} has characters {''.join(bad)!r}; "
                              "expected only Chinese characters (normalize digits and Latin "
                              "letters to Chinese words first)")
        if utt in transcripts:
            raise CorpusError(f"{path}:{number}: duplicate utterance id {utt}")
        transcripts[utt] = " ".join(words)
    if not transcripts:
        raise CorpusError(f"{path}: no transcript lines; expected lines 'UTTID word word ...'")
    if empty:
        logger.warning("%s: skipped %d utterance(s) with an empty transcript", path, empty)
    return transcripts


def find_wavs(wav_dir: str | os.PathLike) -> dict[str, list[Path]]:
    """Split name -> wav paths (absolute, sorted), the split read from the path like Kaldi's grep."""
    root = Path(wav_dir).resolve()
    if not root.is_dir():
        raise CorpusError(f"{wav_dir}: no such directory; expected data_aishell/wav")
    by_split: dict[str, list[Path]] = {split: [] for split in SPLITS}
    for path in sorted(root.rglob("*")):
        if path.suffix.lower() != ".wav" or not path.is_file():
            continue
        parts = [p.lower() for p in path.relative_to(root.parent).parts]
        split = next((s for s in SPLITS if s in parts[:-1]), None)
        if split is not None:
            by_split[split].append(path)
    return by_split


def check_wav(path: Path, sample_rate: int) -> None:
    """Header check: 16-bit PCM, mono, at `sample_rate`; raises CorpusError naming the file."""
    try:
        with wave.open(str(path), "rb") as w:
            rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
    except (wave.Error, EOFError) as err:
        raise CorpusError(f"{path}: not a readable PCM wav file ({err})") from None
    if (rate, channels, width) != (sample_rate, 1, 2):
        raise CorpusError(f"{path}: {rate} Hz, {channels} channel(s), {8 * width}-bit; expected "
                          f"{sample_rate} Hz, 1 channel, 16-bit")


def split_data_dir(wavs: list[Path], transcripts: dict[str, str], sample_rate: int) -> DataDir:
    """One split's data dir: the transcribed wavs, speaker = parent folder name."""
    tables: dict[str, dict[str, str]] = {"wav.scp": {}, "text": {}, "utt2spk": {}}
    for path in wavs:
        utt = path.stem
        if utt not in transcripts:
            continue
        if utt in tables["wav.scp"]:
            raise CorpusError(f"{path}: utterance id {utt} also names {tables['wav.scp'][utt]}")
        check_wav(path, sample_rate)
        tables["wav.scp"][utt] = str(path)
        tables["text"][utt] = transcripts[utt]
        tables["utt2spk"][utt] = path.parent.name
    return DataDir(tables)


def prepare_aishell(wav_dir: str | os.PathLike, transcript_dir: str | os.PathLike,
                    out_dir: str | os.PathLike = "data", sample_rate: int = 16000) -> dict[str, int]:
    """Write <out_dir>/{train,dev,test}; returns the number of utterances per split."""
    transcript_files = sorted(Path(transcript_dir).glob("*.txt"))
    if not transcript_files:
        raise CorpusError(f"{transcript_dir}: no *.txt transcript; expected "
                          "aishell_transcript_v0.8.txt")
    transcripts: dict[str, str] = {}
    for path in transcript_files:
        transcripts.update(read_transcript(path))
    # Check every split before writing any, so bad input leaves no partial set of data dirs.
    splits = {}
    for split, wavs in find_wavs(wav_dir).items():
        data = split_data_dir(wavs, transcripts, sample_rate)
        if not data.utt2spk:
            raise CorpusError(f"{wav_dir}: no transcribed wav under {split}/; expected "
                              f"{wav_dir}/{split}/SPEAKER/UTTID.wav with UTTID in the transcript")
        if len(wavs) > len(data.utt2spk):
            logger.warning("%s: %d wav file(s) have no transcript line; skipped", split,
                           len(wavs) - len(data.utt2spk))
        splits[split] = data
    counts = {}
    for split, data in splits.items():
        write_data_dir(data, Path(out_dir) / split)
        counts[split] = len(data.utt2spk)
        logger.info("%s: %d utterances from %d speakers", split, counts[split],
                    len(set(data.utt2spk.values())))
    unused = len(transcripts) - sum(counts.values())
    if unused:
        logger.info("%d transcript line(s) have no wav file", unused)
    return counts


@click.command("aishell-data-prep")
@click.argument("wav_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("transcript_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--out-dir", default="data", show_default=True,
              help="Where to write train/, dev/ and test/.")
@click.option("--sample-rate", default=16000, show_default=True,
              help="Expected sampling rate of every wav (16-bit mono is required too).")
def aishell_data_prep_cli(wav_dir: str, transcript_dir: str, out_dir: str, sample_rate: int) -> None:
    """Make Kaldi data dirs OUT_DIR/{train,dev,test} from an AISHELL-1 tree.

    WAV_DIR is data_aishell/wav (with train/ dev/ test/ of SPEAKER/UTTID.wav), TRANSCRIPT_DIR is
    data_aishell/transcript. Utterances without a transcript are skipped; transcripts with digits or
    Latin letters, and wavs that are not 16-bit mono at --sample-rate, are errors.
    """
    try:
        prepare_aishell(wav_dir, transcript_dir, out_dir, sample_rate)
    except (CorpusError, TableError) as err:
        raise click.ClickException(str(err)) from None
