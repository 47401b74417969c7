"""Viterbi alignment of a data dir with a GMM-HMM (Kaldi's gmm-align-compiled), and the equal
alignment that starts monophone training (align-equal-compiled).

Per utterance: the training graph of its transcript (emasr.gmm.training_graphs), the model's
transition probabilities added to it (transition scale 1, self-loop scale 0.1, as Kaldi's scripts
pass), and Kaldi's beam-pruned Viterbi (AlignUtteranceWrapper) over GMM log-likelihoods scaled by
the acoustic scale 0.1. An utterance that does not reach the final state within --beam is retried
once with --retry-beam, as Kaldi does. Utterances that cannot be aligned -- a word missing from the
lexicon, features of the wrong dimension, too few frames for the transcript's phones, no path even
with the wider beam -- are named in the log and skipped; the job fails when more than
--max-failed of them are skipped.

Output: ``ali.JOB.gz``, a gzipped Kaldi archive of int32 transition-id vectors, written
atomically.
"""
from __future__ import annotations

import logging
import zlib

import click
import numpy as np

from emasr.gmm.feature_options import feature_pipeline_options
from emasr.gmm.features import SkipCounter, check_dim, check_model_dim, iter_features, read_text
from emasr.kaldi.alignments import AlignmentWriter
from emasr.kaldi.model_io import KaldiModel, read_model, read_tree
from emasr.gmm.training_graphs import GraphCompiler, LangDir, TranscriptError
from emasr.fst_stack import kaldi_hmm_gmm, kaldifst

log = logging.getLogger(__name__)


def boost_silence(model: KaldiModel, silence_phones: list[int], boost: float):
    """A copy of the AmDiagGmm with the weights of silence pdfs times ``boost`` (Kaldi's
    gmm-boost-silence; the weights are deliberately not renormalised)."""
    if boost == 1.0 or not silence_phones:
        return model.am_gmm
    boosted = kaldi_hmm_gmm.AmDiagGmm()
    boosted.copy_from_am_diag_gmm(model.am_gmm)
    _, pdfs = kaldi_hmm_gmm.get_pdfs_for_phones(model.transition_model, sorted(silence_phones))
    for pdf in pdfs:
        gmm = boosted.get_pdf(pdf)
        gmm.set_weights(np.asarray(gmm.weights, dtype=np.float32).ravel() * boost)
        gmm.compute_gconsts()
    log.info("boosted the weights of %d silence pdfs by %g", len(pdfs), boost)
    return boosted


def equal_alignment(graph, num_frames: int, seed: int) -> np.ndarray | None:
    """A path of exactly ``num_frames`` transition ids through the graph, spreading frames
    evenly (align-equal-compiled); None when the utterance is too short for its phones."""
    ok, path = kaldifst.equal_align(graph, num_frames, seed, 10)
    if not ok:
        return None
    ok, tids, _, _ = kaldifst.get_linear_symbol_sequence(path)
    return np.asarray(tids, dtype=np.int32) if ok and len(tids) == num_frames else None


@click.command("gmm-align")
@click.option("--equal", is_flag=True,
              help="Equal alignment (align-equal-compiled): frames spread evenly over the "
                   "states of a path; the model's GMMs are not used.")
@click.option("--beam", type=float, default=10.0, show_default=True)
@click.option("--retry-beam", type=float, default=40.0, show_default=True,
              help="Retry an utterance that failed with this beam (0: no retry).")
@click.option("--careful", is_flag=True, help="Kaldi's --careful: check the final state.")
@click.option("--acoustic-scale", type=float, default=0.1, show_default=True)
@click.option("--transition-scale", type=float, default=1.0, show_default=True)
@click.option("--self-loop-scale", type=float, default=0.1, show_default=True)
@click.option("--boost-silence", type=float, default=1.0, show_default=True,
              help="Multiply the weights of the silence pdfs by this before aligning.")
@feature_pipeline_options()
@click.option("--max-failed", type=float, default=0.1, show_default=True,
              help="Fail when more than this fraction of the utterances cannot be aligned.")
