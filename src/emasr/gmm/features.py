"""The GMMs' input: a data dir's features with per-speaker CMVN and deltas, as Kaldi's GMM steps
read them (``apply-cmvn $cmvn_opts ... | add-deltas``), plus the bookkeeping of skipped utterances.

``cmvn_opts`` is Kaldi's option string, stored in every GMM exp dir (``cmvn_opts``):
``--norm-means=true|false --norm-vars=true|false`` (default: means only).

An LDA system (a model dir with ``final.mat``) reads ``apply-cmvn | splice-feats $splice_opts |
transform-feats final.mat`` instead: ``FeatureOptions(delta_order=0, splice_opts=...,
transform=...)``. A SAT system adds per-speaker affine transforms after it
(``speaker_transforms='ark:trans.JOB'``, looked up through the data dir's utt2spk). The stages
are FeatureStages; ``feature_dim`` gives the pipeline's output dimension before any work, so a
model of another dimension is one clear error naming the files.

The transform steps read the same pipeline from a data dir or a Kaldi feature table
(``scp:x.scp``, ``ark:x.ark``, taken as it is), through TransformedFeatures: ``apply-cmvn
$cmvn_opts | [add-deltas] | [splice-feats $splice_opts] | [transform-feats final.mat] |
[transform-feats --utt2spk trans.JOB]``. ``splice_opts`` is Kaldi's option string (stored as
``splice_opts`` in an LDA exp dir): ``--left-context=3 --right-context=3``.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from emasr.feats.cmvn import CmvnError, apply_cmvn
from emasr.feats.deltas import add_deltas
from emasr.feats.reader import iter_feats_with_stats
from emasr.io.table import read_table
from emasr.kaldi.alignments import iter_alignment_file
from emasr.kaldi.matrix_io import (TransformError, apply_transform, is_table_specifier,
                                   read_matrix, read_matrix_table)
from emasr.kaldi.tables import read_archive, read_scp

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FeatureOptions:
    norm_means: bool = True
    norm_vars: bool = False
    delta_order: int = 2
    splice_opts: str = ""                  # Kaldi's splice_opts; '' = no splicing
    transform: str | None = None           # a Kaldi matrix file (final.mat) after splicing
    speaker_transforms: str | None = None  # a table of affine transforms (ark:trans.JOB)
    utt2spk: str | None = None             # for speaker_transforms; None: the data dir's
    # (F, c): keep 10 ms frame c of every window of F, after every other stage (Kaldi chain's
    # subsample-feats; c as convert-ali --subsample-at: F // 2 centre, 0 start); (1, 0): all
    subsample: tuple[int, int] = (1, 0)

    @property
    def has_stages(self) -> bool:
        """Whether anything follows CMVN and deltas (splicing or a transform)."""
        return bool(self.splice_opts.strip() or self.transform or self.speaker_transforms)

    @classmethod
    def parse(cls, cmvn_opts: str, delta_order: int = 2, **stages) -> "FeatureOptions":
        """From Kaldi's cmvn_opts string; ``stages`` are the fields after delta_order."""
        values = {"--norm-means": True, "--norm-vars": False}
        for word in cmvn_opts.split():
            name, _, value = word.partition("=")
            if name not in values or value not in ("true", "false"):
                raise ValueError(f"unsupported cmvn option '{word}': expected "
                                 "--norm-means=true|false or --norm-vars=true|false")
            values[name] = value == "true"
        return cls(values["--norm-means"], values["--norm-vars"], delta_order, **stages)


def feature_stages(data_dir: str, options: FeatureOptions):
    """The stages after CMVN and deltas, or None when there are none."""
    if not options.has_stages:
        return None
    utt2spk = options.utt2spk
    if options.speaker_transforms and utt2spk is None:
        utt2spk = os.path.join(data_dir, "utt2spk")
    return FeatureStages.load(options.splice_opts, options.transform,
                              options.speaker_transforms, utt2spk)


