"""Best paths of lattices for many (LM weight, penalty) pairs at once, against OpenFst's shortest
path on the same lattices (Kaldi's lattice-scale | lattice-add-penalty | lattice-best-path)."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

from emasr.decode.lattice_best import best_paths, best_paths_batch
from emasr.kaldi.lattice_io import (LatticeArchiveWriter, LatticeArcs, LatticeFormatError,
                                     read_lattices, to_kaldifst)
from emasr.fst_stack import kaldifst

LM_WEIGHTS = [1.0, 2.0, 7.0, 17.0]
PENALTIES = [0.0, 0.5, 1.0]


def openfst_best_paths(arcs: LatticeArcs) -> dict[tuple[float, float], list[int]]:
    """The reference: one kaldifst shortest path per (LM weight, penalty)."""
    best = {}
    for penalty in PENALTIES:
        lattice = to_kaldifst(arcs, penalty)
        for lmwt in LM_WEIGHTS:
            scaled = kaldifst.Lattice(lattice)
            kaldifst.scale_lattice(kaldifst.lattice_scale(1.0, 1.0 / lmwt), scaled)
            _, _, words, _ = kaldifst.get_linear_symbol_sequence(kaldifst.shortest_path(scaled))
            best[(lmwt, penalty)] = list(words)
    return best


def random_lattice(rng: np.random.Generator, frames: int = 12, width: int = 4) -> LatticeArcs:
    """A raw-lattice-shaped DAG: `width` states per frame, emitting arcs to the next frame,
    a few epsilon arcs within a frame, words on some arcs, final states on the last frame."""
    def state(t: int, i: int) -> int:
        return 1 + t * width + i

    src, dst = [], []
    for t in range(frames):
        for i in range(width):
            for j in rng.choice(width, size=2, replace=False):  # emitting arcs into frame t
                src.append(0 if t == 0 else state(t - 1, j))
                dst.append(state(t, i))
            if i + 1 < width and rng.random() < 0.3:            # an epsilon arc within it
                src.append(state(t, i))
                dst.append(state(t, i + 1))
    keep = np.unique(np.stack([src, dst], axis=1), axis=0)  # stored by state, as a decoder does
    src, dst = keep[:, 0], keep[:, 1]
    epsilon = (dst - 1) // width == (src - 1) // width
    olabel = np.where(rng.random(len(src)) < 0.3, rng.integers(1, 50, len(src)), 0)
    finals = {state(frames - 1, i): (float(rng.uniform(0, 2)), float(rng.uniform(0, 5)))
              for i in range(width)}
    return LatticeArcs(src, dst, np.where(epsilon, 0, rng.integers(1, 30, len(src))), olabel,
                       rng.uniform(0, 5, len(src)), rng.uniform(0, 40, len(src)), finals, 0,
                       1 + frames * width)


def test_random_lattices_agree_with_openfst_and_a_batch_with_one_at_a_time():
    rng = np.random.default_rng(7)
    lattices = [(f"u{i}", random_lattice(rng, frames=int(rng.integers(3, 15)))) for i in range(30)]
    batch = best_paths_batch(lattices, LM_WEIGHTS, PENALTIES)
    for (name, arcs), best in zip(lattices, batch):
        assert best == openfst_best_paths(arcs), name
        assert best == best_paths(arcs, LM_WEIGHTS, PENALTIES)
    # The LM weight and the penalty matter: not every pair picks the same words.
    assert any(len({tuple(w) for w in best.values()}) > 1 for best in batch)


def test_a_lattice_numbered_out_of_order_is_sorted_first_and_a_cycle_is_an_error():
    arcs = random_lattice(np.random.default_rng(3))
    expected = best_paths(arcs, LM_WEIGHTS, PENALTIES)
    shuffle = np.random.default_rng(4).permutation(arcs.num_states)   # old state -> new number
    renumbered = LatticeArcs(shuffle[arcs.src], shuffle[arcs.dst], arcs.ilabel, arcs.olabel,
                             arcs.graph, arcs.acoustic,
                             {int(shuffle[s]): w for s, w in arcs.finals.items()},
                             int(shuffle[arcs.start]), arcs.num_states)
    assert best_paths(renumbered, LM_WEIGHTS, PENALTIES) == expected
    one = np.array([0])
    cycle = LatticeArcs(np.array([0, 1]), np.array([1, 0]), one.repeat(2), one.repeat(2),
                        np.zeros(2), np.zeros(2), {1: (0.0, 0.0)}, 0, 2)
    with pytest.raises(LatticeFormatError, match="lat.1.gz: entry u9: the lattice has a cycle"):
        best_paths(cycle, LM_WEIGHTS, PENALTIES, where="lat.1.gz: entry u9")


def test_no_reachable_final_state_gives_no_words():
    arcs = random_lattice(np.random.default_rng(5))
    unreachable = LatticeArcs(arcs.src, arcs.dst, arcs.ilabel, arcs.olabel, arcs.graph,
                              arcs.acoustic, {}, arcs.start, arcs.num_states)
    [none, some] = best_paths_batch([("a", unreachable), ("b", arcs)], LM_WEIGHTS, PENALTIES)
    assert all(words == [] for words in none.values())
    assert some == best_paths(arcs, LM_WEIGHTS, PENALTIES)


def test_binary_archive_reads_back_exactly_and_a_cut_entry_is_named(tmp_path):
    lattices = [random_lattice(np.random.default_rng(s)) for s in range(3)]
    with LatticeArchiveWriter(str(tmp_path / "lat.1.gz")) as writer:
        for i, arcs in enumerate(lattices):
            writer.write(f"u{i}", to_kaldifst(arcs))
    back = list(read_lattices(str(tmp_path / "lat.1.gz")))
    assert [utt for utt, _ in back] == ["u0", "u1", "u2"]
    for arcs, (_, read) in zip(lattices, back):
        assert to_kaldifst(read).to_str() == to_kaldifst(arcs).to_str()
    data = gzip.open(tmp_path / "lat.1.gz", "rb").read()
    with gzip.open(tmp_path / "cut.gz", "wb") as f:
        f.write(data[:len(data) - 30])
    with pytest.raises(LatticeFormatError, match=r"cut\.gz: entry u2: truncated or corrupt"):
        list(read_lattices(str(tmp_path / "cut.gz")))


def test_scoring_batches_keep_the_order_and_the_arc_budget():
    from emasr.score.cli import batches

    rng = np.random.default_rng(11)
    lattices = [(f"u{i}", random_lattice(rng, frames=int(rng.integers(2, 20)))) for i in range(20)]
    sizes = [len(arcs.src) for _, arcs in lattices]
    budget = 3 * int(np.median(sizes))
    grouped = list(batches(lattices + [("big", random_lattice(rng, frames=100))], budget))
    assert [utt for batch in grouped for utt, _ in batch] == [u for u, _ in lattices] + ["big"]
    assert grouped[-1] == [grouped[-1][0]] and grouped[-1][0][0] == "big"  # over budget: alone
    for batch in grouped[:-1]:
        assert sum(len(arcs.src) for _, arcs in batch) <= budget
    assert len(grouped) > 3
