"""Toy lang dirs and models for the decoding tests and bench/decode.py.

A lang dir in Kaldi's layout built directly with kaldifst: phones.txt, words.txt, topo,
L_disambig.fst (optional silence between words, as Kaldi's make_lexicon_fst.py makes it),
G.fst (a word grammar given as FST text) and phones/{disambig,silence}.* . Every pronunciation
ends with the disambiguation symbol #1, which keeps L o G determinizable without working out
which pronunciations are homophones or prefixes of others.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from emasr.fst_stack import kaldi_hmm_gmm, kaldifst

SIL = "SIL"
SIL_PROB = 0.5

# A four-word toy task: the grammar allows exactly two sentences, "A B C" and "B C D".
LEXICON = {"A": ["a1", "a2"], "B": ["b1", "b2", "b3"], "C": ["c1", "a2"], "D": ["d1", "b2"]}
GRAMMAR = """0 1 {A} {A} 0.7
1 2 {B} {B} 0
2 3 {C} {C} 0
3 0
0 4 {B} {B} 0.7
4 5 {C} {C} 0
5 6 {D} {D} 0
6 0"""
SENTENCES = ["A B C", "B C D"]

TOPO_3STATE = """<Topology>
<TopologyEntry>
<ForPhones>
{nonsil}
</ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.75 <Transition> 2 0.25 </State>
<State> 2 <PdfClass> 2 <Transition> 2 0.75 <Transition> 3 0.25 </State>
<State> 3 </State>
</TopologyEntry>
<TopologyEntry>
<ForPhones>
{sil}
</ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.5 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.5 <Transition> 2 0.5 </State>
<State> 2 </State>
</TopologyEntry>
</Topology>
"""


@dataclass
class ToyLang:
    lang_dir: str
    phones: dict[str, int]
    words: dict[str, int]
    lexicon: dict[str, list[str]]


def write_symbols(path: str, symbols: list[str]) -> dict[str, int]:
    table = {s: i for i, s in enumerate(symbols)}
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{s} {i}\n" for s, i in table.items())
    return table


def lexicon_fst_text(lexicon: dict[str, list[str]], phones: dict[str, int],
                     words: dict[str, int]) -> str:
    """Kaldi's lexicon FST with optional silence: 0 start, 1 loop, 2 silence state."""
    no_sil, sil = -math.log(1 - SIL_PROB), -math.log(SIL_PROB)
    lines = [f"0 1 0 0 {no_sil}", f"0 2 0 0 {sil}", f"2 1 {phones[SIL]} 0 0",
             f"1 1 {phones['#0']} {words['#0']} 0", "1 0"]
    next_state = 3
    for word, pron in lexicon.items():
        symbols = [phones[p] for p in pron] + [phones["#1"]]
        source = 1
        for position, phone in enumerate(symbols[:-1]):
            olabel = words[word] if position == 0 else 0
            lines.append(f"{source} {next_state} {phone} {olabel} 0")
            source, next_state = next_state, next_state + 1
        lines.append(f"{source} 1 {symbols[-1]} 0 {no_sil}")
        lines.append(f"{source} 2 {symbols[-1]} 0 {sil}")
    return "\n".join(lines)


def make_lang(lang_dir: str, lexicon: dict[str, list[str]], grammar_text: str) -> ToyLang:
    """Write a lang dir; `grammar_text` is G as FST text over the word symbols' integer ids,
    given as a function of the word table via str.format-style names: `{A}` for word A."""
    os.makedirs(os.path.join(lang_dir, "phones"), exist_ok=True)
    phone_names = sorted({p for pron in lexicon.values() for p in pron})
    phones = write_symbols(os.path.join(lang_dir, "phones.txt"),
                           ["<eps>", SIL, *phone_names, "#0", "#1"])
    words = write_symbols(os.path.join(lang_dir, "words.txt"),
                          ["<eps>", "<SIL>", *sorted(lexicon), "#0", "<s>", "</s>"])
    lexicon_fst = kaldifst.compile(s=lexicon_fst_text(lexicon, phones, words), acceptor=False,
                                   isymbols=None, osymbols=None)
    lexicon_fst.write(os.path.join(lang_dir, "L_disambig.fst"))
    grammar = kaldifst.compile(s=grammar_text.format(**words), acceptor=False, isymbols=None,
                               osymbols=None)
    grammar.write(os.path.join(lang_dir, "G.fst"))
    nonsil = " ".join(str(phones[p]) for p in phone_names)
    with open(os.path.join(lang_dir, "topo"), "w") as f:
        f.write(TOPO_3STATE.format(nonsil=nonsil, sil=phones[SIL]))
    for name, values in (("disambig", ["#0", "#1"]), ("silence", [SIL]),
                         ("optional_silence", [SIL])):
        with open(os.path.join(lang_dir, "phones", f"{name}.int"), "w") as f:
            f.writelines(f"{phones[v]}\n" for v in values)
        with open(os.path.join(lang_dir, "phones", f"{name}.txt"), "w") as f:
            f.writelines(f"{v}\n" for v in values)
    with open(os.path.join(lang_dir, "phones", "silence.csl"), "w") as f:
        f.write(f"{phones[SIL]}\n")
    return ToyLang(lang_dir, phones, words, lexicon)


