"""Lattices on disk: `lat.JOB.gz`, a gzipped Kaldi archive of binary `Lattice` entries.

Each entry is what Kaldi's LatticeWriter writes in binary mode: the utterance id, a space, the
binary marker `\\0B`, then the lattice as an OpenFst binary VectorFst with Kaldi's `lattice4` arcs
(input: transition id, output: word, weight: graph cost and acoustic cost), the layout Kaldi's
readers accept wherever they read `lat.*.gz` (Kaldi's CompactLattice reader converts a binary
Lattice it meets). Acoustic costs are unscaled, so the LM weight and the word insertion penalty
can be chosen later (emasr.decode.lattice_best). kaldifst serialises a lattice only to a file, so
each one passes through a scratch file (in /dev/shm when there is one).
`read_lattices` also reads Kaldi's text form of Lattice entries.
"""
from __future__ import annotations

import contextlib
import gzip
import os
import struct
import tempfile
import zlib
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from emasr.kaldi.fst import scratch_dir
from emasr.kaldi.openfst_binary import HAS_ISYMBOLS, HAS_OSYMBOLS, FstFormatError, read_header
from emasr.fst_stack import kaldifst

BINARY_MARK = b"\0B"    # Kaldi's binary-mode marker after the key
ARC_DTYPE = np.dtype([("ilabel", "<i4"), ("olabel", "<i4"), ("graph", "<f4"),
                      ("acoustic", "<f4"), ("nextstate", "<i4")])
STATE_DTYPE = np.dtype([("graph", "<f4"), ("acoustic", "<f4"), ("num_arcs", "<i8")])


class LatticeFormatError(ValueError):
    """A lattice archive is malformed; the message names the file and the entry."""


class LatticeArchiveWriter:
    """Writes `lat.N.gz` under a temporary name and renames it on a clean close."""

    def __init__(self, path: str):
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, self._tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=directory)
        # Level 1: raw lattices are large and the writer must keep up with the decoder; the
        # file is still ordinary gzip (Kaldi reads it through `gunzip -c`).
        self._file = gzip.open(os.fdopen(fd, "wb"), "wb", compresslevel=1)
        scratch_fd, self._scratch = tempfile.mkstemp(prefix="emasr-lat.", suffix=".fst",
                                                     dir=scratch_dir(directory))
        os.close(scratch_fd)

    def write(self, utt: str, lattice: kaldifst.Lattice) -> None:
        if not lattice.write(self._scratch):
            raise OSError(f"could not serialise the lattice of {utt} to {self._scratch}")
        with open(self._scratch, "rb") as f:
            self._file.write(utt.encode("utf-8") + b" " + BINARY_MARK + f.read())

    def _cleanup(self) -> None:
        self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._scratch)

    def close(self) -> None:
        self._cleanup()
        os.chmod(self._tmp, 0o644)
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        self._cleanup()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._tmp)

    def __enter__(self) -> "LatticeArchiveWriter":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


@dataclass
class LatticeArcs:
    """A lattice as arrays: arcs (src, dst, ilabel, olabel, graph, acoustic), final weights."""
    src: np.ndarray
    dst: np.ndarray
    ilabel: np.ndarray
    olabel: np.ndarray
    graph: np.ndarray
    acoustic: np.ndarray
    finals: dict[int, tuple[float, float]] = field(default_factory=dict)
    start: int = 0
    num_states: int = 0


def parse_binary(data: bytes, pos: int, where: str) -> tuple[LatticeArcs, int]:
    """An OpenFst binary VectorFst of lattice4 arcs at data[pos:]; returns it and its end."""
    try:
        header, pos = read_header(data, pos, where)
    except FstFormatError as err:
        raise LatticeFormatError(str(err)) from None
    if header.fst_type != "vector" or header.arc_type != "lattice4":
        raise LatticeFormatError(f"{where}: expected a binary vector FST of lattice4 arcs "
                                 f"(a Kaldi Lattice), got type '{header.fst_type}/"
                                 f"{header.arc_type}'")
    if header.flags & (HAS_ISYMBOLS | HAS_OSYMBOLS):
        raise LatticeFormatError(f"{where}: lattice carries symbol tables; not supported")
    # Each state is its record (final weight, arc count) then its arcs: only the counts need a
    # walk through the bytes; the records and arcs are then gathered in one go.
    record_at, counts = np.zeros(header.num_states, np.int64), np.zeros(header.num_states, np.int64)
    try:
        for state in range(header.num_states):
            record_at[state] = pos
            (counts[state],) = struct.unpack_from("<q", data, pos + 8)
            pos += STATE_DTYPE.itemsize + int(counts[state]) * ARC_DTYPE.itemsize
        if pos > len(data) or (counts < 0).any():
            raise ValueError(f"{header.num_states} states need {pos} bytes, {len(data)} there")
    except (struct.error, ValueError) as err:
        raise LatticeFormatError(f"{where}: truncated or corrupt binary lattice ({err})") from None
    raw = np.frombuffer(data, np.uint8)
    records = gather(raw, record_at, STATE_DTYPE)
    src = np.repeat(np.arange(header.num_states, dtype=np.int64), counts)
    first_arc = np.cumsum(counts) - counts
    arc_at = (record_at[src] + STATE_DTYPE.itemsize
              + (np.arange(len(src)) - first_arc[src]) * ARC_DTYPE.itemsize)
    table = gather(raw, arc_at, ARC_DTYPE)
    final = np.flatnonzero(np.isfinite(records["graph"]))
    finals = {int(s): (float(records["graph"][s]), float(records["acoustic"][s])) for s in final}
    lattice = LatticeArcs(src, table["nextstate"].astype(np.int64),
                          table["ilabel"].astype(np.int64), table["olabel"].astype(np.int64),
                          table["graph"].astype(np.float64),
                          table["acoustic"].astype(np.float64), finals, header.start,
                          header.num_states)
    return lattice, pos


