"""Feature extraction: Kaldi configs, WAV reading, frame counts, bad input, the yesno fixture."""
from __future__ import annotations

import os
import wave
from pathlib import Path

import kaldi_native_fbank as knf
import kaldiio
import numpy as np
import pytest
from click.testing import CliRunner

from emasr.cli import main
from emasr.feats.cmvn import apply_cmvn, sum_stats
from emasr.feats.deltas import add_deltas
from emasr.feats.extract import extract_job
from emasr.feats.fbank import FbankExtractor
from emasr.feats.framing import FrameGeometry, extract_all_frames
from emasr.feats.kaldi_options import ConfigError, fbank_options, mfcc_options, read_kaldi_config
from emasr.feats.mfcc_pitch import MfccPitchExtractor
from emasr.feats.wav import Audio, WavError, read_wav_spec
from emasr.io.table import read_table


def write_wav(path, samples, rate=16000, channels=1):
    samples = np.asarray(samples, dtype=np.int16)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())
    return path


def noise(num_samples, seed=0):
    return (np.random.default_rng(seed).standard_normal(num_samples) * 1000).astype(np.int16)


@pytest.fixture
def fbank_conf(tmp_path):
    conf = tmp_path / "fbank.conf"
    conf.write_text("# test config\n--num-mel-bins=40   # trailing comment\n\n--dither=0\n"
                    "--sample-frequency=16000\n")
    return str(conf)


@pytest.fixture
def mfcc_pitch_confs(tmp_path):
    (tmp_path / "mfcc.conf").write_text("--use-energy=false\n--dither=0\n")
    (tmp_path / "pitch.conf").write_text("--sample-frequency=16000\n")
    return str(tmp_path / "mfcc.conf"), str(tmp_path / "pitch.conf")


# ---- config files ----

def test_kaldi_config_syntax(fbank_conf):
    assert read_kaldi_config(fbank_conf) == {
        "num-mel-bins": "40", "dither": "0", "sample-frequency": "16000"}
    opts = fbank_options(read_kaldi_config(fbank_conf))
    assert opts.mel_opts.num_bins == 40 and opts.frame_opts.dither == 0.0


def test_kaldi_defaults_differ_from_knf_only_in_dither():
    opts = fbank_options({})
    assert opts.frame_opts.dither == 1.0  # Kaldi's default; knf's is 3e-5
    assert (opts.frame_opts.frame_length_ms, opts.frame_opts.frame_shift_ms) == (25.0, 10.0)
    assert opts.frame_opts.snip_edges and opts.frame_opts.window_type == "povey"


def test_config_errors_name_the_line_and_option(tmp_path):
    bad = tmp_path / "bad.conf"
    bad.write_text("--num-mel-bins=80\nnum-ceps=13\n")
    with pytest.raises(ConfigError, match=r"bad.conf:2: expected '--name=value'"):
        read_kaldi_config(bad)
    with pytest.raises(ConfigError, match="--vtln-warp is not supported"):
        fbank_options({"vtln-warp": "0.9"})
    with pytest.raises(ConfigError, match="bad value for --snip-edges"):
        fbank_options({"snip-edges": "maybe"})


def test_pitch_and_mfcc_geometry_must_agree(tmp_path):
    (tmp_path / "m.conf").write_text("--frame-shift=10\n")
    (tmp_path / "p.conf").write_text("--frame-shift=20\n")
    with pytest.raises(ConfigError, match="frame geometry"):
        MfccPitchExtractor(str(tmp_path / "m.conf"), str(tmp_path / "p.conf"))


# ---- frame counts and values ----

