"""Acoustic rescoring of state-level lattices (Kaldi's gmm-rescore-lattice), for the last pass
of steps/decode_fmllr.sh: the lattices of a decode with the first-pass fMLLR transforms get the
acoustic costs of the final transforms, instead of a third decode.

Each arc with a transition id at frame t (emasr.decode.lattice_post.state_times) gets the
acoustic cost -log p(x_t | pdf of the id) under the model and the new features; the other arcs
and the final weights get acoustic cost 0; graph costs stay. The lattice's paths are unchanged,
so this is exact for them (a new search might have found others: Kaldi's choice too).
"""
from __future__ import annotations

import dataclasses
import logging

import click
import numpy as np

from emasr.kaldi.lattice_io import LatticeArcs, LatticeFormatError
from emasr.decode.lattice_post import state_times
from emasr.gmm.feature_options import feature_pipeline_options

log = logging.getLogger(__name__)


def rescore_acoustics(arcs: LatticeArcs, loglikes: np.ndarray, tid2pdf: np.ndarray,
                      where: str = "lattice") -> LatticeArcs:
    """The lattice with acoustic costs from ``loglikes`` [T, num_pdfs]; the lattice must span T
    frames (LatticeFormatError otherwise: lattice and features do not belong together)."""
    times = state_times(arcs, where)
    reached = [times[s] for s in arcs.finals if times[s] >= 0]
    num_frames = max(reached) if reached else -1
    if num_frames != len(loglikes):
        raise LatticeFormatError(f"{where}: the lattice has {num_frames} frames, the features "
                                 f"{len(loglikes)}")
    acoustic = np.zeros(len(arcs.ilabel))
    emitting = np.flatnonzero((arcs.ilabel != 0) & (times[arcs.src] >= 0))
    acoustic[emitting] = -loglikes[times[arcs.src[emitting]],
                                   tid2pdf[arcs.ilabel[emitting]]].astype(np.float64)
    finals = {s: (g, 0.0) for s, (g, _) in arcs.finals.items()}
    return dataclasses.replace(arcs, acoustic=acoustic, finals=finals)


@click.command("gmm-rescore-lattice")
@feature_pipeline_options()
@click.option("--acwt", type=float, default=0.083333, show_default=True,
              help="Acoustic scale of the 1-best written to the hypotheses table.")
@click.option("--word-symbol-table", type=click.Path(exists=True, dir_okay=False),
              default=None, help="words.txt: write words instead of integer ids.")
@click.option("--hyp-out", default=None, help="1-best text table (default: hyp.N.txt beside "
              "the output lattices).")
@click.argument("model", type=click.Path(dir_okay=False, exists=True))
@click.argument("lattices", type=click.Path(dir_okay=False, exists=True))
@click.argument("data", type=click.Path(file_okay=False, exists=True))
@click.argument("lattice_out", type=click.Path(dir_okay=False))
def gmm_rescore_lattice_cli(features, acwt, word_symbol_table, hyp_out, model, lattices, data,
                            lattice_out):
    """Kaldi's gmm-rescore-lattice: replace the acoustic costs of the lattices LATTICES
    (lat.JOB.gz, state-level, as gmm-decode writes them) by those of MODEL on the features of
    the data dir DATA through the pipeline the options give; write LATTICE_OUT (may be
    LATTICES) and its 1-best hypotheses."""
    from emasr.decode.cli import default_hyp_path, read_word_symbols
    from emasr.decode.gmm_loglikes import gmm_loglikes, stack_gmms
    from emasr.decode.lattice_best import best_paths
    from emasr.kaldi.lattice_io import LatticeArchiveWriter, read_lattices, to_kaldifst
    from emasr.gmm.features import check_model_dim, iter_features
    from emasr.kaldi.model_io import read_model
    from emasr.io.table import write_table

    try:
        kaldi_model = read_model(model)
        check_model_dim(model, kaldi_model.am_gmm.dim, data, features)
        old = list(read_lattices(lattices))          # LATTICE_OUT may be LATTICES
        wanted = {utt for utt, _ in old}
        feats = {utt: (x, problem) for utt, x, problem in iter_features(data, features)
                 if utt in wanted}
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    gmms = stack_gmms(kaldi_model.am_gmm)
    tid2pdf = np.asarray(kaldi_model.transition_model.id2pdf_id, dtype=np.int64)
    words = read_word_symbols(word_symbol_table)
    hyps, failed = {}, 0
    with LatticeArchiveWriter(lattice_out) as writer:
        for utt, arcs in old:
            x, problem = feats.get(utt, (None, "no features in the data dir"))
            try:
                if problem:
                    raise LatticeFormatError(problem)
                new = rescore_acoustics(arcs, gmm_loglikes(gmms, x), tid2pdf,
                                        f"{lattices}: {utt}")
            except (LatticeFormatError, ValueError) as err:
                log.warning("skipping utterance %s: %s", utt, err)
                failed += 1
                continue
            writer.write(utt, to_kaldifst(new))
            best = best_paths(new, [1.0 / acwt], [0.0], utt)[(1.0 / acwt, 0.0)]
            hyps[utt] = " ".join(words.get(w, str(w)) if words else str(w) for w in best)
        if not hyps:
            raise click.ClickException(f"no lattice of {lattices} could be rescored")
    write_table(hyp_out or default_hyp_path(lattice_out), hyps)
    log.info("Done %d lattices, %d failed", len(hyps), failed)
