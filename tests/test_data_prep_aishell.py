"""local/aishell_data_prep.sh on a small tree with the real AISHELL-1 layout and naming."""
from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, run_script

SCRIPT = str(REPO / "local" / "aishell_data_prep.sh")

# (split, speaker, utterance, transcript or None for an untranscribed wav)
UTTERANCES = [
    ("train", "S0002", "BAC009S0002W0122", "而 对 楼市 成交 抑制 作用 最 大 的 限 购"),
    ("train", "S0002", "BAC009S0002W0123", "也 成为 地方 政府 的 眼中 钉"),
    ("train", "S0003", "BAC009S0003W0121", "北京 天气"),
    ("train", "S0003", "BAC009S0003W0122", None),
    ("dev", "S0724", "BAC009S0724W0121", "播放 音乐"),
    ("test", "S0764", "BAC009S0764W0121", "导航 到 天安门"),
    ("test", "S0764", "BAC009S0764W0122", "附近 的   餐厅"),
]


def write_wav(path: Path, rate: int = 16000, channels: int = 1, seconds: float = 0.05) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    samples = (3000 * np.sin(np.arange(int(rate * seconds)) * 0.1)).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.repeat(samples, channels).tobytes())


def make_corpus(root: Path, utterances=UTTERANCES, extra_lines=()) -> tuple[Path, Path]:
    wav_dir = root / "data_aishell" / "wav"
    text_dir = root / "data_aishell" / "transcript"
    text_dir.mkdir(parents=True)
    lines = list(extra_lines)
    for split, spk, utt, text in utterances:
        write_wav(wav_dir / split / spk / f"{utt}.wav")
        if text is not None:
            lines.append(f"{utt} {text}")
    lines.append("BAC009S0999W0001 没有 音频 的 句子")  # transcript without a wav
    (text_dir / "aishell_transcript_v0.8.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return wav_dir, text_dir


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_data_prep_writes_sorted_valid_data_dirs(tmp_path):
    wav_dir, text_dir = make_corpus(tmp_path / "corpus")
    work = tmp_path / "work"
    work.mkdir()
    result = run_script([SCRIPT, str(wav_dir), str(text_dir)], cwd=work)
    assert result.returncode == 0, result.stderr
    train = work / "data" / "train"
    assert read(train / "utt2spk") == ["BAC009S0002W0122 S0002", "BAC009S0002W0123 S0002",
                                      "BAC009S0003W0121 S0003"]
    assert read(train / "spk2utt") == ["S0002 BAC009S0002W0122 BAC009S0002W0123",
                                      "S0003 BAC009S0003W0121"]
    assert read(train / "text")[0] == "BAC009S0002W0122 而 对 楼市 成交 抑制 作用 最 大 的 限 购"
    wav_line = read(train / "wav.scp")[2].split()
    assert wav_line[0] == "BAC009S0003W0121"
    assert Path(wav_line[1]) == (wav_dir / "train/S0003/BAC009S0003W0121.wav").resolve()
    assert read(work / "data/test/text")[1] == "BAC009S0764W0122 附近 的 餐厅"
    assert read(work / "data/dev/utt2spk") == ["BAC009S0724W0121 S0724"]
    assert "1 wav file(s) have no transcript line" in result.stderr
    for split in ("train", "dev", "test"):
        check = run_script([str(REPO / "utils/validate_data_dir.sh"), "--no-feats",
                            str(work / "data" / split)])
        assert check.returncode == 0, check.stderr


@pytest.mark.parametrize("bad_text, expected", [
    ("BAC009S0002W0122 导航 到 3 号 楼", "'3'"),
    ("BAC009S0002W0122 播放 abc 的 歌", "'abc'"),
])
def test_transcript_with_digits_or_latin_letters_is_an_error(tmp_path, bad_text, expected):
    good = [u for u in UTTERANCES if u[2] != "BAC009S0002W0122"]
    wav_dir, text_dir = make_corpus(tmp_path, good, extra_lines=[bad_text])
    result = run_script([SCRIPT, "--out-dir", str(tmp_path / "data"), str(wav_dir), str(text_dir)])
    assert result.returncode != 0
    assert "aishell_transcript_v0.8.txt:1: utterance BAC009S0002W0122" in result.stderr
    assert expected in result.stderr and "only Chinese characters" in result.stderr
    assert not (tmp_path / "data" / "train").exists()


@pytest.mark.parametrize("rate, channels, described", [(8000, 1, "8000 Hz, 1 channel"),
                                                       (16000, 2, "16000 Hz, 2 channel")])
def test_wav_with_wrong_rate_or_channels_is_an_error(tmp_path, rate, channels, described):
    wav_dir, text_dir = make_corpus(tmp_path)
    bad = wav_dir / "dev/S0724/BAC009S0724W0121.wav"
    write_wav(bad, rate=rate, channels=channels)
    result = run_script([SCRIPT, "--out-dir", str(tmp_path / "data"), str(wav_dir), str(text_dir)])
    assert result.returncode != 0
    assert f"{bad.resolve()}: {described}" in result.stderr
    assert "expected 16000 Hz, 1 channel, 16-bit" in result.stderr


def test_empty_transcript_file_is_an_error(tmp_path):
    wav_dir, text_dir = make_corpus(tmp_path)
    (text_dir / "aishell_transcript_v0.8.txt").write_text("", encoding="utf-8")
    result = run_script([SCRIPT, "--out-dir", str(tmp_path / "data"), str(wav_dir), str(text_dir)])
    assert result.returncode != 0
    assert "aishell_transcript_v0.8.txt: no transcript lines" in result.stderr


def test_transcript_line_without_words_is_skipped_and_counted(tmp_path):
    wav_dir, text_dir = make_corpus(tmp_path, extra_lines=["BAC009S0003W0122"])
    result = run_script([SCRIPT, "--out-dir", str(tmp_path / "data"), str(wav_dir), str(text_dir)])
    assert result.returncode == 0, result.stderr
    assert "skipped 1 utterance(s) with an empty transcript" in result.stderr
    assert "BAC009S0003W0122" not in (tmp_path / "data/train/text").read_text(encoding="utf-8")


def test_split_without_transcribed_wavs_is_an_error(tmp_path):
    wav_dir, text_dir = make_corpus(tmp_path, [u for u in UTTERANCES if u[0] != "dev"])
    result = run_script([SCRIPT, "--out-dir", str(tmp_path / "data"), str(wav_dir), str(text_dir)])
    assert result.returncode != 0
    assert "no transcribed wav under dev/" in result.stderr


def test_usage_on_wrong_argument_count():
    result = run_script([SCRIPT, "only-one-arg"])
    assert result.returncode == 1 and "Usage:" in result.stderr
