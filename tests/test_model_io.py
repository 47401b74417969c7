"""Kaldi model files: the real Kaldi yesno model read, checked against Kaldi's own numbering,
written back (binary and text), plus the newer <Tuples> format, text trees and damaged files."""
from __future__ import annotations

import numpy as np
import pytest

import kaldi_hmm_gmm

from conftest import YESNO
from emasr.kaldi import model_io
from emasr.kaldi.io import KaldiFormatError, KaldiReader
from emasr.kaldi.model_io import (KaldiModel, read_am_gmm_arrays, read_model, read_tree,
                                transition_to_pdf, write_model)
from emasr.kaldi.transitions import load_transition_table, read_transition_table

MONO = YESNO / "exp" / "mono"
# (phone, hmm_state, pdf) of every transition state, as Kaldi wrote them in the fixture: SIL (1)
# has 5 emitting states, Y (2) and N (3) have 3, each state its own pdf.
YESNO_TRIPLES = [(1, 0, 0), (1, 1, 1), (1, 2, 2), (1, 3, 3), (1, 4, 4),
                 (2, 0, 5), (2, 1, 6), (2, 2, 7), (3, 0, 8), (3, 1, 9), (3, 2, 10)]


@pytest.fixture(scope="module")
def mono() -> KaldiModel:
    return read_model(MONO / "final.mdl")


def kaldi_transition_model_from_tree():
    """Kaldi's own TransitionModel built from the fixture's tree and topology (its numbering)."""
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read((YESNO / "data" / "lang" / "topo").read_text())
    return kaldi_hmm_gmm.TransitionModel(read_tree(MONO / "tree"), topo)


def test_reads_the_real_kaldi_binary_model(mono):
    tm = mono.transition_model
    assert tm.num_pdfs == 11 and tm.num_transition_ids == 30
    assert [t.__getstate__()[:3] for t in tm.tuples] == YESNO_TRIPLES
    am = mono.am_gmm
    assert am.num_pdfs == 11 and am.dim == 39  # 13 MFCC + deltas + delta-deltas
    gauss = [am.num_gauss_in_pdf(p) for p in range(am.num_pdfs)]
    assert sum(gauss) == am.num_gauss == 371
    occs = np.array(open(MONO / "final.occs").read().split()[1:-1], dtype=float)
    assert len(occs) == am.num_pdfs
    # The least occupied pdf (31 frames) cannot afford more than one Gaussian in Kaldi's mixing up.
    assert gauss[int(np.argmin(occs))] == 1 == min(gauss)
    for pdf in range(am.num_pdfs):
        assert np.isclose(np.sum(am.get_pdf(pdf).weights), 1.0, atol=1e-5)


def test_transition_ids_agree_with_kaldis_own_numbering(mono):
    reference = kaldi_transition_model_from_tree()
    assert [t.__getstate__() for t in reference.tuples] == \
           [t.__getstate__() for t in mono.transition_model.tuples]
    table = load_transition_table(MONO / "final.mdl")  # pure Python, no bindings
    expected = np.array(reference.transition_id_to_pdf_array(), dtype=np.int32)
    assert np.array_equal(table.id2pdf[1:], expected[1:])
    assert np.array_equal(transition_to_pdf(mono)[1:], expected[1:])
    assert transition_to_pdf(mono)[0] == -1
    for tid in range(1, table.num_transition_ids + 1):
        assert table.self_loop[tid] == mono.transition_model.is_self_loop(tid)
        assert table.final[tid] == mono.transition_model.is_final(tid)
        assert table.id2phone[tid] == mono.transition_model.transition_id_to_phone(tid)
    assert list(mono.transition_model.state2id) == table.state2id.tolist()


def test_derived_probabilities_match_a_kaldi_built_model(mono):
    # Kaldi's own constructor computes non-self-loop log-probs from the topology's probabilities;
    # a model read from a file with those same probabilities must hold the same values.
    reference = kaldi_transition_model_from_tree()
    rebuilt = model_io.build_transition_model(model_io.transition_table(reference))
    assert list(rebuilt.non_self_loop_log_probs) == list(reference.non_self_loop_log_probs)
    assert list(rebuilt.log_probs) == list(reference.log_probs)


