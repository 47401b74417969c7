"""Per-frame transition-id posteriors from lattices (Kaldi's lattice-to-post), and acoustic
rescoring of lattices with another model or other features (Kaldi's gmm-rescore-lattice), the
two lattice operations of steps/decode_fmllr.sh.

Forward-backward over a lattice in the log semiring, the arc cost being lm_scale * graph +
acoustic_scale * acoustic (Kaldi's ScaleLattice then LatticeForwardBackward):
alpha(start) = 0, alpha(s) = log sum over arcs a into s of exp(alpha(src a) - cost a);
beta(s) = log(exp(-final(s)) + sum over arcs a out of s of exp(beta(dst a) - cost a));
an arc's posterior is exp(alpha(src) - cost + beta(dst) - total), total = beta(start), the
lattice's log-likelihood. An arc with a transition id (ilabel) consumes the frame at which its
source state is (the number of such arcs on any path to it: Kaldi's LatticeStateTimes; in a
decoder's lattice every path gives the same), and the posteriors of one (frame, transition id)
are summed. Both passes go level by level (emasr.decode.lattice_best.state_levels), so each is
a few array operations per level, not a Python step per arc.
"""
from __future__ import annotations

import logging

import click
import numpy as np

from emasr.ali.posterior import Posterior
from emasr.decode.lattice_best import state_levels
from emasr.kaldi.lattice_io import LatticeArcs, LatticeFormatError

log = logging.getLogger(__name__)


def level_groups(levels: np.ndarray) -> list[np.ndarray]:
    """Arc indices grouped by ``levels`` (one value per arc), in increasing level order."""
    order = np.argsort(levels, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(levels[order])) + 1) if len(order) else []


def state_times(arcs: LatticeArcs, where: str = "lattice", levels: np.ndarray | None = None
                ) -> np.ndarray:
    """Each state's frame: the number of arcs with a transition id on a path from the start
    (-1 for a state the start does not reach). A lattice in which two paths reach a state at
    different frames is not a time-synchronous (decoder's) lattice: LatticeFormatError."""
    levels = state_levels(arcs, where) if levels is None else levels
    emitting = (arcs.ilabel != 0).astype(np.int64)
    low = np.full(arcs.num_states, np.iinfo(np.int64).max)
    high = np.full(arcs.num_states, -1, dtype=np.int64)
    low[arcs.start] = high[arcs.start] = 0
    for group in level_groups(levels[arcs.dst]):
        reached = high[arcs.src[group]] >= 0
        group = group[reached]
        t = high[arcs.src[group]] + emitting[group]
        np.minimum.at(low, arcs.dst[group], t)
        np.maximum.at(high, arcs.dst[group], t)
    bad = np.flatnonzero((high >= 0) & (low != high))
    if len(bad):
        raise LatticeFormatError(f"{where}: state {bad[0]} is reached at frames {low[bad[0]]} "
                                 f"and {high[bad[0]]}: not a time-synchronous lattice")
    return high


def forward_backward(arcs: LatticeArcs, acoustic_scale: float = 1.0, lm_scale: float = 1.0,
                     where: str = "lattice") -> tuple[Posterior, float]:
    """(per-frame transition-id posteriors, the lattice's total log-likelihood at these scales);
    LatticeFormatError when no final state is reachable."""
    levels = state_levels(arcs, where)
    times = state_times(arcs, where, levels)
    cost = lm_scale * arcs.graph + acoustic_scale * arcs.acoustic
    finals = np.array(sorted(arcs.finals), dtype=np.int64)
    final_cost = np.array([lm_scale * arcs.finals[s][0] + acoustic_scale * arcs.finals[s][1]
                           for s in finals.tolist()])
    alpha = np.full(arcs.num_states, -np.inf)
    alpha[arcs.start] = 0.0
    for group in level_groups(levels[arcs.dst]):
        np.logaddexp.at(alpha, arcs.dst[group], alpha[arcs.src[group]] - cost[group])
    beta = np.full(arcs.num_states, -np.inf)
    if len(finals):
        beta[finals] = -final_cost
    for group in reversed(level_groups(levels[arcs.src])):
        np.logaddexp.at(beta, arcs.src[group], beta[arcs.dst[group]] - cost[group])
    total = float(beta[arcs.start])
    if not np.isfinite(total):
        raise LatticeFormatError(f"{where}: no final state is reachable from the start")
    num_frames = int(times[finals][np.isfinite(alpha[finals])].max())
    with np.errstate(invalid="ignore"):
        arc_post = np.exp(alpha[arcs.src] - cost + beta[arcs.dst] - total)
    keep = (arcs.ilabel != 0) & (arc_post > 0)
    frames, ids, weights = times[arcs.src][keep], arcs.ilabel[keep], arc_post[keep]
    # sum the posteriors of each (frame, transition id), ordered by frame then id
    key = frames * (int(ids.max(initial=0)) + 1) + ids
    unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    summed = np.bincount(inverse, weights, minlength=len(unique))
    return Posterior(num_frames, frames[first], ids[first].astype(np.int32), summed), total


@click.command("lattice-to-post")
@click.option("--acoustic-scale", type=float, default=1.0, show_default=True,
              help="Scale of the acoustic costs (decode_fmllr.sh passes its --acwt).")
@click.option("--lm-scale", type=float, default=1.0, show_default=True,
              help="Scale of the graph costs (LM, transitions, pronunciations).")
@click.argument("lattices", type=click.Path(dir_okay=False, exists=True))
@click.argument("post_out", type=click.Path(dir_okay=False))
def lattice_to_post_cli(acoustic_scale, lm_scale, lattices, post_out):
    """Kaldi's lattice-to-post: forward-backward over each lattice of LATTICES (lat.JOB.gz),
    writing per-frame transition-id posteriors (each frame's sum 1) to POST_OUT, a binary
    Kaldi posterior archive (post.JOB.gz: gzipped by the name)."""
    from emasr.ali.posterior import write_posteriors
    from emasr.kaldi.lattice_io import read_lattices
    if acoustic_scale == 0.0:
        raise click.ClickException("do not use a zero acoustic scale")
    totals = {"like": 0.0, "frames": 0, "failed": 0}

    def posteriors():
        for utt, arcs in read_lattices(lattices):
            try:
                post, like = forward_backward(arcs, acoustic_scale, lm_scale,
                                              f"{lattices}: {utt}")
            except LatticeFormatError as err:
                log.warning("skipping utterance %s: %s", utt, err)
                totals["failed"] += 1
                continue
            totals["like"] += like
            totals["frames"] += post.num_frames
            yield utt, post

    try:
        done = write_posteriors(post_out, posteriors())
    except LatticeFormatError as err:
        raise click.ClickException(str(err)) from None
    log.info("Overall average log-like/frame is %.6g over %d frames",
             totals["like"] / max(totals["frames"], 1), totals["frames"])
    log.info("Done %d lattices, %d failed", done, totals["failed"])
    if done == 0:
        raise click.ClickException(f"no posteriors from {lattices}")
