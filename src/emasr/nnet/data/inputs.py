"""A training's inputs opened once: the network feature pipeline, the targets dir, the raw feature
dimension (read by the trainer's setup, and by `emasr regime` before a training)."""
from __future__ import annotations

import os

from emasr.nnet.data import DataError


def make_pipeline(features, train_dir: str | None = None):
    """The network feature pipeline; with global CMVN it carries the training set's stats, so dev
    and decoding normalize exactly as training did."""
    from emasr.feats.cmvn import GLOBAL_CMVN_FILE, read_stats
    from emasr.feats.pipeline import FeaturePipeline, PipelineConfig

    pipeline = FeaturePipeline(PipelineConfig(**{k: v for k, v in features.to_dict().items()
                                                 if k != "dim"}))
    if features.cmvn == "global" and train_dir is not None:
        path = os.path.join(train_dir, GLOBAL_CMVN_FILE)
        if not os.path.isfile(path):
            raise DataError(f"expected file {path} to exist for features.cmvn=global "
                            "(steps/compute_cmvn_stats.sh --global)")
        pipeline.set_global_stats(read_stats(path))
    return pipeline


def open_targets(targets_dir: str):
    from emasr.ali.targets import load_targets

    return load_targets(targets_dir)


def raw_feature_dim(data_dir: str) -> int:
    """The dimension of the first matrix in data_dir/feats.scp."""
    from emasr.kaldi.tables import read_archive

    for _, mat in read_archive(f"scp:{os.path.join(data_dir, 'feats.scp')}"):
        return int(mat.shape[1])
    raise DataError(f"{data_dir}/feats.scp is empty")
