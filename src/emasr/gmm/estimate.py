"""Maximum-likelihood re-estimation of a GMM-HMM from summed statistics (Kaldi's gmm-est).

Transitions: Kaldi's own TransitionModel::MleUpdate. GMMs: Kaldi's MleDiagGmmUpdate rules
(weights, means, floored variances, low-count Gaussians removed) applied to the NumPy stats, since
kaldi-hmm-gmm's accumulator cannot take them. Mixing up follows AmDiagGmm::SplitByCount (each pdf
gets Gaussians in proportion to its occupancy to the power ``power``, then DiagGmm::Split halves
its heaviest Gaussian and moves the two means apart by ``perturb_factor`` standard deviations
along a random direction) but draws the direction from a seeded NumPy generator: the binding's
own Split draws from an RNG that differs in every process, which made training irreproducible.
"""
from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass

import click
import numpy as np

from emasr.gmm.accumulate import GmmStats, sum_stats
from emasr.kaldi.io import KaldiWriter
from emasr.kaldi.model_io import KaldiModel, am_gmm_arrays, read_model, write_model
from emasr.io.atomic import atomic_write
from emasr.fst_stack import kaldi_hmm_gmm

log = logging.getLogger(__name__)


UPDATE_FLAGS = "mvwt"   # Kaldi's gmm-est --update-flags: means, variances, weights, transitions


def check_update_flags(flags: str) -> str:
    if not flags or set(flags) - set(UPDATE_FLAGS):
        raise ValueError(f"bad --update-flags '{flags}': expected letters of '{UPDATE_FLAGS}'")
    return flags


@dataclass(frozen=True)
class MleOptions:
    """Kaldi's MleDiagGmmOptions (defaults as in Kaldi)."""
    min_gaussian_occupancy: float = 10.0
    min_gaussian_weight: float = 1.0e-5
    min_variance: float = 1.0e-3
    remove_low_count_gaussians: bool = True


def update_gmm(gmm, occupancy: np.ndarray, x: np.ndarray, x2: np.ndarray,
               options: MleOptions, flags: str = "mvw") -> tuple[int, int]:
    """Kaldi's MleDiagGmmUpdate of one DiagGmm in place: new weights, means and variances
    (floored) for Gaussians with enough data; Gaussians without are removed (but never the last
    one) or, when removal is off, keep their old parameters. Only the parameters named in
    ``flags`` (w, m, v) change, the variance being that around the statistics' mean in any
    case, as Kaldi's. Returns (removed, floored)."""
    num_gauss = len(occupancy)
    total = occupancy.sum()
    weights = occupancy / total if total > 0 else np.full(num_gauss, 1.0 / num_gauss)
    old_means = np.asarray(gmm.means, dtype=np.float64)
    means = old_means.copy()
    variances = np.asarray(gmm.vars, dtype=np.float64).copy()
    enough = (occupancy > options.min_gaussian_occupancy) & (weights > options.min_gaussian_weight)
    safe = np.maximum(occupancy[enough], 1e-300)[:, None]
    means[enough] = x[enough] / safe
    new_vars = x2[enough] / safe - np.square(means[enough])
    floored = int(np.sum(new_vars < options.min_variance)) if "v" in flags else 0
    if "v" in flags:
        variances[enough] = np.maximum(new_vars, options.min_variance)
    if "m" not in flags:
        means = old_means.copy()
    if "w" not in flags:
        weights = np.asarray(gmm.weights, dtype=np.float64).copy()
    elif not options.remove_low_count_gaussians:   # Kaldi: those keep their old weight
        weights[~enough] = np.asarray(gmm.weights, dtype=np.float64)[~enough]
    keep = np.ones(num_gauss, dtype=bool)
    if options.remove_low_count_gaussians:
        for g in np.flatnonzero(~enough):
            if keep.sum() > 1:
                keep[g] = False
    weights = weights[keep] / weights[keep].sum() if weights[keep].sum() > 0 else \
        np.full(int(keep.sum()), 1.0 / keep.sum())
    gmm.resize(int(keep.sum()), means.shape[1])
    gmm.set_weights(weights.astype(np.float32))
    gmm.set_invvars_and_means((1.0 / variances[keep]).astype(np.float32),
                              means[keep].astype(np.float32))
    gmm.compute_gconsts()
    return num_gauss - int(keep.sum()), floored


