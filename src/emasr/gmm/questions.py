"""Phonetic questions for the decision tree (Kaldi's cluster-phones + extra questions).

Automatic questions come from top-down clustering of the phone sets of ``phones/sets.int`` (the
tones of a base phone form one set): the stats of each set (centre phone in the set, pdf class in
``pdf_classes``, contexts pooled) are one item; a cluster is split in two by 2-means on the
Gaussian objective, recursively down to single sets, and every cluster of the resulting binary tree
is a question (the phones of its sets). The dict's ``extra_questions`` are added (e.g. one question
per tone), duplicates removed. Questions are written one per line as phone ids (questions.int).
"""
from __future__ import annotations

import logging
from pathlib import Path

import click
import numpy as np

from emasr.gmm.gauss_objf import gauss_objf
from emasr.gmm.training_graphs import read_int_sets
from emasr.gmm.tree_stats import TreeStats, load_summed
from emasr.io.atomic import atomic_write

log = logging.getLogger(__name__)


def set_stats(stats: TreeStats, phone_sets: list[list[int]], pdf_classes: list[int]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count [S], x [S, D], x2 [S, D]) pooled per phone set."""
    owner = {p: i for i, s in enumerate(phone_sets) for p in s}
    centre = stats.events[:, 2]
    in_set = np.array([owner.get(int(p), -1) for p in centre])
    use = (in_set >= 0) & np.isin(stats.events[:, 0], pdf_classes)
    num = len(phone_sets)
    count = np.bincount(in_set[use], weights=stats.count[use], minlength=num)
    x = np.zeros((num, stats.dim))
    x2 = np.zeros((num, stats.dim))
    np.add.at(x, in_set[use], stats.x[use])
    np.add.at(x2, in_set[use], stats.x2[use])
    return count, x, x2


def two_means(count: np.ndarray, x: np.ndarray, x2: np.ndarray, iters: int = 10) -> np.ndarray:
    """Split items into two clusters maximising the summed Gaussian objective; returns a
    boolean mask of the first cluster (never empty, never everything)."""
    n = len(count)
    objf_items = gauss_objf(count, x, x2)
    # Seeds: the item with the most data, and the one that would cost most to merge with it.
    first = int(np.argmax(count))
    merge_cost = objf_items[first] + objf_items - gauss_objf(count[first] + count, x[first] + x,
                                                             x2[first] + x2)
    merge_cost[first] = -np.inf
    second = int(np.argmax(merge_cost))
    assign = np.zeros(n, dtype=bool)
    assign[first] = True
    centres = [(count[first], x[first], x2[first]), (count[second], x[second], x2[second])]
    for _ in range(iters):
        # Gain of adding each item to each centre; assign to the better one.
        gains = [gauss_objf(c + count, cx + x, cx2 + x2) - gauss_objf(c, cx, cx2)
                 for c, cx, cx2 in centres]
        new = gains[0] >= gains[1]
        new[first], new[second] = True, False
        if np.array_equal(new, assign):
            break
        assign = new
        centres = [(count[m].sum(), x[m].sum(axis=0), x2[m].sum(axis=0))
                   for m in (assign, ~assign)]
    return assign


def cluster_phone_sets(phone_sets: list[list[int]], count: np.ndarray, x: np.ndarray,
                       x2: np.ndarray) -> list[list[int]]:
    """Every cluster of a top-down binary clustering of the phone sets, as a phone list."""
    questions = []
    pending = [np.flatnonzero(count > 0)]
    unseen = [phone_sets[i] for i in np.flatnonzero(count <= 0)]
    if unseen:
        log.warning("%d phone set(s) have no stats and join no automatic question", len(unseen))
    while pending:
        items = pending.pop()
        questions.append(sorted(p for i in items for p in phone_sets[i]))
        if len(items) < 2:
            continue
        mask = two_means(count[items], x[items], x2[items])
        pending += [items[mask], items[~mask]]
    return questions


def make_questions(stats: TreeStats, phone_sets: list[list[int]],
                   extra_questions: list[list[int]], pdf_classes: list[int]) -> list[list[int]]:
    count, x, x2 = set_stats(stats, phone_sets, pdf_classes)
    questions = cluster_phone_sets(phone_sets, count, x, x2) + \
        [sorted(q) for q in extra_questions]
    unique = []
    for q in questions:
        if q and q not in unique:
            unique.append(q)
    return unique


def write_questions(path: str, questions: list[list[int]]) -> None:
    with atomic_write(path) as f:
        f.writelines(" ".join(map(str, q)) + "\n" for q in questions)


@click.command("cluster-phones")
@click.option("--pdf-classes", default="1", show_default=True,
              help="Comma-separated pdf classes whose stats characterise a phone.")
@click.option("--extra-questions", type=click.Path(dir_okay=False, exists=True), default=None,
              help="phones/extra_questions.int: questions added as they are.")
@click.argument("sets", type=click.Path(dir_okay=False, exists=True))
@click.argument("questions_out", type=click.Path(dir_okay=False))
@click.argument("stats", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
def cluster_phones_cli(pdf_classes, extra_questions, sets, questions_out, stats):
    """Questions (QUESTIONS_OUT, one phone set per line) from top-down clustering of the phone
    SETS (phones/sets.int) on the tree statistics STATS, plus the extra questions."""
    try:
        phone_sets = read_int_sets(Path(sets))
        extra = read_int_sets(Path(extra_questions)) if extra_questions else []
        questions = make_questions(load_summed(list(stats)), phone_sets, extra,
                                   [int(c) for c in pdf_classes.split(",")])
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    write_questions(questions_out, questions)
    log.info("wrote %d questions (%d extra)", len(questions), len(extra))
