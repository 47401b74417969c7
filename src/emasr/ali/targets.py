"""Network training targets from an alignment dir: per-frame pdf ids at the network's frame rate.

``emasr make-targets ALI_DIR FEAT_DATA DIR`` writes the targets dir (interface 3):

- ``pdf.scp`` + ``pdf.JOB.ark``: one int32 vector per utterance, ``ceil(T/k)`` pdf ids for T
  feature frames at 10 ms, subsampled by the feature pipeline's own rule (the label at the centre
  of each stacked window, emasr.feats.pipeline.FeaturePipeline.subsample_labels);
- ``num_pdfs``; ``pdf_counts`` (Kaldi text vector of the written targets' counts); ``prior.vec``
  (log priors, floored, Kaldi text vector; counted over the utterances of ``--priors-from`` when
  given, so that a dev set aligned for frame accuracy does not leak into the model);
  ``frame_subsampling_factor``; ``tree.sha256``, the digest of the ali dir's ``tree`` when it has
  one (emasr.compat: training and ``check-compatible --targets --tree`` refuse another tree's);
- ``skipped`` (utterance -> reason) and ``summary``.

Lengths are checked as Kaldi does: an alignment at 10 ms must have the features' T frames within 2
(it is then cut or padded to T before subsampling); an alignment already at the network rate (its
dir has ``frame_subsampling_factor`` = k) must have ceil(T/k) frames within 1. Utterances that fail,
have no features, or have no alignment are listed; the step fails, writing nothing, when more than
``--max-lost`` (2%) of the feature utterances would get no targets. Every check runs before the
first file is written, and each file is written atomically with pdf.scp last.
"""
from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import click
import kaldiio.matio
import numpy as np

from emasr.kaldi.alignments import ALI_TYPES, AlignmentDir, AlignmentError, open_alignment_dir
from emasr.compat import TREE_DIGEST_FILE, record_tree
from emasr.feats.pipeline import FeaturePipeline, PipelineConfig, lengths_agree
from emasr.kaldi.io import KaldiReader, KaldiWriter
from emasr.kaldi.tables import read_scp
from emasr.io.atomic import atomic_write
from emasr.io.table import TableError, read_table, write_table
from emasr.log import progress

log = logging.getLogger(__name__)

DEFAULT_PRIOR_FLOOR = 5e-6   # the floor of Kaldi's nnet3-am-adjust-priors
DEFAULT_MAX_LOST = 0.02
DEFAULT_MAX_UNSEEN_PDFS = 0.5  # a tree grown on these alignments gives every pdf data; half
                               # unseen means the alignments come from another model
SUBSAMPLED_TOLERANCE = 1     # frames, for alignments already at the network's frame rate
MAX_LOGGED_SKIPS = 20


class TargetsError(RuntimeError):
    """make-targets cannot produce a usable targets dir; nothing was written."""


@dataclass
class TargetsSummary:
    """What make-targets did, for the log and the ``summary`` file."""
    feature_utts: int = 0
    alignment_utts: int = 0
    written: int = 0
    frames: int = 0
    skipped: dict[str, str] = field(default_factory=dict)   # utt -> reason
    never_seen: list[int] = field(default_factory=list)     # pdfs with no target frame
    prior_utts: int = 0                                     # utterances the priors count
    prior_frames: int = 0

    @property
    def lost(self) -> int:
        return self.feature_utts - self.written

    def lines(self) -> list[str]:
        reasons = Counter(map(reason_kind, self.skipped.values()))
        out = [f"utterances_in_features {self.feature_utts}",
               f"utterances_in_alignments {self.alignment_utts}",
               f"utterances_written {self.written}",
               f"frames_written {self.frames}",
               f"utterances_skipped {len(self.skipped)}"]
        out += [f"skipped_{reason.replace(' ', '_')} {n}" for reason, n in sorted(reasons.items())]
        out.append(f"pdfs_never_seen {len(self.never_seen)}"
                   + (" " + " ".join(map(str, self.never_seen)) if self.never_seen else ""))
        out += [f"prior_utterances {self.prior_utts}", f"prior_frames {self.prior_frames}"]
        return out


def reason_kind(reason: str) -> str:
    """'length mismatch: alignment has ...' -> 'length mismatch' (for counting skips)."""
    return reason.split(":")[0].split(" (")[0]


