"""Oracle alignments from phone timings (emasr ali-from-timings), against Kaldi's yesno model: the
timings read off Kaldi's own alignments come back as the same phones and lengths."""
from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from emasr.kaldi.alignments import iter_alignment_file
from emasr.ali.convert import split_phones
from emasr.ali.from_timings import ali_from_timings_cli, frame_segments
from emasr.ali.boundary_error import boundary_error_cli
from emasr.kaldi.transitions import load_transition_table
from gmm_helpers import LANG, MONO

NAMES = {1: "SIL", 2: "Y", 3: "N"}


def test_frame_segments_round_fill_silence_and_clip():
    phones = [("a", 0.031, 0.052), ("b", 0.052, 0.09), ("c", 0.12, 0.3)]
    assert frame_segments(phones, 25, 0.01, "sil") == [
        ("sil", 3), ("a", 2), ("b", 4), ("sil", 3), ("c", 13)]   # c clipped to the 25 frames


def kaldi_phones(table, alignment):
    return [(NAMES[seg.phone], len(seg.states)) for seg in split_phones(table, alignment)]


def test_timings_of_kaldi_alignments_give_back_their_phones(tmp_path):
    table = load_transition_table(MONO / "final.mdl")
    records, frames, reference = [], [], {}
    for utt, ali in iter_alignment_file(MONO / "ali.1.gz"):
        reference[utt] = kaldi_phones(table, ali)
        phones, at = [], 0
        for name, length in reference[utt]:   # 80 samples per 10 ms frame at 8 kHz
            if name != "SIL":
                phones.append([name, at * 80, (at + length) * 80])
            at += length
        records.append({"utt": utt, "sample_rate": 8000, "phones": phones})
        frames.append(f"{utt} {len(ali)}\n")
    (tmp_path / "timings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "utt2num_frames").write_text("".join(frames))
    (tmp_path / "final.mdl").write_bytes((MONO / "final.mdl").read_bytes())
    args = [str(MONO / "final.mdl"), str(MONO / "tree"), str(LANG / "phones.txt"),
            str(tmp_path / "utt2num_frames"), str(tmp_path / "ali.1.gz"),
            str(tmp_path / "timings.jsonl")]
    result = CliRunner().invoke(ali_from_timings_cli, ["--silence-phone", "SIL", *args])
    assert result.exit_code == 0, result.output
    written = dict(iter_alignment_file(tmp_path / "ali.1.gz"))
    assert sorted(written) == sorted(reference)
    for utt, ali in written.items():
        assert kaldi_phones(table, ali) == reference[utt], utt
    result = CliRunner().invoke(boundary_error_cli, [
        "--silence", "SIL", str(tmp_path), str(LANG / "phones.txt"),
        str(tmp_path / "timings.jsonl")])
    assert "boundary error mean 0.0 ms, median 0.0 ms, within 20 ms 100.0%" in result.output

    # a phone of one frame gets its topology's minimum, borrowed from the next phone
    short = dict(records[0], phones=[["Y", 240, 320], ["N", 320, 1040]])
    (tmp_path / "timings.jsonl").write_text(json.dumps(short) + "\n")
    (tmp_path / "utt2num_frames").write_text(f"{short['utt']} 20\n")
    assert CliRunner().invoke(ali_from_timings_cli, ["--silence-phone", "SIL", *args]
                              ).exit_code == 0
    (_, ali), = iter_alignment_file(tmp_path / "ali.1.gz")
    assert kaldi_phones(table, ali) == [("SIL", 3), ("Y", 3), ("N", 7), ("SIL", 7)]

    # an utterance without timings, or a phone the lang lacks, is named and nothing is written
    (tmp_path / "ali.1.gz").unlink()
    (tmp_path / "utt2num_frames").write_text(f"{short['utt']} 20\nnot_timed 30\n")
    result = CliRunner().invoke(ali_from_timings_cli, ["--silence-phone", "SIL", *args])
    assert result.exit_code != 0 and "utterance not_timed has no timings" in result.output
    assert not list(tmp_path.glob("ali.1.gz*"))
    (tmp_path / "utt2num_frames").write_text(f"{short['utt']} 20\n")
    (tmp_path / "timings.jsonl").write_text(json.dumps(dict(short, phones=[["X", 80, 400]])) + "\n")
    result = CliRunner().invoke(ali_from_timings_cli, ["--silence-phone", "SIL", *args])
    assert result.exit_code != 0 and "phones ['X'] are not in the lang's phones.txt" in result.output
    assert np.all([not p.exists() for p in tmp_path.glob("ali.1.gz*")])
