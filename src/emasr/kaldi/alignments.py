"""Alignment directories as Kaldi and this toolkit write them: ``ali.JOB.gz`` + ``final.mdl``.

An alignment file is a Kaldi archive of int32 vectors (one per utterance: a transition id, or with
``--ali-type pdf`` a pdf id, per frame), binary or text, gzipped or not (the gzip magic decides, not
the name). ``num_jobs`` says how many ``ali.JOB[.gz]`` files to expect; without it every
``ali.N[.gz]`` present is read. A ``frame_subsampling_factor`` file (as in Kaldi's chain
alignment dirs) says the alignments are at a lower frame rate than the 10 ms features.
`AlignmentWriter` writes one gzipped archive atomically (``ali.JOB.gz``).
"""
from __future__ import annotations

import gzip
import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import kaldiio
import numpy as np

from emasr.io.atomic import atomic_write
from emasr.kaldi.io import KaldiFormatError
from emasr.kaldi.transitions import TransitionTable, load_transition_table

ALI_TYPES = ("transition", "pdf")
_ALI_NAME = re.compile(r"^ali\.(\d+)(\.gz)?$")


class AlignmentError(ValueError):
    """An alignment dir or file is unusable; the message names the file (and utterance)."""


@dataclass
class AlignmentDir:
    """What make-targets and ali-info need from an alignment dir."""
    path: Path
    ali_type: str                    # "transition" or "pdf"
    files: list[Path]                # ali.JOB[.gz] in job order
    num_pdfs: int
    transitions: TransitionTable | None  # the dir's final.mdl, when there is one
    frame_subsampling_factor: int    # frame rate of the alignments relative to 10 ms

    def to_pdfs(self, ali: np.ndarray, source: str, utt: str) -> np.ndarray:
        """Per-frame pdf ids of one alignment, with the ids checked against the model."""
        if self.ali_type == "transition":
            bad = self.transitions.check_ids(ali)
            if bad is not None:
                raise AlignmentError(
                    f"{source}: utterance {utt}: transition id {int(ali[bad])} at frame {bad} is "
                    f"outside the model's 1..{self.transitions.num_transition_ids} "
                    f"({self.path / 'final.mdl'}); alignments and model do not belong together")
            return self.transitions.id2pdf[ali]
        bad_mask = (ali < 0) | (ali >= self.num_pdfs)
        if bad_mask.any():
            bad = int(np.flatnonzero(bad_mask)[0])
            raise AlignmentError(f"{source}: utterance {utt}: pdf id {int(ali[bad])} at frame "
                                 f"{bad} is outside 0..{self.num_pdfs - 1} "
                                 f"(num_pdfs {self.num_pdfs})")
        return ali.astype(np.int32)

    def iter_pdfs(self) -> Iterator[tuple[Path, str, np.ndarray]]:
        """(file, utt, per-frame pdf ids) over every alignment file in job order."""
        for path in self.files:
            for utt, ali in iter_alignment_file(path):
                yield path, utt, self.to_pdfs(ali, str(path), utt)


def open_alignment_dir(path: str | os.PathLike, ali_type: str = "transition",
                       num_pdfs: int | None = None) -> AlignmentDir:
    """Check an alignment dir's files and load what maps its alignments to pdfs."""
    path = Path(path)
    if ali_type not in ALI_TYPES:
        raise AlignmentError(f"--ali-type must be one of {ALI_TYPES}, got '{ali_type}'")
    if not path.is_dir():
        raise AlignmentError(f"{path}: no such alignment directory")
    files = alignment_files(path)
    model = path / "final.mdl"
    transitions = None
    if ali_type == "transition" or (num_pdfs is None and model.is_file()):
        if not model.is_file():
            raise AlignmentError(f"expected file {model} to exist: transition-id alignments need "
                                 "the model that wrote them (or use --ali-type pdf)")
        try:
            transitions = load_transition_table(model)
        except KaldiFormatError as err:
            raise AlignmentError(str(err)) from None
    if num_pdfs is None:
        num_pdfs = transitions.num_pdfs if transitions else _read_int_file(path / "num_pdfs")
    elif ali_type == "transition" and num_pdfs != transitions.num_pdfs:
        raise AlignmentError(f"--num-pdfs {num_pdfs} disagrees with {model}, which has "
                             f"{transitions.num_pdfs} pdfs")
    factor = 1
    if (path / "frame_subsampling_factor").is_file():
        factor = _read_int_file(path / "frame_subsampling_factor")
    return AlignmentDir(path, ali_type, files, int(num_pdfs), transitions, factor)


