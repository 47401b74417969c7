"""Kaldi tables (ark and scp archives of matrices and vectors) read with every failure named.

kaldiio parses the records; what it raises on a damaged archive says nothing of where
("buffer size must be a multiple of element size", a bare AssertionError for an scp offset past
the end, a UnicodeDecodeError for one into the middle of a record). Every reader here turns any
such failure into a TableError that names the file, the utterance, the scp line or the ark offset
and what was expected, as Kaldi's table readers do:

    read_scp(path)          random access by utterance (lazy, as kaldiio.load_scp)
    read_archive(rspecifier)  sequential (key, value) pairs of "scp:F", "ark:F" or "ark:-"
"""
from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO

import kaldiio

ARK_OFFSET = re.compile(r"(.+):(\d+)")
EXPECTED = "a Kaldi archive record (a key, then a binary or text matrix or vector)"


class TableError(ValueError):
    """A Kaldi table that cannot be read; the message names where and what was expected."""


def load_record(spec: str, where: str) -> Any:
    """The object at an scp's `<ark-file>:<offset>` (or any other form kaldiio reads: a range
    `[a:b]`, a pipe); `where` names it in an error. The file is looked at only when kaldiio
    fails (this is every utterance's read in training)."""
    try:
        with warnings.catch_warnings():   # kaldiio warns before it raises: one message is enough
            warnings.simplefilter("ignore")
            return kaldiio.load_mat(spec)
    except Exception as err:   # kaldiio raises what its parsing meets: name it, whatever it is
        raise TableError(f"{where}: {what_went_wrong(spec, err)}") from None


def what_went_wrong(spec: str, err: Exception) -> str:
    """Why `spec` could not be read: no such archive, an offset past its end, or a record that
    is not one there (truncated, or an offset into the middle of a record)."""
    match = ARK_OFFSET.fullmatch(spec)
    if match is None:
        return f"cannot read '{spec}': {type(err).__name__}: {err}"
    path, offset = match.group(1), int(match.group(2))
    if not os.path.isfile(path):
        return f"no such archive {path}"
    size = os.path.getsize(path)
    if offset >= size:
        return f"offset {offset} is past the end of {path} ({size} bytes)"
    return (f"cannot read {path} at offset {offset} (truncated, or not the start of a record; "
            f"expected {EXPECTED}): {type(err).__name__}: {err}")


def parse_scp(path: str | os.PathLike) -> dict[str, tuple[int, str]]:
    """{utterance: (line number, spec)} of an scp file, its lines checked."""
    entries: dict[str, tuple[int, str]] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                fields = line.split(maxsplit=1)
                if len(fields) != 2:
                    raise TableError(f"{path}:{number}: expected '<utterance> <ark-file>:<offset>', "
                                     f"got '{line.rstrip()}'")
                key, spec = fields[0], fields[1].strip()
                if key in entries:
                    raise TableError(f"{path}:{number}: duplicate key '{key}' (first on line "
                                     f"{entries[key][0]}); expected unique keys")
                entries[key] = (number, spec)
    except (OSError, UnicodeDecodeError) as err:
        raise TableError(f"{path}: cannot read the scp file: {err}") from None
    return entries


class ScpTable(Mapping):
    """An scp file read on demand (as kaldiio.load_scp), each failure naming line and utterance."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self.entries = parse_scp(path)

    def __getitem__(self, key: str) -> Any:
        number, spec = self.entries[key]
        return load_record(spec, f"{self.path}:{number} (utterance '{key}')")

    def __contains__(self, key: object) -> bool:   # without reading the record
        return key in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def read_scp(path: str | os.PathLike) -> ScpTable:
    return ScpTable(path)


def read_archive(rspecifier: str) -> Iterator[tuple[str, Any]]:
    """(key, value) in the order of an "scp:F", "ark:F" or "ark:-" table (options such as
    "ark,s,cs:" allowed); other forms (pipes) go to kaldiio as they are, their errors named."""
    kind, _, path = rspecifier.partition(":")
    kind = kind.split(",")[0]
    if kind == "scp" and not path.endswith("|"):
        yield from sequential_scp(path)
    elif kind == "ark" and not path.endswith("|"):
        if path == "-":
            yield from sequential_ark(sys.stdin.buffer, "standard input")
        else:
            try:
                f = open(path, "rb")
            except OSError as err:
                raise TableError(f"{rspecifier}: cannot open the archive: {err}") from None
            with f:
                yield from sequential_ark(f, path)
    else:
        yield from sequential_other(rspecifier)


def sequential_scp(path: str) -> Iterator[tuple[str, Any]]:
    for key, (number, spec) in parse_scp(path).items():
        yield key, load_record(spec, f"{path}:{number} (utterance '{key}')")


def sequential_ark(f: BinaryIO, name: str) -> Iterator[tuple[str, Any]]:
    records = kaldiio.load_ark(f)
    last = None
    while True:
        offset = f.tell() if f.seekable() else None
        try:
            key, value = next(records)
        except StopIteration:
            return
        except Exception as err:
            where = f"at offset {offset}" if offset is not None else "in the stream"
            after = f"after utterance '{last}'" if last is not None else "the first record"
            raise TableError(f"{name}: cannot read the record {where} ({after}; truncated or "
                             f"damaged? expected {EXPECTED}): {type(err).__name__}: {err}") from None
        last = key
        yield key, value


def sequential_other(rspecifier: str) -> Iterator[tuple[str, Any]]:
    last = None
    try:
        with kaldiio.ReadHelper(rspecifier) as reader:
            for key, value in reader:
                last = key
                yield key, value
    except Exception as err:
        after = f"after utterance '{last}'" if last is not None else "at the first record"
        raise TableError(f"{rspecifier}: cannot read the table {after}: "
                         f"{type(err).__name__}: {err}") from None
