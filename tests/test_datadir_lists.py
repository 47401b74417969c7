"""filter_scp.pl, utt2spk_to_spk2utt.pl, spk2utt_to_utt2spk.pl: Kaldi's behaviour, line for line."""
from __future__ import annotations

import os
import subprocess

from conftest import REPO, run_script
from datadir_helpers import write_lines


def test_filter_scp_keeps_listed_lines_verbatim(tmp_path):
    write_lines(tmp_path / "ids", ["b extra fields ignored", "c"])
    write_lines(tmp_path / "in.scp", ["a 1", "b   two  spaces", "c 3", "d 4"])
    result = run_script(["filter_scp.pl", str(tmp_path / "ids"), str(tmp_path / "in.scp")])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "b   two  spaces\nc 3\n"


def test_filter_scp_exclude_and_field(tmp_path):
    write_lines(tmp_path / "ids", ["2"])
    write_lines(tmp_path / "in", ["foo 1", "bar 2", "baz 3"])
    exclude = run_script(["filter_scp.pl", "--exclude", "-f", "2", str(tmp_path / "ids"),
                          str(tmp_path / "in")])
    assert exclude.stdout == "foo 1\nbaz 3\n"
    field2 = run_script(["filter_scp.pl", "-f", "2", str(tmp_path / "ids"), str(tmp_path / "in")])
    assert field2.stdout == "bar 2\n"


def test_filter_scp_reads_stdin(tmp_path):
    write_lines(tmp_path / "ids", ["foo"])
    env = {**os.environ, "PATH": f"{REPO / 'utils'}:{os.environ['PATH']}"}
    out = subprocess.run(["filter_scp.pl", str(tmp_path / "ids")], input="foo 1\nbar 2\n",
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout == "foo 1\n"


def test_filter_scp_errors(tmp_path):
    write_lines(tmp_path / "ids", ["x"])
    write_lines(tmp_path / "in", ["a 1", "b"])
    short = run_script(["filter_scp.pl", "-f", "2", str(tmp_path / "ids"), str(tmp_path / "in")])
    assert short.returncode == 1 and f"{tmp_path / 'in'}:2: has 1 fields; expected at least 2" in short.stderr
    missing = run_script(["filter_scp.pl", str(tmp_path / "nope"), str(tmp_path / "in")])
    assert missing.returncode != 0 and "nope" in missing.stderr
    usage = run_script(["filter_scp.pl"])
    assert usage.returncode == 1 and "Usage: filter_scp.pl" in usage.stderr


def test_utt2spk_to_spk2utt_first_appearance_order(tmp_path):
    write_lines(tmp_path / "utt2spk", ["u1 zed", "u2 amy", "u3 zed"])
    result = run_script(["utt2spk_to_spk2utt.pl", str(tmp_path / "utt2spk")])
    assert result.stdout == "zed u1 u3\namy u2\n"
    write_lines(tmp_path / "bad", ["u1 a", "u2 a b"])
    bad = run_script(["utt2spk_to_spk2utt.pl", str(tmp_path / "bad")])
    assert bad.returncode == 1
    assert f"{tmp_path / 'bad'}:2: has 3 fields; expected 'utterance speaker'" in bad.stderr


def test_spk2utt_to_utt2spk(tmp_path):
    write_lines(tmp_path / "spk2utt", ["zed u1 u3", "amy u2"])
    result = run_script(["spk2utt_to_utt2spk.pl", str(tmp_path / "spk2utt")])
    assert result.stdout == "u1 zed\nu3 zed\nu2 amy\n"
    write_lines(tmp_path / "bad", ["amy"])
    bad = run_script(["spk2utt_to_utt2spk.pl", str(tmp_path / "bad")])
    assert bad.returncode == 1 and ":1: has 1 fields; expected 'speaker utt1 utt2 ...'" in bad.stderr
