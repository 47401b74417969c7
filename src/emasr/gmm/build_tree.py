"""Phonetic decision-tree building (Kaldi's build-tree), written as a real Kaldi tree file.

Roots come from ``phones/roots.int``: one tree root per line (``shared``: all pdf classes of its
phones start in one node, so the tree may ask about the pdf class; ``not-shared``: one root per pdf
class; ``not-split``: the root stays one leaf). Starting from the roots, the leaf whose best
question gains the most log-likelihood (emasr.gmm.gauss_objf) is split, over all roots at once,
until ``max_leaves`` leaves or until no split gains ``thresh``; both sides of a split must keep
``min_count`` frames. Questions are phone sets about the left (key 0), right (key 2) and within a
root of several phones (the tones of a base phone), the centre phone (key 1), and pdf-class sets
about key -1. Afterwards leaves of the same root are merged bottom-up while a merge loses less than
``cluster_thresh`` (Kaldi's ClusterEventMapRestrictedByMap; negative: ``thresh``; 0: no merging).

The result is a ContextDependency with N=3, P=1 whose event map is, as in Kaldi, a TableEventMap on
the centre phone over the roots' subtrees of SplitEventMaps with ConstantEventMap leaves (pdf ids),
with a TableEventMap on the pdf class for not-shared roots. Merged leaves share a pdf id.
"""
from __future__ import annotations

import heapq
import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path

import click
import numpy as np

from emasr.gmm.gauss_objf import gauss_objf
from emasr.kaldi.model_io import tree_from_text, write_tree
from emasr.gmm.training_graphs import read_int_sets, read_roots
from emasr.gmm.tree_stats import CENTRAL_POSITION, CONTEXT_WIDTH, EVENT_KEYS, PDF_CLASS_KEY, \
    TreeStats, load_summed
from emasr.fst_stack import kaldi_hmm_gmm

log = logging.getLogger(__name__)
COLUMN = {key: i for i, key in enumerate(EVENT_KEYS)}


@dataclass(frozen=True)
class TreeConfig:
    max_leaves: int = 2000
    thresh: float = 300.0         # minimum likelihood gain of a split (Kaldi's build-tree)
    min_count: float = 50.0       # minimum frames on each side of a split
    cluster_thresh: float = -1.0  # merge leaves of a root while the loss is below this


@dataclass(frozen=True)
class Root:
    phones: tuple[int, ...]
    shared: bool
    split: bool
    num_pdf_classes: int


@dataclass
class Node:
    rows: np.ndarray              # indices into the stats' events
    root: int
    question: tuple[int, tuple[int, ...]] | None = None  # (key, yes values)
    yes: "Node | None" = None
    no: "Node | None" = None
    leaf: int = -1
    best: tuple[float, int, tuple[int, ...]] | None = field(default=None, repr=False)


