"""utils/prepare_lang.sh and utils/validate_lang.sh, checked against real Kaldi output (yesno)."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from conftest import REPO, YESNO, run_script
from emasr.lang.dictdir import LexiconEntry
from emasr.lang.disambig import add_lex_disambig
from emasr.fst_stack import kaldi_hmm_gmm, kaldifst

PREPARE = str(REPO / "utils" / "prepare_lang.sh")
VALIDATE = str(REPO / "utils" / "validate_lang.sh")


def fst_paths(path: Path, max_outputs: int = 3, max_inputs: int = 12) -> dict:
    """{(output labels, input labels): lowest cost} over all successful paths with at most
    `max_outputs` non-epsilon outputs (every cycle of L emits a word, so this is finite)."""
    fst = kaldifst.StdVectorFst.read(str(path))
    best: dict[tuple, float] = {}
    stack = [(fst.start, (), (), 0.0)]
    while stack:
        state, ins, outs, cost = stack.pop()
        final = fst.final(state).value
        if math.isfinite(final):
            key = (outs, ins)
            best[key] = min(best.get(key, math.inf), cost + final)
        for arc in kaldifst.ArcIterator(fst, state):
            new_ins = ins + (arc.ilabel,) if arc.ilabel else ins
            new_outs = outs + (arc.olabel,) if arc.olabel else outs
            if len(new_outs) <= max_outputs and len(new_ins) <= max_inputs:
                stack.append((arc.nextstate, new_ins, new_outs, cost + arc.weight.value))
    return best


def assert_same_paths(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    for key, cost in theirs.items():
        assert ours[key] == pytest.approx(cost, abs=1e-5), key


@pytest.fixture(scope="module")
def yesno_lang(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("yesno")
    result = run_script([PREPARE, "--position-dependent-phones", "false", str(YESNO / "dict"),
                         "<SIL>", str(out / "tmp"), str(out / "lang")])
    assert result.returncode == 0, result.stderr
    return out / "lang"


def test_symbol_tables_and_phone_lists_equal_kaldis(yesno_lang):
    kaldi = YESNO / "data" / "lang"
    # yesno's Kaldi lang is position-independent (phones.txt has SIL Y N, no _B/_E).
    for name in ["phones.txt", "words.txt", "oov.txt", "oov.int"] + sorted(
            f"phones/{p.name}" for p in (kaldi / "phones").iterdir()):
        assert (yesno_lang / name).read_text() == (kaldi / name).read_text(), name
    assert (yesno_lang / "phones/wdisambig.txt").read_text() == "#0\n"
    assert (yesno_lang / "phones/wdisambig_phones.int").read_text() == "4\n"
    assert (yesno_lang / "phones/wdisambig_words.int").read_text() == "4\n"
    assert not (yesno_lang / "phones/word_boundary.txt").exists()


@pytest.mark.parametrize("name", ["L.fst", "L_disambig.fst"])
def test_lexicon_fst_accepts_the_same_word_phone_pairs_as_kaldis(yesno_lang, name):
    ours = fst_paths(yesno_lang / name)
    theirs = fst_paths(YESNO / "data" / "lang" / name)
    assert len(theirs) > 20
    assert_same_paths(ours, theirs)
    if name == "L.fst":  # "YES NO" as Y SIL N: three optional-silence choices of cost ln 2 each
        assert ours[((3, 2), (2, 1, 3))] == pytest.approx(3 * math.log(2), abs=1e-5)


def test_default_topology_is_kaldis(yesno_lang):
    # Kaldi's 3-state topology, as its utils/prepare_lang.sh writes it (the one-frame topology is
    # --topology skip, tests/test_topo.py)
    assert (yesno_lang / "topo").read_text() == (YESNO / "data/lang/topo").read_text()
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read((yesno_lang / "topo").read_text())
    topo.check()
    assert [topo.min_length(p) for p in (1, 2, 3)] == [3, 3, 3]


def test_validate_lang_accepts_ours_and_kaldis(yesno_lang):
    for lang in (yesno_lang, YESNO / "data/lang", YESNO / "data/lang_test_tg"):
        result = run_script([VALIDATE, str(lang)])
        assert result.returncode == 0, result.stderr


def test_validate_lang_lists_every_problem(yesno_lang, tmp_path):
    bad = tmp_path / "lang"
    shutil.copytree(yesno_lang, bad)
    (bad / "phones/sets.txt").write_text("SIL\nY\n")
    topo = (bad / "topo").read_text().replace("<ForPhones>\n1\n", "<ForPhones>\n1 9\n")
    (bad / "topo").write_text(topo)
    (bad / "oov.txt").write_text("<UNK>\n")
    shutil.copy(YESNO / "data/lang_test_tg/G.fst", bad / "L.fst")  # ilabel- not olabel-sorted
    result = run_script([VALIDATE, str(bad)])
    assert result.returncode == 1
    assert "phones/sets.txt: expected every phone exactly once (missing ['N']" in result.stderr
    assert "topo: covers phones [1, 2, 3, 9]" in result.stderr
    assert "oov.txt: expected one word of words.txt" in result.stderr
    assert "L.fst: unexpected input labels [4]" in result.stderr


def test_a_grammar_built_with_another_words_txt_is_refused(tmp_path):
    # the same lang with one more word before #0: Kaldi's G.fst (#0 = 4) carries the backoff on
    # a label that is now the word MAYBE, and #0 is 5
    lang = tmp_path / "lang_test"
    shutil.copytree(YESNO / "data/lang_test_tg", lang)
    (lang / "words.txt").write_text("<eps> 0\n<SIL> 1\nNO 2\nYES 3\nMAYBE 4\n#0 5\n<s> 6\n"
                                    "</s> 7\n")
    result = run_script([VALIDATE, str(lang)])
    assert result.returncode == 1
    assert (f"{lang}/G.fst: 1 kind(s) of arc whose labels are neither a word w:w nor the backoff "
            "#0:<eps> (#0 is 5 in words.txt), e.g. 4:0: was it built with another words.txt?"
            ) in result.stderr


def test_oov_word_must_be_in_the_lexicon(tmp_path):
    result = run_script([PREPARE, str(YESNO / "dict"), "<UNK>", str(tmp_path / "tmp"),
                         str(tmp_path / "lang")])
    assert result.returncode != 0
    assert "OOV word '<UNK>' is not in the lexicon" in result.stderr
    assert not (tmp_path / "lang").exists()


def test_disambiguation_symbols_follow_add_lex_disambig():
    lexicon = [LexiconEntry("A", ["a", "b"]), LexiconEntry("B", ["a", "b"]),
               LexiconEntry("C", ["a"]), LexiconEntry("D", ["c"]), LexiconEntry("E", ["a", "b"])]
    out, max_disambig = add_lex_disambig(lexicon)
    assert [e.phones for e in out] == [["a", "b", "#1"], ["a", "b", "#2"], ["a", "#1"], ["c"],
                                       ["a", "b", "#3"]]
    assert max_disambig == 3


def write_dict(root: Path) -> Path:
    d = root / "dict"
    d.mkdir()
    (d / "silence_phones.txt").write_text("sil\n")
    (d / "optional_silence.txt").write_text("sil\n")
    (d / "nonsilence_phones.txt").write_text("a1 a2\nb\n")
    (d / "extra_questions.txt").write_text("a1\na2\n")
    (d / "lexicon.txt").write_text("<UNK> sil\nBA b a1\nBA2 b a2\nA a1\nAB a1 b a2\nA_TOO a1\n")
    return d


def test_position_dependent_phones(tmp_path):
    d = write_dict(tmp_path)
    result = run_script([PREPARE, "--position-dependent-phones", "true", str(d), "<UNK>",
                         str(tmp_path / "tmp"), str(tmp_path / "lang")])
    assert result.returncode == 0, result.stderr
    lang = tmp_path / "lang"
    phones = [line.split()[0] for line in (lang / "phones.txt").read_text().splitlines()]
    assert phones == ["<eps>", "sil", "sil_B", "sil_E", "sil_I", "sil_S",
                      "a1_B", "a1_E", "a1_I", "a1_S", "a2_B", "a2_E", "a2_I", "a2_S",
                      "b_B", "b_E", "b_I", "b_S", "#0", "#1", "#2", "#3"]
    assert (lang / "phones/roots.txt").read_text().splitlines()[1] == (
        "shared split a1_B a1_E a1_I a1_S a2_B a2_E a2_I a2_S")
    boundary = dict(line.split() for line in (lang / "phones/word_boundary.txt").read_text()
                    .splitlines())
    assert boundary["sil"] == "nonword" and boundary["b_I"] == "internal"
    assert "AB AB a1_B b_I a2_E" in (lang / "phones/align_lexicon.txt").read_text().splitlines()
    questions = (lang / "phones/extra_questions.txt").read_text().splitlines()
    assert questions[:3] == ["a1_B a1_E a1_I a1_S", "a2_B a2_E a2_I a2_S", "a1_B a2_B b_B"]
    assert "sil_S" in questions
    words = dict(line.split() for line in (lang / "words.txt").read_text().splitlines())
    ph = {p: i for i, p in enumerate(phones)}
    paths = fst_paths(lang / "L_disambig.fst", max_outputs=1)
    # A and A_TOO are homophones (a1_S #1 / #2); BA b a1 is no prefix of anything.
    assert ((int(words["A"]),), (ph["a1_S"], ph["#1"])) in paths
    assert ((int(words["A_TOO"]),), (ph["a1_S"], ph["#2"])) in paths
    assert ((int(words["BA"]),), (ph["b_B"], ph["a1_E"])) in paths
