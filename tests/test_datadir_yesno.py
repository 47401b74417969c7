"""The data-dir utilities on real Kaldi data dirs (yesno, written by Kaldi; read in place).

Expected results are what Kaldi's own scripts give on these dirs: one speaker 'global', 31
utterances each; split_scp.pl cuts 31 lines into 3 as 11+10+10 and refuses 2 parts for 1 speaker;
subset_scp.pl picks lines 6,14,22,26,30 (0-based) for 5 of 31.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import YESNO, run_script
from datadir_helpers import snapshot, temp_files

SETS = ("train_yesno", "test_yesno")


def run_ok(args):
    result = run_script([str(a) for a in args])
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def fixture_before():
    """The fixture's bytes before this module's tests; compared again at the end."""
    before = {name: snapshot(YESNO / "data" / name) for name in SETS}
    yield before
    assert {name: snapshot(YESNO / "data" / name) for name in SETS} == before


def working_copy(tmp_path: Path, name: str) -> Path:
    """Utilities that write into the data dir (split_data.sh) get a copy, never the fixture."""
    return Path(shutil.copytree(YESNO / "data" / name, tmp_path / name))


@pytest.mark.parametrize("name", SETS)
def test_validates(yesno, fixture_before, name):
    result = run_ok(["validate_data_dir.sh", "--no-feats", yesno / "data" / name])
    assert "INFO cli.py:" in result.stderr and "successfully validated" in result.stderr
    assert "only one speaker" in result.stderr  # Kaldi warns about this too
    failed = run_script(["validate_data_dir.sh", str(yesno / "data" / name)])
    assert failed.returncode == 1 and "feats.scp: no such file" in failed.stderr


def test_split_into_one_part_is_the_whole_dir(yesno, fixture_before, tmp_path):
    data = working_copy(tmp_path, "train_yesno")
    run_ok(["split_data.sh", data, 1])
    for name in ("utt2spk", "spk2utt", "text", "wav.scp"):
        assert (data / "split1" / "1" / name).read_bytes() == (data / name).read_bytes()


def test_split_per_utt_into_three_contiguous_chunks(yesno, fixture_before, tmp_path):
    data = working_copy(tmp_path, "train_yesno")
    run_ok(["split_data.sh", "--per-utt", data, 3])
    parts = [data / "split3utt" / str(i) for i in (1, 2, 3)]
    chunks = [(p / "utt2spk").read_text().splitlines() for p in parts]
    assert [len(c) for c in chunks] == [11, 10, 10]
    assert sum(chunks, []) == (data / "utt2spk").read_text().splitlines()
    for part, chunk in zip(parts, chunks):
        utts = [line.split()[0] for line in chunk]
        assert (part / "spk2utt").read_text() == "global " + " ".join(utts) + "\n"
        assert [line.split()[0] for line in (part / "text").read_text().splitlines()] == utts
        run_ok(["validate_data_dir.sh", "--no-feats", part])
    assert not temp_files(data)


def test_split_per_speaker_into_two_fails_clearly(yesno, fixture_before, tmp_path):
    data = working_copy(tmp_path, "test_yesno")
    result = run_script(["split_data.sh", str(data), "2"])
    assert result.returncode == 1
    assert "cannot split into 2 parts by speaker: it has only 1 speaker(s)" in result.stderr
    assert not (data / "split2").exists()


def test_subsets(yesno, fixture_before, tmp_path):
    src = yesno / "data" / "train_yesno"
    utts = [line.split()[0] for line in (src / "utt2spk").read_text().splitlines()]
    expectations = {
        ("--first", 4): utts[:4],
        ("--last", 3): utts[-3:],
        (None, 5): [utts[i] for i in (6, 14, 22, 26, 30)],
        ("--speakers", 5): utts,  # whole speakers: the only one, 'global', has all 31
    }
    for (mode, num), expected in expectations.items():
        dest = tmp_path / f"{mode}{num}"
        run_ok(["subset_data_dir.sh", *([mode] if mode else []), src, num, dest])
        got = [line.split()[0] for line in (dest / "utt2spk").read_text().splitlines()]
        assert got == expected, mode
        assert [line.split()[0] for line in (dest / "wav.scp").read_text().splitlines()] == expected
        run_ok(["validate_data_dir.sh", "--no-feats", dest])


def test_speaker_maps_round_trip(yesno, fixture_before):
    data = yesno / "data" / "train_yesno"
    to_spk2utt = run_ok(["utt2spk_to_spk2utt.pl", data / "utt2spk"])
    assert to_spk2utt.stdout == (data / "spk2utt").read_text()
    back = run_ok(["spk2utt_to_utt2spk.pl", data / "spk2utt"])
    assert back.stdout == (data / "utt2spk").read_text()


def test_copy_and_combine_train_and_test(yesno, fixture_before, tmp_path):
    for name, prefix in (("train_yesno", "tr-"), ("test_yesno", "te-")):
        run_ok(["copy_data_dir.sh", "--utt-prefix", prefix, "--spk-prefix", prefix,
                yesno / "data" / name, tmp_path / name])
    run_ok(["combine_data.sh", tmp_path / "all", tmp_path / "train_yesno", tmp_path / "test_yesno"])
    spk2utt = (tmp_path / "all" / "spk2utt").read_text().splitlines()
    assert [line.split()[0] for line in spk2utt] == ["te-global", "tr-global"]
    assert len((tmp_path / "all" / "utt2spk").read_text().splitlines()) == 62
    run_ok(["validate_data_dir.sh", "--no-feats", tmp_path / "all"])


def test_combine_unprefixed_yesno_dirs_explains_the_fix(yesno, fixture_before, tmp_path):
    # 'global' does not prefix the test ids: in the union, utterance order puts 1_* before a-*
    # while speaker order puts 'a-global' before 'global'.
    run_ok(["copy_data_dir.sh", "--utt-prefix", "a-", "--spk-prefix", "a-",
            yesno / "data" / "train_yesno", tmp_path / "tr"])
    result = run_script(["combine_data.sh", str(tmp_path / "all"), str(tmp_path / "tr"),
                         str(yesno / "data" / "test_yesno")])
    assert result.returncode == 1
    assert "out of order when sorted by speaker" in result.stderr
    assert "--utt-prefix X- --spk-prefix X-" in result.stderr
    assert not (tmp_path / "all").exists()
