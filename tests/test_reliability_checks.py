"""Cross-checks between steps (docs/reliability.md): targets, transition model, tree, graph and
network must agree on their pdfs, and a graph on its tree, before any work starts; a mismatch is
one line naming both files and both numbers, and nothing is written. Also the decoders' named
errors for a truncated graph and their leftovers after a failed job. On the Kaldi yesno fixture
(read in place) and a tree that gives the same phones other pdfs."""
from __future__ import annotations

import gzip
import os
import shutil

import kaldi_hmm_gmm
import kaldiio
import numpy as np
import pytest

from conftest import REPO, YESNO, run_script
from datadir_helpers import make_data_dir, snapshot, write_lines
from decode_toylang import make_lang, monophone_model
from emasr.kaldi.alignments import iter_alignment_file
from emasr.ali.targets import TargetsError, make_targets
from emasr.kaldi.model_io import (KaldiModel, build_topology, read_model, tree_from_text,
                                write_model, write_tree)
from emasr.kaldi.transitions import load_transition_table
from emasr.nnet.training import checkpoint

MONO = YESNO / "exp" / "mono"
LANG = YESNO / "data" / "lang_test_tg"


def permuted_tree_model(out):
    """A tree over yesno's phones with the pdfs in the opposite phone order, and its model (the
    fixture's GMMs): 11 pdfs, same phones and topology, another tree."""
    topology = load_transition_table(MONO / "final.mdl").topology
    topo = build_topology(topology)
    classes = topo.get_phone_to_num_pdf_classes()
    entries, next_pdf = {}, 0
    for phone in sorted(topo.phones, reverse=True):
        pdfs = " ".join(f"CE {next_pdf + c}" for c in range(classes[phone]))
        entries[phone] = f"TE -1 {classes[phone]} ( {pdfs} )"
        next_pdf += classes[phone]
    table = " ".join(entries.get(p, "NULL") for p in range(len(classes)))
    tree = tree_from_text(f"ContextDependency 1 0 ToPdf TE 0 {len(classes)} ( {table} ) "
                          "EndContextDependency ")
    out.mkdir(parents=True)
    write_tree(out / "tree", tree)
    model = KaldiModel(kaldi_hmm_gmm.TransitionModel(tree, topo),
                       read_model(MONO / "final.mdl").am_gmm)
    write_model(out / "final.mdl", model)
    return out


def model_of_other_size(out):
    """A transition-only model (and its tree) of a toy lang with 21 phones: 62 pdfs."""
    lexicon = {f"W{i}": [f"p{i}"] for i in range(20)}
    lang = make_lang(str(out / "lang"), lexicon, "0 1 {W0} {W0}\n1")
    trans_model, tree = monophone_model(lang.lang_dir)
    (out / "exp").mkdir()
    write_model(out / "exp" / "final.mdl", KaldiModel(trans_model, None))
    write_tree(out / "exp" / "tree", tree)
    return out / "exp", trans_model.num_pdfs


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """HCLG of yesno's lang and Kaldi's monophone model (its tree recorded in the graph dir)."""
    out = tmp_path_factory.mktemp("graph") / "graph"
    result = run_script(["mkgraph.sh", str(LANG), str(MONO), str(out)])
    assert result.returncode == 0, result.stderr
    return out


def no_outputs(directory):
    return not directory.exists() or not [p for p in directory.rglob("*")
                                          if p.name.startswith(("lat.", "hyp.", "final"))]


# -- item 1: pdf counts -----------------------------------------------------------------------

def test_train_sh_refuses_targets_of_another_model(tmp_path):
    targets = tmp_path / "targets"
    targets.mkdir()
    for name in ("pdf.scp", "prior.vec"):
        (targets / name).write_text("")
    (targets / "num_pdfs").write_text("11\n")  # Kaldi's yesno mono
    data = tmp_path / "data"
    data.mkdir()
    (data / "feats.scp").write_text("")
    other, num_pdfs = model_of_other_size(tmp_path / "other")
    exp = tmp_path / "exp"
    result = run_script([str(REPO / "steps/nnet/train.sh"), "--trans-mdl", str(other / "final.mdl"),
                         str(targets), str(data), str(data), str(exp)])
    assert result.returncode == 1
    assert (f"{targets}/num_pdfs has 11 pdfs but {other}/final.mdl has {num_pdfs}"
            in result.stderr)
    assert not exp.exists()


