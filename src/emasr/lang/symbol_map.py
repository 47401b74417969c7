"""Kaldi's utils/sym2int.pl and utils/int2sym.pl: map fields of each line through a symbol table.

Semantics are Kaldi's: `-f 2-` (or `4-5`, `-3`, `3`, and `2:5` as a courtesy) selects the fields
(1-based) to map, all fields by default; fields are separated by whitespace and written back
separated by one space. sym2int stops at the first unknown symbol, naming it and its position,
unless `--map-oov SYM` (a symbol of the table, or an integer) replaces it; the first 20
replacements are logged and the total at the end. int2sym stops at a non-integer token or an
integer that is not in the table. One difference: Kaldi's int2sym.pl ends every output line with
a space before the newline; here neither script writes trailing spaces.
"""
from __future__ import annotations

import logging
import os
import re
import signal
import sys
from dataclasses import dataclass
from typing import IO, Iterable, Iterator

import click

from emasr.io.table import TableError
from emasr.lang.symbols import read_symbols

logger = logging.getLogger(__name__)

MAX_OOV_WARNINGS = 20  # as sym2int.pl


@dataclass(frozen=True)
class FieldRange:
    """Zero-based inclusive field range; None means open on that side."""

    begin: int | None = None
    end: int | None = None

    @classmethod
    def parse(cls, spec: str | None) -> "FieldRange":
        """Kaldi's -f argument: `N`, `N-M`, `N-`, `-M` (or with ':' for '-')."""
        if spec is None:
            return cls()
        if re.fullmatch(r"\d+", spec):
            return cls(int(spec) - 1, int(spec) - 1)
        match = re.match(r"(\d*)[-:](\d*)", spec)
        if not match or (match.group(1) == "" and match.group(2) == ""):
            raise click.UsageError(f"bad argument to -f option: '{spec}' (expected e.g. 2, 2-, "
                                   "3-4 or -5)")
        begin, end = match.groups()
        return cls(int(begin) - 1 if begin else None, int(end) - 1 if end else None)

    def __contains__(self, position: int) -> bool:
        return ((self.begin is None or position >= self.begin)
                and (self.end is None or position <= self.end))


def _input_lines(files: tuple[str, ...]) -> Iterator[tuple[str, int, str]]:
    """(file name, line number, line) of every input file in order, or of stdin (Perl's <>)."""
    if not files:
        files = ("-",)
    for name in files:
        handle: IO[str] = sys.stdin if name == "-" else open(name, encoding="utf-8")
        label = "stdin" if name == "-" else name
        try:
            for number, line in enumerate(handle, 1):
                yield label, number, line
        finally:
            if handle is not sys.stdin:
                handle.close()


class SymbolMapError(TableError):
    """A token that the symbol table cannot map; the message names file, line and position."""


class Sym2Int:
    """Maps symbols to ids; unknown symbols become `oov_id` if given, else an error."""

    def __init__(self, table: dict[str, int], oov_id: int | None, oov_name: str | None):
        self.table, self.oov_id, self.oov_name = table, oov_id, oov_name
        self.replaced = 0

    def __call__(self, token: str, where: str) -> str:
        value = self.table.get(token)
        if value is not None:
            return str(value)
        if self.oov_id is None:
            raise SymbolMapError(f"sym2int.pl: undefined symbol {token} ({where})")
        self.replaced += 1
        if self.replaced <= MAX_OOV_WARNINGS:
            logger.warning("sym2int.pl: replacing %s with %s", token, self.oov_name)
            if self.replaced == MAX_OOV_WARNINGS:
                logger.warning("sym2int.pl: not warning for OOVs any more times")
        return str(self.oov_id)


def int2sym_mapper(table: dict[str, int], symtab: str):
    by_id = {value: symbol for symbol, value in table.items()}

    def mapper(token: str, where: str) -> str:
        if not token.isdigit():
            raise SymbolMapError(f"int2sym.pl: found noninteger token {token} ({where})")
        symbol = by_id.get(int(token))
        if symbol is None:
            raise SymbolMapError(f"int2sym.pl: integer {token} not in symbol table {symtab} "
                                 f"({where})")
        return symbol

    return mapper


def map_lines(lines: Iterable[tuple[str, int, str]], fields: FieldRange, mapper,
              out: IO[str]) -> None:
    """Write each line with the fields in `fields` passed through mapper(token, where)."""
    for label, number, line in lines:
        tokens = line.split()
        mapped = [mapper(t, f"{label}:{number}, field {i + 1}") if i in fields else t
                  for i, t in enumerate(tokens)]
        out.write(" ".join(mapped) + "\n")


def _read_table(symtab: str) -> dict[str, int]:
    try:
        return read_symbols(symtab)
    except (OSError, TableError) as err:
        raise click.ClickException(f"cannot read symbol table: {err}") from None


def _oov_id(map_oov: str | None, table: dict[str, int], symtab: str) -> int | None:
    if map_oov is None:
        return None
    if map_oov.isdigit():
        return int(map_oov)
    if map_oov not in table:
        raise click.ClickException(f"OOV symbol {map_oov} (--map-oov) is not defined in {symtab}")
    return table[map_oov]


def _run(fields, mapper, files) -> None:
    try:
        map_lines(_input_lines(files), fields, mapper, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly with the status of a SIGPIPE death, as
        # Kaldi's Perl script would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(128 + signal.SIGPIPE)
    except (SymbolMapError, OSError) as err:
        raise click.ClickException(str(err)) from None


@click.command("sym2int")
@click.option("--map-oov", default=None, metavar="SYM",
              help="Map symbols not in the table to SYM (a symbol of the table, or an integer).")
@click.option("-f", "field_spec", default=None, metavar="RANGE",
              help="Fields to map (1-based): 2, 2-, 3-4 or -5; default all.")
@click.argument("symtab", type=click.Path(dir_okay=False))
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
def sym2int_cli(map_oov, field_spec, symtab, files):
    """Kaldi's utils/sym2int.pl: symbols -> integers, e.g. `-f 2- words.txt data/train/text`."""
    if map_oov is not None and (map_oov in ("", "-f") or map_oov.endswith("words.txt")):
        raise click.UsageError("the --map-oov option requires an argument")  # as Kaldi's check
    fields = FieldRange.parse(field_spec)
    table = _read_table(symtab)
    mapper = Sym2Int(table, _oov_id(map_oov, table, symtab), map_oov)
    _run(fields, mapper, files)
    if mapper.replaced:
        logger.warning("sym2int.pl: replaced %d instances of OOVs with %s", mapper.replaced,
                       map_oov)


@click.command("int2sym")
@click.option("-f", "field_spec", default=None, metavar="RANGE",
              help="Fields to map (1-based): 2, 2-, 3-4 or -5; default all.")
@click.argument("symtab", type=click.Path(dir_okay=False))
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
def int2sym_cli(field_spec, symtab, files):
    """Kaldi's utils/int2sym.pl: integers -> symbols, e.g. `-f 2- words.txt hyp.int`."""
    fields = FieldRange.parse(field_spec)
    _run(fields, int2sym_mapper(_read_table(symtab), symtab), files)
