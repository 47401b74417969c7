"""Cepstral mean and variance normalisation with Kaldi's statistics layout.

Stats for D-dimensional features are a 2 x (D+1) float64 matrix (Kaldi's compute-cmvn-stats):
row 0 holds the per-dimension sums and the frame count in the last column, row 1 the sums of
squares and 0 in the last column. Per-speaker stats go to `cmvn.scp` keyed by speaker; global stats
are one such matrix in `<data>/global_cmvn`. Applying them is Kaldi's apply-cmvn.
"""
from __future__ import annotations

import logging
import os
from typing import Iterable

import click
import kaldiio
import numpy as np

from emasr.feats.ark import ArkScpWriter
from emasr.io.atomic import atomic_write
from emasr.io.table import TableError, read_table
from emasr.kaldi.tables import read_scp

log = logging.getLogger(__name__)

GLOBAL_CMVN_FILE = "global_cmvn"
# Kaldi's ApplyCmvn floors the variance here (and warns) rather than dividing by zero.
VARIANCE_FLOOR = 1.0e-20


class CmvnError(ValueError):
    """Stats that cannot be applied (too few frames, wrong dimension, wrong shape)."""


def cmvn_stats(feats: np.ndarray) -> np.ndarray:
    """Stats of one feature matrix [T, D] -> [2, D+1] float64 in Kaldi's layout."""
    feats64 = np.asarray(feats, dtype=np.float64)
    dim = feats64.shape[1]
    stats = np.zeros((2, dim + 1), dtype=np.float64)
    stats[0, :dim] = feats64.sum(axis=0)
    stats[1, :dim] = np.square(feats64).sum(axis=0)
    stats[0, dim] = len(feats64)
    return stats


def sum_stats(matrices: Iterable[np.ndarray]) -> np.ndarray | None:
    """Sum the stats of several feature matrices; None when there are none."""
    total = None
    for feats in matrices:
        stats = cmvn_stats(feats)
        total = stats if total is None else total + stats
    return total


def fake_stats(dim: int) -> np.ndarray:
    """Kaldi's `compute_cmvn_stats.sh --fake`: mean 0, variance 1, count 1 (CMVN is a no-op)."""
    stats = np.zeros((2, dim + 1), dtype=np.float64)
    stats[0, dim] = 1.0
    stats[1, :dim] = 1.0
    return stats


def apply_cmvn(feats: np.ndarray, stats: np.ndarray, norm_vars: bool = False) -> np.ndarray:
    """Kaldi's apply-cmvn: subtract the mean, and with norm_vars divide by the std deviation."""
    stats = np.asarray(stats, dtype=np.float64)
    dim = feats.shape[1]
    if stats.ndim != 2 or stats.shape[1] != dim + 1 or stats.shape[0] not in (1, 2):
        raise CmvnError(f"CMVN stats of shape {stats.shape} do not fit features of dim {dim} "
                        f"(expected 2 x {dim + 1})")
    count = stats[0, dim]
    if count < 1.0:
        raise CmvnError(f"insufficient stats for CMVN: frame count {count}")
    mean = stats[0, :dim] / count
    if not norm_vars:
        return (feats - mean).astype(np.float32)
    if stats.shape[0] != 2:
        raise CmvnError("variance normalisation needs 2-row stats (sums of squares)")
    variance = stats[1, :dim] / count - np.square(mean)
    if np.any(variance < VARIANCE_FLOOR):
        log.warning("flooring %d CMVN variances to %g", int((variance < VARIANCE_FLOOR).sum()),
                    VARIANCE_FLOOR)
    scale = 1.0 / np.sqrt(np.maximum(variance, VARIANCE_FLOOR))
    return ((feats - mean) * scale).astype(np.float32)


# ---- computing stats for a data dir -------------------------------------------------------------

def feature_dim(feats_scp: dict) -> int:
    first = next(iter(feats_scp), None)
    if first is None:
        raise CmvnError("feats.scp is empty")
    return feats_scp[first].shape[1]