def split_targets(occupancy: np.ndarray, target: int, power: float, min_count: float) -> list[int]:
    """Kaldi's GetSplitTargets: Gaussians per pdf, starting from one each, given one at a time to
    the pdf with the largest occupancy**power per Gaussian, as long as every Gaussian of it
    keeps ``min_count`` frames; returns the number of Gaussians per pdf."""
    counts = [1] * len(occupancy)
    queue = [(-float(occ) ** power, pdf) for pdf, occ in enumerate(occupancy)]
    heapq.heapify(queue)
    total = len(counts)
    while total < target and queue:
        _, pdf = heapq.heappop(queue)
        if occupancy[pdf] <= 0 or (counts[pdf] + 1) * min_count >= occupancy[pdf]:
            continue  # this pdf can take no more Gaussians
        counts[pdf] += 1
        total += 1
        heapq.heappush(queue, (-float(occupancy[pdf]) ** power / counts[pdf], pdf))
    return counts


def split_gmm(gmm, target: int, perturb_factor: float, rng: np.random.Generator) -> None:
    """Kaldi's DiagGmm::Split: until ``target`` Gaussians, halve the heaviest one into two
    copies whose means differ by 2 * perturb_factor standard deviations along a random
    direction."""
    weights = list(np.asarray(gmm.weights, dtype=np.float64))
    means = list(np.asarray(gmm.means, dtype=np.float64))
    variances = list(np.asarray(gmm.vars, dtype=np.float64))
    while len(weights) < target:
        heaviest = int(np.argmax(weights))
        weights[heaviest] /= 2
        shift = perturb_factor * rng.standard_normal(len(means[heaviest])) \
            * np.sqrt(variances[heaviest])
        weights.append(weights[heaviest])
        variances.append(variances[heaviest].copy())
        means.append(means[heaviest] + shift)
        means[heaviest] = means[heaviest] - shift
    gmm.resize(len(weights), len(means[0]))
    gmm.set_weights(np.asarray(weights, dtype=np.float32))
    gmm.set_invvars_and_means((1.0 / np.asarray(variances)).astype(np.float32),
                              np.asarray(means, dtype=np.float32))
    gmm.compute_gconsts()


def mix_up_model(model: KaldiModel, occupancy: np.ndarray, target: int, power: float,
                 perturb_factor: float, min_count: float, seed: int) -> None:
    """AmDiagGmm::SplitByCount with a seeded generator: pdfs only gain Gaussians."""
    rng = np.random.default_rng(seed)
    am_gmm = model.am_gmm
    for pdf, count in enumerate(split_targets(occupancy, target, power, min_count)):
        gmm = am_gmm.get_pdf(pdf)
        if count > gmm.num_gauss:
            split_gmm(gmm, count, perturb_factor, rng)


def update_model(model: KaldiModel, stats: GmmStats, options: MleOptions = MleOptions(),
                 mix_up: int = 0, power: float = 0.2, perturb_factor: float = 0.01,
                 min_count: float = 20.0, seed: int = 0, flags: str = UPDATE_FLAGS) -> None:
    """Update transitions (flag t) and GMMs (flags m, v, w) in place, then mix up to ``mix_up``
    Gaussians (0: no)."""
    if "t" in flags:
        objf, count = model.transition_model.mle_update(
            stats.transitions, kaldi_hmm_gmm.MleTransitionUpdateConfig())
        log.info("transition update: %.5f log-like improvement per frame over %.0f frames",
                 objf / max(count, 1.0), count)
    removed = floored = 0
    for pdf in range(model.am_gmm.num_pdfs):
        rows = stats.gaussian_rows(pdf)
        try:
            r, f = update_gmm(model.am_gmm.get_pdf(pdf), stats.occupancy[rows], stats.x[rows],
                              stats.x2[rows], options, flags)
        except RuntimeError as err:  # Kaldi's gconst check on NaN/inf parameters
            raise ValueError(f"pdf {pdf}: the updated GMM is not finite (NaN/inf in the "
                             f"statistics?): {str(err).splitlines()[-1]}; not writing the "
                             "model") from None
        removed, floored = removed + r, floored + f
    if removed or floored:
        log.warning("GMM update: removed %d Gaussians with too little data; floored %d "
                    "variance elements", removed, floored)
    log.info("GMM update: overall avg like per frame = %.5f over %.0f frames",
             stats.log_like / max(stats.frames, 1.0), stats.frames)
    if mix_up > model.am_gmm.num_gauss:
        mix_up_model(model, stats.pdf_occupancy(), mix_up, power, perturb_factor, min_count,
                     seed)
        log.info("mixed up to %d Gaussians", model.am_gmm.num_gauss)


