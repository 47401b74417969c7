"""The FST stack in the order the package imports it, with a smoke test that exercises all of it.

kaldi_hmm_gmm must be imported before kaldifst/kaldi_decoder, and kaldilm last: other orders can
deadlock at import time (docs/design.md, "Known pitfalls"). Modules that need the stack import it
from here so that the order is decided in one place. (Named fst_stack, not stack, so that it is not
mistaken for frame stacking in emasr.feats.)
"""
from __future__ import annotations

import logging

import click
import numpy as np

import kaldi_hmm_gmm  # noqa: F401  (first: it fixes which kaldifst symbols are loaded)
import kaldifst
import kaldi_decoder

logger = logging.getLogger(__name__)


def import_kaldilm():
    """Import kaldilm last, after the rest of the stack (import-order pitfall)."""
    import kaldilm

    return kaldilm


def smoke_test() -> list[int]:
    """Build two tiny FSTs, compose them and decode a 3-frame likelihood matrix through the result.

    The transducer A maps runs of input label 1, then of 2, to output labels 10 and 20 (self-loops
    output epsilon, like an HMM); the grammar G only allows the
    sequence 10 20 (plus a detour through 20 alone at a high cost). Frame scores favour 1 then 2.
    Returns the decoded output labels, which must be [10, 20].
    """
    acoustic = kaldifst.compile(
        s="0 1 1 10 0.0\n1 1 1 0 0.0\n1 2 2 20 0.0\n0 2 2 20 0.0\n2 2 2 0 0.0\n2 0.0",
        acceptor=False, isymbols=None, osymbols=None)
    grammar = kaldifst.compile(
        s="0 1 10 10 0.5\n1 2 20 20 0.5\n0 2 20 20 5.0\n2 0.0", acceptor=False,
        isymbols=None, osymbols=None)
    kaldifst.arcsort(acoustic, sort_type="olabel")
    graph = kaldifst.compose(acoustic, grammar)
    kaldifst.connect(graph)
    # Rows are frames; column j scores input label j+1 (DecodableCtc's convention with offset 0).
    loglikes = np.log(np.array([[0.9, 0.1], [0.8, 0.2], [0.1, 0.9]], dtype=np.float32))
    opts = kaldi_decoder.FasterDecoderOptions(beam=13.0, min_active=200)
    decoder = kaldi_decoder.FasterDecoder(graph, opts)
    decoder.decode(kaldi_decoder.DecodableCtc(loglikes))
    ok, best = decoder.get_best_path()
    if not ok:
        raise RuntimeError("FST stack smoke test: the decoder found no path")
    _, _, words, _ = kaldifst.get_linear_symbol_sequence(best)
    import_kaldilm()
    return list(words)


@click.command("check-stack")
def check_stack_cli() -> None:
    """Import kaldi_hmm_gmm, kaldifst, kaldi_decoder and kaldilm, then compose and decode a tiny FST."""
    words = smoke_test()
    versions = {m.__name__: getattr(m, "__version__", "?")
                for m in (kaldi_hmm_gmm, kaldifst, kaldi_decoder, import_kaldilm())}
    click.echo(f"FST stack OK: decoded {words}; versions {versions}")
