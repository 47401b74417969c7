"""emasr.lang.pinyin: tone-numbered pinyin -> AISHELL-style initials and tonal finals."""
from __future__ import annotations

import pytest

from emasr.lang.pinyin import PinyinError, syllable_to_phones, word_to_phones


@pytest.mark.parametrize("syllable, phones", [
    ("bei3", ["b", "ei3"]), ("jing1", ["j", "ing1"]), ("zhong1", ["zh", "ong1"]),
    # pseudo-initials for zero-initial syllables, as in resource_aishell/lexicon.txt
    ("an1", ["aa", "an1"]), ("e4", ["ee", "e4"]), ("er2", ["ee", "er2"]), ("ou1", ["oo", "ou1"]),
    ("yi1", ["ii", "i1"]), ("ya4", ["ii", "ia4"]), ("you3", ["ii", "iu3"]),
    ("ying2", ["ii", "ing2"]), ("wu3", ["uu", "u3"]), ("wei4", ["uu", "ui4"]),
    ("wen2", ["uu", "un2"]), ("weng1", ["uu", "ueng1"]), ("yu2", ["vv", "v2"]),
    ("yue4", ["vv", "ve4"]), ("yuan3", ["vv", "van3"]), ("yun2", ["vv", "vn2"]),
    # written u after j q x is the vowel ü; written v / ü after n l
    ("ju2", ["j", "v2"]), ("xue2", ["x", "ve2"]), ("quan2", ["q", "van2"]), ("lv4", ["l", "v4"]),
    ("nü3", ["n", "v3"]), ("lve4", ["l", "ve4"]),
    # apical vowels
    ("shi4", ["sh", "ix4"]), ("ri4", ["r", "ix4"]), ("zi5", ["z", "iy5"]), ("si1", ["s", "iy1"]),
    ("n2", ["ee", "en2"]),
])
def test_syllable_to_phones(syllable, phones):
    assert syllable_to_phones(syllable) == phones


@pytest.mark.parametrize("bad", ["bei", "bei6", "hm5", "xyz1", ""])
def test_bad_syllables_are_rejected(bad):
    with pytest.raises(PinyinError):
        syllable_to_phones(bad)


def test_word_to_phones_uses_context_readings_and_neutral_tone():
    assert word_to_phones("北京") == ["b", "ei3", "j", "ing1"]
    assert word_to_phones("银行") == ["ii", "in2", "h", "ang2"]   # 行 read hang2 in this word
    assert word_to_phones("好的")[-2:] == ["d", "e5"]


@pytest.mark.parametrize("word", ["abc", "北京2", "", "你好!"])
def test_word_with_non_chinese_characters_is_reported(word):
    with pytest.raises(PinyinError, match="only Chinese characters"):
        word_to_phones(word)
