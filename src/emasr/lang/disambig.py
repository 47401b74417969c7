"""Disambiguation symbols for a lexicon, following Kaldi's utils/add_lex_disambig.pl.

A pronunciation that is shared by several words, or that is a prefix of another word's
pronunciation, gets `#1`, `#2`, ... appended so the lexicon transducer becomes determinizable.
Identical pronunciations get successive numbers (#1, #2, ...); numbers are counted per phone
sequence; the largest number used is returned (0 when none is needed).
"""
from __future__ import annotations

from emasr.lang.dictdir import LexiconEntry


def add_lex_disambig(lexicon: list[LexiconEntry]) -> tuple[list[LexiconEntry], int]:
    """Entries with disambiguation symbols appended where needed, and the highest #N used."""
    count: dict[tuple[str, ...], int] = {}
    prefixes: set[tuple[str, ...]] = set()
    for entry in lexicon:
        phones = tuple(entry.phones)
        count[phones] = count.get(phones, 0) + 1
        for end in range(len(phones)):
            prefixes.add(phones[:end])
    last_used: dict[tuple[str, ...], int] = {}
    max_disambig = 0
    out = []
    for entry in lexicon:
        phones = tuple(entry.phones)
        if count[phones] == 1 and phones not in prefixes:
            out.append(LexiconEntry(entry.word, list(phones), entry.prob))
            continue
        number = last_used.get(phones, 0) + 1
        last_used[phones] = number
        max_disambig = max(max_disambig, number)
        out.append(LexiconEntry(entry.word, list(phones) + [f"#{number}"], entry.prob))
    return out, max_disambig
