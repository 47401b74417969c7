"""The features a transform step reads, as Kaldi's LDA/SAT scripts pipe them:
``apply-cmvn $cmvn_opts | [add-deltas] | [splice-feats $splice_opts] | [transform-feats
final.mat] | [transform-feats --utt2spk trans.JOB]``.

The source is a data dir (feats.scp with per-speaker CMVN from cmvn.scp, as the GMM steps read
it) or a Kaldi feature table (``scp:x.scp``, ``ark:x.ark``), taken as it is; the later stages
apply to both. ``splice_opts`` is Kaldi's option string (stored as ``splice_opts`` in an LDA exp
dir): ``--left-context=3 --right-context=3``.

FeatureStages (splice, final.mat, per-speaker transforms) is shared with the GMM steps' input,
emasr.gmm.inputs.iter_features, which applies it when its FeatureOptions ask for it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator

import kaldiio
import numpy as np

from emasr.feats.deltas import add_deltas
from emasr.gmm.inputs import FeatureOptions, iter_features
from emasr.io.table import read_table
from emasr.transform.matrix_io import (TransformError, apply_transform, is_table_specifier,
                                       read_matrix, read_matrix_table)

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
            with kaldiio.ReadHelper(self.source) as reader:
                for utt, feats in reader:
                    yield utt, np.asarray(feats, dtype=np.float32), None
        else:
            yield from iter_features(self.source, self._options)

    def _stages(self, utt: str, feats: np.ndarray) -> np.ndarray:
        if self.delta_order > 0:
            feats = add_deltas(feats, self.delta_order)
        return self._stages_after_deltas.apply(utt, feats)
