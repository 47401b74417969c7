"""The decision-tree builder on synthetic statistics where the right tree is known, and its output
as a Kaldi tree file that kaldi-hmm-gmm loads and evaluates."""
from __future__ import annotations

import numpy as np
import pytest

import kaldi_hmm_gmm

from emasr.gmm.build_tree import Root, TreeBuilder, TreeConfig, build_tree, load_roots
from emasr.gmm.gauss_objf import gauss_objf
from emasr.kaldi.model_io import read_tree, write_tree
from emasr.gmm.questions import cluster_phone_sets, make_questions
from emasr.gmm.tree_stats import TreeStats

DIM = 4
# Phones 1..6. Phone 3's frames depend on its LEFT phone: after 1 or 2 the mean of dimension 0
# is +3, after 4, 5 or 6 it is -3. The right phone has no effect. Pdf classes 0, 1, 2 differ.
LEFT_EFFECT = {1: 3.0, 2: 3.0, 4: -3.0, 5: -3.0, 6: -3.0}
CLASS_MEANS = {0: 0.0, 1: 10.0, 2: 20.0}
QUESTIONS = [[1, 2], [4, 5, 6], [1, 4], [2, 5, 6], [1, 2, 3, 4, 5, 6], [3]]
TOPO = """<Topology>
<TopologyEntry>
<ForPhones>
1 2 3 4 5 6
</ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.5 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.5 <Transition> 2 0.5 </State>
<State> 2 <PdfClass> 2 <Transition> 2 0.5 <Transition> 3 0.5 </State>
<State> 3 </State>
</TopologyEntry>
</Topology>
"""


def event_stats(events: list[tuple[int, int, int, int]], mean_of, frames=200, seed=0
                ) -> TreeStats:
    """Stats of `frames` Gaussian frames (unit variance) per event, mean from mean_of(event)."""
    rng = np.random.default_rng(seed)
    count, xs, x2s = [], [], []
    for event in events:
        x = rng.normal(size=(frames, DIM))
        x[:, 0] += mean_of(event)
        count.append(frames)
        xs.append(x.sum(axis=0))
        x2s.append(np.square(x).sum(axis=0))
    return TreeStats(np.array(events, dtype=np.int32), np.array(count, dtype=float),
                     np.array(xs), np.array(x2s))


def phone3_stats(seed=0) -> TreeStats:
    events = [(c, left, 3, right) for c in range(3) for left in LEFT_EFFECT for right in (1, 4)]
    return event_stats(events, lambda e: CLASS_MEANS[e[0]] + LEFT_EFFECT[e[1]], seed=seed)


def pdf(tree, left, centre, right, pdf_class):
    ok, value = tree.compute([left, centre, right], pdf_class)
    assert ok
    return value


def test_objective_of_one_gaussian():
    x = np.array([[1.0, 2.0], [3.0, 6.0]])
    objf = gauss_objf(np.array(2.0), x.sum(axis=0), np.square(x).sum(axis=0))
    var = x.var(axis=0)
    expected = np.sum(-0.5 * np.log(2 * np.pi * var) - 0.5) * 2
    assert objf == pytest.approx(expected)
    assert gauss_objf(np.array(0.0), np.zeros(2), np.zeros(2)) == 0.0


def test_tree_finds_the_left_context_split():
    root = Root((3,), shared=True, split=True, num_pdf_classes=3)
    tree, num_pdfs = build_tree(phone3_stats(), [root], QUESTIONS,
                                TreeConfig(max_leaves=100, thresh=50.0, min_count=10.0,
                                           cluster_thresh=0.0))
    # 3 pdf classes x 2 left-context groups: exactly 6 leaves, no split on the right phone.
    assert num_pdfs == 6 and tree.num_pdfs == 6
    for c in range(3):
        assert pdf(tree, 1, 3, 1, c) == pdf(tree, 2, 3, 4, c) == pdf(tree, 2, 3, 0, c)
        assert pdf(tree, 4, 3, 1, c) == pdf(tree, 5, 3, 4, c) == pdf(tree, 6, 3, 1, c)
        assert pdf(tree, 1, 3, 1, c) != pdf(tree, 4, 3, 1, c)
    assert len({pdf(tree, 1, 3, 1, c) for c in range(3)}) == 3
    assert tree.context_width == 3 and tree.central_position == 1


