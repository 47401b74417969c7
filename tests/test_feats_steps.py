"""The shell steps end to end: make_fbank.sh, make_mfcc_pitch.sh, compute_cmvn_stats.sh."""
from __future__ import annotations

import os
import sys
import wave

import kaldiio
import numpy as np
import pytest

from conftest import REPO, run_script
from emasr.feats.pipeline import FeaturePipeline, PipelineConfig
from emasr.io.table import read_table
from test_feats_extract import noise, write_wav

ENV = {"PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}  # emasr of this venv


def step(name, *args, cwd):
    return run_script([str(REPO / "steps" / name), *map(str, args)], cwd=cwd, env=ENV)


def make_data(root, lengths, speakers=2, bad=()):
    """A 16 kHz data dir: utterance i has lengths[i] samples; names in `bad` point at no file."""
    data = root / "data" / "train"
    data.mkdir(parents=True)
    wav_scp, utt2spk = [], []
    for i, length in enumerate(lengths):
        spk = f"spk{i % speakers}"
        utt = f"{spk}-utt{i:02d}"
        path = root / "wav" / f"{utt}.wav"
        path.parent.mkdir(exist_ok=True)
        if utt not in bad:
            write_wav(path, noise(length, seed=i))
        value = f"cat {path} |" if i == 1 else str(path)  # one entry through a pipe, as Kaldi
        wav_scp.append(f"{utt} {value}\n")
        utt2spk.append(f"{utt} {spk}\n")
    (data / "wav.scp").write_text("".join(sorted(wav_scp)))
    (data / "utt2spk").write_text("".join(sorted(utt2spk)))
    spk2utt = {}
    for line in sorted(utt2spk):
        utt, spk = line.split()
        spk2utt.setdefault(spk, []).append(utt)
    lines = [f"{s} {' '.join(u)}\n" for s, u in sorted(spk2utt.items())]
    (data / "spk2utt").write_text("".join(lines))
    conf = root / "conf"
    conf.mkdir()
    (conf / "fbank.conf").write_text("--num-mel-bins=80\n--dither=0\n")
    (conf / "mfcc.conf").write_text("--use-energy=false\n--dither=0\n")
    (conf / "pitch.conf").write_text("--sample-frequency=16000\n")
    return data


def test_make_fbank_then_cmvn_then_pipeline(tmp_path):
    lengths = [16000, 8123, 12000, 4000, 20000, 9999]
    data = make_data(tmp_path, lengths)
    result = step("make_fbank.sh", "--nj", 2, "data/train", "exp/make_fbank/train", "fbank",
                  cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    frames = read_table(data / "utt2num_frames")
    assert [int(frames[u]) for u in sorted(frames)] == \
        [1 + (n - 400) // 160 for n in (16000, 12000, 20000, 8123, 4000, 9999)]  # sorted by utt
    feats = kaldiio.load_scp(str(data / "feats.scp"))
    assert all(feats[u].shape == (int(frames[u]), 80) for u in feats)
    assert (data / "frame_shift").read_text() == "0.01\n"
    assert (data / "conf" / "fbank.conf").read_text() == (tmp_path / "conf/fbank.conf").read_text()
    assert float(read_table(data / "utt2dur")["spk0-utt00"]) == 1.0
    scp_targets = {line.split()[1].rsplit(":", 1)[0] for line in open(data / "feats.scp")}
    assert scp_targets == {str(tmp_path / "fbank" / f"raw_fbank_train.{j}.ark") for j in (1, 2)}
    assert "make_fbank_train.1.log" in os.listdir(tmp_path / "exp/make_fbank/train")

    result = step("compute_cmvn_stats.sh", "data/train", "exp/make_fbank/train", "fbank",
                  cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(read_table(data / "cmvn.scp")) == ["spk0", "spk1"]
    pipe = FeaturePipeline(PipelineConfig(cmvn="speaker", stack=3))
    out = dict(pipe.iterate(str(data)))
    assert out["spk1-utt01"].shape == (-(-49 // 3), 240)  # 8123 samples -> 49 frames


def test_make_mfcc_pitch_on_kaldi_yesno(yesno, tmp_path):
    data = tmp_path / "data" / "train"
    data.mkdir(parents=True)
    for name in ("utt2spk", "spk2utt", "text"):
        (data / name).write_text((yesno / "data/train_yesno" / name).read_text())
    wavs = {u: str(yesno / p) for u, p in read_table(yesno / "data/train_yesno/wav.scp").items()}
    (data / "wav.scp").write_text("".join(f"{u} {p}\n" for u, p in wavs.items()))
    (tmp_path / "pitch.conf").write_text("--sample-frequency=8000\n")
    result = step("make_mfcc_pitch.sh", "--nj", 2, "--mfcc-config", yesno / "conf/mfcc.conf",
                  "--pitch-config", "pitch.conf", "data/train", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    frames = read_table(data / "utt2num_frames")
    assert len(frames) == 31
    for utt, count in frames.items():
        with wave.open(wavs[utt]) as w:
            assert int(count) == 1 + (w.getnframes() - 200) // 80  # Kaldi's formula at 8 kHz
    feats = kaldiio.load_scp(str(data / "feats.scp"))
    assert {m.shape[1] for m in feats.values()} == {16}  # 13 MFCC + 3 pitch
    assert sorted(os.listdir(data / "conf")) == ["mfcc.conf", "pitch.conf"]


def test_one_bad_utterance_in_25_is_skipped_and_named(tmp_path):
    data = make_data(tmp_path, [2000] * 25, bad={"spk0-utt04"})
    result = step("make_fbank.sh", "--nj", 2, "data/train", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(read_table(data / "feats.scp")) == 24 and "spk0-utt04" not in \
        read_table(data / "feats.scp")
    logs = "".join(open(data / "log" / f).read() for f in os.listdir(data / "log")
                   if f.endswith(".log"))
    assert "skipping utterance spk0-utt04" in logs and "no such file" in logs


def test_fewer_than_95_percent_fails_and_writes_no_feats(tmp_path):
    data = make_data(tmp_path, [2000] * 6, bad={"spk0-utt02"})
    result = step("make_fbank.sh", "--nj", 2, "data/train", cwd=tmp_path)
    assert result.returncode != 0
    assert "features for only 5 of 6 utterances" in result.stderr
    assert not (data / "feats.scp").exists() and not (data / "utt2num_frames").exists()


def test_usage_and_missing_inputs(tmp_path):
    result = step("make_fbank.sh", cwd=tmp_path)
    assert result.returncode == 1 and "Usage:" in result.stderr
    (tmp_path / "data").mkdir()
    result = step("make_fbank.sh", "data", cwd=tmp_path)
    assert result.returncode == 1 and "expected file data/wav.scp to exist" in result.stderr
    result = step("compute_cmvn_stats.sh", "data", cwd=tmp_path)
    assert result.returncode == 1 and "expected file data/feats.scp to exist" in result.stderr


@pytest.mark.parametrize("flag", ["--fake", "--global"])
def test_cmvn_variants(tmp_path, flag):
    data = make_data(tmp_path, [4000] * 4)
    assert step("make_fbank.sh", "--nj", 1, "data/train", cwd=tmp_path).returncode == 0
    result = step("compute_cmvn_stats.sh", flag, "data/train", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    if flag == "--global":
        stats = kaldiio.load_mat(str(data / "global_cmvn"))
        assert stats.shape == (2, 81) and stats[0, 80] == 4 * 23
    else:
        for stats in kaldiio.load_scp(str(data / "cmvn.scp")).values():
            assert stats[0, 80] == 1 and np.all(stats[1, :80] == 1)