def _gmm_arrays(path):
    reader = KaldiReader.open(path)
    read_transition_table(reader)
    return read_am_gmm_arrays(reader)


def test_binary_write_reproduces_the_kaldi_file(mono, tmp_path):
    original = (MONO / "final.mdl").read_bytes()
    write_model(tmp_path / "final.mdl", mono, binary=True)
    written = (tmp_path / "final.mdl").read_bytes()
    assert len(written) == len(original)
    # The transition model is byte-identical; so is every GMM parameter except the gconsts, which
    # are recomputed (as Kaldi's reader does) and may differ from Kaldi's in the last bit.
    assert written[:801] == original[:801] and written[801:].startswith(b"<DIMENSION> ")
    ours, theirs = _gmm_arrays(tmp_path / "final.mdl"), _gmm_arrays(MONO / "final.mdl")
    for a, b in zip(ours, theirs):
        assert np.array_equal(a.weights, b.weights)
        assert np.array_equal(a.means_invvars, b.means_invvars)
        assert np.array_equal(a.inv_vars, b.inv_vars)
        np.testing.assert_allclose(a.gconsts, b.gconsts, rtol=1e-6)
    differing = sum(x != y for x, y in zip(written, original))
    assert differing <= 8
    # And a second round trip is exact.
    write_model(tmp_path / "again.mdl", read_model(tmp_path / "final.mdl"))
    assert (tmp_path / "again.mdl").read_bytes() == written


def test_text_round_trip_is_exact(mono, tmp_path):
    write_model(tmp_path / "final.txt", mono, binary=False)
    text = (tmp_path / "final.txt").read_text()
    assert text.startswith("<TransitionModel> \n<Topology> \n<TopologyEntry>")
    assert "<Triples> 11 \n1 0 0 \n" in text and "<DiagGMM> \n<GCONSTS>  [ " in text
    back = read_model(tmp_path / "final.txt")
    write_model(tmp_path / "from_text.mdl", back, binary=True)
    write_model(tmp_path / "from_binary.mdl", mono, binary=True)
    assert (tmp_path / "from_text.mdl").read_bytes() == (tmp_path / "from_binary.mdl").read_bytes()


def test_reads_kaldis_own_text_output(mono):
    # str() of a kaldi_hmm_gmm TransitionModel is Kaldi's text Write (6 significant digits).
    table = read_transition_table(KaldiReader(str(mono.transition_model).encode(), "kaldi text"))
    ours = model_io.transition_table(mono)
    assert table.tuples == ours.tuples
    np.testing.assert_allclose(table.log_probs, ours.log_probs, rtol=1e-5, atol=1e-6)


def test_gmm_log_likelihood_matches_numpy(mono):
    rng = np.random.default_rng(0)
    arrays = _gmm_arrays(MONO / "final.mdl")
    for pdf in (0, 1, 4, 10):
        a = arrays[pdf]
        means = a.means_invvars / a.inv_vars
        frame = (means[0] + rng.normal(size=39) / np.sqrt(a.inv_vars[0])).astype(np.float32)
        # log N(x; mu, var) per Gaussian, plus log weight, log-summed over Gaussians.
        per_gauss = (np.log(a.weights.astype(np.float64))
                     + 0.5 * np.sum(np.log(a.inv_vars), axis=1) - 0.5 * 39 * np.log(2 * np.pi)
                     - 0.5 * np.sum(a.inv_vars * (frame - means) ** 2, axis=1))
        expected = np.logaddexp.reduce(per_gauss)
        assert mono.am_gmm.log_likelihood(pdf, frame) == pytest.approx(expected, abs=2e-3)


NON_HMM_TOPO = """<Topology>
<TopologyEntry>
<ForPhones>
1 2 3
</ForPhones>
<State> 0 <ForwardPdfClass> 0 <SelfLoopPdfClass> 1 <Transition> 0 0.5 <Transition> 1 0.5 </State>
<State> 1 </State>
</TopologyEntry>
</Topology>
"""


