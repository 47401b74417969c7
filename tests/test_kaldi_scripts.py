"""The Kaldi scripts a user reaches for, against Kaldi's semantics on the real yesno fixture (read
in place): make_mfcc.sh feeds Kaldi's own monophone system, make_fbank_pitch.sh pastes 83 dims,
sym2int.pl/int2sym.pl round-trip Kaldi's words.txt with -f ranges and --map-oov, get_utt2dur.sh
reads WAV headers, speed perturbation lengthens audio by 1/0.9 and shortens it by 1/1.1 with
Kaldi's sp0.9- ids, and validate_lang.pl is validate_lang.sh."""
from __future__ import annotations

import os
import subprocess
import wave
from pathlib import Path

import kaldiio
import numpy as np
import pytest

from conftest import REPO, YESNO
from emasr.kaldi.alignments import iter_alignment_file
from emasr.io.table import read_table, write_table

WORDS = YESNO / "data" / "lang" / "words.txt"
UTTS = ("0_0_0_0_1_1_1_1", "0_0_1_0_1_0_1_1", "0_1_1_1_1_1_1_1")


def run_script(args, cwd=None, input: str | None = None) -> subprocess.CompletedProcess:
    """A script with the repository's utils/ and steps/ on PATH, optionally fed stdin."""
    env = dict(os.environ, LC_ALL="C",
               PATH=f"{REPO / 'utils'}:{REPO / 'steps'}:{os.environ['PATH']}")
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, input=input,
                          capture_output=True, text=True)


def ok(args, **kwargs) -> subprocess.CompletedProcess:
    result = run_script(args, **kwargs)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def num_samples(path: Path) -> int:
    with wave.open(str(path), "rb") as w:
        return w.getnframes()


@pytest.fixture
def yesno_data(tmp_path) -> Path:
    """Three yesno training utterances as a data dir whose wav.scp points into the fixture."""
    data = tmp_path / "train"
    data.mkdir()
    texts = read_table(YESNO / "data/train_yesno/text")
    write_table(data / "wav.scp", {u: str(YESNO / "waves_yesno" / f"{u}.wav") for u in UTTS})
    write_table(data / "text", {u: texts[u] for u in UTTS})
    write_table(data / "utt2spk", {u: "global" for u in UTTS})
    write_table(data / "spk2utt", {"global": " ".join(UTTS)})
    return data


def test_make_mfcc_gives_kaldi_yesno_features(yesno_data, tmp_path):
    """13 dims (Kaldi's yesno mfcc.conf), one frame per frame of Kaldi's own alignments, the
    data dir's utt2dur from the audio, and the conf copied beside the features."""
    ok(["steps/make_mfcc.sh", "--nj", "2", "--mfcc-config", YESNO / "conf/mfcc.conf", yesno_data,
        tmp_path / "log", tmp_path / "mfcc"], cwd=REPO)
    feats = dict(kaldiio.load_scp(str(yesno_data / "feats.scp")))
    kaldi_ali = {u: a for u, a in iter_alignment_file(YESNO / "exp/mono/ali.1.gz") if u in UTTS}
    assert sorted(feats) == sorted(UTTS)
    for utt, matrix in feats.items():
        assert matrix.shape == (len(kaldi_ali[utt]), 13)
        assert np.isfinite(matrix).all()
    frames = read_table(yesno_data / "utt2num_frames")
    assert {u: int(n) for u, n in frames.items()} == {u: len(a) for u, a in kaldi_ali.items()}
    dur = float(read_table(yesno_data / "utt2dur")[UTTS[0]])
    assert dur == pytest.approx(num_samples(YESNO / f"waves_yesno/{UTTS[0]}.wav") / 8000, abs=1e-4)
    assert (yesno_data / "conf" / "mfcc.conf").is_file()
    assert sorted(p.name for p in (tmp_path / "mfcc").iterdir()) == [
        "raw_mfcc_train.1.ark", "raw_mfcc_train.1.scp", "raw_mfcc_train.2.ark",
        "raw_mfcc_train.2.scp"]


