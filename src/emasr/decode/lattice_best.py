"""Best paths of lattices for every (LM weight, word insertion penalty) at once.

What Kaldi's scoring does once per pair and lattice, `lattice-scale --inv-acoustic-scale=LMWT |
lattice-add-penalty --word-ins-penalty=WIP | lattice-best-path`, here is one Viterbi pass over a
batch of lattices with a column of costs per pair, in numpy:

    cost(arc) = graph cost + WIP * (arc has a word) + acoustic cost / LMWT

Lattices are acyclic. The batch is taken as one graph (the lattices side by side) level by level,
a state's level being the length of the longest path of arcs that reaches it, so every arc into a
level comes from an earlier one, and a whole level of every lattice in the batch is relaxed with a
few array operations. A decoder's raw lattice has about one level per frame, so a batch costs a
few hundred array operations, whatever the number of lattices and pairs. Ties between equal costs
go to the arc (or final state) that comes first in the lattice.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emasr.kaldi.lattice_io import LatticeArcs, LatticeFormatError

Pair = tuple[float, float]  # (LM weight, word insertion penalty)


def best_paths(arcs: LatticeArcs, lm_weights: list[float], word_ins_penalties: list[float],
               where: str = "lattice") -> dict[Pair, list[int]]:
    """Word sequence of one lattice's best path for every (LM weight, penalty); an empty
    sequence when no final state is reachable."""
    return best_paths_batch([(where, arcs)], lm_weights, word_ins_penalties)[0]


def best_paths_batch(lattices: list[tuple[str, LatticeArcs]], lm_weights: list[float],
                     word_ins_penalties: list[float]) -> list[dict[Pair, list[int]]]:
    """best_paths for each (name, lattice), in one pass; names go into error messages."""
    pairs = [(lmwt, penalty) for penalty in word_ins_penalties for lmwt in lm_weights]
    inverse_lmwt = np.array([1.0 / lmwt for lmwt, _ in pairs])
    penalty = np.array([p for _, p in pairs])
    union = Union.of(lattices)
    costs = (union.graph[:, None] + penalty[None, :] * (union.olabel != 0)[:, None]
             + union.acoustic[:, None] * inverse_lmwt[None, :])
    best, back = forward(union, costs)
    totals = best[union.final_states] + union.final_costs[:, :1] \
        + union.final_costs[:, 1:] * inverse_lmwt[None, :]
    ends = np.full((len(lattices), len(pairs)), -1, dtype=np.int64)
    has_finals = np.flatnonzero(np.diff(np.append(union.finals_start, len(totals))) > 0)
    if len(has_finals):
        first = segment_argmin(totals, union.finals_start[has_finals])
        reachable = np.isfinite(totals[first, np.arange(len(pairs))[None, :]])
        ends[has_finals] = np.where(reachable, union.final_states[first], -1)
    words = trace_back(union, back, ends)
    return [{pair: words[u][k] for k, pair in enumerate(pairs)} for u in range(len(lattices))]


@dataclass
class Union:
    """Lattices side by side as one graph: states renumbered by each lattice's offset."""
    src: np.ndarray
    dst: np.ndarray
    olabel: np.ndarray
    graph: np.ndarray
    acoustic: np.ndarray
    levels: np.ndarray        # per arc: the level of the state it enters
    starts: np.ndarray        # per lattice
    num_states: int
    final_states: np.ndarray  # grouped by lattice, in state order
    final_costs: np.ndarray   # [finals, 2]: graph, acoustic
    finals_start: np.ndarray  # per lattice: its first entry in final_states

    @classmethod
    def of(cls, lattices: list[tuple[str, LatticeArcs]]) -> "Union":
        offsets = np.cumsum([0] + [arcs.num_states for _, arcs in lattices])
        finals = [(offset + s, *arcs.finals[s]) for offset, (_, arcs) in zip(offsets, lattices)
                  for s in sorted(arcs.finals)]
        finals_table = np.array(finals, dtype=np.float64).reshape(-1, 3)
        counts = np.array([len(arcs.finals) for _, arcs in lattices], dtype=np.int64)
        return cls(
            src=np.concatenate([a.src + o for o, (_, a) in zip(offsets, lattices)]),
            dst=np.concatenate([a.dst + o for o, (_, a) in zip(offsets, lattices)]),
            olabel=np.concatenate([a.olabel for _, a in lattices]),
            graph=np.concatenate([a.graph for _, a in lattices]),
            acoustic=np.concatenate([a.acoustic for _, a in lattices]),
            levels=np.concatenate([arc_levels(a, where) for where, a in lattices]),
            starts=np.array([o + a.start for o, (_, a) in zip(offsets, lattices)], np.int64),
            num_states=int(offsets[-1]),
            final_states=finals_table[:, 0].astype(np.int64),
            final_costs=finals_table[:, 1:],
            finals_start=np.cumsum(counts) - counts)