def iter_features(data_dir: str, options: FeatureOptions, utts=None
                  ) -> Iterator[tuple[str, np.ndarray | None, str | None]]:
    """(utt, CMVN-normalised features with deltas, None) in feats.scp order, or
    (utt, None, reason) for an utterance whose features cannot be normalised (wrong dimension)."""
    cmvn = "speaker" if options.norm_means else "none"
    stages = feature_stages(data_dir, options)
    for utt, feats, stats in iter_feats_with_stats(data_dir, cmvn, utts):
        problem = non_finite_problem(feats, "features")
        if stats is not None and problem is None:
            try:
                feats = apply_cmvn(feats, stats, options.norm_vars)
            except CmvnError as err:
                problem = str(err)
            else:  # NaN stats (cmvn.scp) would spread to every frame of the speaker
                problem = non_finite_problem(feats, "features after CMVN (check cmvn.scp)")
        if problem:
            yield utt, None, problem
            continue
        if options.delta_order > 0:
            feats = add_deltas(feats, options.delta_order)
        if stages is not None:
            try:
                feats = stages.apply(utt, feats)
            except TransformError as err:
                yield utt, None, str(err)
                continue
        feats = subsample_frames(feats, *options.subsample)
        yield utt, np.ascontiguousarray(feats, dtype=np.float32), None