@pytest.mark.parametrize("num_samples", [400, 401, 559, 560, 16000, 16123, 48077])
def test_fbank_frame_count_follows_kaldi_formula(fbank_conf, num_samples):
    feats = FbankExtractor(fbank_conf).compute(Audio(16000, noise(num_samples).astype(np.float32)))
    assert feats.shape == (1 + (num_samples - 400) // 160, 40)


def test_fbank_equals_kaldi_native_fbank_on_raw_samples(tmp_path, fbank_conf):
    samples = noise(8000)
    wav = write_wav(tmp_path / "a.wav", samples)
    ours = FbankExtractor(fbank_conf).compute(read_wav_spec(str(wav)))
    opts = knf.FbankOptions()
    opts.frame_opts.dither = 0
    opts.mel_opts.num_bins = 40
    reference = extract_all_frames(knf.OnlineFbank(opts), 16000, samples.astype(np.float32))
    np.testing.assert_array_equal(ours, reference)


def test_dither_is_reproducible_per_utterance(tmp_path):
    conf = tmp_path / "fbank.conf"
    conf.write_text("--num-mel-bins=40\n--dither=1.0\n")
    audio = read_wav_spec(str(write_wav(tmp_path / "a.wav", noise(8000) * 0.01)))
    first = FbankExtractor(str(conf)).compute(audio, source="utt1")
    again = FbankExtractor(str(conf)).compute(audio, source="utt1")
    other = FbankExtractor(str(conf)).compute(audio, source="utt2")
    conf.write_text("--num-mel-bins=40\n--dither=0\n")
    undithered = FbankExtractor(str(conf)).compute(audio, source="utt1")
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other) and not np.array_equal(first, undithered)
    # the noise has Kaldi's scale: one unit of a 16-bit sample, far below the signal's level
    assert np.abs(first - undithered).mean() < 0.5