def test_tuples_format_with_separate_self_loop_pdfs(tmp_path):
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(NON_HMM_TOPO)
    tree = kaldi_hmm_gmm.monophone_context_dependency([1, 2, 3],
                                                       topo.get_phone_to_num_pdf_classes())
    reference = kaldi_hmm_gmm.TransitionModel(tree, topo)
    for binary in (True, False):
        path = tmp_path / f"tuples_{binary}.mdl"
        write_model(path, KaldiModel(reference, None), binary=binary)
        data = path.read_bytes()
        assert b"<Tuples> " in data and b"<Triples>" not in data
        if binary:  # the -1 marker announcing separate self-loop pdf classes
            assert b"<Topology> " + b"\x04\x03\x00\x00\x00" in data
            assert b"\x04\xff\xff\xff\xff\x04\x01\x00\x00\x00" in data
        back = read_model(path)
        assert back.am_gmm is None
        assert back.transition_model.id2pdf_id == reference.id2pdf_id
        table = load_transition_table(path)
        # Self-loops emit the self-loop pdf (1, 3, 5), forward transitions the forward pdf.
        assert table.id2pdf.tolist() == [-1, 1, 0, 3, 2, 5, 4]
    assert str(back.transition_model) == str(reference)


TEXT_TREE = """ContextDependency 3 1 ToPdf SE 1 [ 1 ]
{ CE 0
SE 0 [ 2 3 ]
{ TE -1 1 ( CE 1 )
CE 2
}
}
EndContextDependency
"""


def test_text_tree_with_questions(tmp_path):
    (tmp_path / "tree").write_text(TEXT_TREE)
    tree = read_tree(tmp_path / "tree")
    assert tree.context_width == 3 and tree.central_position == 1 and tree.num_pdfs == 3
    # Centre phone 1 -> pdf 0; otherwise left context 2 or 3 -> pdf 1, else pdf 2.
    assert tree.compute([2, 1, 3], 0) == (True, 0)
    assert tree.compute([3, 2, 1], 0) == (True, 1)
    assert tree.compute([1, 3, 2], 0) == (True, 2)
    tree.write(True, str(tmp_path / "tree.bin"))
    assert read_tree(tmp_path / "tree.bin").__getstate__() == tree.__getstate__()


def test_truncated_model_names_the_file(tmp_path):
    data = (MONO / "final.mdl").read_bytes()
    (tmp_path / "cut.mdl").write_bytes(data[:5000])
    with pytest.raises(KaldiFormatError, match=r"cut\.mdl.*truncated"):
        read_model(tmp_path / "cut.mdl")
    (tmp_path / "bad.mdl").write_bytes(data.replace(b"<Triples>", b"<Triplex>"))
    with pytest.raises(KaldiFormatError, match=r"bad\.mdl: at byte \d+.*<Tuples>.*<Triplex>"):
        read_model(tmp_path / "bad.mdl")
    with pytest.raises(FileNotFoundError, match="missing.mdl"):
        read_model(tmp_path / "missing.mdl")
    (tmp_path / "tree").write_bytes((MONO / "tree").read_bytes()[:-30])
    with pytest.raises(KaldiFormatError, match="tree"):
        read_tree(tmp_path / "tree")


def test_pdf_count_mismatch_is_an_error(mono, tmp_path):
    text = model_io.model_bytes(mono, binary=False).decode()
    (tmp_path / "m.mdl").write_text(text.replace("<NUMPDFS> 11", "<NUMPDFS> 10"))
    with pytest.raises(KaldiFormatError, match="11 pdfs but the AmDiagGmm has 10"):
        read_model(tmp_path / "m.mdl")


