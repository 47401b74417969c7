"""The two HMM topologies of emasr.lang.topo: "kaldi" equals Kaldi's gen_topo.pl output for the
yesno phones (the real Kaldi lang dir, read in place); "skip" lets every phone pass in one frame."""
from __future__ import annotations

import pytest

from conftest import REPO, YESNO, run_script
from emasr.fst_stack import kaldi_hmm_gmm
from emasr.kaldi.io import KaldiReader
from emasr.kaldi.transitions import read_topology
from emasr.lang.topo import DEFAULT_TOPOLOGY, TOPOLOGIES, make_topo

KALDI_TOPO = YESNO / "data" / "lang" / "topo"


def parsed(text: str):
    """(phones, entry of each phone, entries: states with pdf classes and (dest, prob) arcs)."""
    topology = read_topology(KaldiReader(text.encode(), "topo"))
    return topology.phones, topology.phone2idx, topology.entries


def min_lengths(text: str, phones: list[int]) -> list[int]:
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(text)
    topo.check()
    return [topo.min_length(p) for p in phones]


def test_registered_names_and_default():
    assert sorted(TOPOLOGIES) == ["kaldi", "skip"]
    assert DEFAULT_TOPOLOGY == "kaldi"


def test_kaldi_topology_equals_gen_topo_for_yesno():
    ours = make_topo([2, 3], [1], topology="kaldi")
    assert parsed(ours) == parsed(KALDI_TOPO.read_text())
    assert ours == KALDI_TOPO.read_text()  # even the text: gen_topo.pl's spacing and numbers
    assert min_lengths(ours, [1, 2, 3]) == [3, 3, 3]
    assert make_topo([2, 3], [1]) == ours   # the default, as in Kaldi


def test_prepare_lang_writes_the_chosen_topology(tmp_path):
    script = str(REPO / "utils" / "prepare_lang.sh")
    result = run_script([script, "--topology", "kaldi", str(YESNO / "dict"), "<SIL>",
                         str(tmp_path / "tmp"), str(tmp_path / "lang")])
    assert result.returncode == 0, result.stderr
    assert parsed((tmp_path / "lang" / "topo").read_text()) == parsed(KALDI_TOPO.read_text())
    bad = run_script([script, "--topology", "chain", str(YESNO / "dict"), "<SIL>",
                      str(tmp_path / "tmp"), str(tmp_path / "lang2")])
    assert bad.returncode != 0 and "chain" in bad.stderr
    assert not (tmp_path / "lang2").exists()


def test_state_counts():
    text = make_topo([2, 3], [1], num_states=4, num_sil_states=3, topology="kaldi")
    assert min_lengths(text, [1, 2]) == [3, 4]
    phones, _, entries = parsed(text)
    silence = entries[1]
    assert silence[0].transitions == ((0, 0.5), (1, 0.5))          # 0 -> 0..n-2
    assert silence[1].transitions == ((1, 0.5), (2, 0.5))          # middle: 1..n-1
    assert silence[2].transitions == ((2, 0.75), (3, 0.25))        # last: loop and exit
    one = parsed(make_topo([2], [1], num_sil_states=1, topology="kaldi"))[2][1]
    assert one[0].transitions == ((0, 0.75), (1, 0.25))
    with pytest.raises(ValueError, match="silence states"):
        make_topo([2], [1], num_sil_states=2, topology="kaldi")
    with pytest.raises(ValueError, match="unknown topology"):
        make_topo([2], [1], topology="chain")


def test_skip_topology_passes_every_phone_in_one_frame():
    text = make_topo([2, 3], [1], topology="skip")
    assert min_lengths(text, [1, 2, 3]) == [1, 1, 1]
