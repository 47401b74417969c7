"""local/aishell_prepare_dict.sh: AISHELL-style dict dir from a resource lexicon."""
from __future__ import annotations

from pathlib import Path

from conftest import REPO, run_script
from emasr.lang.dictdir import load_dict_dir

SCRIPT = str(REPO / "local" / "aishell_prepare_dict.sh")

RESOURCE_LEXICON = """SIL sil
<SPOKEN_NOISE> sil
一 ii i1
北京 b ei3 j ing1
啊 aa a1
啊 aa a5
鱼 vv v2
是 sh ix4
"""


def make_resource(root: Path, lexicon: str = RESOURCE_LEXICON) -> Path:
    res = root / "resource_aishell"
    res.mkdir(parents=True)
    (res / "lexicon.txt").write_text(lexicon, encoding="utf-8")
    return res


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_dict_files_follow_kaldi_aishell(tmp_path):
    res = make_resource(tmp_path)
    result = run_script([SCRIPT, "--dict-dir", str(tmp_path / "dict"), str(res)])
    assert result.returncode == 0, result.stderr
    d = tmp_path / "dict"
    assert lines(d / "lexicon.txt") == ["<UNK> sil", "SIL sil", "一 ii i1", "北京 b ei3 j ing1",
                                        "啊 aa a1", "啊 aa a5", "是 sh ix4", "鱼 vv v2"]
    assert lines(d / "silence_phones.txt") == ["sil"]
    assert lines(d / "optional_silence.txt") == ["sil"]
    assert lines(d / "nonsilence_phones.txt") == [
        "a1 a5", "aa", "b", "ei3", "i1", "ii", "ing1", "ix4", "j", "sh", "v2", "vv"]
    assert lines(d / "extra_questions.txt") == [
        "sil", "aa b ii j sh vv", "a1 i1 ing1", "v2", "ei3", "ix4", "a5"]
    load_dict_dir(d)  # passes the dict checks


def test_words_missing_from_the_lexicon_get_pypinyin_pronunciations(tmp_path):
    res = make_resource(tmp_path)
    text = tmp_path / "text"
    text.write_text("U1 北京 天气\nU2 是 鱼\nU3 播放 abc\n", encoding="utf-8")
    result = run_script([SCRIPT, "--dict-dir", str(tmp_path / "dict"), "--text", str(text),
                         str(res)])
    assert result.returncode == 0, result.stderr
    lexicon = lines(tmp_path / "dict" / "lexicon.txt")
    assert "天气 t ian1 q i4" in lexicon and "播放 b o1 f ang4" in lexicon
    assert not any(line.startswith("abc") for line in lexicon)
    assert "word 'abc': only Chinese characters" in result.stderr
    assert "2 added from pypinyin (1 without a pronunciation" in result.stderr
    nonsil = lines(tmp_path / "dict" / "nonsilence_phones.txt")
    assert "i1 i4" in nonsil and "ian1" in nonsil


def test_bad_resource_phone_is_reported_with_its_line(tmp_path):
    res = make_resource(tmp_path, RESOURCE_LEXICON + "好 H AO3\n")
    result = run_script([SCRIPT, "--dict-dir", str(tmp_path / "dict"), str(res)])
    assert result.returncode != 0
    assert "lexicon.txt:9: word '好' has phone 'H'" in result.stderr
    assert not (tmp_path / "dict").exists()


def test_missing_resource_lexicon(tmp_path):
    (tmp_path / "res").mkdir()
    result = run_script([SCRIPT, str(tmp_path / "res")])
    assert result.returncode == 1
    assert f"expected file {tmp_path}/res/lexicon.txt to exist" in result.stderr
