"""Decoding core: HCLG for a toy lexicon and grammar, oracle log-likelihoods decoded back to the
sentence, a sentence the grammar forbids never produced, lattices on disk, bad input."""
from __future__ import annotations

import gzip
import logging
import re
import struct

import kaldiio
import numpy as np
import pytest
from click.testing import CliRunner

from decode_toylang import (GRAMMAR, LEXICON, SENTENCES, make_lang, monophone_model,
                            oracle_loglikes, pdf_sequence)
from emasr.cli import main
from emasr.decode.cli import decode_job
from emasr.decode.decoder import DECODERS, DecodeConfig, DecodeError, UtteranceDecoder
from emasr.kaldi.fst import read_fst
from emasr.decode.graph import make_graph
from emasr.decode.lattice_best import best_paths
from emasr.kaldi.lattice_io import LatticeArchiveWriter, read_lattices, to_kaldifst
from emasr.kaldi.openfst_binary import CONST_STATE, FstFormatError, peek_fst_type, read_header
from emasr.fst_stack import kaldi_hmm_gmm, kaldifst

ALLOWED = set(SENTENCES)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    lang = make_lang(str(root / "lang"), LEXICON, GRAMMAR)
    trans_model, ctx_dep = monophone_model(lang.lang_dir)
    stats = make_graph(lang.lang_dir, str(root / "graph"), trans_model, ctx_dep)
    return lang, trans_model, root / "graph", stats


def sentence_loglikes(lang, trans_model, sentence: str, seed: int = 0) -> np.ndarray:
    phones = [lang.phones["SIL"]]
    for word in sentence.split():
        phones += [lang.phones[p] for p in LEXICON[word]]
    phones.append(lang.phones["SIL"])
    pdfs = pdf_sequence(trans_model, phones, frames_per_state=3)
    return oracle_loglikes(pdfs, trans_model.num_pdfs, seed=seed, noise=1.0, margin=6.0)


def words_of(lang, ids):
    names = {i: w for w, i in lang.words.items()}
    return " ".join(names[i] for i in ids)