class TreeBuilder:
    def __init__(self, stats: TreeStats, roots: list[Root], questions: list[list[int]],
                 config: TreeConfig):
        self.stats = stats
        self.roots = roots
        self.config = config
        max_phone = max(max(r.phones) for r in roots)
        max_phone = max(max_phone, int(stats.events[:, 1:].max(initial=0)))
        self.phone_questions = np.zeros((len(questions), max_phone + 1), dtype=bool)
        for i, q in enumerate(questions):
            self.phone_questions[i, [p for p in q if p <= max_phone]] = True
        num_classes = max(r.num_pdf_classes for r in roots)
        # pdf-class questions: every prefix {0..k} and every single class (Kaldi's are similar)
        sets = {tuple(range(k + 1)) for k in range(num_classes - 1)} | \
            {(c,) for c in range(num_classes)}
        self.class_questions = np.zeros((len(sets), num_classes), dtype=bool)
        for i, s in enumerate(sorted(sets)):
            self.class_questions[i, list(s)] = True

    # -- the splitting --
    def keys_for(self, root: Root) -> list[int]:
        if not root.split:
            return []
        keys = [0, 2]
        if len(root.phones) > 1:
            keys.append(CENTRAL_POSITION)
        if root.shared and root.num_pdf_classes > 1:
            keys.append(PDF_CLASS_KEY)
        return keys

    def best_split(self, node: Node) -> tuple[float, int, tuple[int, ...]]:
        """(gain, key, yes values) of the best question for the node; gain -inf if none."""
        best = (-np.inf, 0, ())
        rows = node.rows
        count, x, x2 = self.stats.count[rows], self.stats.x[rows], self.stats.x2[rows]
        total = (count.sum(), x.sum(axis=0), x2.sum(axis=0))
        base = float(gauss_objf(*total))
        for key in self.keys_for(self.roots[node.root]):
            values = self.stats.events[rows, COLUMN[key]]
            order = np.argsort(values, kind="stable")
            uniq, starts = np.unique(values[order], return_index=True)
            if len(uniq) < 2:
                continue
            c = np.add.reduceat(count[order], starts)
            sx = np.add.reduceat(x[order], starts, axis=0)
            sx2 = np.add.reduceat(x2[order], starts, axis=0)
            matrix = self.class_questions if key == PDF_CLASS_KEY else self.phone_questions
            membership = matrix[:, uniq].astype(np.float64)
            yes_c, yes_x, yes_x2 = membership @ c, membership @ sx, membership @ sx2
            no_c = total[0] - yes_c
            gains = gauss_objf(yes_c, yes_x, yes_x2) + \
                gauss_objf(no_c, total[1] - yes_x, total[2] - yes_x2) - base
            gains[(yes_c < self.config.min_count) | (no_c < self.config.min_count)] = -np.inf
            i = int(np.argmax(gains))
            if gains[i] > best[0]:
                best = (float(gains[i]), key, tuple(int(v) for v in uniq[membership[i] > 0]))
        return best

    def root_nodes(self) -> list[Node]:
        nodes = []
        centre = self.stats.events[:, COLUMN[CENTRAL_POSITION]]
        pdf_class = self.stats.events[:, COLUMN[PDF_CLASS_KEY]]
        for index, root in enumerate(self.roots):
            in_root = np.isin(centre, root.phones)
            if root.shared:
                nodes.append(Node(np.flatnonzero(in_root), index))
            else:
                nodes += [Node(np.flatnonzero(in_root & (pdf_class == c)), index)
                          for c in range(root.num_pdf_classes)]
        return nodes

    def grow(self, nodes: list[Node]) -> list[Node]:
        """Split greedily, best gain first over all roots; returns the leaves."""
        tie = itertools.count()
        heap = []
        leaves = set(range(len(nodes)))
        by_id = dict(enumerate(nodes))

        def push(node_id: int) -> None:
            node = by_id[node_id]
            node.best = self.best_split(node)
            if np.isfinite(node.best[0]):
                heapq.heappush(heap, (-node.best[0], next(tie), node_id))

        for node_id in list(by_id):
            push(node_id)
        while heap and len(leaves) < self.config.max_leaves:
            neg_gain, _, node_id = heapq.heappop(heap)
            if -neg_gain < self.config.thresh:
                break
            node = by_id[node_id]
            _, key, yes_values = node.best
            is_yes = np.isin(self.stats.events[node.rows, COLUMN[key]], yes_values)
            node.question = (key, yes_values)
            node.yes = Node(node.rows[is_yes], node.root)
            node.no = Node(node.rows[~is_yes], node.root)
            leaves.remove(node_id)
            for child in (node.yes, node.no):
                child_id = len(by_id)
                by_id[child_id] = child
                leaves.add(child_id)
                push(child_id)
        return [by_id[i] for i in sorted(leaves)]

    # -- the merging --
    def leaf_stats(self, leaf: Node) -> tuple[float, np.ndarray, np.ndarray]:
        rows = leaf.rows
        return (float(self.stats.count[rows].sum()), self.stats.x[rows].sum(axis=0),
                self.stats.x2[rows].sum(axis=0))

    def cluster(self, leaves: list[Node]) -> int:
        """Give every leaf a pdf id, merging leaves of a root bottom-up while the loss is below
        the cluster threshold. Returns the number of pdfs."""
        thresh = self.config.thresh if self.config.cluster_thresh < 0 else \
            self.config.cluster_thresh
        next_id = 0
        for root in range(len(self.roots)):
            members = [leaf for leaf in leaves if leaf.root == root]
            groups = [[leaf] for leaf in members]
            stats = [self.leaf_stats(leaf) for leaf in members]
            while thresh > 0 and len(groups) > 1:
                c = np.array([s[0] for s in stats])
                x = np.stack([s[1] for s in stats])
                x2 = np.stack([s[2] for s in stats])
                single = gauss_objf(c, x, x2)
                loss = single[:, None] + single[None, :] - gauss_objf(
                    c[:, None] + c[None, :], x[:, None] + x[None, :], x2[:, None] + x2[None, :])
                np.fill_diagonal(loss, np.inf)
                i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
                if loss[i, j] >= thresh:
                    break
                i, j = min(i, j), max(i, j)
                groups[i] += groups.pop(j)
                sj = stats.pop(j)
                stats[i] = (stats[i][0] + sj[0], stats[i][1] + sj[1], stats[i][2] + sj[2])
            for group in groups:
                for leaf in group:
                    leaf.leaf = next_id
                next_id += 1
        return next_id

    def build(self) -> tuple["BuiltTree", list[Node]]:
        roots = self.root_nodes()
        leaves = self.grow(roots)
        num_pdfs = self.cluster(leaves)
        log.info("tree: %d leaves after splitting, %d pdfs after merging", len(leaves), num_pdfs)
        return BuiltTree(self.roots, roots, num_pdfs), leaves