def finite_features(data: str, feats: dict, utts: Iterable[str]) -> Iterable[np.ndarray]:
    """The matrices of `utts`; a NaN or infinity is an error naming the utterance, since it would
    make the speaker's stats (and every feature normalized with them) NaN."""
    for utt in utts:
        matrix = feats[utt]
        if not np.isfinite(matrix).all():
            raise CmvnError(f"{data}/feats.scp: utterance {utt} has NaN or infinite values")
        yield matrix


def speaker_stats(data: str, fake: bool = False) -> dict[str, np.ndarray]:
    """Per-speaker stats for a data dir; speakers without any features are left out (warned)."""
    read_table(os.path.join(data, "feats.scp"))   # duplicate keys: an error naming the lines
    feats = read_scp(os.path.join(data, "feats.scp"))
    dim = feature_dim(feats)
    result = {}
    for speaker, utts in read_table(os.path.join(data, "spk2utt")).items():
        present = [u for u in utts.split() if u in feats]
        if len(present) < len(utts.split()):
            log.warning("speaker %s: no features for %d utterance(s)", speaker,
                        len(utts.split()) - len(present))
        if not present:
            log.warning("speaker %s: no features at all; no stats written", speaker)
            continue
        result[speaker] = (fake_stats(dim) if fake
                           else sum_stats(finite_features(data, feats, present)))
    return result


def global_stats(data: str, fake: bool = False) -> np.ndarray:
    feats = read_scp(os.path.join(data, "feats.scp"))
    if fake:
        return fake_stats(feature_dim(feats))
    return sum_stats(finite_features(data, feats, feats))


def read_stats(path: str) -> np.ndarray:
    """A single stats matrix (e.g. <data>/global_cmvn) as float64."""
    return np.asarray(kaldiio.load_mat(path), dtype=np.float64)


def write_global_stats(path: str, stats: np.ndarray) -> None:
    with atomic_write(path, "wb") as f:
        kaldiio.save_mat(f, stats)


@click.command("compute-cmvn-stats")
@click.option("--fake", is_flag=True,
              help="Write stats that make CMVN a no-op (mean 0, variance 1), as Kaldi's --fake.")
@click.option("--global", "global_", is_flag=True,
              help=f"One matrix over all utterances, written to DATA/{GLOBAL_CMVN_FILE}, instead "
                   "of per-speaker stats.")
@click.argument("data", type=click.Path(exists=True, file_okay=False))
@click.argument("cmvn_dir", type=click.Path(file_okay=False), required=False)
def compute_cmvn_stats_cli(fake, global_, data, cmvn_dir):
    """Compute CMVN stats for DATA (Kaldi layout: 2 x (D+1) double matrix, count last).

    Per speaker (spk2utt): CMVN_DIR/cmvn_<set>.ark/.scp, then DATA/cmvn.scp (a copy of the scp).
    With --global: DATA/global_cmvn. Usually called by steps/compute_cmvn_stats.sh.
    """
    try:
        if global_:
            write_global_stats(os.path.join(data, GLOBAL_CMVN_FILE), global_stats(data, fake))
            log.info("wrote %s/%s", data, GLOBAL_CMVN_FILE)
            return
        stats = speaker_stats(data, fake)
    except (CmvnError, TableError, OSError) as err:
        raise click.ClickException(f"{data}: {err}") from None
    if not stats:
        raise click.ClickException(f"{data}: no speaker has features; no CMVN stats written")
    name = os.path.basename(os.path.normpath(data))
    cmvn_dir = cmvn_dir or os.path.join(data, "data")
    scp = os.path.join(cmvn_dir, f"cmvn_{name}.scp")
    with ArkScpWriter(os.path.join(cmvn_dir, f"cmvn_{name}.ark"), scp) as writer:
        for speaker, matrix in stats.items():
            writer.write(speaker, matrix)
    with open(scp, encoding="utf-8") as src, atomic_write(os.path.join(data, "cmvn.scp")) as dst:
        dst.write(src.read())
    log.info("wrote CMVN stats for %d speakers to %s/cmvn.scp", len(stats), data)