def test_graph_files_and_cache(toy, caplog):
    lang, trans_model, graph, stats = toy
    for name in ("HCLG.fst", "words.txt", "phones.txt", "num_pdfs", "disambig_tid.int", "ilabels",
                 "phones/disambig.int"):
        assert (graph / name).is_file(), name
    assert int((graph / "num_pdfs").read_text()) == trans_model.num_pdfs == stats.num_pdfs
    assert stats.num_states > 10 and stats.num_arcs > stats.num_states
    # The second build reuses LG and CLG; a changed G.fst invalidates them.
    with caplog.at_level(logging.INFO):
        make_graph(lang.lang_dir, str(graph), *monophone_model(lang.lang_dir))
    assert sum("reusing" in r.getMessage() for r in caplog.records) == 2
    caplog.clear()
    other = make_lang(lang.lang_dir + "_b", LEXICON, GRAMMAR.replace("0.7", "0.2"))
    with caplog.at_level(logging.INFO):
        make_graph(other.lang_dir, str(graph) + "_b", *monophone_model(other.lang_dir))
    assert not any("reusing" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("decoder", DECODERS)
def test_oracle_loglikes_decode_to_the_sentence(toy, decoder):
    lang, trans_model, graph, _ = toy
    dec = UtteranceDecoder(read_fst(graph / "HCLG.fst"), trans_model, DecodeConfig(decoder=decoder))
    for seed, sentence in enumerate(sorted(ALLOWED)):
        hyp = dec.decode(f"u{seed}", sentence_loglikes(lang, trans_model, sentence, seed))
        assert words_of(lang, hyp.words) == sentence
        assert hyp.reached_final and np.isfinite(hyp.graph_cost)
        assert len(hyp.alignment) == hyp.num_frames


@pytest.mark.parametrize("decoder", DECODERS)
def test_forbidden_sentence_is_never_produced(toy, decoder):
    lang, trans_model, graph, _ = toy
    dec = UtteranceDecoder(read_fst(graph / "HCLG.fst"), trans_model, DecodeConfig(decoder=decoder))
    for seed in range(3):
        hyp = dec.decode("bad", sentence_loglikes(lang, trans_model, "A C D", seed))
        assert words_of(lang, hyp.words) in ALLOWED


def padded_to_16(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 16)


def aligned_const_fst(unaligned: bytes) -> bytes:
    """The same ConstFst written with OpenFst's --fst_align: flag 4 in the header, the states and
    the arcs arrays each padded to start at a multiple of 16 bytes."""
    header, pos = read_header(unaligned, 0, "const")
    states_end = pos + header.num_states * CONST_STATE.itemsize
    flags_at = pos - struct.calcsize("<iQqqq")
    head = unaligned[:flags_at] + struct.pack("<i", header.flags | 4) + unaligned[flags_at + 4:pos]
    return padded_to_16(padded_to_16(head) + unaligned[pos:states_end]) + unaligned[states_end:]


def test_a_const_graph_as_kaldis_mkgraph_writes_it_reads_and_decodes(toy, tmp_path):
    """Kaldi's mkgraph.sh leaves a ConstFst HCLG.fst (fstconvert --fst_type=const), a type the
    kaldifst wheel cannot read: read_fst re-lays it out as the same vector FST."""
    lang, trans_model, graph, _ = toy
    vector = read_fst(graph / "HCLG.fst")
    const_path = tmp_path / "HCLG.const.fst"
    assert kaldifst.StdConstFst(vector).write(str(const_path))
    assert peek_fst_type(str(const_path)) == "const"
    assert read_fst(const_path).to_str() == vector.to_str()
    aligned_path = tmp_path / "HCLG.aligned.fst"
    aligned_path.write_bytes(aligned_const_fst(const_path.read_bytes()))
    assert read_fst(aligned_path).to_str() == vector.to_str()
    dec = UtteranceDecoder(read_fst(const_path), trans_model, DecodeConfig())
    hyp = dec.decode("u", sentence_loglikes(lang, trans_model, "A B C"))
    assert words_of(lang, hyp.words) == "A B C"
    # Damaged files are named, with what is wrong.
    (tmp_path / "cut.fst").write_bytes(const_path.read_bytes()[:-20])
    with pytest.raises(FstFormatError, match=r"cut\.fst: truncated"):
        read_fst(tmp_path / "cut.fst")
    assert kaldifst.StdConstFst(kaldifst.StdVectorFst()).write(str(tmp_path / "empty.fst"))
    assert read_fst(tmp_path / "empty.fst").num_states == 0
    (tmp_path / "text.fst").write_text("0 1 2 2\n1\n")
    with pytest.raises(FstFormatError, match=r"text\.fst: not an OpenFst binary FST"):
        read_fst(tmp_path / "text.fst")


def lattice_labels_and_weights(lattice) -> list:
    """The lattice's arcs and final weights without state numbers (numbering may differ)."""
    return sorted(line.split()[2:] if len(line.split()) > 2 else line.split()[1:]
                  for line in lattice.to_str().splitlines())


@pytest.mark.parametrize("decoder", DECODERS)
def test_the_prune_interval_does_not_change_the_lattice(toy, decoder):
    """Pruning passes every frame or only at the end drop the same tokens (Kaldi's design): the
    option trades memory for speed, the lattice stays the same."""
    lang, trans_model, graph, _ = toy
    hclg = read_fst(graph / "HCLG.fst")
    often, never = (UtteranceDecoder(hclg, trans_model, DecodeConfig(
        decoder=decoder, lattice_beam=20.0, prune_interval=interval)) for interval in (1, 100000))
    if decoder == "lattice-faster":
        assert often._decoder.config.prune_interval == 1
    loglikes = sentence_loglikes(lang, trans_model, "B C D", seed=3)
    a, b = often.decode("u", loglikes), never.decode("u", loglikes)
    assert a.lattice.num_states == b.lattice.num_states > a.num_frames
    assert lattice_labels_and_weights(a.lattice) == lattice_labels_and_weights(b.lattice)


def test_lattice_on_disk_keeps_costs_apart(toy, tmp_path):
    lang, trans_model, graph, _ = toy
    config = DecodeConfig(acwt=0.1)
    dec = UtteranceDecoder(read_fst(graph / "HCLG.fst"), trans_model, config)
    loglikes = sentence_loglikes(lang, trans_model, "B C D", seed=5)
    hyp = dec.decode("utt1", loglikes)
    with LatticeArchiveWriter(str(tmp_path / "lat.1.gz")) as writer:
        writer.write("utt1", hyp.lattice)
    # Kaldi's binary archive entry: key, space, \0B, OpenFst header of a vector FST of lattice4.
    raw = gzip.open(tmp_path / "lat.1.gz", "rb").read()
    assert raw.startswith(b"utt1 \0B" + (2125659606).to_bytes(4, "little") + b"\x06\0\0\0vector")
    assert raw[21:33] == b"\x08\0\0\0lattice4"
    [(utt, arcs)] = list(read_lattices(str(tmp_path / "lat.1.gz")))
    assert utt == "utt1" and len(arcs.src) > hyp.num_frames  # more than one path
    assert to_kaldifst(arcs).to_str() == hyp.lattice.to_str()  # read back exactly
    # LM weight 1/acwt is the decoding scale: the same words. The acoustic costs are unscaled:
    # the best path's acoustic cost is minus the sum of the chosen log-likelihoods.
    best = best_paths(arcs, [1 / config.acwt, 1000.0], [0.0])
    assert words_of(lang, best[(1 / config.acwt, 0.0)]) == "B C D"
    pdfs = dec.tid_to_pdf[np.asarray(hyp.alignment) - 1]
    assert hyp.acoustic_cost == pytest.approx(-loglikes[np.arange(len(pdfs)), pdfs].sum(), rel=1e-4)


def test_bad_input_is_reported_and_the_job_continues(toy, tmp_path):
    lang, trans_model, graph, _ = toy
    good = sentence_loglikes(lang, trans_model, "A B C")
    nan = good.copy()
    nan[4, 2] = np.nan
    matrices = {"a_good": good, "b_wrong_dim": good[:, :-1], "c_nan": nan,
                "d_too_short": good[:1], "e_good": sentence_loglikes(lang, trans_model, "B C D")}
    kaldiio.save_ark(str(tmp_path / "ll.ark"), matrices, scp=str(tmp_path / "ll.scp"))
    from emasr.kaldi.model_io import KaldiModel, write_model

    write_model(str(tmp_path / "final.mdl"), KaldiModel(trans_model, None))
    log = tmp_path / "decode.log"
    result = CliRunner().invoke(main, [
        "--log-file", str(log), "decode-loglikes", "--no-allow-partial", "--word-symbol-table",
        str(graph / "words.txt"), str(tmp_path / "final.mdl"), str(graph / "HCLG.fst"),
        f"scp:{tmp_path / 'll.scp'}", str(tmp_path / "lat.1.gz")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "hyp.1.txt").read_text() == "a_good A B C\ne_good B C D\n"
    assert [u for u, _ in read_lattices(str(tmp_path / "lat.1.gz"))] == ["a_good", "e_good"]
    text = log.read_text()
    for utt in ("b_wrong_dim", "c_nan", "d_too_short"):
        assert f"utterance {utt}:" in text
    assert "decoded 2 utterances" in text
    assert "failed 3 (no-final 1, not-finite 1, wrong-dim 1)" in text
    assert re.search(r"x real time \(the decoder call \d+% of it\)", text)


def test_the_job_knows_how_much_of_its_time_the_decoder_call_took(toy, tmp_path):
    lang, trans_model, graph, _ = toy
    dec = UtteranceDecoder(read_fst(graph / "HCLG.fst"), trans_model, DecodeConfig())
    items = [(f"u{i}", sentence_loglikes(lang, trans_model, s, i)) for i, s in enumerate(SENTENCES)]
    stats = decode_job(dec, items, str(tmp_path / "lat.1.gz"), str(tmp_path / "hyp.1.txt"))
    hyps = [dec.decode(utt, x) for utt, x in items]
    assert all(0 < hyp.decoder_seconds for hyp in hyps)
    assert 0 < stats.decoder_seconds < stats.seconds


def test_decoder_rejects_bad_matrices_by_name(toy):
    lang, trans_model, graph, _ = toy
    dec = UtteranceDecoder(read_fst(graph / "HCLG.fst"), trans_model, DecodeConfig())
    with pytest.raises(DecodeError, match=r"utterance x: .*expected \[frames, \d+\]"):
        dec.decode("x", np.zeros((5, 3), dtype=np.float32))
    with pytest.raises(DecodeError, match="utterance y: .*NaN or inf .*frame 0"):
        dec.decode("y", np.full((5, trans_model.num_pdfs), -np.inf, dtype=np.float32))


@pytest.mark.parametrize("decoder", DECODERS)
def test_triphone_context_graph_decodes(toy, tmp_path, decoder):
    """A context-width-3 tree: C is a real triphone transducer; decoding still recovers the
    sentence and the grammar still rules out the forbidden one."""
    from decode_toylang import context_width_model

    lang, _, _, _ = toy
    trans_model, ctx_dep = context_width_model(lang.lang_dir)
    assert (ctx_dep.context_width, ctx_dep.central_position) == (3, 1)
    stats = make_graph(lang.lang_dir, str(tmp_path / "graph3"), trans_model, ctx_dep)
    ilabels = (tmp_path / "graph3" / "ilabels").read_text().splitlines()
    assert any(len(line.split()) == 4 for line in ilabels)  # index + a 3-phone window
    assert stats.num_states > 0
    dec = UtteranceDecoder(read_fst(tmp_path / "graph3" / "HCLG.fst"), trans_model,
                           DecodeConfig(decoder=decoder))
    for seed, sentence in enumerate(sorted(ALLOWED)):
        hyp = dec.decode("u", sentence_loglikes(lang, trans_model, sentence, seed))
        assert words_of(lang, hyp.words) == sentence
    hyp = dec.decode("bad", sentence_loglikes(lang, trans_model, "A C D", 7))
    assert words_of(lang, hyp.words) in ALLOWED


@pytest.mark.parametrize("decoder", DECODERS)
def test_lm_weight_sweep_on_the_lattice_changes_the_winner(tmp_path, decoder):
    """The lattice keeps the runner-up: with a grammar that prefers "A B C" by 8 nats and
    likelihoods that prefer "B C D" slightly, a low LM weight picks B C D, a high one A B C."""
    lang = make_lang(str(tmp_path / "lang"), LEXICON, GRAMMAR.replace(
        "0 1 {A} {A} 0.7", "0 1 {A} {A} 0.0").replace("0 4 {B} {B} 0.7", "0 4 {B} {B} 8.0"))
    trans_model, ctx_dep = monophone_model(lang.lang_dir)
    make_graph(lang.lang_dir, str(tmp_path / "graph"), trans_model, ctx_dep)
    dec = UtteranceDecoder(read_fst(tmp_path / "graph" / "HCLG.fst"), trans_model,
                           DecodeConfig(acwt=0.1, decoder=decoder))
    phones = [lang.phones[p] for p in ["SIL", "b1", "b2", "b3", "c1", "a2", "d1", "b2", "SIL"]]
    pdfs = pdf_sequence(trans_model, phones, frames_per_state=3)
    loglikes = oracle_loglikes(pdfs, trans_model.num_pdfs, seed=3, noise=0.05, margin=0.5)
    hyp = dec.decode("utt", loglikes)
    assert words_of(lang, hyp.words) == "A B C"  # at the decoding scale the grammar wins
    with LatticeArchiveWriter(str(tmp_path / "lat.1.gz")) as writer:
        writer.write("utt", hyp.lattice)
    [(_, arcs)] = list(read_lattices(str(tmp_path / "lat.1.gz")))
    best = best_paths(arcs, [1.0, 10.0], [0.0])
    assert words_of(lang, best[(1.0, 0.0)]) == "B C D"
    assert words_of(lang, best[(10.0, 0.0)]) == "A B C"


def test_lattice_faster_raw_lattice_agrees_with_the_binding_and_honours_max_active(toy):
    """The lattice read through emasr.decode.lattice_faster is that of kaldi-hmm-gmm's own
    LatticeFasterDecoder: its best path has the words of the binding's best-path decode, and a
    smaller --max-active leaves fewer paths in it."""
    lang, trans_model, graph, _ = toy
    hclg = read_fst(graph / "HCLG.fst")
    wide = UtteranceDecoder(hclg, trans_model, DecodeConfig(beam=30, lattice_beam=30))
    narrow = UtteranceDecoder(hclg, trans_model, DecodeConfig(beam=30, lattice_beam=30,
                                                              max_active=2, min_active=1))
    binding = kaldi_hmm_gmm.LatticeFasterDecoderStdVectorFst(
        hclg, kaldi_hmm_gmm.LatticeFasterDecoderConfig(beam=30, lattice_beam=30))
    for seed, sentence in enumerate(sorted(ALLOWED)):
        loglikes = sentence_loglikes(lang, trans_model, sentence, seed)
        loglikes += np.random.default_rng(seed).normal(0, 3.0, loglikes.shape)  # ambiguous
        hyp = wide.decode("u", loglikes)
        ok, _, words, _ = kaldi_hmm_gmm.decode_utterance_lattice_faster(
            binding, kaldi_hmm_gmm.DecodableCtc(wide.map_to_transition_ids(loglikes)),
            trans_model, "u", True)
        assert ok and hyp.words == list(words)
        assert narrow.decode("u", loglikes).lattice.num_states < hyp.lattice.num_states


def test_kaldi_text_lattice_archive_is_read(tmp_path):
    """Kaldi's text form (`lattice-copy ark:- ark,t:-`): two paths; the LM weight picks one."""
    (tmp_path / "lat.txt").write_text(
        "u1 \n0\t1\t5\t7\t1.5,20\n0\t2\t6\t8\t4,10\n1\t3\t5\t0\n2\t3\t6\t0\t0,1\n3\t0,0\n\n"
        "u2 \n0\t1\t3\t9\n1\n\n")
    lattices = dict(read_lattices(str(tmp_path / "lat.txt")))
    assert sorted(lattices) == ["u1", "u2"] and lattices["u1"].num_states == 4
    best = best_paths(lattices["u1"], [1.0, 10.0], [0.0])
    assert best[(1.0, 0.0)] == [8] and best[(10.0, 0.0)] == [7]
    assert best_paths(lattices["u2"], [10.0], [0.0])[(10.0, 0.0)] == [9]