# -- lengths and subsampling --

def feature_frame_counts(data_dir: str | os.PathLike) -> dict[str, int]:
    """Frames per utterance at 10 ms: utt2num_frames if present, else the rows in feats.scp."""
    data_dir = Path(data_dir)
    if (data_dir / "utt2num_frames").is_file():
        table = read_table(data_dir / "utt2num_frames")
        try:
            return {utt: int(value) for utt, value in table.items()}
        except ValueError:
            bad = next(u for u, v in table.items() if not v.isdigit())
            raise TableError(f"{data_dir}/utt2num_frames: utterance {bad}: expected a frame "
                             f"count, got '{table[bad]}'") from None
    if (data_dir / "feats.scp").is_file():
        feats = read_scp(data_dir / "feats.scp")
        return {utt: int(np.shape(feats[utt])[0]) for utt in feats}
    raise TargetsError(f"expected file {data_dir}/utt2num_frames or {data_dir}/feats.scp to exist")


def fit_to_features(pdfs: np.ndarray, num_frames: int, ali_factor: int,
                    pipeline: FeaturePipeline) -> tuple[np.ndarray | None, str]:
    """Targets of length ceil(T/k) for T feature frames, or (None, reason) past the tolerance."""
    if len(pdfs) == 0:
        return None, "empty alignment"
    if ali_factor == 1:
        if not lengths_agree(num_frames, len(pdfs)):
            return None, (f"length mismatch: alignment has {len(pdfs)} frames, features "
                          f"{num_frames} (tolerance 2)")
        return pipeline.subsample_labels(_cut_or_pad(pdfs, num_frames)), ""
    expected = pipeline.num_output_frames(num_frames)
    if not lengths_agree(expected, len(pdfs), SUBSAMPLED_TOLERANCE):
        return None, (f"length mismatch: alignment has {len(pdfs)} frames at the network rate, "
                      f"expected ceil({num_frames}/{ali_factor}) = {expected} (tolerance 1)")
    return _cut_or_pad(pdfs, expected), ""


def _cut_or_pad(labels: np.ndarray, length: int) -> np.ndarray:
    """Drop extra frames at the end, or repeat the last label (Kaldi-tolerated small mismatch)."""
    if len(labels) >= length:
        return labels[:length]
    return np.concatenate([labels, np.full(length - len(labels), labels[-1], labels.dtype)])


# -- the step --

def make_targets(ali_dir: str | os.PathLike, feat_data: str | os.PathLike,
                 out_dir: str | os.PathLike, subsampling_factor: int = 3,
                 ali_type: str = "transition", num_pdfs: int | None = None,
                 prior_floor: float = DEFAULT_PRIOR_FLOOR,
                 max_lost: float = DEFAULT_MAX_LOST,
                 max_unseen_pdfs: float = DEFAULT_MAX_UNSEEN_PDFS,
                 priors_from: str | os.PathLike | None = None) -> TargetsSummary:
    """Convert an alignment dir into a targets dir (see the module docstring). Returns a summary."""
    if subsampling_factor < 1:
        raise TargetsError(f"--frame-subsampling-factor must be >= 1, got {subsampling_factor}")
    ali = open_alignment_dir(ali_dir, ali_type, num_pdfs)
    _check_model_and_tree(ali)
    if ali.frame_subsampling_factor not in (1, subsampling_factor):
        raise TargetsError(
            f"{ali.path}/frame_subsampling_factor is {ali.frame_subsampling_factor}: alignments at "
            f"that rate cannot become targets at 1/{subsampling_factor} of the 10 ms rate")
    lengths = feature_frame_counts(feat_data)
    pipeline = FeaturePipeline(PipelineConfig(cmvn="none", stack=subsampling_factor))
    summary = TargetsSummary(feature_utts=len(lengths))
    per_file = _collect(ali, lengths, pipeline, summary)
    for utt in sorted(set(lengths) - _aligned(per_file, summary)):
        summary.skipped[utt] = "no alignment"
    too_many_lost = summary.lost > max_lost * summary.feature_utts or summary.written == 0
    # On failure nothing is written, so the log is the only list of what went wrong: log it all.
    _log_skips(summary, None if too_many_lost else MAX_LOGGED_SKIPS, out_dir)
    if too_many_lost:
        raise _loss_error(summary, max_lost, feat_data)
    counts = pdf_counts(per_file, ali.num_pdfs)
    summary.never_seen = np.flatnonzero(counts == 0).tolist()
    summary.frames = int(counts.sum())
    _check_unseen_pdfs(ali, summary, max_unseen_pdfs)
    prior_utts = None if priors_from is None else prior_utterances(priors_from)
    prior_counts = pdf_counts(per_file, ali.num_pdfs, prior_utts)
    if prior_counts.sum() == 0:
        raise TargetsError(f"none of the utterances of {priors_from} got targets from "
                           f"{ali.path}: the priors would count nothing; nothing written")
    summary.prior_frames = int(prior_counts.sum())
    summary.prior_utts = sum(1 for items in per_file.values() for utt, _ in items
                             if prior_utts is None or utt in prior_utts)
    tree = ali.path / "tree"
    _write_targets_dir(Path(out_dir), per_file, counts, subsampling_factor,
                       log_priors(prior_counts, prior_floor), summary,
                       tree if ali.ali_type == "transition" and tree.is_file() else None)
    return summary