def alignment_files(path: Path) -> list[Path]:
    """``ali.N[.gz]`` of an alignment dir in job order; all of 1..num_jobs when num_jobs exists."""
    found: dict[int, Path] = {}
    for entry in path.iterdir():
        match = _ALI_NAME.match(entry.name)
        if match:
            job = int(match.group(1))
            if job in found:
                raise AlignmentError(f"{path}: both {found[job].name} and {entry.name} exist; "
                                     "expected one file per job")
            found[job] = entry
    if (path / "num_jobs").is_file():
        num_jobs = _read_int_file(path / "num_jobs")
        missing = [n for n in range(1, num_jobs + 1) if n not in found]
        if missing:
            raise AlignmentError(f"expected file {path}/ali.{missing[0]}.gz to exist "
                                 f"({path}/num_jobs says {num_jobs} jobs)")
        return [found[n] for n in range(1, num_jobs + 1)]
    if not found:
        raise AlignmentError(f"expected files {path}/ali.JOB.gz to exist: no alignments found")
    return [found[n] for n in sorted(found)]


def iter_alignment_file(path: str | os.PathLike) -> Iterator[tuple[str, np.ndarray]]:
    """(utt, int32 vector) from a Kaldi int-vector archive, binary or text, gzipped or not.

    A damaged or truncated file raises AlignmentError naming the file and the last utterance read.
    """
    path = Path(path)
    last = None
    count = 0
    try:
        with _open_maybe_gzip(path) as f:
            for utt, ali in kaldiio.load_ark(f):
                ali = np.asarray(ali)
                if ali.ndim != 1 or not np.issubdtype(ali.dtype, np.integer):
                    raise AlignmentError(f"{path}: utterance {utt}: expected an int32 vector "
                                         f"(alignment), got {ali.dtype} array of shape {ali.shape}")
                last, count = utt, count + 1
                yield utt, ali.astype(np.int32, copy=False)
    except AlignmentError:
        raise
    except (EOFError, OSError, zlib.error, ValueError, RuntimeError, struct.error,
            IndexError, UnicodeDecodeError) as err:   # what kaldiio raises on a damaged record
        where = f"after utterance {last} ({count} read)" if last else "before the first utterance"
        raise AlignmentError(f"{path}: damaged or truncated alignment file, {where}: "
                             f"{type(err).__name__}: {err}") from None


def _open_maybe_gzip(path: Path):
    with open(path, "rb") as probe:
        magic = probe.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def _read_int_file(path: Path) -> int:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        raise AlignmentError(f"expected file {path} to exist") from None
    try:
        return int(text)
    except ValueError:
        raise AlignmentError(f"{path}: expected one integer, got '{text[:40]}'") from None


class AlignmentWriter:
    """Writes utterance alignments to a gzipped Kaldi archive under a temporary name."""

    def __init__(self, path: str):
        self._context = atomic_write(path, "wb")
        self._file = self._context.__enter__()
        self._gzip = gzip.GzipFile(fileobj=self._file, mode="wb", mtime=0)

    def write(self, utt: str, alignment: np.ndarray) -> None:
        kaldiio.save_ark(self._gzip, {utt: np.asarray(alignment, dtype=np.int32)})

    def close(self, ok: bool = True) -> None:
        self._gzip.close()
        if ok:
            self._context.__exit__(None, None, None)
        else:
            self._context.__exit__(RuntimeError, RuntimeError("aborted"), None)
