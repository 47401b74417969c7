"""Kaldi's Posterior: per frame of an utterance, (transition id, weight) pairs, as ali-to-post,
lattice-to-post and weight-silence-post produce them and gmm-est-fmllr reads them.

On disk a table of them is a Kaldi archive (``post.JOB.gz``: gzipped when the name ends in .gz),
each entry what Kaldi's PosteriorHolder writes: in binary ``key \\0B``, the int32 number of
frames, then per frame the int32 number of pairs and each pair as int32 id, float32 weight
(every basic value preceded by its size byte, 4); in text ``key [ 12 0.6 14 0.4 ] [ 12 1 ]``,
one bracket per frame, one line per utterance. Both are read (the gzip magic, not the name,
decides on reading); binary is written.

In memory an utterance's posterior is flat arrays (frame, id, weight), ordered by frame.
"""
from __future__ import annotations

import gzip
import io
import os
import struct
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from emasr.io.atomic import atomic_write

BINARY_MARK = b"\0B"
_INT = struct.Struct("<bi")     # size byte 4, int32
_PAIR = np.dtype([("isize", "i1"), ("id", "<i4"), ("fsize", "i1"), ("weight", "<f4")])


class PosteriorFormatError(ValueError):
    """A posterior archive is malformed; the message names the file and the entry."""


@dataclass
class Posterior:
    """One utterance: entry k gives weight ``weights[k]`` to transition id ``ids[k]`` at frame
    ``frames[k]``; a frame may have any number of entries (none: it counts for nothing)."""
    num_frames: int
    frames: np.ndarray   # int64, non-decreasing
    ids: np.ndarray      # int32
    weights: np.ndarray  # float64

    @classmethod
    def from_alignment(cls, alignment: np.ndarray) -> "Posterior":
        """Kaldi's ali-to-post: weight 1 for the aligned transition id of every frame."""
        alignment = np.asarray(alignment)
        return cls(len(alignment), np.arange(len(alignment), dtype=np.int64),
                   alignment.astype(np.int32), np.ones(len(alignment)))

    @classmethod
    def from_frame_lists(cls, frames: list[list[tuple[int, float]]]) -> "Posterior":
        counts = [len(f) for f in frames]
        pairs = np.array([p for f in frames for p in f], dtype=np.float64).reshape(-1, 2)
        return cls(len(frames), np.repeat(np.arange(len(frames), dtype=np.int64), counts),
                   pairs[:, 0].astype(np.int32), pairs[:, 1])

    def frame_lists(self) -> list[list[tuple[int, float]]]:
        out: list[list[tuple[int, float]]] = [[] for _ in range(self.num_frames)]
        for t, i, w in zip(self.frames.tolist(), self.ids.tolist(), self.weights.tolist()):
            out[t].append((i, w))
        return out

    def frame_totals(self) -> np.ndarray:
        """[num_frames]: the summed weight of each frame."""
        return np.bincount(self.frames, self.weights, minlength=self.num_frames)

    def select(self, keep: np.ndarray) -> "Posterior":
        return Posterior(self.num_frames, self.frames[keep], self.ids[keep], self.weights[keep])


def weight_silence(post: Posterior, id2phone: np.ndarray, silence_phones: frozenset[int],
                   scale: float) -> Posterior:
    """Kaldi's weight-silence-post: entries of a silence phone's transition ids scaled by
    ``scale``; with scale 0 they are dropped."""
    if not silence_phones or scale == 1.0:
        return post
    silent = np.isin(id2phone[post.ids], sorted(silence_phones))
    weights = np.where(silent, post.weights * scale, post.weights)
    out = Posterior(post.num_frames, post.frames, post.ids, weights)
    return out.select(~silent) if scale == 0.0 else out


def posterior_bytes(post: Posterior) -> bytes:
    """The binary PosteriorHolder serialization (after the key and the \\0B marker)."""
    out = io.BytesIO()
    out.write(_INT.pack(4, post.num_frames))
    counts = np.bincount(post.frames, minlength=post.num_frames)
    pairs = np.zeros(len(post.ids), dtype=_PAIR)
    pairs["isize"], pairs["fsize"] = 4, 4
    pairs["id"], pairs["weight"] = post.ids, post.weights
    start = 0
    for count in counts.tolist():
        out.write(_INT.pack(4, count))
        out.write(pairs[start:start + count].tobytes())
        start += count
    return out.getvalue()