def pdf_counts(per_file, num_pdfs: int, utts: set[str] | None = None) -> np.ndarray:
    """Target frames per pdf, over `utts` only when given."""
    counts = np.zeros(num_pdfs, dtype=np.int64)
    for items in per_file.values():
        for utt, targets in items:
            if utts is None or utt in utts:
                counts += np.bincount(targets, minlength=num_pdfs)
    return counts


def prior_utterances(data_dir: str | os.PathLike) -> set[str]:
    """The utterances of a data dir (its utt2spk, else feats.scp): the priors' training set."""
    for name in ("utt2spk", "feats.scp"):
        path = Path(data_dir) / name
        if path.is_file():
            return set(read_table(path))
    raise TargetsError(f"--priors-from {data_dir}: expected file {data_dir}/utt2spk or "
                       f"{data_dir}/feats.scp to exist")


def _check_model_and_tree(ali: AlignmentDir) -> None:
    """The ali dir's final.mdl is its tree's model (Kaldi's align_si.sh copies both there)."""
    from emasr.compat import CompatError, check_tree_matches_model

    model, tree = ali.path / "final.mdl", ali.path / "tree"
    if ali.ali_type == "transition" and tree.is_file():
        try:
            check_tree_matches_model(str(tree), str(model))
        except CompatError as err:
            raise TargetsError(f"{err}; nothing written") from None


def _check_unseen_pdfs(ali: AlignmentDir, summary: TargetsSummary, max_unseen: float) -> None:
    """Alignments whose ids merely fit another model leave most of its pdfs without a frame."""
    unseen = len(summary.never_seen)
    if unseen > max_unseen * ali.num_pdfs:
        source = ali.path / "final.mdl" if ali.transitions else f"{ali.path} (num_pdfs)"
        raise TargetsError(
            f"{unseen} of the {ali.num_pdfs} pdfs of {source} ({100 * unseen / ali.num_pdfs:.1f}%) "
            f"get no target frame, more than the allowed {100 * max_unseen:g}% "
            "(--max-unseen-pdfs): the alignments probably come from another model; nothing written")


def _collect(ali: AlignmentDir, lengths: dict[str, int], pipeline: FeaturePipeline,
             summary: TargetsSummary) -> dict[int, list[tuple[str, np.ndarray]]]:
    """Read every alignment, check it, and keep its targets by job (file) number."""
    per_file: dict[int, list[tuple[str, np.ndarray]]] = {}
    first_file: dict[str, Path] = {}
    total = len(lengths) or None
    for path, utt, pdfs in progress(ali.iter_pdfs(), total=total, desc="make-targets",
                                    every=1000, logger=log):
        if utt in first_file:
            raise AlignmentError(f"{path}: utterance {utt} is aligned twice (first in "
                                 f"{first_file[utt]})")
        first_file[utt] = path
        summary.alignment_utts += 1
        if utt not in lengths:
            summary.skipped[utt] = "no features"
            continue
        targets, reason = fit_to_features(pdfs, lengths[utt], ali.frame_subsampling_factor,
                                          pipeline)
        if targets is None:
            summary.skipped[utt] = f"{reason} ({path})"
            continue
        job = int(path.name.split(".")[1])
        per_file.setdefault(job, []).append((utt, targets.astype(np.int32)))
        summary.written += 1
    return per_file


