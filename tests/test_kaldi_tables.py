"""emasr.kaldi.tables: Kaldi archives read with every failure named (file, utterance, offset),
checked against kaldiio's own writer and fuzzed with arbitrary bytes and truncations."""
from __future__ import annotations

from pathlib import Path

import kaldiio
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from emasr.kaldi.tables import TableError, read_archive, read_scp

FUZZ = settings(max_examples=150, deadline=None, derandomize=True)


def write_archive(root: Path, count: int = 3) -> tuple[Path, Path, dict[str, np.ndarray]]:
    mats = {f"u{i}": np.arange((5 + i) * 4, dtype=np.float32).reshape(5 + i, 4) + i
            for i in range(count)}
    ark, scp = root / "a.ark", root / "a.scp"
    with kaldiio.WriteHelper(f"ark,scp:{ark},{scp}") as writer:
        for key, mat in mats.items():
            writer(key, mat)
    return ark, scp, mats


def test_a_good_archive_reads_as_kaldiio_wrote_it(tmp_path):
    ark, scp, mats = write_archive(tmp_path)
    for rspecifier in (f"ark:{ark}", f"scp:{scp}", f"ark,s,cs:{ark}"):
        got = dict(read_archive(rspecifier))
        assert list(got) == list(mats)
        assert all(np.array_equal(got[k], mats[k]) for k in mats)
    table = read_scp(scp)
    assert len(table) == 3 and np.array_equal(table["u2"], mats["u2"]) and "u9" not in table


def test_a_truncated_archive_names_the_file_offset_and_the_last_good_utterance(tmp_path):
    ark, scp, _ = write_archive(tmp_path)
    third = int(scp.read_text().splitlines()[2].rsplit(":", 1)[1]) - len("u2 ")
    ark.write_bytes(ark.read_bytes()[:-30])
    with pytest.raises(TableError, match=rf"{ark}: cannot read the record at offset {third} "
                                         r"\(after utterance 'u1'; truncated or damaged"):
        list(read_archive(f"ark:{ark}"))
    with pytest.raises(TableError, match=rf"{scp}:3 \(utterance 'u2'\): cannot read {ark} at "
                                         r"offset \d+ \(truncated"):
        list(read_archive(f"scp:{scp}"))


@pytest.mark.parametrize("offset, message", [
    ("99999", r"offset 99999 is past the end of .*a\.ark \(\d+ bytes\)"),
    ("10", r"cannot read .*a\.ark at offset 10 \(truncated, or not the start of a record"),
])
def test_an_scp_offset_past_the_end_or_into_a_record_is_named(tmp_path, offset, message):
    ark, _, _ = write_archive(tmp_path)
    scp = tmp_path / "b.scp"
    scp.write_text(f"u0 {ark}:3\nu1 {ark}:{offset}\n")
    with pytest.raises(TableError, match=rf"{scp}:2 \(utterance 'u1'\): {message}"):
        read_scp(scp)["u1"]


@pytest.mark.parametrize("text, message", [
    ("u0\n", r":1: expected '<utterance> <ark-file>:<offset>', got 'u0'"),
    ("u0 x.ark:3\nu0 x.ark:9\n", r":2: duplicate key 'u0' \(first on line 1\)"),
])
def test_a_bad_scp_line_is_named(tmp_path, text, message):
    scp = tmp_path / "c.scp"
    scp.write_text(text)
    with pytest.raises(TableError, match=message):
        read_scp(scp)


@FUZZ
@given(data=st.binary(max_size=400))
def test_any_bytes_as_an_archive_parse_or_raise_the_named_error(tmp_path_factory, data):
    ark = tmp_path_factory.mktemp("fuzz") / "f.ark"
    ark.write_bytes(data)
    try:
        for key, value in read_archive(f"ark:{ark}"):
            assert isinstance(key, str) and np.asarray(value).ndim in (1, 2)
    except TableError as err:
        assert str(ark) in str(err)


@FUZZ
@given(cut=st.integers(min_value=0, max_value=10_000), offset=st.integers(0, 1000))
def test_any_truncation_or_offset_parses_or_raises_the_named_error(tmp_path_factory, cut, offset):
    root = tmp_path_factory.mktemp("cut")
    ark, scp, mats = write_archive(root)
    data = ark.read_bytes()
    ark.write_bytes(data[:cut % (len(data) + 1)])
    try:
        got = dict(read_archive(f"ark:{ark}"))
        assert all(np.array_equal(got[k], mats[k]) for k in got)
    except TableError as err:
        assert str(ark) in str(err)
    shifted = root / "s.scp"
    shifted.write_text(f"u0 {ark}:{offset}\n")
    try:
        read_scp(shifted)["u0"]
    except TableError as err:
        assert f"{shifted}:1 (utterance 'u0')" in str(err)


def test_a_step_meeting_a_damaged_archive_says_one_line(tmp_path):
    # compute-cmvn-stats over a data dir whose archive lost its tail: no traceback
    from conftest import run_script

    ark, scp, _ = write_archive(tmp_path)
    ark.write_bytes(ark.read_bytes()[:-30])
    data = tmp_path / "data"
    data.mkdir()
    (data / "feats.scp").write_text(scp.read_text())
    (data / "utt2spk").write_text("u0 s\nu1 s\nu2 s\n")
    (data / "spk2utt").write_text("s u0 u1 u2\n")
    result = run_script(["emasr", "compute-cmvn-stats", str(data), str(tmp_path / "cmvn")])
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert f"Error: {data}/feats.scp:3 (utterance 'u2'): cannot read {ark}" in result.stderr

