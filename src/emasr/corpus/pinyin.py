"""Mandarin words to tone-numbered pinyin and to AISHELL-1 lexicon phones.

The AISHELL-1 resource lexicon (`resource_aishell/lexicon.txt`) writes a word as its syllables, each
split into an initial and a tonal final: `北京 b ei3 j ing1`. Zero-initial syllables get a
pseudo-initial chosen by their first letter (`aa` `oo` `ee` for a/o/e, `ii` for y, `uu` for w, `vv`
for yu), `i` after zh/ch/sh/r is `ix` and after z/c/s is `iy`, `u` after j/q/x is `v`, and the
neutral tone is 5: `坐实 z uo4 sh ix2`, `坐姿 z uo4 z iy1`, `坐拥 z uo4 ii iong1`, `啊 aa a1`.
The syllable-to-phones rule is `emasr.lang.pinyin` (shared with the LM's new-word pronunciations);
this module adds what the simulator needs: the text check and the syllables it synthesizes from,
which are the same syllables it writes to the lexicon, so audio and lexicon agree by construction.
"""
from __future__ import annotations

import re

from pypinyin import Style, lazy_pinyin

from emasr.lang.pinyin import PinyinError, syllable_to_phones

HAN_WORD = re.compile(r"^[\u4e00-\u9fff]+$")
# Syllabic nasals and interjections: pypinyin writes them, but they have no initial+final and
# espeak does not read them as Mandarin syllables, so corpus words must not contain them.
NON_STANDARD = {"n", "ng", "m", "hm", "hng"}


class TextError(ValueError):
    """Text that cannot go into the corpus; the message says where and why."""


def check_han_words(words: list[str], where: str) -> None:
    """Reject words that are not made only of Chinese characters (no digits, Latin letters, symbols)."""
    if not words:
        raise TextError(f"{where}: empty transcript; expected at least one word")
    for word in words:
        if not HAN_WORD.match(word):
            bad = "".join(sorted({ch for ch in word if not HAN_WORD.match(ch)}))
            raise TextError(f"{where}: word '{word}' contains {bad!r}; expected only Chinese "
                            "characters (no digits, Latin letters or punctuation)")


def word_syllables(word: str) -> list[str]:
    """Tone-numbered syllables of a word as pypinyin reads it in context (`北京` -> bei3 jing1)."""
    return lazy_pinyin(word, style=Style.TONE3, neutral_tone_with_five=True, v_to_u=False,
                       errors=lambda chars: ["?"] * len(chars))


def split_syllable(syllable: str) -> tuple[str, str]:
    """AISHELL (initial, tonal final) of one tone-numbered syllable, e.g. `jing1` -> (j, ing1)."""
    if syllable[:-1] in NON_STANDARD:
        raise TextError(f"syllable '{syllable}': a syllabic nasal or interjection, not initial+final")
    try:
        initial, final = syllable_to_phones(syllable)
    except PinyinError as err:
        raise TextError(str(err)) from None
    return initial, final


def syllable_phones(syllable: str) -> list[str]:
    """AISHELL phones of one syllable: [initial or pseudo-initial, tonal final]."""
    return list(split_syllable(syllable))


def word_phones(syllables: list[str]) -> list[str]:
    """AISHELL phones of a word given its syllables: `bei3 jing1` -> b ei3 j ing1."""
    return [phone for syllable in syllables for phone in syllable_phones(syllable)]