def _aligned(per_file, summary: TargetsSummary) -> set[str]:
    written = {utt for items in per_file.values() for utt, _ in items}
    return written | set(summary.skipped)


def _log_skips(summary: TargetsSummary, limit: int | None, out_dir) -> None:
    for number, (utt, reason) in enumerate(sorted(summary.skipped.items())):
        if number == limit:
            log.warning("... and %d more skipped utterances (all listed in %s/skipped)",
                        len(summary.skipped) - limit, out_dir)
            break
        log.warning("skipping utterance %s: %s", utt, reason)


def _loss_error(summary: TargetsSummary, max_lost: float, feat_data) -> TargetsError:
    if summary.written == 0:
        return TargetsError(f"no utterance got targets ({summary.feature_utts} in {feat_data}, "
                            f"{summary.alignment_utts} aligned); nothing written")
    fraction = summary.lost / summary.feature_utts
    reasons = Counter(map(reason_kind, summary.skipped.values()))
    return TargetsError(
        f"{summary.lost} of {summary.feature_utts} utterances in {feat_data} "
        f"({100 * fraction:.1f}%) would get no targets, more than the allowed "
        f"{100 * max_lost:g}% (reasons: {dict(reasons)}); nothing written")


UNSEEN_LOG_PRIOR = float(np.sqrt(np.finfo(np.float32).max))   # Kaldi nnet1's PdfPrior


def log_priors(counts: np.ndarray, floor: float) -> np.ndarray:
    """log(count / total); a pdf whose prior is under `floor` (never or hardly seen in training)
    gets sqrt(FLT_MAX), as Kaldi nnet1's PdfPrior does, so its log-likelihood (log-posterior -
    log-prior) is hugely negative and it never wins a frame. Flooring the prior instead makes the
    untrained output of an unseen pdf, divided by a tiny prior, win frames (on yesno, whose
    alignments never visit SIL's last state, it took most frames of every utterance)."""
    priors = counts / max(counts.sum(), 1)
    with np.errstate(divide="ignore"):
        out = np.where(priors < floor, UNSEEN_LOG_PRIOR, np.log(priors))
    return out.astype(np.float32)