def gather(raw: np.ndarray, offsets: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Records of `dtype` at the given byte offsets of `raw`."""
    index = offsets[:, None] + np.arange(dtype.itemsize)[None, :]
    return raw[index].reshape(-1).view(dtype)


def parse_weight(text: str, where: str) -> tuple[float, float]:
    graph, sep, acoustic = text.partition(",")
    try:
        return float(graph), float(acoustic) if sep else 0.0
    except ValueError:
        raise LatticeFormatError(f"{where}: bad lattice weight '{text}'; "
                                 "expected graph,acoustic") from None


def parse_text(data: bytes, pos: int, where: str) -> tuple[LatticeArcs, int]:
    """Kaldi's text form of a Lattice at data[pos:] (after the key), up to an empty line."""
    end = data.find(b"\n\n", pos)
    end = len(data) if end < 0 else end + 2
    arcs, finals, first = [], {}, None
    for line in data[pos:end].decode("utf-8").splitlines():
        fields = line.split()
        if len(fields) in (4, 5):
            weight = parse_weight(fields[4], where) if len(fields) == 5 else (0.0, 0.0)
            arcs.append((int(fields[0]), int(fields[1]), int(fields[2]), int(fields[3]), *weight))
        elif len(fields) in (1, 2):
            weight = parse_weight(fields[1], where) if len(fields) == 2 else (0.0, 0.0)
            finals[int(fields[0])] = weight
        elif fields:
            raise LatticeFormatError(f"{where}: expected 'src dst tid word g,a' or 'state g,a', "
                                     f"got '{line}'")
        if fields and first is None:
            first = int(fields[0])
    table = np.array(arcs, dtype=np.float64).reshape(-1, 6)
    ints = table[:, :4].astype(np.int64)
    states = [0, *finals, *ints[:, 0].tolist(), *ints[:, 1].tolist()]
    return LatticeArcs(ints[:, 0], ints[:, 1], ints[:, 2], ints[:, 3], table[:, 4], table[:, 5],
                       finals, first or 0, max(states) + 1), end


def read_lattices(path: str) -> Iterator[tuple[str, LatticeArcs]]:
    """(utt, lattice) for each entry of a Kaldi Lattice archive, gzipped or not, binary or text
    entries."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:   # EOFError: a truncated gzip stream
        raise LatticeFormatError(f"{path}: cannot read the lattice archive (truncated or not "
                                 f"gzip? {type(err).__name__}: {err or 'ends early'})") from None
    pos = 0
    while True:
        while pos < len(data) and data[pos:pos + 1].isspace():
            pos += 1
        if pos >= len(data):
            return
        space = data.find(b" ", pos)
        newline = data.find(b"\n", pos)
        cut = min(x for x in (space, newline, len(data)) if x >= 0)
        try:
            utt = data[pos:cut].decode("utf-8")
        except UnicodeDecodeError:
            raise LatticeFormatError(f"{path}: offset {pos}: expected an utterance id (UTF-8) "
                                     "at the start of an entry; damaged archive?") from None
        where = f"{path}: entry {utt}"
        pos = cut + 1 if cut < len(data) and data[cut:cut + 1] == b" " else cut
        if data[pos:pos + 2] == BINARY_MARK:
            lattice, pos = parse_binary(data, pos + 2, where)
        else:
            lattice, pos = parse_text(data, pos, where)
        yield utt, lattice


def to_kaldifst(arcs: LatticeArcs, word_ins_penalty: float = 0.0) -> kaldifst.Lattice:
    """A kaldifst Lattice, with the penalty added to the graph cost of every word arc
    (Kaldi's lattice-add-penalty)."""
    lattice = kaldifst.Lattice()
    for _ in range(arcs.num_states):
        lattice.add_state()
    lattice.start = arcs.start
    graph = arcs.graph + word_ins_penalty * (arcs.olabel != 0)
    for s, d, i, o, g, a in zip(arcs.src.tolist(), arcs.dst.tolist(), arcs.ilabel.tolist(),
                                arcs.olabel.tolist(), graph.tolist(), arcs.acoustic.tolist()):
        lattice.add_arc(s, kaldifst.LatticeArc(i, o, kaldifst.LatticeWeight(g, a), d))
    for state, (g, a) in arcs.finals.items():
        lattice.set_final(state, kaldifst.LatticeWeight(g, a))
    return lattice