@pytest.mark.parametrize("num_samples", [400, 16000, 16123, 48077, 80000])
def test_mfcc_pitch_same_frames_as_mfcc(mfcc_pitch_confs, num_samples):
    extractor = MfccPitchExtractor(*mfcc_pitch_confs)
    feats = extractor.compute(Audio(16000, noise(num_samples).astype(np.float32)))
    assert feats.shape == (1 + (num_samples - 400) // 160, 16) and extractor.dim == 16
    assert np.isfinite(feats).all()


@pytest.mark.parametrize("num_samples", [400, 7777, 16000, 48077])
def test_fbank_and_mfcc_pitch_have_the_same_frames(fbank_conf, mfcc_pitch_confs, num_samples):
    audio = Audio(16000, noise(num_samples).astype(np.float32))
    assert len(FbankExtractor(fbank_conf).compute(audio)) == \
        len(MfccPitchExtractor(*mfcc_pitch_confs).compute(audio))


def test_frame_geometry_without_snip_edges():
    geometry = FrameGeometry(16000, 25, 10, snip_edges=False)
    assert [geometry.num_frames(n) for n in (0, 79, 80, 16000)] == [0, 0, 1, 100]


# ---- WAV reading ----

def test_wav_from_pipe_equals_wav_from_file(tmp_path):
    wav = write_wav(tmp_path / "a.wav", noise(3000))
    from_file = read_wav_spec(str(wav))
    from_pipe = read_wav_spec(f"cat {wav} |")
    assert from_file.rate == from_pipe.rate == 16000
    np.testing.assert_array_equal(from_file.samples, from_pipe.samples)
    assert from_file.samples.dtype == np.float32 and np.abs(from_file.samples).max() > 1000


def test_streamed_wav_with_unknown_data_size(tmp_path):
    data = bytearray(write_wav(tmp_path / "a.wav", noise(1000)).read_bytes())
    data[40:44] = b"\xff\xff\xff\xff"  # data chunk size as a pipe writer leaves it
    (tmp_path / "s.wav").write_bytes(bytes(data))
    audio = read_wav_spec(f"cat {tmp_path / 's.wav'} |")
    assert len(audio.samples) == 1000
    with pytest.raises(WavError, match="truncated"):
        read_wav_spec(str(tmp_path / "s.wav"))  # a file must be complete


def make_bad_inputs(tmp_path: Path) -> dict[str, str]:
    """utt -> wav.scp value, for one good and each kind of bad recording."""
    good = write_wav(tmp_path / "good.wav", noise(16000))
    truncated = tmp_path / "trunc.wav"
    truncated.write_bytes(good.read_bytes()[:20000])
    write_wav(tmp_path / "rate8k.wav", noise(8000), rate=8000)
    write_wav(tmp_path / "stereo.wav", noise(32000), channels=2)
    (tmp_path / "empty.wav").write_bytes(b"")
    write_wav(tmp_path / "nosamples.wav", [])
    write_wav(tmp_path / "short.wav", noise(399))
    with wave.open(str(tmp_path / "8bit.wav"), "wb") as w:
        w.setnchannels(1), w.setsampwidth(1), w.setframerate(16000)
        w.writeframes(bytes(range(256)) * 10)
    return {
        "u1_good": str(good),
        "u2_missing": str(tmp_path / "missing.wav"),
        "u3_truncated": str(truncated),
        "u4_rate": str(tmp_path / "rate8k.wav"),
        "u5_stereo": str(tmp_path / "stereo.wav"),
        "u6_empty": str(tmp_path / "empty.wav"),
        "u7_nosamples": str(tmp_path / "nosamples.wav"),
        "u8_badpipe": "false |",
        "u9_good_pipe": f"cat {good} |",
        "ua_short": str(tmp_path / "short.wav"),
        "ub_8bit": str(tmp_path / "8bit.wav"),
    }


EXPECTED_MESSAGES = {
    "u2_missing": "no such file",
    "u3_truncated": "truncated: header declares 32000 bytes of audio but only 19956",
    "u4_rate": "sample rate 8000 Hz but the config says --sample-frequency=16000",
    "u5_stereo": "2 channels; expected mono",
    "u6_empty": "empty file",
    "u7_nosamples": "zero-length audio",
    "u8_badpipe": "command 'false ' failed with status 1",
    "ua_short": "399 samples is shorter than one 25 ms frame (400 samples)",
    "ub_8bit": "8 bits per sample; expected 16-bit PCM",
}


def test_bad_input_is_named_and_skipped(tmp_path, fbank_conf, caplog):
    scp = tmp_path / "wav.scp"
    scp.write_text("".join(f"{u} {v}\n" for u, v in make_bad_inputs(tmp_path).items()))
    out = tmp_path / "out"
    done, failed = extract_job(FbankExtractor(fbank_conf), str(scp), str(out / "f.ark"),
                               str(out / "f.scp"), utt2num_frames=str(out / "n"),
                               utt2dur=str(out / "d"))
    assert (done, failed) == (2, 9)
    for utt, message in EXPECTED_MESSAGES.items():
        assert any(utt in r.getMessage() and message in r.getMessage() for r in caplog.records), \
            f"no log line naming {utt} with '{message}'"
    feats = kaldiio.load_scp(str(out / "f.scp"))
    assert sorted(feats) == ["u1_good", "u9_good_pipe"]
    np.testing.assert_array_equal(feats["u1_good"], feats["u9_good_pipe"])
    assert read_table(out / "n") == {"u1_good": "98", "u9_good_pipe": "98"}
    assert read_table(out / "d") == {"u1_good": "1", "u9_good_pipe": "1"}
    assert sorted(os.listdir(out)) == ["d", "f.ark", "f.scp", "n"]  # no temporary leftovers


def test_job_that_crashes_leaves_nothing(tmp_path, fbank_conf):
    scp = tmp_path / "wav.scp"
    write_wav(tmp_path / "a.wav", noise(4000))
    scp.write_text(f"a {tmp_path / 'a.wav'}\n")

    class Exploding(FbankExtractor):
        def compute(self, audio, source="audio"):
            raise RuntimeError("simulated crash")

    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        extract_job(Exploding(fbank_conf), str(scp), str(out / "f.ark"), str(out / "f.scp"))
    assert os.listdir(out) == []


def test_segments_are_cut_as_extract_segments(tmp_path, fbank_conf):
    samples = noise(32000)
    write_wav(tmp_path / "rec.wav", samples)
    (tmp_path / "wav.scp").write_text(f"rec {tmp_path / 'rec.wav'}\n")
    (tmp_path / "segments").write_text("a rec 0 1.0\nb rec 0.5 -1\nc rec 1.9 2.3\n")
    out = tmp_path / "out"
    done, _ = extract_job(FbankExtractor(fbank_conf), str(tmp_path / "wav.scp"), str(out / "f.ark"),
                          str(out / "f.scp"), segments=str(tmp_path / "segments"))
    feats = kaldiio.load_scp(str(out / "f.scp"))
    assert done == 3 and [len(feats[u]) for u in "abc"] == [98, 148, 8]  # c: 1.9 s .. end (2.0 s)


def test_compute_fbank_cli_exit_status(tmp_path, fbank_conf):
    scp = tmp_path / "wav.scp"
    scp.write_text(f"a {tmp_path / 'missing.wav'}\n")
    result = CliRunner().invoke(main, ["compute-fbank-feats", "--config", fbank_conf, str(scp),
                                       str(tmp_path / "f.ark"), str(tmp_path / "f.scp")])
    assert result.exit_code == 1  # as Kaldi: fails when no utterance succeeded
    assert (f"Error: no utterance of {scp} succeeded (1 failed); the first, a: a "
            f"({tmp_path / 'missing.wav'}): no such file") in result.output   # and says why
    write_wav(tmp_path / "b.wav", noise(4000))
    scp.write_text(f"a {tmp_path / 'missing.wav'}\nb {tmp_path / 'b.wav'}\n")
    result = CliRunner().invoke(main, ["compute-fbank-feats", "--config", fbank_conf, "--compress",
                                       str(scp), str(tmp_path / "f.ark"), str(tmp_path / "f.scp")])
    assert result.exit_code == 0, result.output
    compressed = kaldiio.load_scp(str(tmp_path / "f.scp"))["b"]
    assert compressed.shape == (23, 40)
    assert (tmp_path / "f.ark").read_bytes()[:7] == b"b \x00BCM "  # Kaldi's compressed matrix


# ---- the Kaldi yesno fixture (8 kHz) ----

def test_yesno_mfcc_frame_counts(yesno, tmp_path, monkeypatch):
    monkeypatch.chdir(yesno)  # its wav.scp paths are relative to the fixture dir
    (tmp_path / "pitch.conf").write_text("--sample-frequency=8000\n")
    extractor = MfccPitchExtractor("conf/mfcc.conf", str(tmp_path / "pitch.conf"))
    out = tmp_path / "out"
    done, failed = extract_job(extractor, "data/train_yesno/wav.scp", str(out / "f.ark"),
                               str(out / "f.scp"), utt2num_frames=str(out / "n"))
    wavs = read_table("data/train_yesno/wav.scp")
    assert (done, failed) == (len(wavs), 0) == (31, 0)
    for utt, frames in read_table(out / "n").items():
        with wave.open(wavs[utt]) as w:
            assert w.getframerate() == 8000
            assert int(frames) == 1 + (w.getnframes() - 200) // 80
    assert kaldiio.load_scp(str(out / "f.scp"))["0_0_0_0_1_1_1_1"].shape == (633, 16)


def read_text_alignments(path):
    """Kaldi's `ali.1.gz` as written by the fixture: a gzipped text ark `utt tid tid ...`."""
    import gzip

    with gzip.open(path, "rt") as f:
        return {fields[0]: np.array(fields[1:], dtype=np.int64)
                for fields in (line.split() for line in f) if fields}


def test_yesno_mfcc_fits_kaldis_model_and_alignments(yesno, monkeypatch):
    """Real Kaldi output as the reference: Kaldi's alignments have exactly our frame counts, and
    Kaldi's monophone model (trained on Kaldi's MFCC + CMVN + deltas) scores our features far
    better on Kaldi's alignment than on the same alignment shifted by 25 frames."""
    from emasr.kaldi.model_io import read_model, transition_to_pdf  # another area's module

    monkeypatch.chdir(yesno)
    opts = mfcc_options({**read_kaldi_config("conf/mfcc.conf"), "dither": "0"})
    wavs = read_table("data/train_yesno/wav.scp")
    feats = {u: extract_all_frames(knf.OnlineMfcc(opts), 8000, read_wav_spec(p).samples)
             for u, p in wavs.items()}
    alignments = read_text_alignments("exp/mono/ali.1.gz")
    assert sorted(alignments) == sorted(feats)
    assert all(len(feats[u]) == len(alignments[u]) for u in feats)
    model = read_model("exp/mono/final.mdl")
    to_pdf = transition_to_pdf(model)
    stats = sum_stats(feats.values())  # cmvn_opts is empty: means only, one speaker "global"
    aligned = shifted = frames = 0.0
    for utt in list(alignments)[:8]:
        x = add_deltas(apply_cmvn(feats[utt], stats))
        pdfs = to_pdf[alignments[utt]]
        for t in range(len(x)):
            aligned += model.am_gmm.log_likelihood(int(pdfs[t]), x[t])
            shifted += model.am_gmm.log_likelihood(int(pdfs[(t + 25) % len(x)]), x[t])
        frames += len(x)
    assert aligned / frames > -90 and aligned / frames > shifted / frames + 30
