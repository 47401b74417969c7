"""Maximum-likelihood statistics of a GMM-HMM from alignments (Kaldi's gmm-acc-stats-ali, and
gmm-acc-stats-twofeats for a SAT system's speaker-independent alignment model).

For each frame aligned to transition id t with pdf p: the transition count of t, and for the GMM of
p the Gaussian posteriors of the frame, their sum (occupancy), and the posterior-weighted sums of
x and x^2 -- exactly Kaldi's AccumDiagGmm::AccumulateFromDiag, computed per pdf over all its frames
at once. (kaldi-hmm-gmm's AccumAmDiagGmm cannot be filled from summed arrays -- get_acc returns a
copy -- so the stats live in NumPy and emasr.gmm.estimate applies Kaldi's MLE update to them.)
Each job writes its stats to ``N.JOB.acc`` (a NumPy archive); gmm-est sums the jobs' files.

gmm-acc-stats-twofeats (steps/train_sat.sh's final.alimdl) computes the Gaussian posteriors on the
speaker-adapted features and accumulates x and x^2 of the speaker-independent ones, so that
re-estimating means and variances from the stats gives a model of the unadapted features that
matches the SAT model Gaussian for Gaussian.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass

import click
import numpy as np

from emasr.gmm.feature_options import feature_pipeline_options
from emasr.gmm.features import (FeatureOptions, FeatureStages, SkipCounter, check_model_dim,
                                iter_aligned_features)
from emasr.kaldi.matrix_io import TransformError
from emasr.kaldi.model_io import read_model
from emasr.io.atomic import atomic_write

log = logging.getLogger(__name__)


@dataclass
class GmmStats:
    """Sufficient statistics of a model's GMMs and transitions, summable across jobs."""
    transitions: np.ndarray  # [num_transition_ids + 1] float64 counts (entry 0 unused)
    num_gauss: np.ndarray    # [num_pdfs] Gaussians per pdf (the layout of the arrays below)
    occupancy: np.ndarray    # [total_gauss]
    x: np.ndarray            # [total_gauss, dim] posterior-weighted sums of x
    x2: np.ndarray           # [total_gauss, dim] posterior-weighted sums of x^2
    log_like: float = 0.0
    frames: float = 0.0

    @classmethod
    def zeros(cls, model) -> "GmmStats":
        am = model.am_gmm
        num_gauss = np.array([am.num_gauss_in_pdf(p) for p in range(am.num_pdfs)], dtype=np.int64)
        total = int(num_gauss.sum())
        return cls(np.zeros(model.transition_model.num_transition_ids + 1), num_gauss,
                   np.zeros(total), np.zeros((total, am.dim)), np.zeros((total, am.dim)))

    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.num_gauss)])

    def add(self, other: "GmmStats") -> None:
        if not np.array_equal(self.num_gauss, other.num_gauss) or \
                len(self.transitions) != len(other.transitions):
            raise ValueError("cannot add statistics of differently shaped models")
        self.transitions += other.transitions
        self.occupancy += other.occupancy
        self.x += other.x
        self.x2 += other.x2
        self.log_like += other.log_like
        self.frames += other.frames

    def pdf_occupancy(self) -> np.ndarray:
        return np.add.reduceat(self.occupancy, self.offsets()[:-1]) if len(self.occupancy) else \
            np.zeros(0)

    def save(self, path: str) -> None:
        with atomic_write(path, "wb", encoding=None) as f:
            np.savez(f, transitions=self.transitions, num_gauss=self.num_gauss,
                     occupancy=self.occupancy, x=self.x, x2=self.x2,
                     totals=np.array([self.log_like, self.frames]))

    @classmethod
    def load(cls, path: str) -> "GmmStats":
        try:
            with np.load(path) as z:
                return cls(z["transitions"], z["num_gauss"], z["occupancy"], z["x"], z["x2"],
                           float(z["totals"][0]), float(z["totals"][1]))
        except (OSError, KeyError, ValueError) as err:
            raise ValueError(f"{path}: not a statistics file written by gmm-acc-stats-ali "
                             f"({err})") from None

    def gaussian_rows(self, pdf: int) -> slice:
        offsets = self.offsets()
        return slice(int(offsets[pdf]), int(offsets[pdf + 1]))


