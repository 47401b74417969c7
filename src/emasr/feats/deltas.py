"""Delta features for the GMMs (Kaldi's add-deltas), applied on the fly after CMVN.

Kaldi's GMM steps read `apply-cmvn ... | add-deltas`; iter_gmm_feats is that pipe in Python.
The arithmetic is kaldi-native-fbank's port of Kaldi's DeltaFeatures: with window N the delta is
sum_{j=-N..N} j * x[clamp(t+j)] / (2 * sum_{j=1..N} j^2), higher orders apply it again, and the
output is [x, delta, delta-delta].
"""
from __future__ import annotations

from typing import Iterable, Iterator

import click
import kaldi_native_fbank as knf
import kaldiio
import numpy as np

from emasr.feats.cmvn import apply_cmvn
from emasr.feats.reader import iter_feats_with_stats
from emasr.kaldi.tables import read_archive

DELTA_ORDER = 2
DELTA_WINDOW = 2


def add_deltas(feats: np.ndarray, order: int = DELTA_ORDER, window: int = DELTA_WINDOW
               ) -> np.ndarray:
    """[T, D] -> [T, D * (order + 1)]: the features followed by their deltas of order 1..order."""
    opts = knf.DeltaOptions()
    opts.order, opts.window = order, window
    return knf.compute_deltas(opts, np.ascontiguousarray(feats, dtype=np.float32))


def iter_gmm_feats(data_dir: str, utts: Iterable[str] | None = None, cmvn: str = "speaker",
                   norm_vars: bool = False, delta_order: int = DELTA_ORDER
                   ) -> Iterator[tuple[str, np.ndarray]]:
    """(utt, features) as Kaldi's train_mono.sh/train_deltas.sh read them: CMVN, then add-deltas.

    Kaldi's default cmvn_opts are means only (norm_vars false); delta_order 0 skips the deltas.
    """
    for utt, feats, stats in iter_feats_with_stats(data_dir, cmvn, utts):
        if stats is not None:
            feats = apply_cmvn(feats, stats, norm_vars)
        yield utt, add_deltas(feats, delta_order) if delta_order > 0 else feats


@click.command("add-deltas")
@click.option("--delta-order", type=int, default=DELTA_ORDER, show_default=True)
@click.option("--delta-window", type=int, default=DELTA_WINDOW, show_default=True)
@click.argument("rspecifier")
@click.argument("wspecifier")
def add_deltas_cli(delta_order, delta_window, rspecifier, wspecifier):
    """Kaldi's add-deltas: append delta features, e.g. `scp:feats.scp ark:deltas.ark`."""
    with kaldiio.WriteHelper(wspecifier) as writer:
        for utt, feats in read_archive(rspecifier):
            writer(utt, add_deltas(feats, delta_order, delta_window))