def check_finite_model(model: KaldiModel, what: str) -> None:
    """Raise instead of writing a model with NaN/inf parameters, which decodes nothing."""
    for pdf, gmm in enumerate(am_gmm_arrays(model.am_gmm)):
        for name in ("weights", "means_invvars", "inv_vars"):
            if not np.all(np.isfinite(getattr(gmm, name))):
                raise ValueError(f"{what} has non-finite {name} in pdf {pdf} (NaN/inf in the "
                                 "statistics): not writing it")


def write_occupancies(path: str, occs: np.ndarray) -> None:
    """Per-pdf occupancies as a Kaldi text vector (final.occs)."""
    writer = KaldiWriter(binary=False)
    writer.write_float_vector(np.asarray(occs, dtype=np.float32))
    with atomic_write(path, "wb") as f:
        f.write(writer.getvalue())


@click.command("gmm-est")
@click.option("--min-gaussian-occupancy", type=float, default=10.0, show_default=True)
@click.option("--mix-up", type=int, default=0, help="Increase the number of Gaussians to this.")
@click.option("--power", type=float, default=0.2, show_default=True,
              help="Allocate Gaussians to pdfs in proportion to occupancy to this power.")
@click.option("--perturb-factor", type=float, default=0.01, show_default=True)
@click.option("--min-count", type=float, default=20.0, show_default=True,
              help="Minimum count per Gaussian when mixing up.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the random directions along which mixing up splits Gaussians.")
@click.option("--write-occs", type=click.Path(dir_okay=False), default=None,
              help="Write the per-pdf occupancies here (e.g. N.occs).")
@click.option("--update-flags", default=UPDATE_FLAGS, show_default=True,
              help="What to update: m(eans), v(ariances), w(eights), t(ransitions).")
@click.option("--remove-low-count-gaussians", type=click.BOOL, default=True, show_default=True,
              help="Remove Gaussians with too little data (false: they keep their old "
              "parameters, as for train_sat.sh's final.alimdl).")
@click.option("--binary/--text", default=True, show_default=True)
@click.argument("model_in", type=click.Path(dir_okay=False, exists=True))
@click.argument("model_out", type=click.Path(dir_okay=False))
@click.argument("stats", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
def gmm_est_cli(min_gaussian_occupancy, mix_up, power, perturb_factor, min_count, seed,
                write_occs, update_flags, remove_low_count_gaussians, binary, model_in,
                model_out, stats):
    """Re-estimate MODEL_IN from the STATS files of all jobs (summed) into MODEL_OUT."""
    try:
        check_update_flags(update_flags)
        model = read_model(model_in)
        total = sum_stats(list(stats))
        if len(total.num_gauss) != model.am_gmm.num_pdfs:
            raise ValueError(f"the statistics have {len(total.num_gauss)} pdfs, {model_in} has "
                             f"{model.am_gmm.num_pdfs}")
        occs = total.pdf_occupancy()
        options = MleOptions(min_gaussian_occupancy,
                             remove_low_count_gaussians=remove_low_count_gaussians)
        update_model(model, total, options, mix_up, power, perturb_factor, min_count, seed,
                     update_flags)
        check_finite_model(model, f"the model re-estimated from {', '.join(stats)}")
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    write_model(model_out, model, binary)
    if write_occs:
        write_occupancies(write_occs, occs)