def test_leaf_budget_threshold_and_min_count():
    root = Root((3,), shared=True, split=True, num_pdf_classes=3)
    stats = phone3_stats()
    # The pdf classes differ far more than the contexts: a budget of 3 leaves splits them only.
    tree, num_pdfs = build_tree(stats, [root], QUESTIONS, TreeConfig(3, 50.0, 10.0, 0.0))
    assert num_pdfs == 3
    assert all(pdf(tree, 1, 3, 1, c) == pdf(tree, 4, 3, 1, c) for c in range(3))
    # A huge gain threshold: no split at all.
    _, num_pdfs = build_tree(stats, [root], QUESTIONS, TreeConfig(100, 1e9, 10.0, 0.0))
    assert num_pdfs == 1
    # Every side needs more frames than the context groups have (2400 per left group of
    # phone 3 over all classes, 800 per class and group): only pdf-class splits remain.
    _, num_pdfs = build_tree(stats, [root], QUESTIONS, TreeConfig(100, 50.0, 1000.0, 0.0))
    assert num_pdfs == 3


def test_merging_leaves_with_the_smallest_loss():
    # Not-shared root: one tree per pdf class, so classes 0 and 2 start apart even when equal.
    root = Root((3,), shared=False, split=True, num_pdf_classes=3)
    events = [(c, left, 3, 1) for c in range(3) for left in (1, 4)]
    stats = event_stats(events, lambda e: 0.0 if e[0] != 1 else 10.0, frames=400)
    _, apart = build_tree(stats, [root], QUESTIONS, TreeConfig(100, 50.0, 10.0, 0.0))
    assert apart == 3
    tree, merged = build_tree(stats, [root], QUESTIONS, TreeConfig(100, 50.0, 10.0, 100.0))
    assert merged == 2
    assert pdf(tree, 1, 3, 1, 0) == pdf(tree, 1, 3, 1, 2) != pdf(tree, 1, 3, 1, 1)


def test_shared_root_may_split_on_the_centre_phone(tmp_path):
    # Phones 3 and 4 share a root (like two tones of one final); they differ in their mean.
    events = [(c, left, centre, 1) for c in range(3) for left in (1, 2) for centre in (3, 4)]
    stats = event_stats(events, lambda e: CLASS_MEANS[e[0]] + (5.0 if e[2] == 4 else 0.0))
    roots = [Root((1,), True, True, 3), Root((2,), True, True, 3), Root((3, 4), True, True, 3),
             Root((5, 6), True, True, 3)]
    tree, num_pdfs = build_tree(stats, roots, QUESTIONS + [[4]], TreeConfig(100, 50.0, 10.0, 0.0))
    # Roots 1, 2 and 5-6 have no data: one leaf each. Root 3-4: 3 classes x 2 centre phones.
    assert num_pdfs == 3 + 6
    assert pdf(tree, 1, 3, 1, 0) != pdf(tree, 1, 4, 1, 0)
    assert pdf(tree, 1, 5, 1, 0) == pdf(tree, 2, 6, 3, 2)
    # A real Kaldi tree file: written, read back, and usable by Kaldi's TransitionModel.
    write_tree(tmp_path / "tree", tree)
    back = read_tree(tmp_path / "tree")
    assert back.num_pdfs == num_pdfs and pdf(back, 1, 4, 1, 2) == pdf(tree, 1, 4, 1, 2)
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(TOPO)
    model = kaldi_hmm_gmm.TransitionModel(back, topo)
    assert model.num_pdfs == num_pdfs


def test_roots_file_and_clustering_questions(tmp_path):
    (tmp_path / "roots.int").write_text("shared split 1 2\nnot-shared not-split 3\n")
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(TOPO.replace("1 2 3 4 5 6", "1 2 3"))
    roots = load_roots(tmp_path / "roots.int", topo)
    assert roots == [Root((1, 2), True, True, 3), Root((3,), False, False, 3)]
    builder = TreeBuilder(phone3_stats(), roots, QUESTIONS, TreeConfig())
    assert builder.keys_for(roots[1]) == []
    # Top-down clustering separates the two groups of phone sets with different means.
    count = np.full(4, 100.0)
    means = np.array([0.0, 0.2, 8.0, 8.3])
    x = np.zeros((4, DIM))
    x[:, 0] = means * count
    x2 = np.ones((4, DIM)) * count[:, None]
    x2[:, 0] += np.square(means) * count
    questions = cluster_phone_sets([[1], [2], [3, 4], [5]], count, x, x2)
    assert [1, 2] in questions and [3, 4, 5] in questions and [1, 2, 3, 4, 5] in questions
    extra = make_questions(phone3_stats(), [[3]], [[1, 2], [9]], [1])
    assert extra == [[3], [1, 2], [9]]