def _write_targets_dir(out_dir: Path, per_file, counts: np.ndarray, factor: int,
                       priors: np.ndarray, summary: TargetsSummary,
                       tree: Path | None = None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    # An old pdf.scp would point into arks about to be replaced; without it a crash below leaves
    # a dir that is visibly incomplete rather than silently inconsistent.
    (out_dir / "pdf.scp").unlink(missing_ok=True)
    scp: dict[str, str] = {}
    for job, items in sorted(per_file.items()):
        ark = (out_dir / f"pdf.{job}.ark").resolve()
        with atomic_write(ark, "wb") as f:
            for utt, targets in items:
                f.write(utt.encode("utf-8") + b" ")
                scp[utt] = f"{ark}:{f.tell()}"
                kaldiio.matio.write_array(f, targets)
    _write_text(out_dir / "num_pdfs", f"{len(counts)}\n")
    _write_text(out_dir / "pdf_counts", " [ " + "".join(f"{c} " for c in counts) + "]\n")
    writer = KaldiWriter(binary=False)
    writer.write_float_vector(priors)
    _write_text(out_dir / "prior.vec", writer.getvalue().decode())
    _write_text(out_dir / "frame_subsampling_factor", f"{factor}\n")
    write_table(out_dir / "skipped", summary.skipped)
    _write_text(out_dir / "summary", "".join(line + "\n" for line in summary.lines()))
    if tree is not None:  # which tree's pdfs these are: the number of pdfs alone does not say
        record_tree(str(out_dir), str(tree))
    else:
        (out_dir / TREE_DIGEST_FILE).unlink(missing_ok=True)
    write_table(out_dir / "pdf.scp", scp)  # last: a present pdf.scp means complete arks
    for stale in out_dir.glob("pdf.*.ark"):
        if int(stale.name.split(".")[1]) not in per_file:
            stale.unlink()


def _write_text(path: Path, text: str) -> None:
    with atomic_write(path) as f:
        f.write(text)


# -- reading a targets dir (interface 3) --

@dataclass
class Targets:
    """A targets dir opened for training: ``reader[utt]`` is an int32 vector of pdf ids."""
    path: Path
    num_pdfs: int
    subsampling_factor: int
    counts: np.ndarray
    log_priors: np.ndarray
    reader: object  # kaldiio scp reader (a lazy mapping utt -> np.int32 array)


def load_targets(path: str | os.PathLike) -> Targets:
    """Open a targets dir written by make-targets."""
    path = Path(path)
    for name in ("pdf.scp", "num_pdfs", "prior.vec", "frame_subsampling_factor"):
        if not (path / name).is_file():
            raise FileNotFoundError(f"expected file {path / name} to exist (run make-targets)")
    num_pdfs = int((path / "num_pdfs").read_text().split()[0])
    priors = KaldiReader.open(path / "prior.vec").read_float_vector("prior.vec")
    counts = np.zeros(num_pdfs, dtype=np.int64)
    if (path / "pdf_counts").is_file():
        counts = KaldiReader.open(path / "pdf_counts").read_float_vector("pdf_counts")
        counts = np.rint(counts).astype(np.int64)
    if len(priors) != num_pdfs or len(counts) != num_pdfs:
        raise ValueError(f"{path}: prior.vec has {len(priors)} and pdf_counts {len(counts)} "
                         f"entries, num_pdfs says {num_pdfs}")
    factor = int((path / "frame_subsampling_factor").read_text().split()[0])
    return Targets(path, num_pdfs, factor, counts, priors,
                   read_scp(path / "pdf.scp"))


# -- command line --

@click.command("make-targets")
@click.option("--frame-subsampling-factor", "factor", type=int, default=3, show_default=True,
              help="k: the network's frame rate is 1/k of the 10 ms features (the feature "
                   "pipeline's stacking factor).")
@click.option("--ali-type", type=click.Choice(ALI_TYPES), default="transition",
              show_default=True, help="What the alignments hold: transition ids (mapped to pdfs "
                                      "through ALI_DIR/final.mdl) or pdf ids.")
@click.option("--num-pdfs", type=int, default=None,
              help="Number of pdfs for --ali-type pdf (default: from ALI_DIR/final.mdl or "
                   "ALI_DIR/num_pdfs).")
@click.option("--prior-floor", type=float, default=DEFAULT_PRIOR_FLOOR, show_default=True,
              help="Floor on the pdf priors before the log.")
@click.option("--max-lost", type=float, default=DEFAULT_MAX_LOST, show_default=True,
              help="Fail when more than this fraction of the feature utterances get no targets.")
@click.option("--max-unseen-pdfs", type=float, default=DEFAULT_MAX_UNSEEN_PDFS,
              show_default=True,
              help="Fail when more than this fraction of the model's pdfs get no target frame.")
@click.option("--priors-from", type=click.Path(file_okay=False), default=None,
              help="Count the priors over this data dir's utterances only (the training set, "
                   "when FEAT_DATA also holds the dev set) [default: all written targets].")
@click.argument("ali_dir", type=click.Path(file_okay=False))
@click.argument("feat_data", type=click.Path(file_okay=False))
@click.argument("dir", type=click.Path(file_okay=False))
def make_targets_cli(factor, ali_type, num_pdfs, prior_floor, max_lost, max_unseen_pdfs,
                     priors_from, ali_dir, feat_data, dir):
    """Write frame-level pdf targets at the network's frame rate from ALI_DIR (Kaldi's or this
    toolkit's ali.JOB.gz + final.mdl) for the utterances of FEAT_DATA, into DIR: pdf.scp,
    pdf.JOB.ark, num_pdfs, pdf_counts, prior.vec, frame_subsampling_factor, skipped, summary."""
    try:
        summary = make_targets(ali_dir, feat_data, dir, factor, ali_type, num_pdfs, prior_floor,
                               max_lost, max_unseen_pdfs, priors_from)
    except (AlignmentError, TargetsError, TableError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    for line in summary.lines():
        log.info("%s", line)
    log.info("wrote targets for %d utterances (%d frames at 1/%d rate) to %s", summary.written,
             summary.frames, factor, dir)
