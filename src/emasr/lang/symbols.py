"""OpenFst/Kaldi symbol tables (`symbol id` per line): phones.txt, words.txt."""
from __future__ import annotations

import os

from emasr.io.atomic import atomic_write
from emasr.io.table import TableError, read_lines


def read_symbols(path: str | os.PathLike) -> dict[str, int]:
    """symbol -> id; raises TableError on a malformed line, a duplicate symbol or a duplicate id."""
    path = os.fspath(path)
    table: dict[str, int] = {}
    ids: set[int] = set()
    for number, line in enumerate(read_lines(path), 1):
        fields = line.split()
        if len(fields) != 2 or not fields[1].isdigit():
            raise TableError(f"{path}:{number}: expected 'symbol integer-id', got '{line}'")
        symbol, sym_id = fields[0], int(fields[1])
        if symbol in table or sym_id in ids:
            raise TableError(f"{path}:{number}: duplicate symbol or id in '{line}'")
        table[symbol] = sym_id
        ids.add(sym_id)
    return table


def write_symbols(path: str | os.PathLike, symbols: list[str]) -> dict[str, int]:
    """Write `symbol index` lines numbered from 0 in the given order; returns the mapping."""
    if len(set(symbols)) != len(symbols):
        raise ValueError(f"{path}: duplicate symbols in {symbols}")
    with atomic_write(path) as f:
        f.writelines(f"{s} {i}\n" for i, s in enumerate(symbols))
    return {s: i for i, s in enumerate(symbols)}


def to_ints(symbols: list[str], table: dict[str, int], where: str) -> list[int]:
    """Map symbols to ids (Kaldi's sym2int.pl), naming the first unknown symbol."""
    try:
        return [table[s] for s in symbols]
    except KeyError as err:
        raise TableError(f"{where}: symbol {err.args[0]!r} is not in the symbol table") from None