def sum_stats(paths: list[str]) -> GmmStats:
    total = GmmStats.load(paths[0])
    for path in paths[1:]:
        try:
            total.add(GmmStats.load(path))
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    return total


def accumulate_utterance(model, stats: GmmStats, feats: np.ndarray, pdfs: np.ndarray,
                         tids: np.ndarray, stats_feats: np.ndarray | None = None) -> float:
    """Add one utterance's frames (feats [T, D], aligned pdfs and transition ids [T]). With
    ``stats_feats`` [T, D] the Gaussian posteriors come from ``feats`` and the sums of x and x^2
    from ``stats_feats`` (Kaldi's AccumulateForGmmTwofeats)."""
    stats.transitions += np.bincount(tids, minlength=len(stats.transitions))
    offsets = stats.offsets()
    total_like = 0.0
    order = np.argsort(pdfs, kind="stable")
    boundaries = np.flatnonzero(np.diff(pdfs[order])) + 1
    for frames in np.split(order, boundaries):
        pdf = int(pdfs[frames[0]])
        x = feats[frames]
        # Per-Gaussian log-likelihoods including the log weights, as Kaldi's LogLikelihoods.
        loglikes = np.asarray(model.am_gmm.get_pdf(pdf).log_likelihoods_matrix(x),
                              dtype=np.float64)
        frame_like = np.logaddexp.reduce(loglikes, axis=1)
        posteriors = np.exp(loglikes - frame_like[:, None])
        rows = slice(offsets[pdf], offsets[pdf + 1])
        x64 = (x if stats_feats is None else stats_feats[frames]).astype(np.float64)
        stats.occupancy[rows] += posteriors.sum(axis=0)
        stats.x[rows] += posteriors.T @ x64
        stats.x2[rows] += posteriors.T @ np.square(x64)
        total_like += float(frame_like.sum())
    stats.log_like += total_like
    stats.frames += len(pdfs)
    return total_like


def accumulate_alignments(model_path: str, data_dir: str, ali_path: str, options: FeatureOptions,
                          max_skipped: float) -> GmmStats:
    model = read_model(model_path)
    check_model_dim(model_path, model.am_gmm.dim, data_dir, options)
    tid2pdf = np.asarray(model.transition_model.id2pdf_id, dtype=np.int64)
    stats = GmmStats.zeros(model)
    counter = SkipCounter(f"gmm-acc-stats-ali {data_dir}", max_skipped)
    logdet = SpeakerLogDet.of(data_dir, options)
    for utt, feats, ali in iter_aligned_features(data_dir, options, ali_path, model.am_gmm.dim,
                                                 len(tid2pdf) - 1, counter):
        accumulate_utterance(model, stats, feats, tid2pdf[ali], ali.astype(np.int64))
        logdet.add(utt, len(feats))
        counter.ok()
    counter.check()
    log.info("overall log-likelihood per frame is %.4f over %d frames",
             stats.log_like / max(stats.frames, 1), stats.frames)
    logdet.report()
    return stats


@dataclass
class SpeakerLogDet:
    """The log-determinants of the per-speaker transforms the features went through, per frame:
    the likelihood of the unadapted features is that of the adapted ones plus log |det A|
    (Kaldi's transform-feats logs "Overall average logdet"; train_sat.sh adds it to the
    likelihood of each pass)."""
    stages: object = None
    total: float = 0.0
    frames: int = 0

    @classmethod
    def of(cls, data_dir: str, options: FeatureOptions) -> "SpeakerLogDet":
        if not options.speaker_transforms:
            return cls()
        return cls(FeatureStages.load(speaker_transforms=options.speaker_transforms,
                                      utt2spk=options.utt2spk or
                                      os.path.join(data_dir, "utt2spk")))

    def add(self, utt: str, num_frames: int) -> None:
        if self.stages is None:
            return
        matrix = self.stages.speaker_matrix(utt)
        self.total += num_frames * float(np.linalg.slogdet(matrix[:, :matrix.shape[0]])[1])
        self.frames += num_frames

    def report(self) -> None:
        if self.stages is not None:
            log.info("Overall average logdet is %.6g over %d frames",
                     self.total / max(self.frames, 1), self.frames)


