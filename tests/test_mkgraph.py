"""utils/mkgraph.sh and emasr mkgraph: usage, missing inputs and an empty composition are
reported clearly, naming the file."""
from __future__ import annotations

import shutil
import struct

import pytest

from conftest import YESNO, run_script
from decode_toylang import make_lang, monophone_model
from emasr.decode.graph import GraphError, make_graph


def test_usage_and_missing_files(tmp_path):
    result = run_script(["mkgraph.sh", "only-one-arg"])
    assert result.returncode == 1 and "Usage: " in result.stderr
    lang = tmp_path / "lang"
    shutil.copytree(YESNO / "data" / "lang_test_tg", lang)
    for path in [lang, *lang.rglob("*")]:  # the fixture is read-only; the copy must not be
        path.chmod(0o755 if path.is_dir() else 0o644)
    (lang / "G.fst").unlink()
    result = run_script(["mkgraph.sh", str(lang), str(YESNO / "exp/mono"), str(tmp_path / "g")])
    assert result.returncode == 1
    assert f"expected file {lang}/G.fst to exist" in result.stderr


def test_grammar_over_unknown_words_is_an_error(tmp_path):
    # G uses word id 9, which words.txt does not have (L o G would be empty)
    lang = make_lang(str(tmp_path / "lang"), {"A": ["a1"], "B": ["b1"]}, "0 1 9 9 0\n1 0")
    with pytest.raises(GraphError, match=r"G.fst: word arcs with labels \[9\] that are not words"):
        make_graph(lang.lang_dir, str(tmp_path / "graph"), *monophone_model(lang.lang_dir))


def test_model_with_other_phones_is_refused(tmp_path):
    model = tmp_path / "exp"
    model.mkdir()
    for name in ("final.mdl", "tree"):
        (model / name).symlink_to(YESNO / "exp/mono" / name)
    (model / "phones.txt").write_text("<eps> 0\nSIL 1\nA 2\nB 3\n#0 4\n#1 5\n")
    result = run_script(["mkgraph.sh", str(YESNO / "data/lang_test_tg"), str(model),
                         str(tmp_path / "graph")])
    assert result.returncode == 1 and "phone symbol tables" in result.stderr


def test_a_grammar_of_another_words_txt_is_refused_before_composing(tmp_path):
    lang = tmp_path / "lang_test"
    shutil.copytree(YESNO / "data/lang_test_tg", lang)
    (lang / "words.txt").write_text("<eps> 0\n<SIL> 1\nNO 2\nYES 3\nMAYBE 4\n#0 5\n<s> 6\n"
                                    "</s> 7\n")
    result = run_script(["mkgraph.sh", str(lang), str(YESNO / "exp/mono"), str(tmp_path / "g")])
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"{lang}/G.fst: 1 kind(s) of arc whose labels are neither" in result.stderr
    assert not (tmp_path / "g" / "HCLG.fst").exists()


def flip_arc_labels(fst_path) -> None:
    """Damage an OpenFst vector FST as a bad disk or copy would, keeping it readable: bit 2 of
    every arc's input label flipped (arcs are ilabel, olabel, weight, nextstate after each
    state's final weight and arc count; the header ends at byte 0x42 for a StdVectorFst)."""
    data = bytearray(fst_path.read_bytes())
    offset = 0x42
    for _ in range(struct.unpack_from("<q", data, 0x32)[0]):
        arcs = struct.unpack_from("<q", data, offset + 4)[0]
        offset += 12
        for _ in range(arcs):
            data[offset] ^= 4
            offset += 16
    fst_path.write_bytes(bytes(data))


def test_a_damaged_lexicon_fst_is_refused_and_leaves_no_graph(tmp_path):
    lang, graph = tmp_path / "lang_test", tmp_path / "graph"
    shutil.copytree(YESNO / "data/lang_test_tg", lang)
    for path in [lang, *lang.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    mkgraph = ["mkgraph.sh", str(lang), str(YESNO / "exp/mono"), str(graph)]
    assert run_script(mkgraph).returncode == 0 and (graph / "HCLG.fst").exists()
    flip_arc_labels(lang / "L_disambig.fst")
    result = run_script(mkgraph)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert errors == [f"Error: {lang}/L_disambig.fst: unexpected input labels [6, 7] / output "
                      "labels []; expected those of the lang dir's symbol tables"], result.stderr
    # the earlier graph is gone with its record: nothing a decode could take for this one's
    assert not (graph / "HCLG.fst").exists() and not (graph / "tree.sha256").exists()
    assert run_script(["validate_lang.sh", str(lang)]).returncode == 1


def test_validate_lang_names_an_unreadable_lexicon_fst(tmp_path):
    lang = tmp_path / "lang"
    shutil.copytree(YESNO / "data/lang", lang)
    for path in [lang, *lang.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    data = bytearray((lang / "L_disambig.fst").read_bytes())
    data[0x46] ^= 0x40   # state 0's arc count: OpenFst asks for absurd sizes or reads past the end
    (lang / "L_disambig.fst").write_bytes(bytes(data))
    result = run_script(["validate_lang.sh", str(lang)])
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{lang}/L_disambig.fst: not readable as an OpenFst StdVectorFst" in result.stderr
