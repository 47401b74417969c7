"""Alignment files and dirs: every Kaldi encoding reads the same, phone segmentation follows Kaldi's
SplitToPhones in both self-loop orders, and `emasr ali-info` reports the yesno alignments."""
from __future__ import annotations

import gzip

import kaldiio
import numpy as np
import pytest
from click.testing import CliRunner

from conftest import YESNO
from emasr.ali.ali_info import ali_info_cli
from emasr.kaldi.alignments import iter_alignment_file, open_alignment_dir
from emasr.kaldi.transitions import load_transition_table

MONO = YESNO / "exp" / "mono"
PHONES = YESNO / "data" / "lang" / "phones.txt"


@pytest.fixture(scope="module")
def alignments():
    return dict(iter_alignment_file(MONO / "ali.1.gz"))


@pytest.fixture(scope="module")
def table():
    return load_transition_table(MONO / "final.mdl")


def test_every_encoding_reads_the_same(alignments, tmp_path):
    assert len(alignments) == 31
    assert alignments["0_0_0_0_1_1_1_1"][:8].tolist() == [4, 1, 1, 1, 1, 1, 16, 18]
    kaldiio.save_ark(str(tmp_path / "binary"), alignments)
    kaldiio.save_ark(str(tmp_path / "text"), alignments, text=True)
    (tmp_path / "binary.gz").write_bytes(gzip.compress((tmp_path / "binary").read_bytes()))
    for name in ("binary", "text", "binary.gz"):
        again = dict(iter_alignment_file(tmp_path / name))
        assert list(again) == list(alignments)
        assert all(np.array_equal(again[u], alignments[u]) for u in alignments)


def _words(utt: str) -> list[str]:
    return ["YES" if c == "1" else "NO" for c in utt.split("_")]


def _phone_sequence(table, tids):
    starts = np.flatnonzero(table.phone_starts(tids))
    return table.id2phone[tids[starts]].tolist(), np.diff(np.append(starts, len(tids)))


def test_phone_segmentation_matches_the_transcripts(alignments, table):
    # Kaldi's graphs put self-loops after the forward transition ("reordered").
    for utt, tids in alignments.items():
        assert table.is_reordered(tids)
        phones, durations = _phone_sequence(table, tids)
        assert durations.sum() == len(tids) and durations.min() >= 1
        words = [p for p in phones if p != 1]  # drop silence (phone 1)
        assert words == [2 if w == "YES" else 3 for w in _words(utt)]


def _unreorder(table, tids):
    """The same path with each state's self-loops before its forward transition (Kaldi's
    non-reordered order): within a run of one transition state, move the first id to the end."""
    out, start = [], 0
    states = table.id2state[tids]
    for end in list(np.flatnonzero(states[1:] != states[:-1]) + 1) + [len(tids)]:
        run = tids[start:end].tolist()
        out += run[1:] + run[:1] if len(run) > 1 and table.self_loop[run[1]] else run
        start = end
    return np.array(out, dtype=np.int32)


def test_segmentation_of_non_reordered_alignments(alignments, table):
    for tids in list(alignments.values())[:5]:
        plain = _unreorder(table, tids)
        assert not table.is_reordered(plain)
        assert _phone_sequence(table, plain)[0] == _phone_sequence(table, tids)[0]
        assert np.array_equal(_phone_sequence(table, plain)[1], _phone_sequence(table, tids)[1])


def test_alignment_dir_needs_consistent_files(tmp_path):
    (tmp_path / "ali.1.gz").write_bytes((MONO / "ali.1.gz").read_bytes())
    (tmp_path / "ali.1").write_bytes(b"")
    with pytest.raises(ValueError, match="both ali.1(.gz)? and ali.1(.gz)? exist"):
        open_alignment_dir(tmp_path, "pdf", num_pdfs=11)
    (tmp_path / "ali.1").unlink()
    with pytest.raises(ValueError, match=r"expected file \S+/num_pdfs to exist"):
        open_alignment_dir(tmp_path, "pdf")
    assert open_alignment_dir(tmp_path, "pdf", num_pdfs=11).files == [tmp_path / "ali.1.gz"]


def test_ali_info_on_the_kaldi_yesno_dir():
    result = CliRunner().invoke(ali_info_cli,
                                ["--phones", str(PHONES), "--silence", "SIL", str(MONO)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "utterances 31" in lines
    assert lines[2].startswith("frames 18996 (190.0 s at 10 ms); per utterance min 556 ")
    # Kaldi's final.occs counts the same frames: pdf 1 has 31, pdf 4 has 5418.
    assert lines[3].startswith("pdf counts: min 31 (pdf 1), max 5418 (pdf 4)")
    # Kaldi's 3-state topology: no phone passes in one frame
    assert lines[4] == "one-frame instances of non-silence phones 0 of 248 (0.00%)"
    rows = {line.split()[0]: line.split()[1:] for line in lines[6:]}
    assert rows["Y"][0] == "113" and rows["N"][0] == "135"  # YES and NO words in the transcripts
    assert set(rows) == {"SIL", "Y", "N"}


def test_ali_info_errors_name_the_file(tmp_path):
    result = CliRunner().invoke(ali_info_cli, [str(tmp_path)])
    assert result.exit_code != 0 and "ali.JOB.gz to exist" in result.output