def write_posteriors(path: str | os.PathLike, posteriors: Iterable[tuple[str, Posterior]]
                     ) -> int:
    """A binary Kaldi posterior archive, gzipped when the name ends in .gz, written under a
    temporary name and renamed; entries must be ordered by frame. Returns the number written."""
    path = os.fspath(path)
    count = 0
    with atomic_write(path, "wb", encoding=None) as f:
        stream = gzip.GzipFile(fileobj=f, mode="wb", compresslevel=1) \
            if path.endswith(".gz") else f
        for utt, post in posteriors:
            if not utt or " " in utt:
                raise ValueError(f"bad key '{utt}' for {path}")
            if len(post.frames) and (np.any(np.diff(post.frames) < 0) or post.frames[0] < 0
                                     or post.frames[-1] >= post.num_frames):
                raise ValueError(f"{utt}: posterior entries are not ordered by frame 0.."
                                 f"{post.num_frames - 1}")
            stream.write(utt.encode("utf-8") + b" " + BINARY_MARK + posterior_bytes(post))
            count += 1
        if stream is not f:
            stream.close()
    return count


def read_posteriors(path: str | os.PathLike) -> Iterator[tuple[str, Posterior]]:
    """(utt, Posterior) for each entry of a Kaldi posterior archive, binary or text, gzipped
    or not."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    pos = 0
    while True:
        while pos < len(data) and data[pos:pos + 1].isspace():
            pos += 1
        if pos >= len(data):
            return
        cut = data.find(b" ", pos)
        if cut < 0:
            raise PosteriorFormatError(f"{path}: entry without a value at byte {pos}")
        utt = data[pos:cut].decode("utf-8")
        where = f"{path}: entry {utt}"
        pos = cut + 1
        if data[pos:pos + 2] == BINARY_MARK:
            post, pos = _parse_binary(data, pos + 2, where)
        else:
            end = data.find(b"\n", pos)
            end = len(data) if end < 0 else end
            post, pos = _parse_text(data[pos:end].decode("utf-8"), where), end
        yield utt, post


def _parse_binary(data: bytes, pos: int, where: str) -> tuple[Posterior, int]:
    try:
        size, num_frames = _INT.unpack_from(data, pos)
        pos += _INT.size
        counts = []
        chunks = []
        for _ in range(num_frames):
            size2, count = _INT.unpack_from(data, pos)
            pos += _INT.size
            if size != 4 or size2 != 4 or count < 0:
                raise ValueError("bad size marker or count")
            chunk = np.frombuffer(data, _PAIR, count, pos)
            pos += count * _PAIR.itemsize
            counts.append(count)
            chunks.append(chunk)
    except (struct.error, ValueError) as err:
        raise PosteriorFormatError(f"{where}: truncated or corrupt binary posterior "
                                   f"({err})") from None
    pairs = np.concatenate(chunks) if chunks else np.zeros(0, _PAIR)
    if len(pairs) and (np.any(pairs["isize"] != 4) or np.any(pairs["fsize"] != 4)):
        raise PosteriorFormatError(f"{where}: corrupt binary posterior (size markers)")
    frames = np.repeat(np.arange(num_frames, dtype=np.int64), counts)
    return Posterior(num_frames, frames, pairs["id"].astype(np.int32),
                     pairs["weight"].astype(np.float64)), pos


def _parse_text(text: str, where: str) -> Posterior:
    frames: list[list[tuple[int, float]]] = []
    tokens = text.split()
    k = 0
    try:
        while k < len(tokens):
            if tokens[k] != "[":
                raise ValueError(f"expected '[', got '{tokens[k]}' (alignments in place of "
                                 "posteriors?)")
            k += 1
            frame = []
            while tokens[k] != "]":
                frame.append((int(tokens[k]), float(tokens[k + 1])))
                k += 2
            frames.append(frame)
            k += 1
    except (IndexError, ValueError) as err:
        raise PosteriorFormatError(f"{where}: bad text posterior: {err}") from None
    return Posterior.from_frame_lists(frames)
