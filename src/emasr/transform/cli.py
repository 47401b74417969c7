"""The transform steps' command lines, with Kaldi's names and arguments: acc-lda, est-lda,
gmm-acc-mllt, est-mllt, gmm-transform-means, gmm-est-fmllr, transform-feats,
compose-transforms. Statistics files (``lda.JOB.acc``, ``N.JOB.macc``) are NumPy archives, as
gmm-acc-stats-ali's; matrices are Kaldi's (emasr.kaldi.matrix_io)."""
from __future__ import annotations

import functools
import logging
from typing import Iterator

import click
import kaldiio
import numpy as np

from emasr.kaldi.alignments import iter_alignment_file
from emasr.kaldi.io import KaldiFormatError
from emasr.kaldi.tables import read_archive
from emasr.io.table import read_table
from emasr.gmm.features import SkipCounter, TransformedFeatures, alignment_problem
from emasr.transform.fmllr import UPDATE_TYPES
from emasr.transform.gmm import GmmModel, parse_phone_list, read_gmm_model

log = logging.getLogger(__name__)

# Features are gathered over this many frames before the per-pdf MLLT accumulation.
MLLT_BATCH_FRAMES = 200_000


def feature_options(command):
    """The feature pipeline options shared by the steps that read features."""
    options = [
        click.option("--cmvn-opts", default="", help="Kaldi's cmvn_opts for a data dir's "
                     "features, e.g. '--norm-vars=false' (CMVN from cmvn.scp per speaker)."),
        click.option("--delta-order", type=int, default=0, show_default=True,
                     help="Add deltas of this order first (0: none, as for LDA features)."),
        click.option("--splice-opts", default="", help="Splice frames, Kaldi's splice_opts, "
                     "e.g. '--left-context=3 --right-context=3'."),
        click.option("--transform", "transform", type=click.Path(dir_okay=False, exists=True),
                     default=None, help="Then apply this Kaldi matrix (final.mat)."),
        click.option("--speaker-transforms", default=None, help="Then apply per-speaker "
                     "transforms from this table, e.g. 'ark:exp/tri3/trans.1'."),
        click.option("--utt2spk", default=None, type=click.Path(dir_okay=False, exists=True),
                     help="utt2spk for --speaker-transforms (default: the data dir's)."),
    ]
    return stacked(options)(command)


def stacked(decorators: list):
    """The decorators as if written one above the other in this order."""
    def decorate(command):
        for decorator in reversed(decorators):
            command = decorator(command)
        return command
    return decorate


def aligned_inputs(output: str):
    """The options and arguments of a command that reads features with their alignments:
    the feature pipeline, silence weighting, --max-skipped, MODEL FEATS ALI and `output`."""
    return stacked([
        feature_options, silence_options(0.0),
        click.option("--max-skipped", type=float, default=0.1, show_default=True,
                     help="Fail when more than this fraction of utterances cannot be used."),
        click.argument("model", type=click.Path(dir_okay=False, exists=True)),
        click.argument("feats"),
        click.argument("ali", type=click.Path(dir_okay=False, exists=True)),
        click.argument(output, type=click.Path(dir_okay=False))])


def silence_options(default_weight: float):
    def decorate(command):
        command = click.option("--silence-weight", type=float, default=default_weight,
                               show_default=True, help="Weight of silence frames "
                               "(weight-silence-post).")(command)
        return click.option("--silence-phones", default="", help="Colon-separated silence "
                            "phone ids (data/lang/phones/silence.csl); empty: no "
                            "weighting.")(command)
    return decorate