def test_write_is_atomic(mono, tmp_path, monkeypatch):
    target = tmp_path / "final.mdl"
    target.write_bytes(b"old")

    def fail(*_args, **_kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(model_io, "model_bytes", fail)
    with pytest.raises(RuntimeError):
        write_model(target, mono)
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["final.mdl"]


def test_gmm_info_and_show_transitions():
    from click.testing import CliRunner

    from emasr.gmm.model_info import gmm_info_cli, show_transitions_cli

    result = CliRunner().invoke(gmm_info_cli, [str(MONO / "final.mdl")])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "number of phones 3", "number of pdfs 11", "number of transition-ids 30",
        "number of transition-states 11", "feature dimension 39", "number of gaussians 371"]
    result = CliRunner().invoke(show_transitions_cli, [
        str(YESNO / "data" / "lang" / "phones.txt"), str(MONO / "final.mdl"),
        str(MONO / "final.occs")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "Transition-state 1: phone = SIL hmm-state = 0 pdf = 0"
    assert lines[1].startswith(" Transition-id = 1 p = 0.7") and lines[1].endswith(
        "count of pdf = 923 [self-loop]")
    assert sum(line.startswith("Transition-state") for line in lines) == 11
    assert lines[-1].startswith(" Transition-id = 30 p = ") and "phone = N" in lines[-3]


def test_write_tree_round_trip(tmp_path):
    from emasr.kaldi.model_io import write_tree

    tree = read_tree(MONO / "tree")
    write_tree(tmp_path / "tree", tree)
    assert (tmp_path / "tree").read_bytes() == (MONO / "tree").read_bytes()
    write_tree(tmp_path / "tree.txt", tree, binary=False)
    assert (tmp_path / "tree.txt").read_text().startswith("ContextDependency 1 0 ToPdf TE 0 4 (")
    assert read_tree(tmp_path / "tree.txt").__getstate__() == tree.__getstate__()


def test_the_read_model_realigns_kaldis_training_data_as_kaldi_did(mono):
    """End to end: MFCC + CMVN + deltas of the yesno wavs, training graphs from the fixture's
    L.fst, Viterbi alignment through kaldi_hmm_gmm with the model read here: the per-frame pdfs
    agree with Kaldi's own alignments (Kaldi dithered its features, so not to the last frame)."""
    import kaldi_native_fbank as knf

    from emasr import fst_stack  # noqa: F401  (kaldi_hmm_gmm before kaldifst)
    import kaldifst
    from emasr.kaldi.alignments import iter_alignment_file
    from emasr.feats.cmvn import apply_cmvn, cmvn_stats
    from emasr.feats.deltas import add_deltas
    from emasr.feats.framing import extract_all_frames
    from emasr.feats.kaldi_options import mfcc_options, read_kaldi_config
    from emasr.feats.wav import read_wav_spec

    lang = YESNO / "data" / "lang"
    options = mfcc_options(read_kaldi_config(YESNO / "conf" / "mfcc.conf"))
    options.frame_opts.dither = 0.0
    feats = {}
    for line in (YESNO / "data" / "train_yesno" / "wav.scp").read_text().splitlines():
        utt, rel = line.split()
        audio = read_wav_spec(str(YESNO / rel))
        feats[utt] = extract_all_frames(knf.OnlineMfcc(options), audio.rate, audio.samples)
    stats = sum(cmvn_stats(f) for f in feats.values())  # one speaker
    graph_options = kaldi_hmm_gmm.TrainingGraphCompilerOptions()
    graph_options.self_loop_scale = 0.1
    # The compiler keeps references to the tree and L: they must outlive it.
    tree = read_tree(MONO / "tree")
    lexicon = kaldifst.StdVectorFst.read(str(lang / "L.fst"))
    compiler = kaldi_hmm_gmm.TrainingGraphCompiler(
        mono.transition_model, tree, lexicon,
        [int(x) for x in (lang / "phones" / "disambig.int").read_text().split()], graph_options)
    words = dict(line.split()[::-1] for line in (lang / "words.txt").read_text().splitlines())
    words = {w: int(i) for i, w in words.items()}
    texts = dict(line.split(None, 1) for line in
                 (YESNO / "data" / "train_yesno" / "text").read_text().splitlines())
    tid2pdf = transition_to_pdf(mono)
    agree = total = 0
    for utt, kaldi_ali in iter_alignment_file(MONO / "ali.1.gz"):
        graph = compiler.compile_graph_from_text([words[w] for w in texts[utt].split()])
        x = add_deltas(apply_cmvn(feats[utt], stats)).astype(np.float32)
        decodable = kaldi_hmm_gmm.DecodableAmDiagGmmScaled(mono.am_gmm, mono.transition_model,
                                                           x, 0.1)
        result = kaldi_hmm_gmm.align_utterance_wrapper(
            kaldi_hmm_gmm.AlignConfig(beam=10, retry_beam=40), utt, 0.1, graph, decodable,
            0, 0, 0, 0.0, 0)
        ours = np.array(result[5])
        assert len(ours) == len(kaldi_ali) == len(x)
        agree += int(np.sum(tid2pdf[ours] == tid2pdf[kaldi_ali]))
        total += len(ours)
    assert agree / total > 0.995