def aligned_stats_arguments(command):
    """What the statistics commands over alignments take: the feature pipeline, --max-skipped,
    MODEL DATA ALI STATS_OUT."""
    for decorator in reversed([
            feature_pipeline_options(),
            click.option("--max-skipped", type=float, default=0.1, show_default=True,
                         help="Fail when more than this fraction of utterances cannot be used."),
            click.argument("model", type=click.Path(dir_okay=False, exists=True)),
            click.argument("data", type=click.Path(file_okay=False, exists=True)),
            click.argument("ali", type=click.Path(dir_okay=False, exists=True)),
            click.argument("stats_out", type=click.Path(dir_okay=False))]):
        command = decorator(command)
    return command


@click.command("gmm-acc-stats-ali")
@aligned_stats_arguments
def acc_stats_ali_cli(features, max_skipped, model, data, ali, stats_out):
    """Accumulate GMM and transition statistics for MODEL from the alignments ALI (ali.JOB.gz)
    of the data dir DATA (features with CMVN and deltas, or CMVN, splicing and --transform),
    into STATS_OUT (one job's .acc)."""
    try:
        stats = accumulate_alignments(model, data, ali, features, max_skipped)
    except (ValueError, RuntimeError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    stats.save(stats_out)


def accumulate_twofeats(model_path: str, data_dir: str, ali_path: str, options: FeatureOptions,
                        max_skipped: float) -> GmmStats:
    """Statistics of the features without ``options.speaker_transforms``, with the Gaussian
    posteriors (and transition counts, log-likelihood) of the features with them."""
    if not options.speaker_transforms:
        raise ValueError("gmm-acc-stats-twofeats needs --speaker-transforms (the adapted "
                         "features are the pipeline with them, the statistics are of the "
                         "pipeline without)")
    model = read_model(model_path)
    check_model_dim(model_path, model.am_gmm.dim, data_dir, options)
    speaker = FeatureStages.load(speaker_transforms=options.speaker_transforms,
                                 utt2spk=options.utt2spk or os.path.join(data_dir, "utt2spk"))
    si_options = dataclasses.replace(options, speaker_transforms=None, utt2spk=None)
    tid2pdf = np.asarray(model.transition_model.id2pdf_id, dtype=np.int64)
    stats = GmmStats.zeros(model)
    counter = SkipCounter(f"gmm-acc-stats-twofeats {data_dir}", max_skipped)
    for utt, si_feats, ali in iter_aligned_features(data_dir, si_options, ali_path,
                                                    model.am_gmm.dim, len(tid2pdf) - 1, counter):
        try:
            adapted = speaker.apply(utt, si_feats)
        except TransformError as err:
            counter.skip(utt, str(err))
            continue
        accumulate_utterance(model, stats, adapted, tid2pdf[ali], ali.astype(np.int64),
                             stats_feats=si_feats)
        counter.ok()
    counter.check()
    log.info("overall log-likelihood per frame (adapted features) is %.4f over %d frames",
             stats.log_like / max(stats.frames, 1), stats.frames)
    return stats


@click.command("gmm-acc-stats-twofeats")
@aligned_stats_arguments
def acc_stats_twofeats_cli(features, max_skipped, model, data, ali, stats_out):
    """Kaldi's gmm-acc-stats-twofeats as train_sat.sh runs it: Gaussian posteriors of MODEL on
    the features of DATA through the whole pipeline (with --speaker-transforms, the adapted
    features), statistics of the same pipeline without the speaker transforms (the
    speaker-independent features), from the alignments ALI, into STATS_OUT (one job's .acc)."""
    try:
        stats = accumulate_twofeats(model, data, ali, features, max_skipped)
    except (ValueError, RuntimeError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    stats.save(stats_out)