def test_make_fbank_pitch_pastes_fbank_and_pitch(yesno_data, tmp_path):
    (tmp_path / "fbank.conf").write_text("--sample-frequency=8000\n--num-mel-bins=40\n")
    (tmp_path / "pitch.conf").write_text("--sample-frequency=8000\n")
    ok(["steps/make_fbank_pitch.sh", "--nj", "1", "--fbank-config", tmp_path / "fbank.conf",
        "--pitch-config", tmp_path / "pitch.conf", yesno_data, tmp_path / "log",
        tmp_path / "fbank"], cwd=REPO)
    feats = dict(kaldiio.load_scp(str(yesno_data / "feats.scp")))
    frames = {u: int(n) for u, n in read_table(yesno_data / "utt2num_frames").items()}
    for utt, matrix in feats.items():
        assert matrix.shape == (frames[utt], 40 + 3)
        pov = matrix[:, 40]  # Kaldi's POV feature lies in about [-1.5, 1.5]
        assert np.abs(pov).max() < 2.0
    assert (tmp_path / "fbank" / "raw_fbank_pitch_train.1.ark").is_file()


def test_sym2int_int2sym_round_trip_kaldi_words(tmp_path):
    text = YESNO / "data/train_yesno/text"
    ints = ok(["sym2int.pl", "-f", "2-", WORDS, text]).stdout
    first = ints.splitlines()[0]
    assert first == "0_0_0_0_1_1_1_1 2 2 2 2 3 3 3 3"  # NO=2, YES=3 in Kaldi's words.txt
    (tmp_path / "text.int").write_text(ints)
    back = ok(["int2sym.pl", "-f", "2-", WORDS, tmp_path / "text.int"]).stdout
    assert back == text.read_text()


def test_field_ranges_and_oov_map_as_kaldi(tmp_path):
    line = "2 3 2 3\n"
    assert ok(["int2sym.pl", "-f", "2-3", WORDS], input=line).stdout == "2 YES NO 3\n"
    assert ok(["int2sym.pl", "-f", "-2", WORDS], input=line).stdout == "NO YES 2 3\n"
    assert ok(["int2sym.pl", "-f", "4", WORDS], input=line).stdout == "2 3 2 YES\n"
    mapped = ok(["sym2int.pl", "--map-oov", "<SIL>", "-f", "2-", WORDS], input="u1 YES MAYBE NO\n")
    assert mapped.stdout == "u1 3 1 2\n"
    assert "replacing MAYBE with <SIL>" in mapped.stderr
    unknown = run_script(["sym2int.pl", "-f", "2-", str(WORDS)], input="u1 YES MAYBE\n")
    assert unknown.returncode != 0 and "undefined symbol MAYBE (stdin:1, field 3)" in unknown.stderr
    bad = run_script(["int2sym.pl", str(WORDS)], input="2 99\n")
    assert bad.returncode != 0 and "integer 99 not in symbol table" in bad.stderr
    oov = run_script(["sym2int.pl", "--map-oov", "<UNK>", str(WORDS)], input="YES\n")
    assert oov.returncode != 0 and "<UNK>" in oov.stderr and "not defined" in oov.stderr


def test_get_utt2dur_from_wav_headers(yesno_data):
    ok(["utils/data/get_utt2dur.sh", yesno_data], cwd=REPO)
    durations = {u: float(d) for u, d in read_table(yesno_data / "utt2dur").items()}
    for utt in UTTS:
        seconds = num_samples(YESNO / f"waves_yesno/{utt}.wav") / 8000
        assert durations[utt] == pytest.approx(seconds, abs=1e-5)


