"""Mandarin pinyin to AISHELL-style phones: one initial plus one tonal final per syllable.

The phone set is the one of AISHELL-1's resource_aishell/lexicon.txt (and THCHS-30's):
- initials: b p m f d t n l g k h j q x zh ch sh r z c s;
- zero-initial syllables get a pseudo-initial so every syllable has two phones:
  `aa` (a-), `ee` (e-, er), `oo` (o-), `ii` (y- without ü), `uu` (w-), `vv` (yu-, i.e. ü);
- finals carry the tone digit 1-5 (5 = neutral): `ei3`, `ing1`; the finals spelled after y/w/j/q/x
  are written in their underlying form (`yue` -> `vv ve`, `ju` -> `j v`, `wei` -> `uu ui`), and the
  apical vowel `i` is `ix` after zh/ch/sh/r and `iy` after z/c/s (`shi4` -> `sh ix4`).

    >>> syllable_to_phones("bei3")
    ['b', 'ei3']
    >>> syllable_to_phones("yue4")
    ['vv', 've4']
    >>> word_to_phones("北京")
    ['b', 'ei3', 'j', 'ing1']

`word_to_phones` asks pypinyin for the tone-numbered syllables (its phrase dictionary picks the
reading of heteronyms in context, and the neutral tone is written 5).
"""
from __future__ import annotations

INITIALS = ("zh", "ch", "sh", "b", "p", "m", "f", "d", "t", "n", "l", "g", "k", "h", "j", "q", "x",
            "r", "z", "c", "s")
PSEUDO_INITIALS = ("aa", "ee", "ii", "oo", "uu", "vv")
FINALS = frozenset(
    "a ai an ang ao e ei en eng er i ia ian iang iao ie in ing io iong iu ix iy o ong ou "
    "u ua uai uan uang ueng ui un uo v van ve vn".split())
TONES = "12345"


class PinyinError(ValueError):
    """A syllable or word that has no AISHELL-style pronunciation."""


def _split_tone(syllable: str) -> tuple[str, str]:
    """'bei3' -> ('bei', '3'). A syllable without a tone digit is an error: tones are phones here."""
    text = syllable.strip().lower().replace("ü", "v").replace("u:", "v")
    if len(text) < 2 or text[-1] not in TONES:
        raise PinyinError(f"pinyin syllable '{syllable}': expected letters then a tone digit 1-5, "
                          "e.g. 'bei3'")
    return text[:-1], text[-1]


def _zero_initial(base: str) -> tuple[str, str]:
    """Pseudo-initial and final of a syllable written without a consonant initial."""
    if base.startswith("yu"):
        return "vv", "v" + base[2:]                       # yu, yue, yuan, yun
    if base.startswith("y"):
        final = base[1:] if base[1:2] == "i" else "i" + base[1:]   # yi, yin, ying / ya, ye, you
        return "ii", {"iou": "iu"}.get(final, final)
    if base.startswith("w"):
        final = base[1:] if base[1:2] == "u" else "u" + base[1:]   # wu / wa, wo, wei, wen
        return "uu", {"uei": "ui", "uen": "un"}.get(final, final)
    return {"a": "aa", "e": "ee", "o": "oo"}.get(base[0], ""), base


def syllable_to_phones(syllable: str) -> list[str]:
    """One tone-numbered pinyin syllable -> [initial or pseudo-initial, tonal final]."""
    base, tone = _split_tone(syllable)
    if base in ("n", "ng"):
        return ["ee", "e" + base + tone]                  # syllabic nasal (嗯 n2): nearest final
    initial = next((i for i in INITIALS if base.startswith(i) and len(base) > len(i)), "")
    if initial:
        final = base[len(initial):]
        if initial in ("j", "q", "x") and final.startswith("u"):
            final = "v" + final[1:]                       # ju -> j v, xuan -> x van
        elif final == "i" and initial in ("zh", "ch", "sh", "r"):
            final = "ix"
        elif final == "i" and initial in ("z", "c", "s"):
            final = "iy"
    else:
        initial, final = _zero_initial(base)
    if not initial or final not in FINALS:
        raise PinyinError(f"pinyin syllable '{syllable}' has no AISHELL-style phones "
                          f"(parsed initial '{initial}', final '{final}')")
    return [initial, final + tone]


def is_chinese_char(char: str) -> bool:
    """CJK unified ideographs (basic block and extension A), the characters AISHELL text uses."""
    return "\u4e00" <= char <= "\u9fff" or "\u3400" <= char <= "\u4dbf"


def word_to_phones(word: str) -> list[str]:
    """A word of Chinese characters -> its phones, via pypinyin's tone-numbered reading.

    Raises PinyinError naming the word if it holds anything but Chinese characters or pypinyin has
    no reading that maps to the phone set.
    """
    from pypinyin import Style, lazy_pinyin

    bad = [c for c in word if not is_chinese_char(c)]
    if not word or bad:
        raise PinyinError(f"word '{word}': only Chinese characters have a pinyin pronunciation "
                          f"(found {''.join(bad)!r})")
    syllables = lazy_pinyin(word, style=Style.TONE3, neutral_tone_with_five=True)
    if len(syllables) != len(word):
        raise PinyinError(f"word '{word}': pypinyin returned {syllables}, expected one syllable "
                          "per character")
    phones: list[str] = []
    for char, syllable in zip(word, syllables):
        if char in syllable:
            raise PinyinError(f"word '{word}': pypinyin has no reading for '{char}'")
        try:
            phones.extend(syllable_to_phones(syllable))
        except PinyinError as err:
            raise PinyinError(f"word '{word}': {err}") from None
    return phones