def test_nnet_decode_refuses_a_network_of_other_pdfs(graph, tmp_path):
    exp = tmp_path / "exp"
    exp.mkdir()
    checkpoint.save({"num_pdfs": 20}, str(exp / "final.pt"))
    for name in ("final.mdl", "tree"):
        os.symlink(MONO / name, exp / name)
    data = tmp_path / "data"
    data.mkdir()
    (data / "feats.scp").write_text("")
    result = run_script([str(REPO / "steps/nnet/decode.sh"), str(graph), str(data),
                         str(exp / "decode")])
    assert result.returncode == 1
    assert f"{exp}/final.pt has 20 pdfs but {exp}/final.mdl has 11" in result.stderr
    assert not (exp / "decode").exists()


@pytest.mark.parametrize("damage", ["no cmvn.scp", "a speaker missing from cmvn.scp"])
def test_nnet_decode_refuses_data_without_the_cmvn_stats_its_network_reads(graph, tmp_path,
                                                                          damage):
    exp = tmp_path / "exp"
    exp.mkdir()
    checkpoint.save({"num_pdfs": 11, "pipeline": {"cmvn": "speaker", "norm_vars": True,
                                                  "stack": 3, "splice": 2}}, str(exp / "final.pt"))
    for name in ("final.mdl", "tree"):
        os.symlink(MONO / name, exp / name)
    data = make_data_dir(tmp_path / "data", {"spkA": 2, "spkB": 1}, feats=True, cmvn=True)
    if damage == "no cmvn.scp":
        (data / "cmvn.scp").unlink()
        expected = (f"Error: expected file {data}/cmvn.scp to exist: {exp}/final.pt normalizes "
                    "its features per speaker")
    else:
        write_lines(data / "cmvn.scp", ["spkA /feats/cmvn.ark:0"])
        expected = (f"Error: {data}/cmvn.scp has no stats for 1 of the 2 speakers of "
                    f"{data}/utt2spk (spkB); expected one line per speaker")
    before = snapshot(data)
    result = run_script([str(REPO / "steps/nnet/decode.sh"), str(graph), str(data),
                         str(exp / "decode")])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and errors[0].startswith(expected), result.stderr
    assert snapshot(data) == before and not (exp / "decode").exists()


def test_decode_sh_refuses_a_graph_of_other_pdfs(graph, tmp_path):
    other, num_pdfs = model_of_other_size(tmp_path / "other")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("feats.scp", "cmvn.scp"):
        (data / name).write_text("")
    result = run_script([str(REPO / "steps/decode.sh"), str(graph), str(data),
                         str(other / "decode")])
    assert result.returncode == 1
    assert f"{other}/final.mdl has {num_pdfs} pdfs but {graph}/num_pdfs has 11" in result.stderr
    assert not (other / "decode").exists()


# -- item 2: the graph's tree -----------------------------------------------------------------

def test_graph_records_its_tree_and_decoders_refuse_another(graph, tmp_path):
    assert len((graph / "tree.sha256").read_text().split()[0]) == 64
    exp = permuted_tree_model(tmp_path / "exp")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("feats.scp", "cmvn.scp"):
        (data / name).write_text("")
    result = run_script([str(REPO / "steps/decode.sh"), str(graph), str(data),
                         str(exp / "decode")])
    assert result.returncode == 1
    assert (f"{graph}/HCLG.fst was built with another tree than {exp}/tree" in result.stderr)
    assert not (exp / "decode").exists()


def test_mkgraph_refuses_a_tree_that_is_not_the_models(tmp_path):
    other = permuted_tree_model(tmp_path / "other")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    os.symlink(MONO / "final.mdl", mixed / "final.mdl")
    os.symlink(other / "tree", mixed / "tree")
    result = run_script(["mkgraph.sh", str(LANG), str(mixed), str(tmp_path / "g")])
    assert result.returncode == 1
    assert f"{mixed}/tree is not the tree of {mixed}/final.mdl" in result.stderr
    assert not (tmp_path / "g" / "HCLG.fst").exists()


# -- item 3: alignments and their model -------------------------------------------------------

def frames_of_alignments(tmp_path):
    """A data dir whose utt2num_frames are the yesno alignments' own lengths."""
    data = tmp_path / "data"
    data.mkdir()
    lengths = {u: len(a) for u, a in iter_alignment_file(MONO / "ali.1.gz")}
    (data / "utt2num_frames").write_text("".join(f"{u} {n}\n" for u, n in sorted(lengths.items())))
    return data


