"""AISHELL-style dict dir (data/local/dict) from resource_aishell/lexicon.txt, as Kaldi's
egs/aishell/s5/local/aishell_prepare_dict.sh does, plus pypinyin pronunciations for words that the
resource lexicon lacks.

- lexicon.txt: the resource lexicon without its special entries, plus `SIL sil` and `<UNK> sil`;
- nonsilence_phones.txt: one line per base phone with all its tones (`a1 a2 a3 a4 a5`), so the tones
  of a final share one tree root and the tree's questions decide whether to split them;
- silence_phones.txt and optional_silence.txt: `sil`;
- extra_questions.txt: the silence phones, then one line per tone (the toneless line holds the
  initials), as Kaldi's script writes them (here in a fixed order).
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import click

from emasr.io.table import TableError
from emasr.lang.dictdir import DictDir, DictError, LexiconEntry, read_lexicon, write_dict_dir
from emasr.lang.pinyin import PinyinError, word_to_phones

logger = logging.getLogger(__name__)

SILENCE_PHONE = "sil"
SPECIAL_ENTRIES = [LexiconEntry("SIL", [SILENCE_PHONE]), LexiconEntry("<UNK>", [SILENCE_PHONE])]
PHONE_PATTERN = re.compile(r"([a-z]+)([1-5]?)")


def split_tone(phone: str) -> tuple[str, str]:
    """'ei3' -> ('ei', '3'); 'b' -> ('b', '')."""
    match = PHONE_PATTERN.fullmatch(phone)
    if not match:
        raise DictError(f"phone '{phone}': expected lower-case letters and an optional tone 1-5")
    return match.group(1), match.group(2)


def read_resource_lexicon(path: str | os.PathLike) -> list[LexiconEntry]:
    """The resource lexicon without `SIL` and `<...>` entries (we add our own), phones checked."""
    entries = []
    for number, entry in enumerate(read_lexicon(path), 1):
        if entry.word == "SIL" or re.fullmatch(r"<.*>", entry.word):
            continue
        for phone in entry.phones:
            if phone == SILENCE_PHONE or not PHONE_PATTERN.fullmatch(phone):
                raise DictError(f"{path}:{number}: word '{entry.word}' has phone '{phone}'; "
                                "expected AISHELL phones (initials and tonal finals, e.g. 'b ei3')")
        entries.append(entry)
    return entries


def dict_from_lexicon(entries: list[LexiconEntry]) -> DictDir:
    """The whole AISHELL-style dict dir implied by a word lexicon (phone sets from its phones)."""
    lexicon = SPECIAL_ENTRIES + [e for e in entries if e.word not in ("SIL", "<UNK>")]
    by_base: dict[str, set[str]] = {}
    by_tone: dict[str, set[str]] = {}
    for entry in lexicon:
        for phone in entry.phones:
            if phone != SILENCE_PHONE:
                base, tone = split_tone(phone)
                by_base.setdefault(base, set()).add(phone)
                by_tone.setdefault(tone, set()).add(phone)
    nonsilence = [sorted(by_base[base]) for base in sorted(by_base)]
    questions = [[SILENCE_PHONE]] + [sorted(by_tone[tone]) for tone in sorted(by_tone)]
    return DictDir([[SILENCE_PHONE]], nonsilence, SILENCE_PHONE, lexicon, questions)


def pinyin_entries(words: list[str], known: set[str]) -> tuple[list[LexiconEntry], list[str]]:
    """pypinyin pronunciations for the words not in `known`; returns (entries, words that failed)."""
    entries, failed = [], []
    for word in sorted(set(words) - known):
        try:
            entries.append(LexiconEntry(word, word_to_phones(word)))
        except PinyinError as err:
            logger.warning("no pronunciation: %s", err)
            failed.append(word)
    return entries, failed


def words_of_texts(text_files: list[str]) -> list[str]:
    """All words of Kaldi `text` files (first field is the utterance id)."""
    words = []
    for path in text_files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                words.extend(line.split()[1:])
    return words


def prepare_aishell_dict(resource_dir: str | os.PathLike, dict_dir: str | os.PathLike,
                         text_files: list[str] = ()) -> DictDir:
    """Write dict_dir from <resource_dir>/lexicon.txt (+ pypinyin for words of text_files)."""
    lexicon_path = Path(resource_dir) / "lexicon.txt"
    if not lexicon_path.is_file():
        raise DictError(f"{lexicon_path}: expected file to exist")
    entries = read_resource_lexicon(lexicon_path)
    known = {e.word for e in entries}
    added, failed = pinyin_entries(words_of_texts(list(text_files)), known)
    d = dict_from_lexicon(entries + added)
    write_dict_dir(d, dict_dir)
    # A fresh dict holds no LM words yet (train-lm records the ones it adds in this file).
    Path(dict_dir, "lexicon_lm_words.txt").unlink(missing_ok=True)
    logger.info("%s: %d words from %s, %d added from pypinyin (%d without a pronunciation, left "
                "out: they will map to <UNK>), %d nonsilence phones", dict_dir, len(known),
                lexicon_path, len(added), len(failed), sum(map(len, d.nonsilence_phones)))
    return d


@click.command("aishell-prepare-dict")
@click.argument("resource_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--dict-dir", default="data/local/dict", show_default=True, help="Output dict dir.")
@click.option("--text", "text_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Kaldi text file whose words missing from the lexicon get pypinyin "
                   "pronunciations (repeatable; use training text only).")
def aishell_prepare_dict_cli(resource_dir: str, dict_dir: str, text_files: tuple[str, ...]) -> None:
    """Make an AISHELL-style dict dir from RESOURCE_DIR/lexicon.txt (resource_aishell).

    Phones are initials and tonal finals with pseudo-initials (aa ee ii oo uu vv) for zero-initial
    syllables, and `sil`; the lexicon gets `SIL sil` and `<UNK> sil`.
    """
    try:
        prepare_aishell_dict(resource_dir, dict_dir, list(text_files))
    except (DictError, TableError) as err:
        raise click.ClickException(str(err)) from None
