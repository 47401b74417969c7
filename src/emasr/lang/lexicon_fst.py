"""The lexicon transducer L (phones in, words out) with optional silence between words.

Same construction as Kaldi's utils/make_lexicon_fst.pl, so our L.fst has the same states, arcs and
weights as Kaldi's: a start state, a loop state where words begin and end (final), and a silence
state. Before the first word silence is optional (cost -log p each way); after each word the path
goes either straight back to the loop state (cost -log(1-p)) or through one silence phone (cost
-log p), except after a word that ends in the silence phone itself. With `sil_disambig` (for
L_disambig.fst), the silence is followed by that disambiguation symbol, so L o G stays
determinizable. The word label sits on the first phone of each word.
"""
from __future__ import annotations

import math

from emasr.lang.dictdir import LexiconEntry
from emasr.fst_stack import kaldifst

EPS = "<eps>"


def lexicon_fst_lines(lexicon: list[LexiconEntry], sil_prob: float, sil_phone: str,
                      sil_disambig: str | None = None) -> list[tuple]:
    """Arcs (src, dst, phone, word, cost) and final states (state, cost) of L, in symbols."""
    if not 0.0 < sil_prob < 1.0:
        raise ValueError(f"sil_prob must be in (0, 1), got {sil_prob}")
    sil_cost, nosil_cost = -math.log(sil_prob), -math.log(1.0 - sil_prob)
    start, loop, sil = 0, 1, 2
    lines: list[tuple] = [(start, loop, EPS, EPS, nosil_cost)]
    if sil_disambig is None:
        lines += [(start, loop, sil_phone, EPS, sil_cost), (sil, loop, sil_phone, EPS, 0.0)]
        next_state = 3
    else:
        disambig_state, next_state = 3, 4
        lines += [(start, disambig_state, sil_phone, EPS, sil_cost),
                  (sil, disambig_state, sil_phone, EPS, 0.0),
                  (disambig_state, loop, sil_disambig, EPS, 0.0)]
    for entry in lexicon:
        pron_cost = -math.log(entry.prob)
        state, label = loop, entry.word
        for phone in entry.phones[:-1]:
            lines.append((state, next_state, phone, label, pron_cost))
            state, label, pron_cost = next_state, EPS, 0.0
            next_state += 1
        last = entry.phones[-1]
        if last == sil_phone:   # no point in optional silence after a silence word
            lines.append((state, loop, last, label, pron_cost))
        else:
            lines.append((state, loop, last, label, nosil_cost + pron_cost))
            lines.append((state, sil, last, label, sil_cost + pron_cost))
    lines.append((loop, 0.0))
    return lines


def lexicon_fst(lexicon: list[LexiconEntry], phone_ids: dict[str, int], word_ids: dict[str, int],
                sil_prob: float, sil_phone: str, sil_disambig: str | None = None,
                wdisambig: tuple[str, str] | None = None) -> "kaldifst.StdVectorFst":
    """Compile L with integer labels, olabel-sorted (Kaldi's fstcompile | fstarcsort pipeline).

    `wdisambig` = (phone symbol, word symbol) adds that self-loop pair (#0:#0) where words leave, as
    Kaldi's fstaddselfloops does for L_disambig.fst.
    """
    def label(table: dict[str, int], symbol: str, kind: str) -> int:
        if symbol not in table:
            raise KeyError(f"{kind} '{symbol}' is not in the {kind} symbol table")
        return table[symbol]

    text = []
    for line in lexicon_fst_lines(lexicon, sil_prob, sil_phone, sil_disambig):
        if len(line) == 2:
            text.append(f"{line[0]}\t{line[1]:g}")
        else:
            src, dst, phone, word, cost = line
            text.append(f"{src}\t{dst}\t{label(phone_ids, phone, 'phone')}\t"
                        f"{label(word_ids, word, 'word')}\t{cost!r}")
    fst = kaldifst.compile("\n".join(text), acceptor=False)
    if wdisambig is not None:
        kaldifst.add_self_loops(fst, [phone_ids[wdisambig[0]]], [word_ids[wdisambig[1]]])
    kaldifst.arcsort(fst, sort_type="olabel")
    return fst