def monophone_model(lang_dir: str):
    """A monophone tree and TransitionModel for the lang's topology (no GMM needed)."""
    topo = kaldi_hmm_gmm.HmmTopology()
    with open(os.path.join(lang_dir, "topo")) as f:
        topo.read(f.read())
    ctx_dep = kaldi_hmm_gmm.monophone_context_dependency(topo.phones,
                                                         topo.get_phone_to_num_pdf_classes())
    return kaldi_hmm_gmm.TransitionModel(ctx_dep, topo), ctx_dep


def pdf_sequence(trans_model, phone_ids: list[int], frames_per_state: int = 3) -> list[int]:
    """Pdfs of a left-to-right pass through the phones' HMM states, each state held N frames.

    Monophone models only (the pdf depends on the phone and HMM state alone)."""
    pdf_of = {}
    for entry in trans_model.tuples:
        phone, hmm_state, forward_pdf, _ = entry.__getstate__()
        pdf_of[(phone, hmm_state)] = forward_pdf
    pdfs = []
    for phone in phone_ids:
        for hmm_state in sorted(h for (p, h) in pdf_of if p == phone):
            pdfs.extend([pdf_of[(phone, hmm_state)]] * frames_per_state)
    return pdfs


def oracle_loglikes(pdfs: list[int], num_pdfs: int, seed: int = 0, noise: float = 1.0,
                    margin: float = 6.0) -> np.ndarray:
    """Log-likelihoods [T, num_pdfs] that favour the given pdf per frame by `margin`, plus noise."""
    rng = np.random.default_rng(seed)
    loglikes = rng.normal(-margin, noise, size=(len(pdfs), num_pdfs)).astype(np.float32)
    loglikes[np.arange(len(pdfs)), pdfs] = rng.normal(0.0, noise, size=len(pdfs))
    return loglikes


def random_bigram_text(words: list[str], successors: int, seed: int = 0) -> str:
    """G text for a backoff bigram: state 0 = backoff (unigram) state, one state per word.

    Each word state has `successors` explicit successors and a #0 backoff arc to state 0."""
    rng = np.random.default_rng(seed)
    state = {w: i + 1 for i, w in enumerate(words)}
    lines = []
    for w in words:
        lines.append(f"0 {state[w]} {{{w}}} {{{w}}} {rng.uniform(5, 9):.3f}")
        for nxt in rng.choice(words, size=min(successors, len(words)), replace=False):
            lines.append(f"{state[w]} {state[nxt]} {{{nxt}}} {{{nxt}}} {rng.uniform(1, 4):.3f}")
        lines.append(f"{state[w]} 0 {{#0}} 0 {rng.uniform(1, 3):.3f}")
        lines.append(f"{state[w]} {rng.uniform(2, 4):.3f}")
    return "\n".join(lines)


def context_width_model(lang_dir: str, context_width: int = 3, central_position: int = 1):
    """A tree of context width N (triphone by default) whose questions ask only about the
    central phone, with its TransitionModel: the graph then goes through a real N-phone C
    transducer, while the pdfs stay those of monophones (so oracle likelihoods still apply)."""
    from emasr.kaldi.model_io import tree_from_text

    topo = kaldi_hmm_gmm.HmmTopology()
    with open(os.path.join(lang_dir, "topo")) as f:
        topo.read(f.read())
    classes = topo.get_phone_to_num_pdf_classes()
    entries, next_pdf = ["NULL"], 0
    for phone in range(1, len(classes)):
        if phone not in topo.phones:
            entries.append("NULL")
            continue
        pdfs = " ".join(f"CE {next_pdf + c}" for c in range(classes[phone]))
        entries.append(f"TE -1 {classes[phone]} ( {pdfs} )")
        next_pdf += classes[phone]
    text = (f"ContextDependency {context_width} {central_position} ToPdf TE {central_position} "
            f"{len(entries)} ( {' '.join(entries)} ) EndContextDependency ")
    ctx_dep = tree_from_text(text)
    return kaldi_hmm_gmm.TransitionModel(ctx_dep, topo), ctx_dep
