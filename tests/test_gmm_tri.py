"""Triphone building blocks on the real Kaldi yesno system: tree statistics from Kaldi's own
monophone alignments, a tree, a model initialized from it, the alignments converted to it, and a
Viterbi realignment through triphone training graphs."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from emasr.kaldi.alignments import iter_alignment_file
from emasr.gmm.accumulate import GmmStats, accumulate_utterance
from emasr.gmm.align import gmm_align_cli
from emasr.gmm.build_tree import TreeConfig, build_tree, load_roots
from emasr.gmm.estimate import update_model
from emasr.gmm.features import FeatureOptions, iter_features
from emasr.kaldi.model_io import read_model, transition_table, write_model, write_tree
from emasr.gmm.questions import make_questions
from emasr.gmm.training_graphs import LangDir
from emasr.gmm.tree_stats import accumulate_tree_stats
from emasr.ali.convert import AlignmentConverter
from emasr.gmm.tri import init_model
from gmm_helpers import LANG, MONO, write_data_dir, yesno_mfcc_feats, yesno_texts


@pytest.fixture(scope="module")
def yesno_mfcc(tmp_path_factory):
    return write_data_dir(tmp_path_factory.mktemp("train_yesno"), yesno_mfcc_feats(),
                          yesno_texts())


@pytest.fixture(scope="module")
def tri_system(yesno_mfcc, tmp_path_factory):
    out = tmp_path_factory.mktemp("tri")
    stats = accumulate_tree_stats(str(MONO / "final.mdl"), str(yesno_mfcc), str(MONO / "ali.1.gz"),
                                  FeatureOptions(), {1}, 0.0)
    lang = LangDir.load(LANG)
    roots = load_roots(LANG / "phones" / "roots.int", lang.topology)
    questions = make_questions(stats, lang.phone_sets("sets.int"),
                               lang.phone_sets("extra_questions.int"), [1])
    tree, num_pdfs = build_tree(stats, roots, questions, TreeConfig(max_leaves=20, thresh=100))
    model, occs = init_model(tree, lang.topology, stats)
    write_tree(out / "tree", tree)
    write_model(out / "1.mdl", model)
    return out, stats, tree, model, occs


def test_tree_stats_cover_every_frame_with_silence_context_free(tri_system):
    _, stats, _, _, _ = tri_system
    assert stats.count.sum() == 18996  # every frame of Kaldi's 31 training alignments
    assert stats.x.shape[1] == 39
    pdf_class, left, centre, right = stats.events.T
    assert set(centre) == {1, 2, 3}
    assert np.all(left[centre == 1] == 0) and np.all(right[centre == 1] == 0)
    # Y and N are always between silences or other words in yesno.
    assert set(left[centre == 2]) <= {1, 2, 3} and set(pdf_class[centre == 1]) == set(range(5))


def test_triphone_tree_and_model(tri_system):
    _, stats, tree, model, occs = tri_system
    assert tree.context_width == 3 and tree.central_position == 1
    assert 11 < tree.num_pdfs <= 20  # more than the 11 monophone pdfs, at most the budget
    assert model.am_gmm.num_pdfs == tree.num_pdfs == model.transition_model.num_pdfs
    assert occs.sum() == pytest.approx(18996)
    assert np.all(occs > 0)


def test_converted_alignments_keep_the_state_sequence(tri_system):
    _, _, tree, model, _ = tri_system
    old = transition_table(read_model(MONO / "final.mdl"))
    new = transition_table(model)
    converter = AlignmentConverter(old, new, tree)
    for utt, ali in list(iter_alignment_file(MONO / "ali.1.gz"))[:5]:
        converted = converter.convert(ali)
        assert len(converted) == len(ali)
        old_states = [old.tuples[s - 1] for s in old.id2state[ali]]
        new_states = [new.tuples[s - 1] for s in new.id2state[converted]]
        assert [(t.phone, t.hmm_state) for t in old_states] == \
               [(t.phone, t.hmm_state) for t in new_states]
        assert np.array_equal(old.self_loop[ali], new.self_loop[converted])
        # The pdfs are the tree's for the phone in its context.
        starts = np.flatnonzero(new.phone_starts(converted))
        phones = new.id2phone[converted[starts]]
        left = 0 if len(phones) < 2 else phones[0]
        ok, pdf = tree.compute([left, phones[1], phones[2] if len(phones) > 2 else 0],
                               new.topology.entry_for(phones[1])[new_states[starts[1]].hmm_state]
                               .forward_pdf_class)
        assert ok and new.id2pdf[converted[starts[1]]] == pdf


def test_one_training_pass_and_a_triphone_realignment(tri_system, yesno_mfcc):
    out, _, tree, model, _ = tri_system
    converter = AlignmentConverter(transition_table(read_model(MONO / "final.mdl")),
                                   transition_table(model), tree)
    alignments = {u: converter.convert(a) for u, a in iter_alignment_file(MONO / "ali.1.gz")}
    tid2pdf = np.asarray(model.transition_model.id2pdf_id)
    stats = GmmStats.zeros(model)
    for utt, feats, _ in iter_features(str(yesno_mfcc), FeatureOptions()):
        accumulate_utterance(model, stats, feats, tid2pdf[alignments[utt]], alignments[utt])
    before = stats.log_like / stats.frames
    update_model(model, stats, mix_up=60)
    write_model(out / "2.mdl", model)
    result = CliRunner().invoke(gmm_align_cli, [str(out / "2.mdl"), str(out / "tree"), str(LANG),
                                                str(yesno_mfcc), str(out / "ali.1.gz")])
    assert result.exit_code == 0, result.output
    realigned = dict(iter_alignment_file(out / "ali.1.gz"))
    assert set(realigned) == set(alignments)
    table = transition_table(model)
    frames = sum(len(a) for a in realigned.values())
    agree = sum(np.sum(table.id2phone[realigned[u]] == table.id2phone[alignments[u]])
                for u in realigned)
    assert agree / frames > 0.95
    likes = []
    for _ in range(3):  # EM passes on the new alignments: the likelihood must not decrease
        stats = GmmStats.zeros(model)
        for utt, feats, _ in iter_features(str(yesno_mfcc), FeatureOptions()):
            accumulate_utterance(model, stats, feats, tid2pdf[realigned[utt]], realigned[utt])
        likes.append(stats.log_like / stats.frames)
        update_model(model, stats)
    assert likes[0] > before and likes == sorted(likes) and likes[-1] > likes[0] + 0.1
