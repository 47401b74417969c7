"""Small FST helpers shared by graph building and decoding: atomic FST writes, sizes, relabelling.

kaldifst has no mutable arc iterator, so label edits are done the FST way: compose with a one-state
transducer that maps the labels (what OpenFst's fstrelabel/fstrmsymbols amount to).
"""
from __future__ import annotations

import os
import tempfile
from typing import Iterable

from emasr.kaldi.openfst_binary import FstFormatError, const_as_vector_bytes, peek_fst_type
from emasr.io.atomic import atomic_path
from emasr.fst_stack import kaldifst


def write_fst(fst, path: str | os.PathLike) -> None:
    """Write an OpenFst binary FST atomically (temporary name beside `path`, then rename)."""
    with atomic_path(path) as tmp:
        if not fst.write(tmp):
            raise OSError(f"could not write FST to {os.fspath(path)}")


def scratch_dir(fallback: str) -> str:
    """Where scratch FST files go: kaldifst reads and writes FSTs only as files."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else fallback


def read_fst(path: str | os.PathLike) -> kaldifst.StdVectorFst:
    """Read an OpenFst binary FST as a StdVectorFst: a vector FST, or a const one (Kaldi's
    mkgraph.sh output), which kaldifst cannot read itself and is re-laid out as a vector FST."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"expected FST file {path} to exist")
    fst_type = peek_fst_type(path)
    if fst_type not in ("vector", "const"):
        raise FstFormatError(f"{path}: FST type '{fst_type}' is not supported (expected a "
                             "vector or const FST)")
    try:
        if fst_type == "vector":
            fst = kaldifst.StdVectorFst.read(path)
        else:
            with open(path, "rb") as f:
                vector_bytes = const_as_vector_bytes(f.read(), path)
            with tempfile.NamedTemporaryFile(dir=scratch_dir(tempfile.gettempdir()),
                                             suffix=".fst") as scratch:
                scratch.write(vector_bytes)
                scratch.flush()
                fst = kaldifst.StdVectorFst.read(scratch.name)
    except FstFormatError:
        raise
    except (ValueError, RuntimeError, MemoryError) as err:
        # OpenFst's reader trusts the counts in the file: a damaged one asks for absurd sizes
        # ("vector::reserve") without saying which file
        raise FstFormatError(f"{path}: OpenFst could not read this FST: damaged or truncated "
                             f"({type(err).__name__}: {err}; rebuild it)") from None
    if fst is None:
        raise FstFormatError(f"{path}: OpenFst could not read this FST: damaged or truncated "
                             "(rebuild it; OpenFst's own message is above)")
    return fst


def fst_size(fst) -> tuple[int, int]:
    """(number of states, number of arcs)."""
    num_states = fst.num_states
    return num_states, sum(fst.num_arcs(s) for s in range(num_states))


def map_input_labels_to_epsilon(fst, labels: Iterable[int], max_label: int
                                ) -> kaldifst.StdVectorFst:
    """Replace the given input labels by epsilon (OpenFst's fstrmsymbols on the input side).

    Composes a one-state transducer on the left: `x:x` for every other label up to `max_label`,
    `<eps>:d` for each label d to remove. The result has the same states and arcs as `fst`.
    """
    remove = set(int(x) for x in labels)
    lines = [f"0 0 {0 if label in remove else label} {label}" for label in range(1, max_label + 1)]
    lines.append("0")
    mapper = kaldifst.compile(s="\n".join(lines), acceptor=False, isymbols=None, osymbols=None)
    kaldifst.arcsort(mapper, sort_type="olabel")
    return kaldifst.StdVectorFst(kaldifst.compose(mapper, fst, connect=True))

