"""Kaldi dict directories (data/local/dict): reading, checking and writing.

A dict dir holds `lexicon.txt` (or `lexiconp.txt` with a probability after the word),
`silence_phones.txt` and `nonsilence_phones.txt` (one line per base phone, its variants on the same
line: they share a tree root), `optional_silence.txt` (one phone) and `extra_questions.txt` (one
phone set per line, for the tree's questions). The checks are those of Kaldi's
utils/validate_dict_dir.pl that matter downstream; each error names the file and line.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from emasr.io.atomic import atomic_write
from emasr.io.table import c_sort_key, read_lines

RESERVED_WORDS = ("<eps>", "<s>", "</s>", "#0")


class DictError(ValueError):
    """A dict dir is inconsistent; the message names the file and line."""


@dataclass
class LexiconEntry:
    word: str
    phones: list[str]
    prob: float = 1.0


@dataclass
class DictDir:
    silence_phones: list[list[str]]
    nonsilence_phones: list[list[str]]
    optional_silence: str
    lexicon: list[LexiconEntry]
    extra_questions: list[list[str]] = field(default_factory=list)

    def phones(self) -> list[str]:
        """Every phone, silence first, in file order (the order of phones.txt)."""
        return [p for line in self.silence_phones + self.nonsilence_phones for p in line]

    def words(self) -> set[str]:
        return {e.word for e in self.lexicon}


def read_phone_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in read_lines(path) if line.strip()]


def read_lexicon(path: str | os.PathLike, with_probs: bool = False) -> list[LexiconEntry]:
    """`word phone...` (or `word prob phone...`) lines; rejects empty pronunciations and bad probs."""
    path = os.fspath(path)
    entries = []
    for number, line in enumerate(read_lines(path), 1):
        fields = line.split()
        if not fields:
            continue
        word, rest = fields[0], fields[1:]
        prob = 1.0
        if with_probs:
            try:
                prob = float(rest.pop(0)) if rest else -1.0
            except ValueError:
                prob = -1.0
            if not 0.0 < prob <= 1.0:
                raise DictError(f"{path}:{number}: expected 'word prob phone...' with 0 < prob <= 1")
        if not rest:
            raise DictError(f"{path}:{number}: word '{word}' has an empty pronunciation")
        entries.append(LexiconEntry(word, rest, prob))
    return entries


def load_dict_dir(path: str | os.PathLike) -> DictDir:
    """Read and check a dict dir (lexiconp.txt wins over lexicon.txt, as in Kaldi)."""
    path = Path(path)
    for name in ("silence_phones.txt", "nonsilence_phones.txt", "optional_silence.txt"):
        if not (path / name).is_file():
            raise DictError(f"{path}/{name}: expected file to exist")
    if (path / "lexiconp.txt").is_file():
        lexicon = read_lexicon(path / "lexiconp.txt", with_probs=True)
    elif (path / "lexicon.txt").is_file():
        lexicon = read_lexicon(path / "lexicon.txt")
    else:
        raise DictError(f"{path}/lexicon.txt: expected file to exist")
    optional = read_phone_lines(path / "optional_silence.txt")
    if len(optional) != 1 or len(optional[0]) != 1:
        raise DictError(f"{path}/optional_silence.txt: expected exactly one phone")
    extra = path / "extra_questions.txt"
    d = DictDir(read_phone_lines(path / "silence_phones.txt"),
                read_phone_lines(path / "nonsilence_phones.txt"), optional[0][0], lexicon,
                read_phone_lines(extra) if extra.is_file() else [])
    check_dict(d, str(path))
    return d


def check_dict(d: DictDir, where: str = "dict") -> None:
    """Kaldi's dict rules: phones unique and well formed, lexicon phones known, no reserved words."""
    seen: dict[str, str] = {}
    for name, lines in (("silence_phones.txt", d.silence_phones),
                        ("nonsilence_phones.txt", d.nonsilence_phones)):
        for number, line in enumerate(lines, 1):
            for phone in line:
                if phone in seen:
                    raise DictError(f"{where}/{name}:{number}: phone '{phone}' also in {seen[phone]}")
                if phone.startswith("#") or phone == "<eps>" or not re.fullmatch(r"\S+", phone):
                    raise DictError(f"{where}/{name}:{number}: phone '{phone}' is reserved")
                seen[phone] = name
    if not d.silence_phones:
        raise DictError(f"{where}/silence_phones.txt: expected at least one silence phone")
    if seen.get(d.optional_silence) != "silence_phones.txt":
        raise DictError(f"{where}/optional_silence.txt: '{d.optional_silence}' is not a silence phone")
    for number, line in enumerate(d.extra_questions, 1):
        unknown = [p for p in line if p not in seen]
        if unknown:
            raise DictError(f"{where}/extra_questions.txt:{number}: unknown phone(s) {unknown}")
    prons: set[tuple[str, tuple[str, ...]]] = set()
    for number, entry in enumerate(d.lexicon, 1):
        if entry.word in RESERVED_WORDS or entry.word.startswith("#"):
            raise DictError(f"{where}/lexicon.txt:{number}: word '{entry.word}' is reserved")
        unknown = [p for p in entry.phones if p not in seen]
        if unknown:
            raise DictError(f"{where}/lexicon.txt:{number}: word '{entry.word}' uses phone(s) "
                            f"{unknown} not in silence_phones.txt or nonsilence_phones.txt")
        key = (entry.word, tuple(entry.phones))
        if key in prons:
            raise DictError(f"{where}/lexicon.txt:{number}: duplicate entry "
                            f"'{entry.word} {' '.join(entry.phones)}'")
        prons.add(key)


def write_phone_lines(path: Path, lines: list[list[str]]) -> None:
    with atomic_write(path) as f:
        f.writelines(" ".join(line) + "\n" for line in lines)


def write_dict_dir(d: DictDir, path: str | os.PathLike) -> None:
    """Write the dict dir, lexicon sorted (C locale) by `word phones`, each file atomically."""
    check_dict(d, os.fspath(path))
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    write_phone_lines(path / "silence_phones.txt", d.silence_phones)
    write_phone_lines(path / "nonsilence_phones.txt", d.nonsilence_phones)
    write_phone_lines(path / "optional_silence.txt", [[d.optional_silence]])
    write_phone_lines(path / "extra_questions.txt", d.extra_questions)
    lines = sorted({f"{e.word} {' '.join(e.phones)}" for e in d.lexicon}, key=c_sort_key)
    with atomic_write(path / "lexicon.txt") as f:
        f.writelines(line + "\n" for line in lines)
