"""HMM topologies (Kaldi `topo` files): Kaldi's standard one and a skip topology, by name.

- "kaldi": utils/gen_topo.pl's topology, for GMMs at 10 ms. Non-silence phones are a strict
  left-to-right chain of `num_states` (3) states, each looping with 0.75 and moving on with 0.25,
  so a phone lasts at least `num_states` frames. Silence has `num_sil_states` (5) states: state 0
  goes to any of states 0..n-2, the middle states are fully connected among states 1..n-1 (all
  with probability 1/(n-1)), and the last emitting state loops with 0.75 and exits with 0.25
  (a one-state silence, as newer gen_topo.pl, loops with 0.75 and exits with 0.25).
- "skip": every emitting state may also jump forward to any later state and to the final state,
  so a phone can be traversed in a single frame (state 0 -> final) while longer phones still use
  their states in order. This is what one tree, one set of pdfs and one HCLG shared by the GMMs at
  10 ms and the networks at 30 ms (after 3-frame stacking) need: at 30 ms a 60 ms phone has only 2
  frames, which the Kaldi topology cannot align. State i loops with 0.5 (0.75 in the last state)
  and shares the rest equally among the later states and the final state; silence is Kaldi's
  5-state silence plus an exit to the final state from every state.

Kaldi attaches a frame to each transition out of an emitting state, so "0 -> final" costs exactly
one frame. The probabilities are initial values; training re-estimates them.
`DEFAULT_TOPOLOGY` is the one `emasr prepare-lang` (and utils/prepare_lang.sh) writes when not told:
Kaldi's, as in Kaldi; networks at 30 ms get the one-frame topology in a lang dir of their own
(utils/prepare_lang_nnet.sh) and their own tree.
"""
from __future__ import annotations

from typing import Callable

DEFAULT_TOPOLOGY = "kaldi"


def _prob(p: float) -> str:
    """A probability as Perl prints it (gen_topo.pl): up to 15 significant digits."""
    return f"{p:.15g}"


def _state(index: int, arcs: list[tuple[int, float]]) -> str:
    transitions = "".join(f"<Transition> {dest} {_prob(p)} " for dest, p in arcs)
    return f"<State> {index} <PdfClass> {index} {transitions}</State>"


def _final(index: int) -> str:
    return f"<State> {index} </State>"


# -- Kaldi's standard topology (utils/gen_topo.pl) --

def kaldi_nonsilence_states(num_states: int) -> list[str]:
    if num_states < 1:
        raise ValueError(f"the kaldi topology needs at least 1 non-silence state, got {num_states}")
    return [_state(i, [(i, 0.75), (i + 1, 0.25)]) for i in range(num_states)] + [_final(num_states)]


def kaldi_silence_states(num_states: int) -> list[str]:
    if num_states == 1:
        return [_state(0, [(0, 0.75), (1, 0.25)]), _final(1)]
    if num_states < 3:
        raise ValueError(f"the kaldi topology needs 1 or at least 3 silence states (gen_topo.pl), "
                         f"got {num_states}")
    share = 1.0 / (num_states - 1)
    last = num_states - 1
    lines = [_state(0, [(d, share) for d in range(0, last)])]
    lines += [_state(i, [(d, share) for d in range(1, last + 1)]) for i in range(1, last)]
    return lines + [_state(last, [(last, 0.75), (num_states, 0.25)]), _final(num_states)]


# -- the skip topology (one frame per phone possible) --

def _skip_state(index: int, destinations: list[int], self_loop: float) -> str:
    """Self-loop prob `self_loop`, the rest split evenly over the other `destinations`."""
    others = [d for d in destinations if d != index]
    share = (1.0 - self_loop) / len(others)
    arcs = [f"<Transition> {index} {self_loop:g}"] + [f"<Transition> {d} {share:g}" for d in others]
    return f"<State> {index} <PdfClass> {index} {' '.join(arcs)} </State>"


def skip_nonsilence_states(num_states: int) -> list[str]:
    final = num_states
    lines = []
    for i in range(num_states):
        self_loop = 0.75 if i == num_states - 1 else 0.5
        lines.append(_skip_state(i, list(range(i, final + 1)), self_loop))
    return lines + [_final(final)]


def skip_silence_states(num_states: int) -> list[str]:
    if num_states < 3:
        return skip_nonsilence_states(num_states)
    final, last = num_states, num_states - 1
    lines = [_skip_state(0, list(range(0, last)) + [final], 0.25)]
    for i in range(1, last):
        lines.append(_skip_state(i, list(range(1, last + 1)) + [final], 0.25))
    lines.append(_skip_state(last, [last, final], 0.75))
    return lines + [_final(final)]


# name -> (non-silence states, silence states) writers
TOPOLOGIES: dict[str, tuple[Callable[[int], list[str]], Callable[[int], list[str]]]] = {
    "kaldi": (kaldi_nonsilence_states, kaldi_silence_states),
    "skip": (skip_nonsilence_states, skip_silence_states),
}

# kept for callers of the former single-topology module
nonsilence_states = skip_nonsilence_states
silence_states = skip_silence_states


def make_topo(nonsilence: list[int], silence: list[int], num_states: int = 3,
              num_sil_states: int = 5, topology: str = DEFAULT_TOPOLOGY) -> str:
    """Text of a Kaldi topo file for the given phone ids, in the named topology."""
    if topology not in TOPOLOGIES:
        raise ValueError(f"unknown topology '{topology}'; expected one of "
                         f"{', '.join(sorted(TOPOLOGIES))}")
    nonsilence_writer, silence_writer = TOPOLOGIES[topology]

    def entry(phones: list[int], states: list[str]) -> list[str]:
        return (["<TopologyEntry>", "<ForPhones>", " ".join(map(str, phones)), "</ForPhones>"]
                + states + ["</TopologyEntry>"])

    lines = ["<Topology>"]
    if nonsilence:
        lines += entry(nonsilence, nonsilence_writer(num_states))
    lines += entry(silence, silence_writer(num_sil_states))
    return "\n".join(lines + ["</Topology>"]) + "\n"
