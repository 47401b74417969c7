"""The HMM topology (Kaldi `topo` file) shared by the GMMs at 10 ms and the networks at 30 ms.

Kaldi's default (utils/gen_topo.pl) is a strict left-to-right chain: a 3-state phone needs at least
3 frames. After 3-frame stacking the networks see one frame per 30 ms, so a 60 ms phone would have
only 2 frames and could not be aligned at all. We want one tree, one set of pdfs and one HCLG for
both frame rates, so every emitting state may also jump forward to any later state and to the final
state: a phone can be traversed in a single frame (state 0 -> final), while longer phones still use
all their states in order. Kaldi attaches a frame to each transition out of an emitting state, so
"0 -> final" costs exactly one frame. The probabilities are initial values only; training
re-estimates them (Kaldi's transition model update).

Non-silence phones: `num_states` (3) states; state i loops with 0.5 (0.75 for the last state) and
shares the rest equally among the later states and the final state.
Silence phones: `num_sil_states` (5) states as in Kaldi (state 0 to 1..3, the middle states fully
connected), plus a jump to the final state from every state.
"""
from __future__ import annotations


def _state(index: int, transitions: list[int], self_loop: float) -> str:
    """One <State> line: self-loop prob `self_loop`, the rest split evenly over `transitions`."""
    others = [t for t in transitions if t != index]
    share = (1.0 - self_loop) / len(others)
    arcs = [f"<Transition> {index} {self_loop:g}"] + [f"<Transition> {t} {share:g}" for t in others]
    return f"<State> {index} <PdfClass> {index} {' '.join(arcs)} </State>"


def nonsilence_states(num_states: int) -> list[str]:
    final = num_states
    lines = []
    for i in range(num_states):
        self_loop = 0.75 if i == num_states - 1 else 0.5
        lines.append(_state(i, list(range(i, final + 1)), self_loop))
    return lines + [f"<State> {final} </State>"]


def silence_states(num_states: int) -> list[str]:
    if num_states < 3:
        return nonsilence_states(num_states)
    final, last = num_states, num_states - 1
    lines = [_state(0, list(range(0, last)) + [final], 0.25)]
    for i in range(1, last):
        lines.append(_state(i, list(range(1, last + 1)) + [final], 0.25))
    lines.append(_state(last, [last, final], 0.75))
    return lines + [f"<State> {final} </State>"]


def make_topo(nonsilence: list[int], silence: list[int], num_states: int = 3,
              num_sil_states: int = 5) -> str:
    """Text of a Kaldi topo file for the given phone ids."""
    def entry(phones: list[int], states: list[str]) -> list[str]:
        return (["<TopologyEntry>", "<ForPhones>", " ".join(map(str, phones)), "</ForPhones>"]
                + states + ["</TopologyEntry>"])

    lines = ["<Topology>"]
    if nonsilence:
        lines += entry(nonsilence, nonsilence_states(num_states))
    lines += entry(silence, silence_states(num_sil_states))
    return "\n".join(lines + ["</Topology>"]) + "\n"
