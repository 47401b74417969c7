"""The network feature pipeline: CMVN, frame stacking (lower frame rate), splicing.

One implementation serves training and decoding, and its configuration is stored in every model
file (final.pt, ema.pt, ...), which decoding reads, so the two cannot drift apart; the experiment
dir's `feature_pipeline.yaml` is a readable record of it that decoding checks (`differences`).

For features x[0..T-1] of dim D and stacking factor k:
  - CMVN (per speaker or global, means or means and variances) is applied first, with Kaldi's
    apply-cmvn arithmetic. Per-dimension CMVN commutes with stacking for the same stats.
  - Output frame t stacks input frames t*k .. t*k+k-1; the last window is padded by repeating the
    last input frame. So T' = ceil(T/k) frames of dim k*D (k=1: unchanged).
  - Splicing s adds s stacked frames of context on each side (edges replicated): dim k*D*(2s+1).
Targets follow the same rule: output frame t takes the label of the input frame at the centre of its
window, min(t*k + k//2, T-1). Lengths are expected to be ceil(T/k), within LENGTH_TOLERANCE frames
(the rule Kaldi applies between features and alignments).
"""
from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, fields
from typing import Iterable, Iterator

import numpy as np
import yaml

from emasr.feats.cmvn import apply_cmvn
from emasr.feats.reader import CMVN_MODES, iter_feats_with_stats
from emasr.io.atomic import atomic_write

log = logging.getLogger(__name__)

PIPELINE_FILE = "feature_pipeline.yaml"
LENGTH_TOLERANCE = 2
# Where a frame of the lower rate samples the labels of its k original frames: the centre of the
# stacked window (this pipeline's rule, subsample_labels) or its start (Kaldi chain's).
SUBSAMPLE_AT = ("centre", "start")


@dataclass
class PipelineConfig:
    cmvn: str = "speaker"      # "speaker" (cmvn.scp keyed by speaker) | "global" | "none"
    norm_vars: bool = False
    stack: int = 3             # frame stacking factor k (1 = off)
    splice: int = 0            # stacked frames of context on each side (0 = none)

    def __post_init__(self) -> None:
        if self.cmvn not in CMVN_MODES:
            raise ValueError(f"cmvn must be one of {CMVN_MODES}, got '{self.cmvn}'")
        if int(self.stack) != self.stack or self.stack < 1:
            raise ValueError(f"stack must be an integer >= 1, got {self.stack}")
        if int(self.splice) != self.splice or self.splice < 0:
            raise ValueError(f"splice must be an integer >= 0, got {self.splice}")


def stack_frames(feats: np.ndarray, k: int) -> np.ndarray:
    """[T, D] -> [ceil(T/k), k*D]; the last window repeats the last frame."""
    num_frames, dim = feats.shape
    out_frames = math.ceil(num_frames / k)
    if k == 1 or num_frames == 0:
        return feats.reshape(out_frames, k * dim)
    index = np.minimum(np.arange(out_frames * k), num_frames - 1)
    return feats[index].reshape(out_frames, k * dim)


def splice_frames(feats: np.ndarray, context: int) -> np.ndarray:
    """[T, D] -> [T, D*(2c+1)]: frames t-c .. t+c side by side, edge frames replicated."""
    if context == 0:
        return feats
    num_frames, dim = feats.shape
    offsets = np.arange(-context, context + 1)
    index = np.clip(np.arange(num_frames)[:, None] + offsets, 0, max(num_frames - 1, 0))
    return feats[index].reshape(num_frames, dim * (2 * context + 1))


def lengths_agree(expected: int, actual: int, tolerance: int = LENGTH_TOLERANCE) -> bool:
    """Kaldi's rule between feature and alignment lengths: equal within `tolerance` frames."""
    return abs(expected - actual) <= tolerance


