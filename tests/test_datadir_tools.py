"""fix_data_dir.sh, split_data.sh, subset_data_dir.sh, copy_data_dir.sh, combine_data.sh,
data/modify_speaker_info.sh."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import REPO, run_script
from datadir_helpers import make_data_dir, snapshot, temp_files, write_lines
from emasr.io.datadir import load_data_dir
from emasr.io.datadir_edit import spread_selection
from emasr.io.datadir_split import split_evenly, split_speakers


def run_ok(args):
    result = run_script([str(a) for a in args])
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def run_fails(args, *fragments):
    result = run_script([str(a) for a in args])
    assert result.returncode == 1, result.stdout + result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    return result


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def keys(path: Path) -> list[str]:
    return [line.split()[0] for line in lines(path)]


# -- fix_data_dir.sh ----------------------------------------------------------------------------

def test_fix_keeps_common_utterances_and_backs_up(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 2, "spkB": 2}, feats=True)
    originals = snapshot(data)
    write_lines(data / "text", list(reversed(lines(data / "text"))))       # unsorted
    write_lines(data / "feats.scp", lines(data / "feats.scp")[:3])           # spkB-u2 has no feats
    write_lines(data / "wav.scp", lines(data / "wav.scp") + ["zzz-u9 z.wav"])  # unknown utterance
    write_lines(data / "utt2spk", lines(data / "utt2spk") + lines(data / "utt2spk")[:1])  # repeated
    broken = snapshot(data)
    result = run_ok(["fix_data_dir.sh", data])
    assert "kept 3 utterances out of 4" in result.stderr
    assert "filtered wav.scp from 5 to 3 lines" in result.stderr
    assert keys(data / "utt2spk") == ["spkA-u1", "spkA-u2", "spkB-u1"]
    assert lines(data / "spk2utt") == ["spkA spkA-u1 spkA-u2", "spkB spkB-u1"]
    assert keys(data / "text") == keys(data / "wav.scp") == keys(data / "feats.scp") == keys(data / "utt2spk")
    assert lines(data / "text")[0] == originals["text"].decode().splitlines()[0]
    for name in ("text", "feats.scp", "wav.scp", "utt2spk"):
        assert (data / ".backup" / name).read_bytes() == broken[name]
    run_ok(["validate_data_dir.sh", data])
    assert not temp_files(data)


def test_fix_drops_speakers_without_cmvn_and_empty_transcripts(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 2, "spkB": 2}, cmvn=True)
    write_lines(data / "cmvn.scp", lines(data / "cmvn.scp")[:1])  # only spkA has stats
    text = lines(data / "text")
    text[1] = "spkA-u2"
    write_lines(data / "text", text)
    run_ok(["fix_data_dir.sh", data])
    assert keys(data / "utt2spk") == ["spkA-u1"]
    run_ok(["validate_data_dir.sh", "--no-feats", data])


def test_fix_unchanged_files_keep_their_mtime(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 2})
    old = (data / "wav.scp").stat().st_mtime_ns
    result = run_ok(["fix_data_dir.sh", data])
    assert "kept all 2 utterances" in result.stderr
    assert (data / "wav.scp").stat().st_mtime_ns == old


@pytest.mark.parametrize("damage, message", [
    ("nothing_left", "no utterances remained"),
    ("crlf", "text:1: line ends with CR"),
    ("speaker_order", "utt2spk:2: utterance 'b1' of speaker 'amy' is out of order when sorted by speaker"),
    ("conflicting", "text: 'spkA-u1' has two different lines ('spkA-u1 "),
])
def test_fix_failure_leaves_dir_untouched(tmp_path, damage, message):
    data = make_data_dir(tmp_path / "d", {"spkA": 2})
    if damage == "nothing_left":
        write_lines(data / "text", ["other-u1 x"])
    elif damage == "conflicting":   # the same utterance twice, with two transcripts
        write_lines(data / "text", lines(data / "text") + ["spkA-u1 another transcript"])
    elif damage == "crlf":
        (data / "text").write_bytes((data / "text").read_bytes().replace(b"\n", b"\r\n"))
    else:
        write_lines(data / "utt2spk", ["a1 zed", "b1 amy"])
    before = snapshot(data)
    run_fails(["fix_data_dir.sh", data], message)
    assert snapshot(data) == before and not (data / ".backup").exists() and not temp_files(data)


def test_fix_filters_extra_files(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 2, "spkB": 1})
    write_lines(data / "text", lines(data / "text")[1:])  # spkA-u1 loses its transcript
    write_lines(data / "utt2category", ["spkA-u1 read", "spkA-u2 read", "spkB-u1 spont"])
    write_lines(data / "spk2age", ["spkA 30", "spkB 40"])
    run_ok(["fix_data_dir.sh", "--utt-extra-files", "utt2category", "--spk-extra-files", "spk2age", data])
    assert keys(data / "utt2category") == ["spkA-u2", "spkB-u1"]
    assert keys(data / "spk2age") == ["spkA", "spkB"]


def test_fix_missing_utt2spk(tmp_path):
    (tmp_path / "d").mkdir()
    run_fails(["fix_data_dir.sh", tmp_path / "d"], "expected file", "utt2spk")


# -- split_data.sh ------------------------------------------------------------------------------

def test_kaldi_balanced_speaker_split():
    # Dealt out 3+3 speakers -> sizes 7,3; moving boundary speakers gives 5,5 (Kaldi's rule).
    counts = {"s0": 5, "s1": 1, "s2": 1, "s3": 1, "s4": 1, "s5": 1}
    assert split_speakers(list(counts), counts, 2) == [["s0"], ["s1", "s2", "s3", "s4", "s5"]]
    # Equal speakers split evenly with no moves.
    even = {f"s{i}": 2 for i in range(6)}
    assert split_speakers(list(even), even, 3) == [["s0", "s1"], ["s2", "s3"], ["s4", "s5"]]


def test_split_evenly_puts_the_remainder_first():
    assert [len(p) for p in split_evenly(list(range(31)), 3)] == [11, 10, 10]
    assert split_evenly(list("abcde"), 2) == [["a", "b", "c"], ["d", "e"]]


def test_split_per_speaker_with_per_speaker_files(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 3, "spkB": 1, "spkC": 2}, feats=True, cmvn=True)
    run_ok(["split_data.sh", data, 2])
    part1, part2 = data / "split2" / "1", data / "split2" / "2"
    assert lines(part1 / "spk2utt") == ["spkA spkA-u1 spkA-u2 spkA-u3"]
    assert keys(part2 / "utt2spk") == ["spkB-u1", "spkC-u1", "spkC-u2"]
    assert keys(part2 / "cmvn.scp") == ["spkB", "spkC"]
    for part in (part1, part2):
        run_ok(["validate_data_dir.sh", part])
    assert not temp_files(data)


def test_split_per_utt_shares_speakers(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 3, "spkB": 2}, cmvn=True)
    run_ok(["split_data.sh", "--per-utt", data, 2])
    part1, part2 = data / "split2utt" / "1", data / "split2utt" / "2"
    assert keys(part1 / "utt2spk") == ["spkA-u1", "spkA-u2", "spkA-u3"]
    assert keys(part2 / "utt2spk") == ["spkB-u1", "spkB-u2"]
    assert keys(part1 / "cmvn.scp") == ["spkA"]


def test_split_fewer_speakers_than_parts(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 3, "spkB": 2})
    run_fails(["split_data.sh", data, 3], "only 2 speaker(s); expected at least 3", "--per-utt")
    assert not (data / "split3").exists()


def test_split_with_segments_keeps_recordings_of_each_part(tmp_path):
    data = tmp_path / "seg"
    data.mkdir()
    write_lines(data / "utt2spk", ["spkA-1 spkA", "spkA-2 spkA", "spkB-1 spkB"])
    write_lines(data / "spk2utt", ["spkA spkA-1 spkA-2", "spkB spkB-1"])
    write_lines(data / "segments", ["spkA-1 r1 0 1", "spkA-2 r1 1 2", "spkB-1 r2 0 1"])
    write_lines(data / "wav.scp", ["r1 r1.wav", "r2 r2.wav"])
    run_ok(["split_data.sh", data, 2])
    assert lines(data / "split2" / "1" / "wav.scp") == ["r1 r1.wav"]
    assert lines(data / "split2" / "2" / "wav.scp") == ["r2 r2.wav"]


def test_split_is_skipped_when_parts_are_newer(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 2, "spkB": 2})
    run_ok(["split_data.sh", data, 2])
    part_text = data / "split2" / "1" / "text"
    first = part_text.stat().st_mtime_ns
    run_ok(["split_data.sh", data, 2])
    assert part_text.stat().st_mtime_ns == first
    # A newer source file makes the parts stale: they are written again.
    future = first + 5_000_000_000
    os.utime(data / "text", ns=(future, future))
    run_ok(["split_data.sh", data, 2])
    assert part_text.stat().st_mtime_ns > first


def test_split_bad_num(tmp_path):
    data = make_data_dir(tmp_path / "d", {"spkA": 2})
    run_fails(["split_data.sh", data, 0], "expected a positive integer")


# -- subset_data_dir.sh -------------------------------------------------------------------------

def test_spread_selection_matches_kaldi_subset_scp():
    # Kaldi's subset_scp.pl halves the list recursively; for 31 lines and 5 wanted it picks these.
    assert spread_selection([str(i) for i in range(31)], 5) == ["6", "14", "22", "26", "30"]
    assert spread_selection(list("abcd"), 4) == list("abcd")


@pytest.fixture
def six(tmp_path) -> Path:
    return make_data_dir(tmp_path / "src", {"spkA": 3, "spkB": 1, "spkC": 2}, feats=True, cmvn=True)


def test_subset_first_last(six, tmp_path):
    run_ok(["subset_data_dir.sh", "--first", six, 2, tmp_path / "first"])
    assert keys(tmp_path / "first" / "utt2spk") == ["spkA-u1", "spkA-u2"]
    assert keys(tmp_path / "first" / "cmvn.scp") == ["spkA"]
    result = run_ok(["subset_data_dir.sh", "--last", six, 3, tmp_path / "last"])
    assert "reducing #utt from 6 to 3" in result.stderr
    assert keys(tmp_path / "last" / "utt2spk") == ["spkB-u1", "spkC-u1", "spkC-u2"]
    for d in ("first", "last"):
        run_ok(["validate_data_dir.sh", tmp_path / d])


def test_subset_lists(six, tmp_path):
    write_lines(tmp_path / "utts", ["spkC-u2", "spkA-u1", "nobody"])
    run_ok(["subset_data_dir.sh", "--utt-list", tmp_path / "utts", six, tmp_path / "u"])
    assert keys(tmp_path / "u" / "feats.scp") == ["spkA-u1", "spkC-u2"]
    write_lines(tmp_path / "spks", ["spkC"])
    run_ok(["subset_data_dir.sh", "--spk-list", tmp_path / "spks", six, tmp_path / "s"])
    assert lines(tmp_path / "s" / "spk2utt") == ["spkC spkC-u1 spkC-u2"]


def test_subset_speakers_takes_whole_speakers(six, tmp_path):
    run_ok(["subset_data_dir.sh", "--speakers", six, 2, tmp_path / "spk"])
    spk2utt = {line.split()[0]: line.split()[1:] for line in lines(tmp_path / "spk" / "spk2utt")}
    full = {line.split()[0]: line.split()[1:] for line in lines(six / "spk2utt")}
    assert sum(map(len, spk2utt.values())) >= 2
    assert all(full[s] == u for s, u in spk2utt.items())


def test_subset_random_is_seeded(six, tmp_path):
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        run_ok(["subset_data_dir.sh", "--random", "--seed", seed, six, 3, tmp_path / name])
    assert lines(tmp_path / "a" / "utt2spk") == lines(tmp_path / "b" / "utt2spk")
    assert len(lines(tmp_path / "a" / "utt2spk")) == 3
    run_ok(["validate_data_dir.sh", tmp_path / "c"])


def test_subset_per_spk(six, tmp_path):
    run_ok(["subset_data_dir.sh", "--per-spk", six, 1, tmp_path / "p"])
    assert keys(tmp_path / "p" / "utt2spk") == ["spkA-u1", "spkB-u1", "spkC-u1"]


def test_subset_shortest_uses_utt2num_frames(six, tmp_path):
    write_lines(six / "utt2num_frames", ["spkA-u1 90", "spkA-u2 10", "spkA-u3 50", "spkB-u1 20",
                                         "spkC-u1 70", "spkC-u2 30"])
    run_ok(["subset_data_dir.sh", "--shortest", six, 3, tmp_path / "short"])
    assert keys(tmp_path / "short" / "utt2spk") == ["spkA-u2", "spkB-u1", "spkC-u2"]


def test_subset_into_existing_dir_removes_stale_tables(six, tmp_path):
    dest = make_data_dir(tmp_path / "dest", {"old": 1}, feats=True)
    (six / "feats.scp").unlink()
    run_ok(["subset_data_dir.sh", "--first", six, 2, dest])
    assert not (dest / "feats.scp").exists()
    run_ok(["validate_data_dir.sh", "--no-feats", dest])


def test_subset_too_many_writes_nothing(six, tmp_path):
    run_fails(["subset_data_dir.sh", six, 7, tmp_path / "big"], "only 6; expected at most 6")
    assert not (tmp_path / "big").exists()


def test_subset_usage(six, tmp_path):
    result = run_script(["subset_data_dir.sh", str(six), str(tmp_path / "x")])
    assert result.returncode == 1 and "Usage" in result.stderr


# -- copy_data_dir.sh ---------------------------------------------------------------------------

def test_copy_with_prefixes(six, tmp_path):
    dest = tmp_path / "copy"
    before = snapshot(six)
    result = run_ok(["copy_data_dir.sh", "--utt-prefix", "sp1.1-", "--spk-prefix", "sp1.1-", six, dest])
    assert "INFO cli.py:" in result.stderr and "successfully validated" in result.stderr
    assert lines(dest / "utt2spk")[0] == "sp1.1-spkA-u1 sp1.1-spkA"
    assert keys(dest / "cmvn.scp") == ["sp1.1-spkA", "sp1.1-spkB", "sp1.1-spkC"]
    assert lines(dest / "wav.scp")[0] == "sp1.1-spkA-u1 /audio/spkA-u1.wav"
    assert snapshot(six) == before


def test_copy_suffix_and_validate_opts(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    write_lines(src / "utt2spk", ["a-1 a", "a-b-1 a-b"])
    write_lines(src / "spk2utt", ["a a-1", "a-b a-b-1"])
    write_lines(src / "text", ["a-1 x", "a-b-1 y"])
    before = snapshot(src)
    # Suffixing speakers reorders them ("a-bx" < "ax"), so the copy fails validation ...
    run_fails(["copy_data_dir.sh", "--spk-suffix", "x", src, tmp_path / "bad"],
              "speaker 'a-bx' of utterance 'a-b-1' sorts before speaker 'ax'")
    # ... unless told not to require speaker order, as Kaldi's --validate-opts allows.
    run_ok(["copy_data_dir.sh", "--spk-suffix", "x", "--validate-opts", "--no-spk-sort", src,
            tmp_path / "ok"])
    assert lines(tmp_path / "ok" / "utt2spk") == ["a-1 ax", "a-b-1 a-bx"]
    assert snapshot(src) == before


def test_copy_with_segments_keeps_recording_ids(tmp_path):
    src = tmp_path / "seg"
    src.mkdir()
    write_lines(src / "utt2spk", ["s-1 s", "s-2 s"])
    write_lines(src / "spk2utt", ["s s-1 s-2"])
    write_lines(src / "text", ["s-1 a", "s-2 b"])
    write_lines(src / "segments", ["s-1 rec 0 1", "s-2 rec 1 2"])
    write_lines(src / "wav.scp", ["rec rec.wav"])
    run_ok(["copy_data_dir.sh", "--utt-prefix", "p-", "--spk-prefix", "p-", src, tmp_path / "c"])
    assert lines(tmp_path / "c" / "segments") == ["p-s-1 rec 0 1", "p-s-2 rec 1 2"]
    assert lines(tmp_path / "c" / "wav.scp") == ["rec rec.wav"]


def test_copy_bad_option(six, tmp_path):
    result = run_script(["copy_data_dir.sh", "--utt-prefx", "a", str(six), str(tmp_path / "c")])
    assert result.returncode == 1 and "--utt-prefx" in result.stderr


# -- combine_data.sh ----------------------------------------------------------------------------

def test_combine(tmp_path):
    a = make_data_dir(tmp_path / "a", {"spkA": 2}, feats=True)
    b = make_data_dir(tmp_path / "b", {"spkB": 1, "spkC": 1}, feats=True)
    (b / "feats.scp").unlink()
    write_lines(b / "feats.scp", ["spkB-u1 f.ark:1"])  # spkC-u1 lacks features -> fixed away
    dest = tmp_path / "all"
    (dest / "old").mkdir(parents=True)
    result = run_ok(["combine_data.sh", dest, a, b])
    assert "kept 3 utterances out of 4" in result.stderr
    assert keys(dest / "utt2spk") == ["spkA-u1", "spkA-u2", "spkB-u1"]
    assert not (dest / "old").exists()
    run_ok(["validate_data_dir.sh", dest])


def test_combine_skip_fix_and_utt2uniq(tmp_path):
    a = make_data_dir(tmp_path / "a", {"spkA": 1})
    b = make_data_dir(tmp_path / "b", {"spkB": 1})
    write_lines(b / "utt2uniq", ["spkB-u1 orig-u1"])
    run_ok(["combine_data.sh", "--skip-fix", "true", tmp_path / "c", a, b])
    assert lines(tmp_path / "c" / "utt2uniq") == ["spkA-u1 spkA-u1", "spkB-u1 orig-u1"]


def test_combine_conflicting_ids(tmp_path):
    a = make_data_dir(tmp_path / "a", {"spkA": 2})
    b = make_data_dir(tmp_path / "b", {"spkA": 1})
    write_lines(b / "wav.scp", ["spkA-u1 /elsewhere.wav"])
    run_fails(["combine_data.sh", tmp_path / "c", a, b],
              f"{b}/wav.scp: 'spkA-u1' is also in {a}/wav.scp with a different value")
    assert not (tmp_path / "c").exists()


def test_combine_file_missing_in_later_source(tmp_path):
    a = make_data_dir(tmp_path / "a", {"spkA": 1}, feats=True)
    b = make_data_dir(tmp_path / "b", {"spkB": 1})
    run_fails(["combine_data.sh", tmp_path / "c", a, b], f"{b}/feats.scp: no such file")


def test_load_data_dir_reads_known_tables_only(six):
    (six / "notes.txt").write_text("not a table\n")
    data = load_data_dir(six)
    assert set(data.tables) == {"utt2spk", "text", "wav.scp", "feats.scp", "cmvn.scp"}


# -- data/modify_speaker_info.sh ----------------------------------------------------------------

MODIFY_SPEAKER_INFO = REPO / "utils" / "data" / "modify_speaker_info.sh"


def test_pseudo_speakers_of_one_utterance_make_everything_per_utterance(six, tmp_path):
    write_lines(six / "spk2gender", ["spkA f", "spkB m", "spkC f"])
    run_ok([MODIFY_SPEAKER_INFO, "--utts-per-spk-max", 1, six, tmp_path / "u"])
    out = tmp_path / "u"
    assert lines(out / "utt2spk") == ["spkA-u1 spkA-00001", "spkA-u2 spkA-00002",
                                      "spkA-u3 spkA-00003", "spkB-u1 spkB-00001",
                                      "spkC-u1 spkC-00001", "spkC-u2 spkC-00002"]
    assert lines(out / "spk2utt")[0] == "spkA-00001 spkA-u1"
    assert lines(out / "spk2gender")[3:] == ["spkB-00001 m", "spkC-00001 f", "spkC-00002 f"]
    assert lines(out / "feats.scp") == lines(six / "feats.scp")
    assert not (out / "cmvn.scp").exists()  # the old stats are per speaker
    assert load_data_dir(str(out)).utt2spk.keys() == load_data_dir(str(six)).utt2spk.keys()


def test_pseudo_speakers_of_two_utterances_and_bad_options(six, tmp_path):
    run_ok([MODIFY_SPEAKER_INFO, "--utts-per-spk-max", 2, six, tmp_path / "two"])
    assert lines(tmp_path / "two" / "spk2utt") == [
        "spkA-00001 spkA-u1 spkA-u2", "spkA-00002 spkA-u3", "spkB-00001 spkB-u1",
        "spkC-00001 spkC-u1 spkC-u2"]
    run_fails([MODIFY_SPEAKER_INFO, "--utts-per-spk-max", 0, six, tmp_path / "zero"],
              "--utts-per-spk-max must be a positive integer")
    run_fails([MODIFY_SPEAKER_INFO, six, six], "must differ")
