"""Line filters with Kaldi's exact behaviour: filter_scp.pl, utt2spk_to_spk2utt.pl, spk2utt_to_utt2spk.pl.

They stream bytes, so any encoding and any line passes through unchanged, and they keep the input
order (these tools are used in pipes on files that are not data-dir tables, e.g. unsorted lists).
"""
from __future__ import annotations

from typing import IO, Iterable, Iterator


class ListError(ValueError):
    """A malformed line; the message names the source and the line number."""


def read_ids(lines: Iterable[bytes], source: str) -> set[bytes]:
    """First field of each line of an id list (blank lines are an error, as in Kaldi)."""
    ids = set()
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            raise ListError(f"{source}:{number}: empty line; expected an id first on every line")
        ids.add(fields[0])
    return ids


def filter_lines(lines: Iterable[bytes], ids: set[bytes], field: int = 1, exclude: bool = False,
                 source: str = "-") -> Iterator[bytes]:
    """Lines whose `field`-th field (1-based) is in `ids` (or not in it, with exclude)."""
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if len(fields) < field:
            raise ListError(f"{source}:{number}: has {len(fields)} fields; expected at least "
                            f"{field} (filtering on field {field})")
        if (fields[field - 1] in ids) != exclude:
            yield line if line.endswith(b"\n") else line + b"\n"


def utt2spk_to_spk2utt(lines: Iterable[bytes], source: str = "-") -> Iterator[bytes]:
    """`spk utt1 utt2 ...` per speaker, speakers in order of first appearance (Kaldi's order)."""
    spk2utt: dict[bytes, list[bytes]] = {}
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if len(fields) != 2:
            raise ListError(f"{source}:{number}: has {len(fields)} fields; expected 'utterance speaker'")
        spk2utt.setdefault(fields[1], []).append(fields[0])
    for spk, utts in spk2utt.items():
        yield b" ".join([spk, *utts]) + b"\n"


def spk2utt_to_utt2spk(lines: Iterable[bytes], source: str = "-") -> Iterator[bytes]:
    """`utt spk` for every utterance of every `spk utt1 utt2 ...` line, in input order."""
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if len(fields) < 2:
            raise ListError(f"{source}:{number}: has {len(fields)} fields; expected "
                            "'speaker utt1 utt2 ...'")
        for utt in fields[1:]:
            yield utt + b" " + fields[0] + b"\n"


def write_all(out: IO[bytes], lines: Iterable[bytes]) -> None:
    for line in lines:
        out.write(line)
