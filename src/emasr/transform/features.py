"""The features a transform step reads, as Kaldi's LDA/SAT scripts pipe them:
``apply-cmvn $cmvn_opts | [add-deltas] | [splice-feats $splice_opts] | [transform-feats
final.mat] | [transform-feats --utt2spk trans.JOB]``.

The source is a data dir (feats.scp with per-speaker CMVN from cmvn.scp, as the GMM steps read
it) or a Kaldi feature table (``scp:x.scp``, ``ark:x.ark``), taken as it is; the later stages
apply to both. ``splice_opts`` is Kaldi's option string (stored as ``splice_opts`` in an LDA exp
dir): ``--left-context=3 --right-context=3``.
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
class TransformedFeatures:
    """A feature source and the stages applied to it (see the module docstring)."""
    source: str
    cmvn_opts: str = ""
    delta_order: int = 0
    splice_opts: str = ""
    transform: str | None = None           # a matrix file (final.mat)
    speaker_transforms: str | None = None  # a table rspecifier (ark:trans.1), keyed by speaker
    utt2spk: str | None = None             # for speaker_transforms; default: the data dir's
    _splice: tuple[int, int] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._splice = parse_splice_opts(self.splice_opts)
        self._options = FeatureOptions.parse(self.cmvn_opts, 0)
        self._matrix = read_matrix(self.transform) if self.transform else None
        self._speaker_matrices = (read_matrix_table(self.speaker_transforms)
                                  if self.speaker_transforms else None)
        self._utt2spk = None
        if self._speaker_matrices is not None:
            path = self.utt2spk or (None if self.is_table else os.path.join(self.source,
                                                                            "utt2spk"))
            self._utt2spk = read_table(path) if path else {}

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
        if self._splice is not None:
            feats = splice_feats(feats, *self._splice)
        if self._matrix is not None:
            feats = apply_transform(feats, self._matrix, f"utterance {utt} ({self.transform})")
        if self._speaker_matrices is not None:
            key = self._utt2spk.get(utt, utt)
            if key not in self._speaker_matrices:
                raise TransformError(f"utterance {utt}: no transform for speaker {key} in "
                                     f"{self.speaker_transforms}")
            feats = apply_transform(feats, self._speaker_matrices[key],
                                    f"utterance {utt} ({self.speaker_transforms}, {key})")
        return feats
