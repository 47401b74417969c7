"""OpenFst's binary FST layouts read with numpy: the header, and the ConstFst graphs Kaldi writes.

Kaldi's utils/mkgraph.sh ends with `fstconvert --fst_type=const`, so a Kaldi graph dir holds a
ConstFst HCLG.fst. kaldifst's reader does not know that type ("Fst::Read: Unknown FST type const":
the wheel does not register it), so `const_as_vector_bytes` re-lays such a file out as a VectorFst
(same states, arcs, weights and properties) that kaldifst reads.

Layouts (OpenFst 1.7, standard arcs: int32 ilabel, int32 olabel, float32 weight, int32 nextstate):
- header: int32 magic, string fst type, string arc type, int32 version, int32 flags, uint64
  properties, int64 start, int64 number of states, int64 number of arcs (a string is an int32
  length and its bytes); symbol tables follow when flags 1/2 are set;
- VectorFst: per state, float32 final weight, int64 number of arcs, then its arcs;
- ConstFst<StdArc, uint32>: all states (float32 final, uint32 first arc, uint32 number of arcs,
  uint32 input and output epsilon counts), then all arcs in state order; with flag 4 (aligned)
  each of the two arrays starts at a multiple of 16 bytes from the start of the file.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

FST_MAGIC = 2125659606
HAS_ISYMBOLS, HAS_OSYMBOLS, IS_ALIGNED = 1, 2, 4        # header flags
EXPANDED_MUTABLE = 0x3                                  # property bits every VectorFst has
ARCH_ALIGNMENT = 16
VECTOR_VERSION = 2
STD_ARC = np.dtype([("ilabel", "<i4"), ("olabel", "<i4"), ("weight", "<f4"),
                    ("nextstate", "<i4")])
CONST_STATE = np.dtype([("final", "<f4"), ("pos", "<u4"), ("num_arcs", "<u4"),
                        ("num_iepsilons", "<u4"), ("num_oepsilons", "<u4")])


class FstFormatError(ValueError):
    """A file is not the OpenFst binary FST it should be; the message names it."""


@dataclass
class FstHeader:
    fst_type: str
    arc_type: str
    version: int
    flags: int
    properties: int
    start: int
    num_states: int
    num_arcs: int


def read_header(data: bytes, pos: int, where: str) -> tuple[FstHeader, int]:
    """The header at data[pos:] and the offset just after it."""
    def take(fmt: str):
        nonlocal pos
        values = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return values

    def string() -> str:
        nonlocal pos
        (length,) = take("<i")
        if not 0 <= length <= 256:
            raise FstFormatError(f"{where}: corrupt FST header (type name of {length} bytes)")
        pos += length
        return data[pos - length:pos].decode("ascii", "replace")

    try:
        (magic,) = take("<i")
        if magic != FST_MAGIC:
            raise FstFormatError(f"{where}: not an OpenFst binary FST (magic number {magic})")
        fst_type, arc_type = string(), string()
        header = FstHeader(fst_type, arc_type, *take("<iiQqqq"))
    except struct.error:
        raise FstFormatError(f"{where}: truncated FST header") from None
    return header, pos


def peek_fst_type(path: str) -> str:
    """'vector', 'const', ... from the header of an OpenFst binary FST file."""
    with open(path, "rb") as f:
        head = f.read(1024)
    return read_header(head, 0, path)[0].fst_type


def const_as_vector_bytes(data: bytes, where: str) -> bytes:
    """A binary ConstFst of standard arcs, re-laid out as the equivalent binary VectorFst."""
    header, pos = read_header(data, 0, where)
    if header.fst_type != "const" or header.arc_type != "standard":
        raise FstFormatError(f"{where}: expected a const FST of standard arcs, got "
                             f"'{header.fst_type}/{header.arc_type}'")
    if header.flags & (HAS_ISYMBOLS | HAS_OSYMBOLS):
        raise FstFormatError(f"{where}: FST carries symbol tables; not supported")

    def align(offset: int) -> int:
        if header.flags & IS_ALIGNED:
            return -(-offset // ARCH_ALIGNMENT) * ARCH_ALIGNMENT
        return offset

    states_at = align(pos)
    arcs_at = align(states_at + header.num_states * CONST_STATE.itemsize)
    if arcs_at + header.num_arcs * STD_ARC.itemsize > len(data):
        raise FstFormatError(f"{where}: truncated: the header promises {header.num_states} "
                             f"states and {header.num_arcs} arcs")
    states = np.frombuffer(data, CONST_STATE, header.num_states, states_at)
    arcs = np.frombuffer(data, STD_ARC, header.num_arcs, arcs_at)
    counts = states["num_arcs"].astype(np.int64)
    first_arc = np.cumsum(counts) - counts
    if not np.array_equal(states["pos"].astype(np.int64), first_arc):
        raise FstFormatError(f"{where}: arcs are not stored in state order")
    return _vector_layout(header, states["final"], counts, first_arc, arcs)


def _vector_layout(header: FstHeader, finals: np.ndarray, counts: np.ndarray,
                   first_arc: np.ndarray, arcs: np.ndarray) -> bytes:
    """The VectorFst file: header, then per state its final weight, arc count and arcs
    (`first_arc`: each state's first arc in `arcs`)."""
    def string(text: str) -> bytes:
        return struct.pack("<i", len(text)) + text.encode("ascii")

    head = (struct.pack("<i", FST_MAGIC) + string("vector") + string(header.arc_type)
            + struct.pack("<iiQqqq", VECTOR_VERSION, 0, header.properties | EXPANDED_MUTABLE,
                          header.start, len(finals), len(arcs)))
    # Every field is a multiple of 4 bytes, so the body is laid out as 32-bit words: state s's
    # record (final weight, int64 arc count) is 3 words, each arc 4, in state order; so state s
    # starts at word 3 s + 4 (arcs of earlier states), and arc j of state s at 3 (s + 1) + 4 j.
    num_states, num_arcs = len(finals), len(arcs)
    words = np.empty(3 * num_states + 4 * num_arcs, "<u4")
    record_at = 3 * np.arange(num_states, dtype=np.int64) + 4 * first_arc
    words[record_at] = np.ascontiguousarray(finals, "<f4").view("<u4")
    words[record_at + 1] = counts & 0xFFFFFFFF
    words[record_at + 2] = counts >> 32
    arc_at = 3 * (np.repeat(np.arange(num_states, dtype=np.int64), counts) + 1) \
        + 4 * np.arange(num_arcs, dtype=np.int64)
    arc_words = np.ascontiguousarray(arcs).view("<u4").reshape(num_arcs, 4)
    for field in range(4):
        words[arc_at + field] = arc_words[:, field]
    return head + words.tobytes()
