"""validate_data_dir.sh: each broken input is rejected with its file, its line and what was expected."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_script
from datadir_helpers import make_data_dir, snapshot, temp_files, write_lines
from emasr.io.datadir import DataDirError
from emasr.io.datadir_validate import ValidateOptions, validate_data_dir


def validate(data: Path, *opts: str):
    return run_script(["validate_data_dir.sh", *opts, str(data)])


def expect_failure(data: Path, *fragments: str, opts=("--no-feats",)) -> str:
    before = snapshot(data)
    result = validate(data, *opts)
    assert result.returncode == 1, result.stdout + result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    assert snapshot(data) == before and not temp_files(data), "validation must not write"
    return result.stderr


@pytest.fixture
def data(tmp_path) -> Path:
    return make_data_dir(tmp_path / "train", {"spkA": 2, "spkB": 3})


def test_valid_dir_passes(data):
    result = validate(data, "--no-feats")
    assert result.returncode == 0, result.stderr
    assert f"successfully validated data-directory {data}" in result.stderr


def test_feats_required_unless_no_feats(data):
    expect_failure(data, f"{data}/feats.scp: no such file", "--no-feats", opts=())


def test_missing_text_needs_no_text(data):
    (data / "text").unlink()
    expect_failure(data, f"{data}/text: no such file", "--no-text")
    assert validate(data, "--no-feats", "--no-text").returncode == 0


def test_missing_wav_needs_no_wav(data):
    (data / "wav.scp").unlink()
    expect_failure(data, f"{data}/wav.scp: no such file", "--no-wav")
    assert validate(data, "--no-feats", "--no-wav").returncode == 0


def test_unsorted_keys(data):
    lines = (data / "text").read_text().splitlines()
    lines[1], lines[2] = lines[2], lines[1]
    write_lines(data / "text", lines)
    expect_failure(data, f"{data}/text:3: key 'spkA-u2' comes after 'spkB-u1'",
                   "expected keys sorted as by LC_ALL=C sort")


def test_duplicate_key(data):
    lines = (data / "wav.scp").read_text().splitlines()
    write_lines(data / "wav.scp", lines[:2] + [lines[1]] + lines[2:])
    expect_failure(data, f"{data}/wav.scp:3: duplicate key 'spkA-u2' (first on line 2)",
                   "expected unique keys")


def test_utterance_missing_from_text(data):
    lines = (data / "text").read_text().splitlines()
    write_lines(data / "text", lines[:-1])
    expect_failure(data, f"{data}/text: 'spkB-u3' (utt2spk line 5) is missing",
                   "expected the same utterances in text and utt2spk")


def test_extra_utterance_in_wav_scp(data):
    lines = (data / "wav.scp").read_text().splitlines()
    write_lines(data / "wav.scp", lines + ["spkC-u1 /audio/x.wav"])
    expect_failure(data, f"{data}/wav.scp:6: 'spkC-u1' is not in {data}/utt2spk",
                   "expected the same utterances")


def test_crlf(data):
    (data / "text").write_bytes((data / "text").read_bytes().replace(b"\n", b"\r\n"))
    expect_failure(data, f"{data}/text:1: line ends with CR", "expected Unix line endings")


def test_invalid_utf8(data):
    raw = (data / "text").read_bytes().splitlines(keepends=True)
    raw[3] = raw[3].replace("你".encode(), b"\xe4\xbd")  # a truncated 3-byte sequence
    (data / "text").write_bytes(b"".join(raw))
    expect_failure(data, f"{data}/text:4: invalid UTF-8")


def test_empty_data_dir(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    expect_failure(empty, f"{empty}/utt2spk: no such file")
    (empty / "utt2spk").touch()
    (empty / "spk2utt").touch()
    expect_failure(empty, f"{empty}/utt2spk: empty file; expected at least one utterance")


def test_missing_directory(tmp_path):
    result = validate(tmp_path / "nope", "--no-feats")
    assert result.returncode == 1 and "no such directory" in result.stderr


def test_speaker_not_a_prefix(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    # Speaker ids do not prefix the utterance ids, and sorting by speaker reorders the lines.
    write_lines(data / "utt2spk", ["a1 zed", "b1 amy"])
    write_lines(data / "spk2utt", ["amy b1", "zed a1"])
    write_lines(data / "text", ["a1 hi", "b1 ho"])
    write_lines(data / "wav.scp", ["a1 a.wav", "b1 b.wav"])
    expect_failure(data, f"{data}/utt2spk:2: speaker 'amy' of utterance 'b1' sorts before "
                   "speaker 'zed'", "make speaker ids prefixes of utterance ids")
    assert validate(data, "--no-feats", "--no-spk-sort").returncode == 0


def test_spk2utt_disagrees(data):
    write_lines(data / "spk2utt", ["spkA spkA-u1", "spkB spkA-u2 spkB-u1 spkB-u2 spkB-u3"])
    expect_failure(data, f"{data}/spk2utt:1: utterance 'spkA-u2' of speaker 'spkA' is missing "
                   "from this line", "expected spk2utt to agree with utt2spk")


def test_wrong_field_count_in_utt2spk(data):
    write_lines(data / "utt2spk", ["spkA-u1 spkA x", "spkA-u2 spkA", "spkB-u1 spkB",
                                   "spkB-u2 spkB", "spkB-u3 spkB"])
    expect_failure(data, f"{data}/utt2spk:1: 'spkA-u1 spkA x' has 3 fields",
                   "expected 'utterance speaker'")


def test_empty_transcript(data):
    lines = (data / "text").read_text().splitlines()
    lines[2] = "spkB-u1"
    write_lines(data / "text", lines)
    expect_failure(data, f"{data}/text:3: utterance 'spkB-u1' has an empty transcript",
                   "expected at least one word")


def test_reserved_symbol_in_text(data):
    lines = (data / "text").read_text().splitlines()
    lines[0] = "spkA-u1 <s> hello"
    write_lines(data / "text", lines)
    expect_failure(data, f"{data}/text:1: utterance 'spkA-u1' contains the reserved symbol '<s>'")


def test_missing_final_newline(data):
    (data / "wav.scp").write_bytes((data / "wav.scp").read_bytes().rstrip(b"\n"))
    expect_failure(data, f"{data}/wav.scp:5: last line has no newline")


def segmented_dir(root: Path) -> Path:
    data = root / "seg"
    data.mkdir()
    write_lines(data / "utt2spk", ["spkA-r1-0000 spkA", "spkA-r1-0150 spkA", "spkB-r2-0000 spkB"])
    write_lines(data / "spk2utt", ["spkA spkA-r1-0000 spkA-r1-0150", "spkB spkB-r2-0000"])
    write_lines(data / "text", ["spkA-r1-0000 a", "spkA-r1-0150 b", "spkB-r2-0000 c"])
    write_lines(data / "segments", ["spkA-r1-0000 r1 0.00 1.50", "spkA-r1-0150 r1 1.50 3.20",
                                    "spkB-r2-0000 r2 0.00 2.00"])
    write_lines(data / "wav.scp", ["r1 r1.wav", "r2 r2.wav"])
    write_lines(data / "reco2file_and_channel", ["r1 r1 A", "r2 r2 A"])
    return data


def test_segments_valid(tmp_path):
    data = segmented_dir(tmp_path)
    assert validate(data, "--no-feats").returncode == 0


def test_segment_start_not_before_end(tmp_path):
    data = segmented_dir(tmp_path)
    write_lines(data / "segments", ["spkA-r1-0000 r1 0.00 1.50", "spkA-r1-0150 r1 3.20 1.50",
                                    "spkB-r2-0000 r2 0.00 2.00"])
    expect_failure(data, f"{data}/segments:2: segment 'spkA-r1-0150' starts at 3.20 and ends at "
                   "1.50; expected start < end")


def test_segment_recording_missing(tmp_path):
    data = segmented_dir(tmp_path)
    write_lines(data / "wav.scp", ["r1 r1.wav"])
    expect_failure(data, f"{data}/segments:3: recording 'r2' of segment 'spkB-r2-0000' is not in "
                   f"{data}/wav.scp")


def test_values_of_utt2num_frames_and_frame_shift(data):
    utts = list((data / "utt2spk").read_text().split()[::2])
    write_lines(data / "utt2num_frames", [f"{u} 100" for u in utts[:-1]] + [f"{utts[-1]} 1.5"])
    expect_failure(data, f"{data}/utt2num_frames:5: value '1.5' of 'spkB-u3'",
                   "expected one positive integer")
    write_lines(data / "utt2num_frames", [f"{u} 100" for u in utts])
    write_lines(data / "frame_shift", ["ten"])
    expect_failure(data, f"{data}/frame_shift:1: 'ten'; expected one positive number")


def test_cmvn_keyed_by_speaker(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 1, "spkB": 1}, feats=True, cmvn=True)
    assert validate(data).returncode == 0
    write_lines(data / "cmvn.scp", ["spkA x.ark:1"])
    expect_failure(data, f"{data}/cmvn.scp: 'spkB' (spk2utt line 2) is missing",
                   "expected the same speakers in cmvn.scp and spk2utt", opts=())


def test_python_api_returns_warnings(tmp_path):
    data = make_data_dir(tmp_path / "one", {"solo": 2})
    warnings = validate_data_dir(data, ValidateOptions(no_feats=True))
    assert any("only one speaker" in w for w in warnings)
    with pytest.raises(DataDirError, match="feats.scp: no such file"):
        validate_data_dir(data)