def test_get_utt2dur_from_segments(yesno_data):
    (yesno_data / "segments").write_text(
        f"a {UTTS[0]} 0.5 2.25\nb {UTTS[1]} 1.0 -1\n")
    write_table(yesno_data / "utt2spk", {"a": "global", "b": "global"})
    write_table(yesno_data / "spk2utt", {"global": "a b"})
    write_table(yesno_data / "text", {"a": "NO", "b": "YES"})
    ok(["utils/data/get_utt2dur.sh", yesno_data], cwd=REPO)
    durations = {u: float(d) for u, d in read_table(yesno_data / "utt2dur").items()}
    whole = num_samples(YESNO / f"waves_yesno/{UTTS[1]}.wav") / 8000
    assert durations == pytest.approx({"a": 1.75, "b": whole - 1.0}, abs=1e-5)


def test_speed_perturbation_3way(yesno_data, tmp_path):
    """Kaldi's ids (originals unprefixed, sp0.9-, sp1.1-), utt2dur divided by the factor, utt2uniq,
    and audio whose real length (read back through the wav.scp pipes) matches utt2dur."""
    dest = tmp_path / "train_sp"
    ok(["utils/data/perturb_data_dir_speed_3way.sh", yesno_data, dest], cwd=REPO)
    utt2spk = read_table(dest / "utt2spk")
    assert sorted(utt2spk) == sorted([*UTTS, *(f"sp0.9-{u}" for u in UTTS),
                                      *(f"sp1.1-{u}" for u in UTTS)])
    assert utt2spk[f"sp0.9-{UTTS[0]}"] == "sp0.9-global"
    assert read_table(dest / "utt2uniq")[f"sp1.1-{UTTS[2]}"] == UTTS[2]
    assert read_table(dest / "text")[f"sp1.1-{UTTS[2]}"] == read_table(yesno_data / "text")[UTTS[2]]
    assert not (yesno_data / "utt2dur").exists()  # the source dir is only read
    declared = {u: float(d) for u, d in read_table(dest / "utt2dur").items()}
    original = num_samples(YESNO / f"waves_yesno/{UTTS[0]}.wav") / 8000
    assert declared[UTTS[0]] == pytest.approx(original, abs=1e-4)
    assert declared[f"sp0.9-{UTTS[0]}"] == pytest.approx(original / 0.9, abs=1e-4)
    assert declared[f"sp1.1-{UTTS[0]}"] == pytest.approx(original / 1.1, abs=1e-4)
    # the perturbed audio itself: lengths from running the pipes, and MFCC frames to match
    (dest / "utt2dur").unlink()
    ok(["utils/data/get_utt2dur.sh", dest], cwd=REPO)
    measured = {u: float(d) for u, d in read_table(dest / "utt2dur").items()}
    assert measured == pytest.approx(declared, abs=2e-4)


def test_speed_perturbed_audio_keeps_its_spectrum_shape(tmp_path):
    """Speed 0.9 lowers every frequency by 0.9 (tempo and pitch change, as sox's `speed`)."""
    from emasr.feats.speed import perturb_speed
    from emasr.feats.wav import Audio

    rate = 8000
    t = np.arange(rate) / rate
    tone = Audio(rate, (8000 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32))
    for factor in (0.9, 1.1):
        out = perturb_speed(tone, factor)
        assert len(out.samples) == pytest.approx(rate / factor, abs=1)
        spectrum = np.abs(np.fft.rfft(out.samples))
        peak_hz = np.argmax(spectrum) * rate / len(out.samples)
        assert peak_hz == pytest.approx(1000 * factor, abs=2)


def test_perturb_refuses_a_dest_with_features(yesno_data, tmp_path):
    dest = tmp_path / "sp"
    dest.mkdir()
    (dest / "feats.scp").write_text("x y\n")
    result = run_script(["utils/data/perturb_data_dir_speed_3way.sh", str(yesno_data), str(dest)],
                        cwd=REPO)
    assert result.returncode != 0 and f"{dest}/feats.scp already exists" in result.stderr


def test_validate_lang_pl_is_validate_lang_sh():
    result = ok(["utils/validate_lang.pl", YESNO / "data/lang_test_tg"], cwd=REPO)
    same = ok(["utils/validate_lang.sh", YESNO / "data/lang_test_tg"], cwd=REPO)
    assert result.stdout == same.stdout