def clean_errors(function):
    """Input errors become one-line click errors naming the file (no traceback)."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except (ValueError, RuntimeError, FileNotFoundError, KeyError, KaldiFormatError) as err:
            raise click.ClickException(str(err)) from None
    return wrapper


def make_features(feats: str, cmvn_opts, delta_order, splice_opts, transform,
                  speaker_transforms, utt2spk) -> TransformedFeatures:
    return TransformedFeatures(feats, cmvn_opts, delta_order, splice_opts, transform,
                               speaker_transforms, utt2spk)


def iter_aligned(model: GmmModel, features: TransformedFeatures, ali_path: str,
                 silence_phones: str, silence_weight: float, counter: SkipCounter,
                 dim: int | None) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """(utt, features, pdf ids, frame weights) per usable utterance; the others are skipped on
    ``counter`` with the reason (in the log, naming the utterance). Features must have ``dim``
    dimensions (the model's), or, with dim None, all the first usable utterance's."""
    silence = parse_phone_list(silence_phones)
    alignments = dict(iter_alignment_file(ali_path))
    num_tids = model.transitions.num_transition_ids
    expected = dim
    for utt, feats, problem in features:
        if problem is None:
            expected = feats.shape[1] if expected is None else expected
            if feats.shape[1] != expected:
                whose = "the model expects" if dim is not None else "the first utterance has"
                problem = (f"features have dimension {feats.shape[1]}, {whose} {expected} "
                           "(check --splice-opts, --delta-order and --transform)")
        ali = alignments.get(utt)
        problem = problem or alignment_problem(ali, len(feats), num_tids)
        if problem:
            counter.skip(utt, problem)
            continue
        counter.ok()
        yield utt, feats, model.frame_pdfs(ali), model.frame_weights(ali, silence,
                                                                     silence_weight)


def load_model(path: str) -> GmmModel:
    return read_gmm_model(path)


# -- LDA --

@click.command("acc-lda")
@aligned_inputs("acc_out")
@clean_errors
def acc_lda_cli(cmvn_opts, delta_order, splice_opts, transform, speaker_transforms, utt2spk,
                silence_phones, silence_weight, max_skipped, model, feats, ali, acc_out):
    """Kaldi's acc-lda: LDA statistics into ACC_OUT, the classes being the pdfs of MODEL's
    transition ids in ALI (an ali.JOB.gz), from FEATS (a data dir, or a Kaldi table such as
    scp:feats.scp). As train_lda_mllt.sh: --splice-opts '--left-context=3 --right-context=3'
    --silence-phones $(cat data/lang/phones/silence.csl)."""
    from emasr.transform.lda import LdaStats
    gmm_model = load_model(model)
    features = make_features(feats, cmvn_opts, delta_order, splice_opts, transform,
                             speaker_transforms, utt2spk)
    counter = SkipCounter(f"acc-lda {feats}", max_skipped)
    stats = None
    for _, x, pdfs, weights in iter_aligned(gmm_model, features, ali, silence_phones,
                                            silence_weight, counter, dim=None):
        if stats is None:
            stats = LdaStats.zeros(gmm_model.transitions.num_pdfs, x.shape[1])
        stats.accumulate(x, pdfs, weights)
    counter.check()
    stats.save(acc_out)
    log.info("acc-lda: %g frames (weighted), %d classes, dimension %d", stats.zero.sum(),
             stats.num_classes, stats.dim)


@click.command("est-lda")
@click.option("--dim", type=int, default=40, show_default=True,
              help="Dimension to project to.")
@click.option("--remove-offset", type=click.BOOL, default=False, show_default=True,
              help="Append an offset column so the projected mean is zero (affine matrix).")
@click.option("--within-class-factor", type=float, default=1.0, show_default=True,
              help="1.0: conventional LDA (unit within-class variance in the output); less "
              "scales down the dimensions whose between-class variance is small.")
@click.option("--allow-large-dim", type=click.BOOL, default=False, show_default=True,
              help="Allow --dim >= the number of classes.")
@click.option("--write-full-matrix", type=click.Path(dir_okay=False), default=None,
              help="Also write the full (undimension-reduced) LDA matrix here.")
@click.option("--binary", type=click.BOOL, default=True, show_default=True,
              help="Write Kaldi's binary matrix format (false: text).")
@click.argument("matrix_out", type=click.Path(dir_okay=False))
@click.argument("accs", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@clean_errors
def est_lda_cli(dim, remove_offset, within_class_factor, allow_large_dim, write_full_matrix,
                binary, matrix_out, accs):
    """Kaldi's est-lda: sum the acc-lda statistics ACCS and write the LDA matrix MATRIX_OUT
    (dim x D, or dim x (D+1) with --remove-offset true), e.g. exp/tri2/0.mat."""
    from emasr.transform.lda import estimate_lda, sum_lda_stats
    from emasr.kaldi.matrix_io import write_matrix
    result = estimate_lda(sum_lda_stats(list(accs)), dim, remove_offset, within_class_factor,
                          allow_large_dim)
    write_matrix(matrix_out, result.matrix, binary)
    if write_full_matrix:
        write_matrix(write_full_matrix, result.full_matrix, binary)
    log.info("est-lda: wrote %d x %d matrix to %s", *result.matrix.shape, matrix_out)


# -- MLLT --

@click.command("gmm-acc-mllt")
@aligned_inputs("acc_out")
@clean_errors
def gmm_acc_mllt_cli(cmvn_opts, delta_order, splice_opts, transform, speaker_transforms,
                     utt2spk, silence_phones, silence_weight, max_skipped, model, feats, ali,
                     acc_out):
    """Kaldi's gmm-acc-mllt: MLLT statistics into ACC_OUT (N.JOB.macc) from the Gaussian
    posteriors of MODEL's GMMs within the pdfs aligned in ALI, on FEATS (a data dir or a Kaldi
    table) in the model's current feature space (e.g. --splice-opts ... --transform N.mat)."""
    from emasr.transform.mllt import MlltStats
    gmm_model = load_model(model)
    features = make_features(feats, cmvn_opts, delta_order, splice_opts, transform,
                             speaker_transforms, utt2spk)
    counter = SkipCounter(f"gmm-acc-mllt {feats}", max_skipped)
    stats = MlltStats.zeros(gmm_model.dim)
    batch: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    like = 0.0

    def flush():
        nonlocal like
        if batch:
            x, pdfs, weights = (np.concatenate(parts) for parts in zip(*batch))
            like += stats.accumulate(x, pdfs, weights, gmm_model.pdfs)
            batch.clear()

    for _, x, pdfs, weights in iter_aligned(gmm_model, features, ali, silence_phones,
                                            silence_weight, counter, gmm_model.dim):
        batch.append((x, pdfs, weights))
        if sum(len(b[0]) for b in batch) >= MLLT_BATCH_FRAMES:
            flush()
    flush()
    counter.check()
    stats.save(acc_out)
    log.info("gmm-acc-mllt: average like per frame is %.4f over %g frames",
             like / max(stats.beta, 1e-10), stats.beta)