def test_alignments_read_through_another_model_are_refused(tmp_path):
    """yesno's transition ids 1..30 all exist in a 62-pdf toy model: without the check they
    became targets over its first pdfs only."""
    other, num_pdfs = model_of_other_size(tmp_path / "other")
    ali = tmp_path / "ali"
    ali.mkdir()
    os.symlink(MONO / "ali.1.gz", ali / "ali.1.gz")
    shutil.copy(other / "final.mdl", ali / "final.mdl")
    data = frames_of_alignments(tmp_path)
    with pytest.raises(TargetsError, match=rf"\d+ of the {num_pdfs} pdfs of {ali}/final.mdl "
                                           r"\(\d+\.\d%\) get no target frame, more than the "
                                           r"allowed 50%"):
        make_targets(ali, data, tmp_path / "targets", 1)
    assert not (tmp_path / "targets").exists()
    result = run_script([str(REPO / "steps/nnet/make_targets.sh"), "--max-unseen-pdfs", "1",
                         "--frame-subsampling-factor", "1", str(ali), str(data),
                         str(tmp_path / "t2")], cwd=REPO)
    assert result.returncode == 0, result.stderr  # the threshold is an option


def test_alignment_dir_whose_tree_is_not_its_model(tmp_path):
    other = permuted_tree_model(tmp_path / "other")
    ali = tmp_path / "ali"
    ali.mkdir()
    os.symlink(MONO / "ali.1.gz", ali / "ali.1.gz")
    os.symlink(MONO / "final.mdl", ali / "final.mdl")
    os.symlink(other / "tree", ali / "tree")
    data = frames_of_alignments(tmp_path)
    result = run_script([str(REPO / "steps/nnet/make_targets.sh"), str(ali), str(data),
                         str(tmp_path / "targets")], cwd=REPO)
    assert result.returncode == 1
    assert f"{ali}/tree is not the tree of {ali}/final.mdl" in result.stderr
    assert not (tmp_path / "targets").exists()
    with pytest.raises(TargetsError, match="is not the tree of"):
        make_targets(ali, data, tmp_path / "targets", 1)


# -- tracebacks that are now one line ---------------------------------------------------------

def test_mkgraph_with_a_lang_of_another_phone_set(tmp_path):
    lang = make_lang(str(tmp_path / "lang"), {"A": ["a1", "a2"], "B": ["b1"]},
                     "0 1 {A} {A}\n1 0 {B} {B}\n1")
    result = run_script(["mkgraph.sh", lang.lang_dir, str(MONO), str(tmp_path / "g")])
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert (f"{lang.lang_dir}/phones.txt:5: phone 4 (b1) has no HMM in {MONO}/final.mdl"
            in result.stderr)
    assert not (tmp_path / "g" / "HCLG.fst").exists()


def test_truncated_graph_is_named_and_leaves_nothing(graph, tmp_path):
    hclg = tmp_path / "HCLG.fst"
    hclg.write_bytes((graph / "HCLG.fst").read_bytes()[:600])
    kaldiio.save_ark(str(tmp_path / "ll.ark"), {"u1": np.zeros((20, 11), np.float32)})
    result = run_script(["emasr", "decode-loglikes", str(MONO / "final.mdl"), str(hclg),
                         f"ark:{tmp_path}/ll.ark", str(tmp_path / "out" / "lat.1.gz")])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{hclg}: OpenFst could not read this FST: damaged or truncated" in result.stderr
    assert no_outputs(tmp_path / "out")


# -- leftovers of a failed decode -------------------------------------------------------------

def test_failed_decode_leaves_no_empty_lattices_or_hypotheses(graph, tmp_path):
    out = tmp_path / "decode"
    out.mkdir()
    (out / "lat.1.gz").write_bytes(gzip.compress(b""))  # an earlier run's: not this job's result
    kaldiio.save_ark(str(tmp_path / "ll.ark"), {"u1": np.zeros((20, 5), np.float32),
                                                "u2": np.full((20, 11), np.nan, np.float32)})
    result = run_script(["emasr", "decode-loglikes", str(MONO / "final.mdl"),
                         str(graph / "HCLG.fst"), f"ark:{tmp_path}/ll.ark", str(out / "lat.1.gz")])
    assert result.returncode == 1 and "no utterance was decoded" in result.stderr
    assert sorted(os.listdir(out)) == []