def arc_levels(arcs: LatticeArcs, where: str) -> np.ndarray:
    """Each arc's level: that of the state it enters."""
    return state_levels(arcs, where)[arcs.dst]


def state_levels(arcs: LatticeArcs, where: str) -> np.ndarray:
    """Each state's level: the longest path, in arcs, from a state without incoming arcs. Every
    arc leads from a lower level to a higher one, so a pass level by level sees all arcs into
    a state before any arc out of it (emasr.decode.lattice_post's forward-backward too)."""
    levels = [0] * arcs.num_states
    for src, dst in topological_arcs(arcs, where):
        level = levels[src] + 1
        if level > levels[dst]:
            levels[dst] = level
    return np.asarray(levels, dtype=np.int64)


def topological_arcs(arcs: LatticeArcs, where: str) -> list[tuple[int, int]]:
    """(src, dst) of every arc, ordered so that all arcs into a state come before any arc out of
    it. A decoder's raw lattice is in that order already: its states are numbered in
    topological order (arcs lead to higher numbers) and its arcs stored by state. Any other
    acyclic lattice is ordered by Kahn's algorithm."""
    src, dst = arcs.src.tolist(), arcs.dst.tolist()
    if bool(np.all(arcs.src < arcs.dst)) and bool(np.all(np.diff(arcs.src) >= 0)):
        return list(zip(src, dst))
    incoming = [0] * arcs.num_states
    outgoing: list[list[int]] = [[] for _ in range(arcs.num_states)]
    for s, d in zip(src, dst):
        incoming[d] += 1
        outgoing[s].append(d)
    ready = [s for s in range(arcs.num_states) if incoming[s] == 0]
    ordered = []
    while ready:
        state = ready.pop()
        for d in outgoing[state]:
            ordered.append((state, d))
            incoming[d] -= 1
            if incoming[d] == 0:
                ready.append(d)
    if len(ordered) != len(src):
        raise LatticeFormatError(f"{where}: the lattice has a cycle; a lattice must be acyclic")
    return ordered


def segment_argmin(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """[segments, columns]: the row of each segment's minimum per column (segment i is rows
    starts[i] up to starts[i + 1]); ties go to the first row."""
    minimum = np.minimum.reduceat(values, starts, axis=0)
    segment = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(values))))
    # The first row at the minimum has the largest count-down from the end.
    countdown = len(values) - np.arange(len(values))[:, None]
    at_minimum = np.where(values == minimum[segment], countdown, 0)
    return len(values) - np.maximum.reduceat(at_minimum, starts, axis=0)


def forward(union: Union, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best cost of reaching each state [states, pairs] and the arc it is reached by (-1: none)."""
    best = np.full((union.num_states, costs.shape[1]), np.inf)
    best[union.starts] = 0.0
    back = np.full(best.shape, -1, dtype=np.int64)
    if len(union.levels) == 0:
        return best, back
    order = np.lexsort((np.arange(len(union.levels)), union.dst, union.levels))
    levels = union.levels[order]
    for group in np.split(order, np.flatnonzero(np.diff(levels)) + 1):
        dst = union.dst[group]
        starts = np.flatnonzero(np.concatenate([[True], dst[1:] != dst[:-1]]))  # per state
        candidates = best[union.src[group]] + costs[group]
        first = segment_argmin(candidates, starts)
        states = dst[starts]  # all arcs into a state are in its level: each is set once
        best[states] = np.take_along_axis(candidates, first, axis=0)
        back[states] = group[first]
    return best, back


def trace_back(union: Union, back: np.ndarray, ends: np.ndarray) -> list[list[list[int]]]:
    """[lattice][pair]: the words along the best path from the start state to `ends` (-1: no
    path, no words)."""
    pairs = np.arange(ends.shape[1])[None, :]
    current, steps = ends.copy(), []
    while True:
        arc = np.where(current >= 0, back[np.maximum(current, 0), pairs], -1)
        if (arc < 0).all():
            break
        steps.append(arc)
        current = np.where(arc >= 0, union.src[np.maximum(arc, 0)], -1)
    if not steps:
        return [[[] for _ in range(ends.shape[1])] for _ in range(ends.shape[0])]
    path = np.stack(steps[::-1])                     # [steps, lattices, pairs], -1 before start
    labels = np.where(path >= 0, union.olabel[np.maximum(path, 0)], 0)
    return [[column[column != 0].tolist() for column in labels[:, u, :].T]
            for u in range(ends.shape[0])]
