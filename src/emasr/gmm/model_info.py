"""Inspect Kaldi GMM model files: ``emasr gmm-info`` and ``emasr show-transitions``, as Kaldi's
gmm-info and show-transitions print them."""
from __future__ import annotations

import math

import click
import numpy as np

from emasr.kaldi.io import KaldiFormatError, KaldiReader
from emasr.kaldi.model_io import read_model, transition_table
from emasr.io.table import TableError, read_table


def model_summary(path: str) -> list[str]:
    model = read_model(path)
    table = transition_table(model)
    lines = [f"number of phones {len(table.topology.phones)}",
             f"number of pdfs {table.num_pdfs}",
             f"number of transition-ids {table.num_transition_ids}",
             f"number of transition-states {table.num_transition_states}"]
    if model.am_gmm is not None:
        lines += [f"feature dimension {model.am_gmm.dim}",
                  f"number of gaussians {model.am_gmm.num_gauss}"]
    return lines


def transition_lines(path: str, phone_names: dict[int, str],
                     occs: np.ndarray | None = None) -> list[str]:
    table = transition_table(read_model(path))
    lines = []
    for tstate, tup in enumerate(table.tuples, 1):
        name = phone_names.get(tup.phone, str(tup.phone))
        pdfs = (f"pdf = {tup.forward_pdf}" if tup.forward_pdf == tup.self_loop_pdf else
                f"forward-pdf = {tup.forward_pdf} self-loop-pdf = {tup.self_loop_pdf}")
        lines.append(f"Transition-state {tstate}: phone = {name} hmm-state = {tup.hmm_state} "
                     f"{pdfs}")
        for tid in range(table.state2id[tstate], table.state2id[tstate + 1]):
            kind = ("[self-loop]" if table.self_loop[tid] else
                    f"[{tup.hmm_state} -> {table.dest_state[tid]}]")
            count = f" count of pdf = {occs[table.id2pdf[tid]]:g}" if occs is not None else ""
            lines.append(f" Transition-id = {tid} p = {math.exp(table.log_probs[tid]):.6g}"
                         f"{count} {kind}")
    return lines


@click.command("gmm-info")
@click.argument("model", type=click.Path(dir_okay=False, exists=True))
def gmm_info_cli(model):
    """Print the numbers of phones, pdfs, transition ids and Gaussians of a Kaldi MODEL
    (final.mdl, binary or text)."""
    try:
        lines = model_summary(model)
    except KaldiFormatError as err:
        raise click.ClickException(str(err)) from None
    click.echo("\n".join(lines))


@click.command("show-transitions")
@click.argument("phones", type=click.Path(dir_okay=False, exists=True))
@click.argument("model", type=click.Path(dir_okay=False, exists=True))
@click.argument("occs", type=click.Path(dir_okay=False, exists=True), required=False)
def show_transitions_cli(phones, model, occs):
    """Print each transition state of MODEL (phone names from PHONES, phones.txt) with its
    transition ids and probabilities; with OCCS (final.occs), the count of each pdf."""
    try:
        names = {int(n): s for s, n in read_table(phones).items()}
        counts = None
        if occs:
            counts = KaldiReader.open(occs).read_float_vector("the pdf occupancies")
        lines = transition_lines(model, names, counts)
    except (KaldiFormatError, TableError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    click.echo("\n".join(lines))