@dataclass
class BuiltTree:
    roots: list[Root]
    root_nodes: list[Node]
    num_pdfs: int

    def to_text(self) -> str:
        """The tree as Kaldi's text ContextDependency."""
        max_phone = max(max(r.phones) for r in self.roots)
        table: list[str] = ["NULL"] * (max_phone + 1)
        nodes = iter(self.root_nodes)
        for root in self.roots:
            if root.shared:
                subtree = node_text(next(nodes))
            else:
                classes = [node_text(next(nodes)) for _ in range(root.num_pdf_classes)]
                subtree = f"TE {PDF_CLASS_KEY} {len(classes)} ( {' '.join(classes)} )"
            for phone in root.phones:
                table[phone] = subtree
        return (f"ContextDependency {CONTEXT_WIDTH} {CENTRAL_POSITION} ToPdf "
                f"TE {CENTRAL_POSITION} {len(table)} ( {' '.join(table)} )\nEndContextDependency\n")


def node_text(node: Node) -> str:
    if node.question is None:
        return f"CE {node.leaf}"
    key, values = node.question
    return (f"SE {key} [ {' '.join(map(str, values))} ]\n{{ {node_text(node.yes)} "
            f"{node_text(node.no)} }}")


def load_roots(path: Path, topology: kaldi_hmm_gmm.HmmTopology) -> list[Root]:
    num_classes = topology.get_phone_to_num_pdf_classes()
    roots = []
    for shared, split, phones in read_roots(path):
        classes = {num_classes[p] if p < len(num_classes) else -1 for p in phones}
        if len(classes) != 1 or -1 in classes:
            raise ValueError(f"{path}: the phones {phones} of a root must all be in the topology "
                             "with the same number of pdf classes")
        roots.append(Root(tuple(phones), shared, split, classes.pop()))
    return roots


def build_tree(stats: TreeStats, roots: list[Root], questions: list[list[int]],
               config: TreeConfig):
    """(ContextDependency, number of pdfs) for the stats."""
    built, _ = TreeBuilder(stats, roots, questions, config).build()
    return tree_from_text(built.to_text()), built.num_pdfs


@click.command("build-tree")
@click.option("--max-leaves", type=int, default=2000, show_default=True)
@click.option("--thresh", type=float, default=300.0, show_default=True,
              help="Minimum log-likelihood gain of a split.")
@click.option("--min-count", type=float, default=50.0, show_default=True,
              help="Minimum frames on each side of a split.")
@click.option("--cluster-thresh", type=float, default=-1.0, show_default=True,
              help="Merge leaves of a root while the loss is below this (<0: thresh; 0: off).")
@click.argument("roots", type=click.Path(dir_okay=False, exists=True))
@click.argument("questions", type=click.Path(dir_okay=False, exists=True))
@click.argument("topo", type=click.Path(dir_okay=False, exists=True))
@click.argument("tree_out", type=click.Path(dir_okay=False))
@click.argument("stats", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
def build_tree_cli(max_leaves, thresh, min_count, cluster_thresh, roots, questions, topo,
                   tree_out, stats):
    """Build a decision tree from tree STATS (treeacc) with the ROOTS (phones/roots.int),
    QUESTIONS (one phone set per line) and TOPO; write the Kaldi tree file TREE_OUT."""
    topology = kaldi_hmm_gmm.HmmTopology()
    topology.read(Path(topo).read_text())
    try:
        tree, num_pdfs = build_tree(load_summed(list(stats)), load_roots(Path(roots), topology),
                                    read_int_sets(Path(questions)),
                                    TreeConfig(max_leaves, thresh, min_count, cluster_thresh))
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    write_tree(tree_out, tree)
    log.info("wrote %s with %d pdfs", tree_out, num_pdfs)
