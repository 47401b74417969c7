"""`emasr decode-loglikes` and `emasr gmm-decode`: one decoding job over many utterances.

Both go through `decode_job`: each utterance's log-likelihood matrix is decoded by
UtteranceDecoder, its lattice appended to `lat.N.gz` and its 1-best to `hyp.N.txt` (Kaldi text
table `utt word...`, sorted). An utterance that cannot be decoded (wrong number of pdfs, NaN/inf,
no surviving token, unreadable features) is logged by name and skipped; the counts per kind are in
the log, and the job fails only when no utterance at all was decoded (as Kaldi's latgen does).
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import click
import numpy as np

from emasr.decode.decoder import (DECODERS, PRUNE_INTERVAL, DecodeConfig, DecodeError,
                                  UtteranceDecoder)
from emasr.kaldi.fst import read_fst
from emasr.kaldi.lattice_io import LatticeArchiveWriter
from emasr.kaldi.tables import read_archive
from emasr.gmm.feature_options import transform_options
from emasr.io.table import read_table, write_table
from emasr.log import progress

logger = logging.getLogger(__name__)


@dataclass
class DecodeStats:
    num_done: int = 0
    num_frames: int = 0
    num_partial: int = 0
    failed: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    decoder_seconds: float = 0.0  # of `seconds`, in the C++ decoder call itself
    acoustic_cost: float = 0.0

    def summary(self, frame_shift: float) -> str:
        audio = self.num_frames * frame_shift
        speed = audio / self.seconds if self.seconds > 0 else float("inf")
        failed = ", ".join(f"{kind} {count}" for kind, count in sorted(self.failed.items()))
        avg = -self.acoustic_cost / max(self.num_frames, 1)
        share = self.decoder_seconds / self.seconds if self.seconds > 0 else 1.0
        return (f"decoded {self.num_done} utterances ({self.num_frames} frames, {audio:.1f} s of "
                f"audio) in {self.seconds:.1f} s = {speed:.1f}x real time (the decoder call "
                f"{100 * share:.0f}% of it); partial (no final "
                f"state) {self.num_partial}; failed {sum(self.failed.values())}"
                f"{' (' + failed + ')' if failed else ''}; average acoustic log-likelihood per "
                f"frame {avg:.3f}")


def default_hyp_path(lattice_path: str) -> str:
    """lat.3.gz -> hyp.3.txt beside it (any other name: <name>.hyp.txt)."""
    directory, name = os.path.split(lattice_path)
    match = re.fullmatch(r"lat\.(.+)\.gz", name)
    return os.path.join(directory, f"hyp.{match.group(1)}.txt" if match else name + ".hyp.txt")


def read_word_symbols(path: str | None) -> dict[int, str] | None:
    if not path:
        return None
    table = read_table(path)
    try:
        return {int(index): word for word, index in table.items()}
    except ValueError:
        raise click.ClickException(f"{path}: expected 'word integer-id' lines") from None


def decode_job(decoder: UtteranceDecoder, items: Iterable[tuple[str, np.ndarray | Exception]],
               lattice_path: str, hyp_path: str, word_symbols: dict[int, str] | None = None,
               total: int | None = None) -> DecodeStats:
    """Decode (utt, log-likelihoods) pairs; an Exception in place of a matrix is a failed read."""
    stats = DecodeStats()
    hyps = {}
    start = time.monotonic()
    try:
        with LatticeArchiveWriter(lattice_path) as lattices:
            _decode_items(decoder, items, lattices, hyps, word_symbols, total, stats)
            if stats.num_done == 0:
                raise _NothingDecoded  # aborts the lattice archive: no empty lat.N.gz
    except _NothingDecoded:
        # Nor an empty (or an earlier run's) hyp.N.txt or lat.N.gz, which scoring would read as
        # this job's result.
        for path in (lattice_path, hyp_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    else:
        write_table(hyp_path, hyps)
    stats.seconds = time.monotonic() - start
    return stats


class _NothingDecoded(Exception):
    """No utterance of the job was decoded: nothing is written."""


def _decode_items(decoder, items, lattices, hyps, word_symbols, total, stats) -> None:
    """Decode each item into `lattices` and `hyps`; a failed utterance is logged and counted."""
    for utt, loglikes in progress(items, total=total, desc="decode", logger=logger):
        try:
            if isinstance(loglikes, Exception):
                raise DecodeError(utt, "bad-input", str(loglikes))
            hyp = decoder.decode(utt, loglikes)
        except DecodeError as err:
            logger.warning("skipping %s", err)
            stats.failed[err.kind] += 1
            continue
        lattices.write(utt, hyp.lattice)
        words = [word_symbols.get(w, str(w)) for w in hyp.words] if word_symbols else \
            [str(w) for w in hyp.words]
        hyps[utt] = " ".join(words)
        logger.info("%s %s", utt, hyps[utt])
        stats.num_done += 1
        stats.num_frames += hyp.num_frames
        stats.num_partial += not hyp.reached_final
        stats.decoder_seconds += hyp.decoder_seconds
        stats.acoustic_cost += hyp.acoustic_cost


def read_matrices(rspecifier: str) -> Iterator[tuple[str, np.ndarray | Exception]]:
    """(utt, matrix) from a Kaldi rspecifier (`scp:x.scp`, `ark:x.ark`); a bare path ending in
    .scp or .ark is taken as such."""
    if ":" not in rspecifier.split(",")[0]:
        rspecifier = ("scp:" if rspecifier.endswith(".scp") else "ark:") + rspecifier
    yield from read_archive(rspecifier)


def load_decoder(model: str, hclg_path: str, config: DecodeConfig, need_gmm: bool = False):
    """(UtteranceDecoder, KaldiModel) from a Kaldi final.mdl and an HCLG.fst."""
    from emasr.kaldi.openfst_binary import FstFormatError
    from emasr.kaldi.model_io import KaldiFormatError, read_model

    for path in (model, hclg_path):
        if not os.path.isfile(path):
            raise click.ClickException(f"expected file {path} to exist")
    try:
        kaldi_model = read_model(model)
        hclg = read_fst(hclg_path)
    except (FstFormatError, KaldiFormatError) as err:
        raise click.ClickException(str(err)) from None
    if need_gmm and kaldi_model.am_gmm is None:
        raise click.ClickException(f"{model} holds no AmDiagGmm (a transition model only)")
    return UtteranceDecoder(hclg, kaldi_model.transition_model, config), kaldi_model


def decode_options(func):
    """The decoder options shared by decode-loglikes and gmm-decode (Kaldi's names)."""
    options = [
        click.option("--beam", type=float, default=13.0, show_default=True,
                     help="Decoding beam."),
        click.option("--lattice-beam", type=float, default=8.0, show_default=True,
                     help="Lattice pruning beam."),
        click.option("--max-active", type=int, default=7000, show_default=True,
                     help="Most active states per frame (lattice-faster only)."),
        click.option("--min-active", type=int, default=200, show_default=True,
                     help="Fewest active states per frame (lattice-faster only)."),
        click.option("--prune-interval", type=click.IntRange(min=1), default=PRUNE_INTERVAL,
                     show_default=True,
                     help="Frames between lattice pruning passes (Kaldi's option): the "
                          "lattice is the same for any interval, the speed and memory are not."),
        click.option("--acwt", "--acoustic-scale", "acwt", type=float, default=0.1,
                     show_default=True, help="Acoustic scale applied to the log-likelihoods."),
        click.option("--decoder", type=click.Choice(DECODERS), default="lattice-faster",
                     show_default=True,
                     help="Both write Kaldi's raw lattices; lattice-faster also prunes by "
                          "--max-active/--min-active, lattice-simple by --beam only."),
        click.option("--allow-partial/--no-allow-partial", default=True, show_default=True,
                     help="Output a partial result when no final state is reached."),
        click.option("--word-symbol-table", type=click.Path(exists=True, dir_okay=False),
                     default=None, help="words.txt: write words instead of integer ids."),
        click.option("--hyp-out", default=None,
                     help="1-best text table (default: hyp.N.txt beside lat.N.gz)."),
        click.option("--frame-shift", type=float, default=0.01, show_default=True,
                     help="Seconds per frame of the matrices, for the real-time factor "
                          "(0.03 for networks on 3-frame stacked features)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def config_from(options: dict) -> DecodeConfig:
    return DecodeConfig(beam=options["beam"], lattice_beam=options["lattice_beam"],
                        max_active=options["max_active"], min_active=options["min_active"],
                        prune_interval=options["prune_interval"], acwt=options["acwt"],
                        decoder=options["decoder"], allow_partial=options["allow_partial"])


def finish(stats: DecodeStats, frame_shift: float) -> None:
    logger.info(stats.summary(frame_shift))
    if stats.num_done == 0:
        raise click.ClickException("no utterance was decoded")


@click.command("decode-loglikes")
@decode_options
@click.argument("model", type=click.Path(dir_okay=False))
@click.argument("hclg", type=click.Path(dir_okay=False))
@click.argument("loglikes_rspecifier")
@click.argument("lattice_out")
def decode_loglikes_cli(model, hclg, loglikes_rspecifier, lattice_out, **options):
    """Decode log-likelihood matrices over pdfs (Kaldi's latgen-faster-mapped).

    MODEL is a Kaldi final.mdl (its TransitionModel maps pdfs to the graph's transition ids),
    HCLG the graph, LOGLIKES_RSPECIFIER e.g. scp:loglikes.1.scp, LATTICE_OUT e.g. lat.1.gz.
    """
    decoder, _ = load_decoder(model, hclg, config_from(options))
    stats = decode_job(decoder, read_matrices(loglikes_rspecifier), lattice_out,
                       options["hyp_out"] or default_hyp_path(lattice_out),
                       read_word_symbols(options["word_symbol_table"]))
    finish(stats, options["frame_shift"])


def gmm_loglike_items(data_dir: str, am_gmm, cmvn: str, norm_vars: bool, delta_order: int,
                      stages=None) -> Iterator[tuple[str, np.ndarray | Exception]]:
    """(utt, GMM log-likelihoods) over a data dir's features with CMVN and deltas, as
    emasr.feats.deltas.iter_gmm_feats reads them, then ``stages`` (an LDA system's splicing and
    final.mat, SAT's per-speaker transforms: emasr.gmm.features.FeatureStages); a
    per-utterance failure (features that do not fit the CMVN stats, a transform or the GMMs)
    is passed on in place of the matrix."""
    from emasr.decode.gmm_loglikes import gmm_loglikes, stack_gmms
    from emasr.feats.cmvn import apply_cmvn
    from emasr.feats.deltas import add_deltas
    from emasr.feats.reader import iter_feats_with_stats

    gmms = stack_gmms(am_gmm)
    for utt, feats, stats in iter_feats_with_stats(data_dir, cmvn):
        try:
            if stats is not None:
                feats = apply_cmvn(feats, stats, norm_vars)
            if delta_order > 0:
                feats = add_deltas(feats, delta_order)
            if stages is not None:
                feats = stages.apply(utt, feats)
            yield utt, gmm_loglikes(gmms, feats)
        except ValueError as err:  # CmvnError is a ValueError too
            yield utt, err


@click.command("gmm-decode")
@decode_options
@click.option("--cmvn", type=click.Choice(["speaker", "global", "none"]), default="speaker",
              show_default=True, help="CMVN stats: per speaker (cmvn.scp), global or none.")
@click.option("--norm-vars/--no-norm-vars", default=False, show_default=True,
              help="Normalise variances too (Kaldi cmvn_opts --norm-vars=true).")
@click.option("--delta-order", type=int, default=2, show_default=True,
              help="Delta order of the features (Kaldi's add-deltas; 0 = none).")
@transform_options
@click.argument("model", type=click.Path(dir_okay=False))
@click.argument("hclg", type=click.Path(dir_okay=False))
@click.argument("data_dir", type=click.Path(file_okay=False))
@click.argument("lattice_out")
def gmm_decode_cli(model, hclg, data_dir, lattice_out, cmvn, norm_vars, delta_order,
                   splice_opts, transform, speaker_transforms, utt2spk, **options):
    """Decode a data dir with a Kaldi GMM model (Kaldi's gmm-latgen-faster).

    Features are read as Kaldi's decode.sh reads them (apply-cmvn, then add-deltas, or for an
    LDA system --delta-order 0 --splice-opts ... --transform final.mat), scored by the model's
    AmDiagGmm and decoded through the same path as decode-loglikes.
    """
    from emasr.gmm.features import FeatureOptions, check_model_dim, feature_stages
    decoder, kaldi_model = load_decoder(model, hclg, config_from(options), need_gmm=True)
    feature_options = FeatureOptions(delta_order=delta_order, splice_opts=splice_opts,
                                     transform=transform, speaker_transforms=speaker_transforms,
                                     utt2spk=utt2spk)
    try:
        check_model_dim(model, kaldi_model.am_gmm.dim, data_dir, feature_options)
        stages = feature_stages(data_dir, feature_options)
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    items = gmm_loglike_items(data_dir, kaldi_model.am_gmm, cmvn, norm_vars, delta_order,
                              stages)
    stats = decode_job(decoder, items, lattice_out,
                       options["hyp_out"] or default_hyp_path(lattice_out),
                       read_word_symbols(options["word_symbol_table"]))
    finish(stats, options["frame_shift"])