@click.command("est-mllt")
@click.option("--binary", type=click.BOOL, default=True, show_default=True,
              help="Write Kaldi's binary matrix format (false: text).")
@click.argument("matrix_out", type=click.Path(dir_okay=False))
@click.argument("accs", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@clean_errors
def est_mllt_cli(binary, matrix_out, accs):
    """Kaldi's est-mllt: sum the gmm-acc-mllt statistics ACCS and write the square MLLT matrix
    MATRIX_OUT, estimated from the identity (compose it with the previous transform:
    compose-transforms MATRIX_OUT N.mat N+1.mat)."""
    from emasr.kaldi.matrix_io import write_matrix
    from emasr.transform.mllt import mllt_update, sum_mllt_stats
    stats = sum_mllt_stats(list(accs))
    matrix, improvement = mllt_update(stats)
    write_matrix(matrix_out, matrix, binary)
    log.info("Overall objective function improvement for MLLT is %.6g over %g frames",
             improvement / max(stats.beta, 1e-10), stats.beta)


@click.command("gmm-transform-means")
@click.option("--binary", type=click.BOOL, default=True, show_default=True)
@click.argument("matrix", type=click.Path(dir_okay=False, exists=True))
@click.argument("model_in", type=click.Path(dir_okay=False, exists=True))
@click.argument("model_out", type=click.Path(dir_okay=False))
@clean_errors
def gmm_transform_means_cli(binary, matrix, model_in, model_out):
    """Kaldi's gmm-transform-means: MODEL_OUT is MODEL_IN with every Gaussian mean mu replaced
    by A mu (+ b) for the D x D (or D x (D+1)) MATRIX; weights and variances unchanged."""
    from emasr.kaldi.matrix_io import read_matrix
    from emasr.transform.mllt import transform_means
    model = load_model(model_in)
    model.pdfs = transform_means(model.pdfs, read_matrix(matrix))
    write_gmm_model(model_out, model, binary)


def write_gmm_model(path: str, model: GmmModel, binary: bool = True) -> None:
    from emasr.kaldi.io import KaldiWriter
    from emasr.kaldi.model_io import GmmArrays, write_am_gmm_arrays
    from emasr.kaldi.transitions import write_transition_table
    from emasr.io.atomic import atomic_write
    writer = KaldiWriter(binary)
    write_transition_table(writer, model.transitions)
    arrays = []
    for gmm in model.pdfs:
        gconsts = gmm.log_likelihoods(np.zeros((1, gmm.dim)))[0]   # Kaldi's gconsts
        arrays.append(GmmArrays(gconsts.astype(np.float32), gmm.weights.astype(np.float32),
                                (gmm.means * gmm.inv_vars).astype(np.float32),
                                gmm.inv_vars.astype(np.float32)))
    write_am_gmm_arrays(writer, arrays)
    with atomic_write(path, "wb", encoding=None) as f:
        f.write(writer.getvalue())


# -- fMLLR --

@click.command("gmm-est-fmllr")
@aligned_inputs("trans_out")
@click.option("--spk2utt", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Estimate one transform per speaker of this spk2utt (default: per "
              "utterance, as Kaldi).")
@click.option("--post", "is_post", is_flag=True, help="ALI is a Kaldi posterior archive "
              "(lattice-to-post's post.JOB.gz: per-frame transition-id weights) instead of "
              "alignments.")
@click.option("--gpost-model", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Gaussian posteriors from this model, matching MODEL Gaussian for Gaussian "
              "(a SAT system's final.alimdl), on the same features: Kaldi's gmm-post-to-gpost "
              "| gmm-est-fmllr-gpost.")
@click.option("--fmllr-update-type", type=click.Choice(UPDATE_TYPES), default="full",
              show_default=True, help="full: A and b; diag: A diagonal, and b; offset: b only "
              "(A = I); none: the identity.")
@click.option("--fmllr-min-count", type=float, default=500.0, show_default=True,
              help="Below this many (weighted) frames the transform stays the identity.")
@click.option("--fmllr-num-iters", type=int, default=40, show_default=True)
@clean_errors
def gmm_est_fmllr_cli(cmvn_opts, delta_order, splice_opts, transform, speaker_transforms,
                      utt2spk, silence_phones, silence_weight, spk2utt, is_post, gpost_model,
                      fmllr_update_type, fmllr_min_count, fmllr_num_iters, max_skipped, model,
                      feats, ali, trans_out):
    """Kaldi's gmm-est-fmllr: one fMLLR transform (D x (D+1)) per speaker (--spk2utt) or per
    utterance, from the Gaussian posteriors of MODEL within the pdfs of ALI (alignments, or
    with --post posteriors) on FEATS (a data dir or a Kaldi table), written as the Kaldi archive
    TRANS_OUT (trans.JOB). Silence frames (entries) are weighted by --silence-weight."""
    from emasr.transform.fmllr import FmllrStats, estimate_fmllr
    from emasr.kaldi.matrix_io import write_matrix_table
    gmm_model = load_model(model)
    gpost_gmms = check_gpost_model(gpost_model, gmm_model, model) if gpost_model else None
    features = make_features(feats, cmvn_opts, delta_order, splice_opts, transform,
                             speaker_transforms, utt2spk)
    utt_to_key = {}
    stats: dict[str, FmllrStats] = {}
    if spk2utt:   # every speaker gets a transform (the identity without usable frames)
        for speaker, utts in read_table(spk2utt).items():
            utt_to_key.update((u, speaker) for u in utts.split())
            stats[speaker] = FmllrStats.zeros(gmm_model.dim)
    counter = SkipCounter(f"gmm-est-fmllr {feats}", max_skipped)
    frames = iter_posterior_frames if is_post else iter_aligned
    for utt, x, pdfs, weights in frames(gmm_model, features, ali, silence_phones,
                                        silence_weight, counter, gmm_model.dim):
        key = utt_to_key.get(utt, utt) if spk2utt else utt
        if spk2utt and utt not in utt_to_key:
            log.warning("utterance %s is not in %s: its own transform", utt, spk2utt)
        stats.setdefault(key, FmllrStats.zeros(gmm_model.dim)).accumulate(
            x, pdfs, weights, gmm_model.pdfs, gpost_gmms)
    counter.check()
    transforms = {}
    total_impr = total_frames = 0.0
    for key in sorted(stats):
        W, improvement = estimate_fmllr(stats[key], fmllr_update_type, fmllr_min_count,
                                        fmllr_num_iters)
        transforms[key] = W
        count = stats[key].beta
        log.info("For %s %s, auxf-impr from fMLLR is %.6g, over %g frames",
                 "speaker" if spk2utt else "utterance", key, improvement / max(count, 1e-10),
                 count)
        total_impr += improvement
        total_frames += count
    write_matrix_table(trans_out, transforms)
    log.info("Overall fMLLR auxf impr per frame is %.6g over %g frames",
             total_impr / max(total_frames, 1e-10), total_frames)


def iter_posterior_frames(model: GmmModel, features: TransformedFeatures, post_path: str,
                          silence_phones: str, silence_weight: float, counter: SkipCounter,
                          dim: int | None):
    """As iter_aligned, but (utt, features [N, D], pdfs [N], weights [N]) with one entry per
    (frame, transition id) of the posteriors, its frame's features repeated (Kaldi's
    AccumulateForUtterance over a Posterior); silence entries weighted as weight-silence-post
    weights them."""
    from emasr.ali.posterior import read_posteriors, weight_silence
    silence = parse_phone_list(silence_phones)
    posteriors = dict(read_posteriors(post_path))
    num_tids = model.transitions.num_transition_ids
    for utt, feats, problem in features:
        if problem is None and feats.shape[1] != dim:
            problem = f"features have dimension {feats.shape[1]}, the model expects {dim}"
        post = posteriors.get(utt)
        if problem is None:
            if post is None:
                problem = f"no posteriors in {post_path}"
            elif post.num_frames != len(feats):
                problem = f"posteriors have {post.num_frames} frames, features {len(feats)}"
            elif len(post.ids) and (post.ids.min() < 1 or post.ids.max() > num_tids):
                problem = "transition ids outside the model"
        if problem:
            counter.skip(utt, problem)
            continue
        counter.ok()
        post = weight_silence(post, model.transitions.id2phone, silence, silence_weight)
        yield utt, feats[post.frames], model.frame_pdfs(post.ids), post.weights


def check_gpost_model(path: str, model: GmmModel, model_path: str):
    """The pdfs of the --gpost-model, which must match MODEL's pdf for pdf and Gaussian for
    Gaussian (as a SAT system's final.alimdl matches its final.mdl)."""
    other = load_model(path)
    if len(other.pdfs) != len(model.pdfs) or other.dim != model.dim or any(
            len(a.weights) != len(b.weights) for a, b in zip(other.pdfs, model.pdfs)):
        raise ValueError(f"--gpost-model {path} does not match {model_path} Gaussian for "
                         f"Gaussian ({len(other.pdfs)} vs {len(model.pdfs)} pdfs, dimension "
                         f"{other.dim} vs {model.dim}, or other Gaussians per pdf)")
    return other.pdfs


# -- applying and composing --

@click.command("transform-feats")
@click.option("--utt2spk", type=click.Path(dir_okay=False, exists=True), default=None,
              help="With a table of per-speaker transforms: utt2spk to find each one.")
@click.argument("transform")
@click.argument("rspecifier")
@click.argument("wspecifier")
@clean_errors
def transform_feats_cli(utt2spk, transform, rspecifier, wspecifier):
    """Kaldi's transform-feats: apply TRANSFORM (a Kaldi matrix file, or a table such as
    ark:trans.1 keyed by utterance or, with --utt2spk, speaker) to the features RSPECIFIER,
    writing WSPECIFIER (e.g. ark,scp:out.ark,out.scp). Linear (R x D) or affine (R x (D+1))."""
    from emasr.kaldi.matrix_io import (TransformError, apply_transform,
                                           is_table_specifier, read_matrix, read_matrix_table)
    table = read_matrix_table(transform) if is_table_specifier(transform) else None
    single = None if table is not None else read_matrix(transform)
    speakers = read_table(utt2spk) if utt2spk else {}
    done = errors = 0
    with kaldiio.WriteHelper(wspecifier) as writer:
        for utt, feats in read_archive(rspecifier):
            matrix = single
            if table is not None:
                key = speakers.get(utt, utt)
                matrix = table.get(key)
                if matrix is None:
                    log.warning("transform-feats: no transform for utterance %s (key %s) in %s",
                                utt, key, transform)
                    errors += 1
                    continue
            try:
                writer(utt, apply_transform(feats, matrix, f"utterance {utt}"))
            except TransformError as err:
                raise click.ClickException(f"{err} (transform {transform})") from None
            done += 1
    log.info("transform-feats: applied the transform to %d utterances; %d had errors", done,
             errors)
    if done == 0:
        raise click.ClickException(f"transform-feats: no utterances transformed from "
                                   f"{rspecifier}")


@click.command("compose-transforms")
@click.option("--b-is-affine", type=click.BOOL, default=False, show_default=True,
              help="B is affine (D x (D+1)) even if A's size would allow B linear.")
@click.option("--binary", type=click.BOOL, default=True, show_default=True)
@click.argument("a")
@click.argument("b")
@click.argument("c")
@clean_errors
def compose_transforms_cli(b_is_affine, binary, a, b, c):
    """Kaldi's compose-transforms: C = A B, the transform that applies B, then A. A and B are
    Kaldi matrix files or tables (ark:...); with a table, C is an archive composed per key."""
    from emasr.kaldi.matrix_io import (compose_transforms, is_table_specifier, read_matrix,
                                           read_matrix_table, write_matrix,
                                           write_matrix_table)
    a_table = read_matrix_table(a) if is_table_specifier(a) else None
    b_table = read_matrix_table(b) if is_table_specifier(b) else None
    if a_table is None and b_table is None:
        write_matrix(c, compose_transforms(read_matrix(a), read_matrix(b), b_is_affine), binary)
        return
    out_path = c.split(":", 1)[1] if is_table_specifier(c) else c
    a_single = read_matrix(a) if a_table is None else None
    b_single = read_matrix(b) if b_table is None else None
    keys = a_table if a_table is not None else b_table
    out = {}
    for key in keys:
        a_matrix = a_table[key] if a_table is not None else a_single
        if b_table is not None and key not in b_table:
            log.warning("compose-transforms: no transform for %s in %s", key, b)
            continue
        b_matrix = b_table[key] if b_table is not None else b_single
        try:
            out[key] = compose_transforms(a_matrix, b_matrix, b_is_affine)
        except ValueError as err:
            raise ValueError(f"{key}: {err}") from None
    write_matrix_table(out_path, out)