@click.argument("model", type=click.Path(dir_okay=False, exists=True))
@click.argument("tree", type=click.Path(dir_okay=False, exists=True))
@click.argument("lang", type=click.Path(file_okay=False, exists=True))
@click.argument("data", type=click.Path(file_okay=False, exists=True))
@click.argument("ali_out", type=click.Path(dir_okay=False))
def gmm_align_cli(equal, beam, retry_beam, careful, acoustic_scale, transition_scale,
                  self_loop_scale, boost_silence, features, max_failed, model, tree, lang, data,
                  ali_out):
    """Align the utterances of the data dir DATA (its text and features) with MODEL and TREE
    over LANG's L.fst; write ALI_OUT (ali.JOB.gz). Features: CMVN, deltas, or for an LDA system
    --delta-order 0 --splice-opts ... --transform final.mat."""
    try:
        lang_dir = LangDir.load(lang)
        kaldi_model = read_model(model)
        texts = read_text(data)
        if not equal:  # an equal alignment does not score the features
            check_model_dim(model, kaldi_model.am_gmm.dim, data, features)
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    aligner = Aligner(kaldi_model, read_tree(tree), lang_dir, beam, retry_beam, careful,
                      acoustic_scale, transition_scale, self_loop_scale,
                      boost_silence)
    counter = SkipCounter(f"gmm-align {data}", max_failed)
    writer = AlignmentWriter(ali_out)
    ok = False
    try:
        for index, (utt, feats, problem) in enumerate(iter_features(data, features)):
            problem = problem or check_dim(feats, kaldi_model.am_gmm.dim)
            if problem is None and utt not in texts:
                problem = "no transcript in text"
            alignment = None
            if problem is None:
                alignment, problem = aligner.align(utt, texts[utt], feats, equal, seed=index)
            if problem:
                counter.skip(utt, problem)
                continue
            writer.write(utt, alignment)
            counter.ok()
        counter.check()
        aligner.log_summary()
        aligner.compiler.lang.log_oov_summary()
        ok = True
    except (RuntimeError, ValueError, zlib.error) as err:
        raise click.ClickException(str(err)) from None
    finally:
        writer.close(ok)  # a failed job leaves no (partial) ali file behind


class Aligner:
    """Aligns one utterance at a time; keeps the graph compiler and its inputs alive."""

    def __init__(self, model: KaldiModel, tree, lang: LangDir, beam: float, retry_beam: float,
                 careful: bool, acoustic_scale: float, transition_scale: float,
                 self_loop_scale: float, boost: float):
        self.model = model
        self.compiler = GraphCompiler(lang, model.transition_model, tree)
        self.config = kaldi_hmm_gmm.AlignConfig(beam=beam, retry_beam=retry_beam,
                                                careful=careful)
        self.scales = (acoustic_scale, transition_scale, self_loop_scale)
        self.am_gmm = boost_silence(model, lang.silence, boost)
        self.counts = [0, 0, 0, 0.0, 0]  # done, error, retried, total like, frames

    def align(self, utt: str, transcript: str, feats: np.ndarray, equal: bool, seed: int
              ) -> tuple[np.ndarray | None, str | None]:
        try:
            graph = self.compiler.compile(transcript)
        except TranscriptError as err:
            return None, str(err)
        if equal:
            alignment = equal_alignment(graph, len(feats), seed)
            if alignment is None:
                return None, (f"{len(feats)} frames are too few for the transcript's phones "
                              "(no equal alignment)")
            return alignment, None
        acoustic_scale, transition_scale, self_loop_scale = self.scales
        kaldi_hmm_gmm.add_transition_probs(trans_model=self.model.transition_model,
                                           transition_scale=transition_scale,
                                           self_loop_scale=self_loop_scale, fst=graph)
        decodable = kaldi_hmm_gmm.DecodableAmDiagGmmScaled(
            self.am_gmm, self.model.transition_model, feats, acoustic_scale)
        before_error = self.counts[1]
        *self.counts, alignment, _ = kaldi_hmm_gmm.align_utterance_wrapper(
            self.config, utt, acoustic_scale, graph, decodable, *self.counts)
        if self.counts[1] > before_error or len(alignment) != len(feats):
            return None, (f"no alignment within beam {self.config.retry_beam or self.config.beam}"
                          f" ({len(feats)} frames; too short for its transcript, or a bad "
                          "transcript)")
        return np.asarray(alignment, dtype=np.int32), None

    def log_summary(self) -> None:
        done, error, retried, like, frames = self.counts
        if frames:
            log.info("done %d, errors %d, retried %d; overall log-likelihood per frame is %.4f "
                     "over %d frames", done, error, retried, like / frames, frames)