def subsample_frames(feats: np.ndarray, factor: int, offset: int) -> np.ndarray:
    """[T, D] -> [ceil(T/F), D]: frame min(k*F + c, T-1) for window k, the frames whose labels
    convert-ali --frame-subsampling-factor F keeps (FeaturePipeline.subsample_labels' rule)."""
    if factor <= 1:
        return feats
    index = np.arange(-(-len(feats) // factor)) * factor + offset
    return feats[np.minimum(index, len(feats) - 1)]


def feature_dim(data_dir: str, options: FeatureOptions, sample: int = 10) -> tuple[int, str]:
    """The dimension of the features iter_features yields, and how it is reached
    ('data/train/feats.scp (13) -> splice -3..+3 (91) -> exp/tri2/final.mat (40)'), from the
    most common raw dimension of the first ``sample`` utterances (an odd one is skipped later,
    by name). A transform that does not fit raises ValueError naming it."""
    import collections

    scp = os.path.join(data_dir, "feats.scp")
    if not os.path.isfile(scp):
        raise FileNotFoundError(f"expected file {scp} to exist")
    feats = read_scp(scp)
    dims = collections.Counter()
    for utt in feats:
        dims[np.shape(feats[utt])[-1]] += 1
        if sum(dims.values()) >= sample:
            break
    if not dims:
        raise ValueError(f"{scp} is empty")
    dim = dims.most_common(1)[0][0]
    chain = f"{scp} ({dim})"
    if options.delta_order > 0:
        dim *= options.delta_order + 1
        chain += f" -> deltas of order {options.delta_order} ({dim})"
    stages = feature_stages(data_dir, options)
    if stages is None:
        return dim, chain
    return stages.output_dim(dim, chain)


def check_model_dim(model_path: str, model_dim: int, data_dir: str,
                    options: FeatureOptions) -> None:
    """ValueError naming the model, the features and the transforms when the pipeline's output
    does not have the model's dimension: checked before any work, not per utterance."""
    dim, chain = feature_dim(data_dir, options)
    if dim != model_dim:
        hint = ("the model dir's final.mat and splice_opts" if options.has_stages else
                "the delta order, or a final.mat the model dir should have")
        raise ValueError(f"{model_path} expects {model_dim}-dimensional features, but the "
                         f"features are {dim}-dimensional: {chain} (check {hint})")


def non_finite_problem(feats: np.ndarray, what: str) -> str | None:
    """'features have nan at frame 5' for the first NaN/inf value, or None: one such value makes
    the accumulated stats, and so the re-estimated model, NaN."""
    bad = ~np.isfinite(feats)
    if not bad.any():
        return None
    frame, dim = (int(i[0]) for i in np.nonzero(bad))
    return f"{what} have {feats[frame, dim]} at frame {frame} (dimension {dim})"


def read_text(data_dir: str) -> dict[str, str]:
    path = os.path.join(data_dir, "text")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"expected file {path} to exist")
    return read_table(path)


@dataclass
class SkipCounter:
    """Utterances a step could not use, each named in the log with the reason; the step fails
    when more than ``max_fraction`` of its utterances were skipped."""
    what: str
    max_fraction: float
    total: int = 0
    skipped: dict[str, str] = field(default_factory=dict)

    def ok(self) -> None:
        self.total += 1

    def skip(self, utt: str, reason: str) -> None:
        self.total += 1
        self.skipped[utt] = reason
        log.warning("%s: skipping utterance %s: %s", self.what, utt, reason)

    def check(self) -> None:
        """Log the summary; raise when too many utterances were skipped."""
        count = len(self.skipped)
        log.info("%s: %d utterance(s) done, %d skipped", self.what, self.total - count, count)
        if self.total == 0:
            raise RuntimeError(f"{self.what}: no utterances to process")
        if count > self.max_fraction * self.total:
            raise RuntimeError(f"{self.what}: {count} of {self.total} utterances skipped, more "
                               f"than the allowed fraction {self.max_fraction}; first: "
                               f"{next(iter(self.skipped.items()))}")


def check_dim(feats: np.ndarray, dim: int) -> str | None:
    """The reason features do not fit a model of dimension ``dim``, or None."""
    if feats.ndim != 2 or feats.shape[1] != dim:
        return f"features have dimension {feats.shape[-1]}, the model expects {dim}"
    if len(feats) == 0:
        return "no frames"
    return None


def alignment_problem(ali: np.ndarray | None, num_frames: int, num_transition_ids: int) -> str | None:
    """The reason an alignment cannot be used with features of `num_frames` frames, or None."""
    if ali is None:
        return "no alignment"
    if len(ali) != num_frames:
        return f"alignment has {len(ali)} frames, features {num_frames}"
    if ali.min() < 1 or ali.max() > num_transition_ids:
        return "transition ids outside the model"
    return None


def iter_aligned_features(data_dir: str, options: FeatureOptions, ali_path: str, dim: int,
                          num_transition_ids: int, counter: SkipCounter
                          ) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(utt, features, transition-id alignment) for the utterances usable together; the others
    are skipped on `counter` with the reason. The caller calls counter.ok() per used utterance."""
    alignments = dict(iter_alignment_file(ali_path))
    for utt, feats, problem in iter_features(data_dir, options):
        ali = alignments.get(utt)
        problem = (problem or check_dim(feats, dim)
                   or alignment_problem(ali, len(feats), num_transition_ids))
        if problem:
            counter.skip(utt, problem)
            continue
        yield utt, feats, ali


SPLICE_DEFAULT = 4  # Kaldi's splice-feats default context on each side


def parse_splice_opts(splice_opts: str) -> tuple[int, int] | None:
    """'--left-context=3 --right-context=3' -> (3, 3); '' -> None (no splicing)."""
    if not splice_opts.strip():
        return None
    context = {"--left-context": SPLICE_DEFAULT, "--right-context": SPLICE_DEFAULT}
    for word in splice_opts.split():
        name, _, value = word.partition("=")
        if name not in context or not value.isdigit():
            raise ValueError(f"unsupported splice option '{word}': expected "
                             "--left-context=N or --right-context=N")
        context[name] = int(value)
    return context["--left-context"], context["--right-context"]


def splice_feats(feats: np.ndarray, left: int, right: int) -> np.ndarray:
    """Kaldi's splice-feats: [T, D] -> [T, D*(left+1+right)], frames t-left..t+right side by
    side, the first and last frames repeated beyond the edges."""
    num_frames, dim = feats.shape
    offsets = np.arange(-left, right + 1)
    index = np.clip(np.arange(num_frames)[:, None] + offsets, 0, max(num_frames - 1, 0))
    return feats[index].reshape(num_frames, dim * len(offsets))


@dataclass
class FeatureStages:
    """The stages after CMVN and deltas, loaded once: splice, one matrix (final.mat), then
    per-speaker matrices (a table such as ``ark:trans.1``) found through utt2spk.

    A per-speaker table is looked up by the utterance's speaker, and by the utterance itself
    when the table has no entry for the speaker (gmm-est-fmllr without --spk2utt writes
    transforms per utterance)."""
    splice: tuple[int, int] | None = None
    matrix: np.ndarray | None = None
    matrix_path: str | None = None
    speaker_matrices: dict[str, np.ndarray] | None = None
    speaker_path: str | None = None
    utt2spk: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, splice_opts: str = "", transform: str | None = None,
             speaker_transforms: str | None = None, utt2spk: str | None = None
             ) -> "FeatureStages":
        """Read the matrix and the table; utt2spk is a file path (None: keys are utterances)."""
        return cls(parse_splice_opts(splice_opts),
                   read_matrix(transform) if transform else None, transform,
                   read_matrix_table(speaker_transforms) if speaker_transforms else None,
                   speaker_transforms,
                   read_table(utt2spk) if speaker_transforms and utt2spk else {})

    def speaker_matrix(self, utt: str) -> np.ndarray:
        key = self.utt2spk.get(utt, utt)
        if key not in self.speaker_matrices and utt in self.speaker_matrices:
            key = utt
        if key not in self.speaker_matrices:
            raise TransformError(f"utterance {utt}: no transform for speaker {key} in "
                                 f"{self.speaker_path}")
        return self.speaker_matrices[key]

    def apply(self, utt: str, feats: np.ndarray) -> np.ndarray:
        """The stages on one utterance; TransformError (naming it) when a matrix does not fit."""
        if self.splice is not None:
            feats = splice_feats(feats, *self.splice)
        if self.matrix is not None:
            feats = apply_transform(feats, self.matrix, f"utterance {utt} ({self.matrix_path})")
        if self.speaker_matrices is not None:
            feats = apply_transform(feats, self.speaker_matrix(utt),
                                    f"utterance {utt} ({self.speaker_path}, "
                                    f"{self.utt2spk.get(utt, utt)})")
        return feats

    def output_dim(self, dim: int, chain: str) -> tuple[int, str]:
        """The dimension after the stages of ``dim``-dimensional input, and ``chain`` (how the
        input was reached, e.g. 'feats.scp (13)') extended by the stages ('... -> splice
        -3..+3 (91) -> final.mat (40)'); a matrix that does not fit is a TransformError naming
        it and the chain so far."""
        if self.splice is not None:
            left, right = self.splice
            dim *= left + 1 + right
            chain += f" -> splice -{left}..+{right} ({dim})"
        matrices = []
        if self.matrix is not None:
            matrices.append((self.matrix, self.matrix_path))
        if self.speaker_matrices:
            matrices.append((next(iter(self.speaker_matrices.values())), self.speaker_path))
        for matrix, path in matrices:
            rows, cols = matrix.shape
            if cols not in (dim, dim + 1):
                raise TransformError(f"{path} is a {rows} x {cols} transform: it takes {cols} "
                                     f"(linear) or {cols - 1} (affine) dimensions, but the "
                                     f"features are {chain}")
            dim = rows
            chain += f" -> {path} ({dim})"
        return dim, chain


@dataclass
class TransformedFeatures:
    """A feature source and the stages applied to it (see the module docstring)."""
    source: str
    cmvn_opts: str = ""
    delta_order: int = 0
    splice_opts: str = ""
    transform: str | None = None           # a matrix file (final.mat)
    speaker_transforms: str | None = None  # a table rspecifier (ark:trans.1), keyed by speaker
    utt2spk: str | None = None             # for speaker_transforms; default: the data dir's

    def __post_init__(self) -> None:
        self._options = FeatureOptions.parse(self.cmvn_opts, 0)
        utt2spk = self.utt2spk
        if self.speaker_transforms and utt2spk is None and not self.is_table:
            utt2spk = os.path.join(self.source, "utt2spk")
        self._stages_after_deltas = FeatureStages.load(self.splice_opts, self.transform,
                                                       self.speaker_transforms, utt2spk)

    @property
    def is_table(self) -> bool:
        return is_table_specifier(self.source)

    def __iter__(self) -> Iterator[tuple[str, np.ndarray | None, str | None]]:
        """(utt, features, None), or (utt, None, reason) for an utterance that cannot be used."""
        for utt, feats, problem in self._source():
            if problem is None:
                try:
                    feats = self._stages(utt, feats)
                except TransformError as err:
                    feats, problem = None, str(err)
            yield utt, feats, problem

    def _source(self):
        if self.is_table:
            for utt, feats in read_archive(self.source):
                yield utt, np.asarray(feats, dtype=np.float32), None
        else:
            yield from iter_features(self.source, self._options)

    def _stages(self, utt: str, feats: np.ndarray) -> np.ndarray:
        if self.delta_order > 0:
            feats = add_deltas(feats, self.delta_order)
        return self._stages_after_deltas.apply(utt, feats)