class FeaturePipeline:
    """CMVN -> stack -> splice, configured once and saved beside the model."""

    def __init__(self, config: PipelineConfig, global_stats: np.ndarray | None = None):
        self.config = config
        # Global CMVN stats travel with the pipeline once set, so decoding uses the training stats.
        self.global_stats = None if global_stats is None else np.asarray(global_stats, np.float64)

    def __repr__(self) -> str:
        return f"FeaturePipeline({self.config})"

    # ---- configuration ----
    def to_dict(self) -> dict:
        d = asdict(self.config)
        if self.global_stats is not None:
            d["global_cmvn_stats"] = self.global_stats.tolist()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "FeaturePipeline":
        known = {f.name for f in fields(PipelineConfig)}
        unknown = set(d) - known - {"global_cmvn_stats"}
        if unknown:
            raise ValueError(f"unknown feature pipeline option(s): {sorted(unknown)}; "
                             f"expected some of {sorted(known)}")
        stats = d.get("global_cmvn_stats")
        return cls(PipelineConfig(**{k: v for k, v in d.items() if k in known}),
                   None if stats is None else np.array(stats, dtype=np.float64))

    def save(self, path: str) -> None:
        with atomic_write(path) as f:
            f.write("# emasr feature pipeline: CMVN -> stack -> splice. A record of the pipeline "
                    "stored in the models; decoding uses theirs, and refuses one this differs from\n")
            yaml.safe_dump(self.to_dict(), f, sort_keys=False)

    @classmethod
    def load(cls, path: str) -> "FeaturePipeline":
        with open(path, encoding="utf-8") as f:
            d = yaml.safe_load(f)
        if not isinstance(d, dict):
            raise ValueError(f"{path}: expected a YAML mapping of pipeline options")
        try:
            return cls.from_dict(d)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: {err}") from None

    def differences(self, other: "FeaturePipeline") -> list[str]:
        """'key: ours vs theirs' for every option (and the global stats) that differs."""
        ours, theirs = self.to_dict(), other.to_dict()
        return [f"{key}: {ours.get(key)!r} vs {theirs.get(key)!r}"
                for key in sorted(set(ours) | set(theirs)) if ours.get(key) != theirs.get(key)]

    def set_global_stats(self, stats: np.ndarray) -> None:
        self.global_stats = np.asarray(stats, dtype=np.float64)

    # ---- shapes ----
    def output_dim(self, input_dim: int) -> int:
        return input_dim * self.config.stack * (2 * self.config.splice + 1)

    def num_output_frames(self, num_frames: int) -> int:
        return math.ceil(num_frames / self.config.stack)

    # ---- the transform ----
    def transform(self, feats: np.ndarray, cmvn_stats: np.ndarray | None) -> np.ndarray:
        """[T, D] float32 -> [ceil(T/k), output_dim(D)] float32."""
        feats = np.asarray(feats, dtype=np.float32)
        if feats.ndim != 2:
            raise ValueError(f"features must be [T, D], got shape {feats.shape}")
        if self.config.cmvn != "none":
            if cmvn_stats is None:
                raise ValueError(f"the pipeline applies {self.config.cmvn} CMVN but no stats "
                                 "were given")
            feats = apply_cmvn(feats, cmvn_stats, self.config.norm_vars)
        stacked = stack_frames(feats, self.config.stack)
        return np.ascontiguousarray(splice_frames(stacked, self.config.splice))

    def subsample_labels(self, labels: np.ndarray) -> np.ndarray:
        """[T] -> [ceil(T/k)]: the label of the frame at the centre of each stacked window."""
        labels = np.asarray(labels)
        k = self.config.stack
        index = np.minimum(np.arange(self.num_output_frames(len(labels))) * k + k // 2,
                           len(labels) - 1)
        return labels[index]

    def iterate(self, data_dir: str, utts: Iterable[str] | None = None
                ) -> Iterator[tuple[str, np.ndarray]]:
        """Stream (utt, transformed feats) from data_dir/feats.scp with cmvn.scp + utt2spk.

        Global CMVN uses the pipeline's stats if set, else <data_dir>/global_cmvn.
        """
        for utt, feats, stats in iter_feats_with_stats(data_dir, self.config.cmvn, utts,
                                                       self.global_stats):
            yield utt, self.transform(feats, stats)
