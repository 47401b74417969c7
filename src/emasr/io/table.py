"""Kaldi text tables: `key value...` per line, UTF-8, keys unique and sorted in the C locale.

C-locale order is the order of the UTF-8 bytes, which is what `LC_ALL=C sort` gives and what
Kaldi's tools check; Python's default string order (code points) agrees with it for UTF-8.
"""
from __future__ import annotations

import os
from typing import Iterable, Mapping

from emasr.io.atomic import atomic_write


class TableError(ValueError):
    """A table file is malformed; the message names the file, the line and what was expected."""


def c_sort_key(key: str) -> bytes:
    """Sort key equal to `LC_ALL=C sort` on UTF-8 text."""
    return key.encode("utf-8")


def read_lines(path: str | os.PathLike) -> list[str]:
    """Read a text table's lines, rejecting invalid UTF-8 and CRLF with the line number."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, 1):
        if line.endswith(b"\r"):
            raise TableError(f"{path}:{number}: line ends with CR (Windows line ending); "
                             "expected Unix line endings (run dos2unix)")
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise TableError(f"{path}:{number}: invalid UTF-8 at byte {err.start}") from None
    return out


def split_key(line: str) -> tuple[str, str]:
    """`key rest` of one table line; any run of spaces or tabs separates the key, as in Kaldi."""
    parts = line.strip().split(None, 1)
    if not parts:
        return "", ""
    return parts[0], parts[1] if len(parts) > 1 else ""


def read_table(path: str | os.PathLike, check_sorted: bool = False) -> dict[str, str]:
    """Read `key rest-of-line` pairs. Raises TableError on duplicates, empty keys or bad order."""
    path = os.fspath(path)
    table: dict[str, str] = {}
    first_line: dict[str, int] = {}
    previous = None
    for number, line in enumerate(read_lines(path), 1):
        key, value = split_key(line)
        if not key:
            raise TableError(f"{path}:{number}: empty line; expected 'key value'")
        if key in table:
            raise TableError(f"{path}:{number}: duplicate key '{key}' (first on line "
                             f"{first_line[key]}); expected unique keys")
        if check_sorted and previous is not None and c_sort_key(key) < c_sort_key(previous):
            raise TableError(f"{path}:{number}: key '{key}' comes after '{previous}'; "
                             "expected sorted keys (LC_ALL=C sort)")
        table[key] = value
        first_line[key] = number
        previous = key
    return table


def render_table(table: Mapping[str, str] | Iterable[tuple[str, str]]) -> str:
    """The text of a table sorted in C-locale order, as write_table writes it."""
    items = table.items() if isinstance(table, Mapping) else table
    rows = sorted(((str(k), str(v)) for k, v in items), key=lambda kv: c_sort_key(kv[0]))
    return "".join(f"{k} {v}\n" if v != "" else f"{k}\n" for k, v in rows)


def write_table(path: str | os.PathLike, table: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
    """Write a table sorted in C-locale order, atomically."""
    text = render_table(table)
    with atomic_write(path) as f:
        f.write(text)
