"""`emasr compare-cer`: bootstrap confidence of a CER, and of one system beating another.

kaldialign.bootstrap_wer_ci implements Bisani and Ney's bootstrap (Kaldi's compute-wer-bootci):
utterances are resampled with replacement; the 95% interval of the error rate, and with a second
system on the same utterances, the probability that it improves on the first.
"""
from __future__ import annotations

import click
import kaldialign

from emasr.io.table import read_table
from emasr.score.wer import filter_words, to_units


def read_units(path: str, metric: str) -> dict[str, list[str]]:
    return {u: to_units(filter_words(t.split()), metric) for u, t in read_table(path).items()}


def bootstrap(refs: dict[str, list[str]], hyps_a: dict[str, list[str]],
              hyps_b: dict[str, list[str]] | None = None, replications: int = 10000,
              seed: int = 0) -> dict:
    """kaldialign's bootstrap over the reference utterances (a missing hypothesis is empty)."""
    utts = sorted(refs)
    args = dict(refs=[refs[u] for u in utts], hyps=[hyps_a.get(u, []) for u in utts],
                replications=replications, seed=seed)
    if hyps_b is not None:
        args["hyps2"] = [hyps_b.get(u, []) for u in utts]
    return kaldialign.bootstrap_wer_ci(**args)


def describe(name: str, result: dict, metric: str) -> str:
    label = metric.upper()
    return (f"{name}: {label} {100 * result['wer']:.2f}% (95% interval "
            f"{100 * result['ci95min']:.2f}% to {100 * result['ci95max']:.2f}%, "
            f"+/- {100 * result['ci95']:.2f})")


@click.command("compare-cer")
@click.option("--metric", type=click.Choice(["cer", "wer"]), default="cer", show_default=True)
@click.option("--replications", type=int, default=10000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.argument("ref", type=click.Path(exists=True, dir_okay=False))
@click.argument("hyp_a", type=click.Path(exists=True, dir_okay=False))
@click.argument("hyp_b", type=click.Path(exists=True, dir_okay=False), required=False)
def compare_cer_cli(metric, replications, seed, ref, hyp_a, hyp_b):
    """Bootstrap 95% interval of HYP_A's CER against REF (text tables, e.g. data/test/text and
    decode/scoring_kaldi/penalty_0.5/12.txt); with HYP_B, its interval too and the probability
    that B improves on A on the same utterances."""
    refs = read_units(ref, metric)
    hyps_a = read_units(hyp_a, metric)
    hyps_b = read_units(hyp_b, metric) if hyp_b else None
    result = bootstrap(refs, hyps_a, hyps_b, replications, seed)
    if hyps_b is None:
        click.echo(describe(f"A {hyp_a}", result, metric))
        return
    click.echo(describe(f"A {hyp_a}", result["system1"], metric))
    click.echo(describe(f"B {hyp_b}", result["system2"], metric))
    click.echo(f"P(B improves on A) = {result['p_s2_improv_over_s1']:.4f} "
               f"({len(refs)} utterances, {replications} replications)")
