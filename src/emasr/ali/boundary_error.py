"""How far an alignment's phone boundaries are from the synthesizer's (emasr ali-boundary-error).

The simulated corpus records espeak's phone timings per utterance (``timings/<set>.jsonl``:
``"phones": [[phone, start_sample, end_sample], ...]`` in the lexicon's phone names). An alignment
dir's phones come from its transition ids, split into phone instances as Kaldi's SplitToPhones
does; silence phones are dropped. Where the two phone sequences agree, each phone start and the
last phone's end of the alignment (frame t at t * frame_shift) is compared with the synthesizer's;
the mean absolute difference is the boundary error, also per phone (the phone a boundary starts).
Utterances whose sequences differ are counted and left out.

The synthesizer's boundaries are espeak's phoneme events, which follow espeak's own conventions
(where a vowel event falls in the formant transition, how much of a closure an affricate gets), so
part of the error is a constant offset per phone. ``--phone-offsets`` measures what is left once
each phone's median signed error is taken out; ``--by-snr`` splits the error by the simulated
noise level of the utterances. Alignment settings that fail on more utterances leave the hard ones
out of their own measure: ``--common-with OTHER`` compares only the utterances that OTHER aligned
too, so two settings are measured on the same utterances.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from emasr.kaldi.alignments import alignment_files, iter_alignment_file
from emasr.kaldi.transitions import TransitionTable, load_transition_table
from emasr.io.table import read_lines

log = logging.getLogger(__name__)
END_LABEL = "<end>"   # the label of an utterance's last phone end


def read_timings(paths: list[Path]) -> dict[str, dict]:
    """The synthesizer's record of each utterance (the lines of timings/<set>.jsonl files)."""
    records = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                try:
                    record = json.loads(line)
                    records[record["utt"]] = record
                except (ValueError, KeyError, TypeError):
                    raise ValueError(f"{path}:{number}: expected a JSON object with 'utt', "
                                     "'sample_rate' and 'phones'") from None
    return records


def timed_phones(record: dict) -> list[tuple[str, float, float]]:
    """(phone, start, end) in seconds of one timings record."""
    try:
        rate = float(record["sample_rate"])
        return [(str(p), s / rate, e / rate) for p, s, e in record["phones"]]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"utterance {record.get('utt')}: expected 'sample_rate' and 'phones' "
                         "as [[phone, start_sample, end_sample], ...]") from None


def aligned_phones(table: TransitionTable, alignment: np.ndarray
                   ) -> list[tuple[int, int, int]]:
    """(phone, start frame, end frame) of each phone instance of an alignment."""
    starts = np.flatnonzero(table.phone_starts(alignment))
    ends = np.append(starts[1:], len(alignment))
    return [(int(table.id2phone[alignment[s]]), int(s), int(e)) for s, e in zip(starts, ends)]


def utterance_boundaries(segments: list[tuple[str, float, float]]) -> np.ndarray:
    """Phone starts plus the last phone's end, in seconds."""
    return np.array([s for _, s, _ in segments] + [segments[-1][2]])


@dataclass
class BoundaryErrors:
    errors: np.ndarray   # signed, in seconds, ours minus the synthesizer's
    labels: list[str]    # the phone each boundary starts, END_LABEL for an utterance's last end
    snr: np.ndarray      # the simulated SNR (dB) of each boundary's utterance (NaN: not recorded)
    compared: int        # utterances compared
    left_out: int        # utterances whose phone sequences differ


def aligned_utterances(ali_dir: Path) -> set[str]:
    """The utterances an alignment dir holds."""
    return {utt for path in alignment_files(ali_dir) for utt, _ in iter_alignment_file(path)}


def boundary_errors(ali_dir: Path, timings: list[Path], phones_txt: Path, silence: set[str],
                    frame_shift: float, only: set[str] | None = None) -> BoundaryErrors:
    """The boundary errors of ali_dir's utterances (of those in `only`, when given)."""
    names = {int(i): p for p, i in (line.split() for line in read_lines(phones_txt))}
    table = load_transition_table(ali_dir / "final.mdl")
    truth, snr_of = {}, {}
    for utt, record in read_timings(timings).items():
        truth[utt] = [(p, s, e) for p, s, e in timed_phones(record) if p not in silence]
        snr_of[utt] = record.get("conditions", {}).get("snr_db", np.nan)
    errors, labels, snr, compared, left_out = [], [], [], 0, 0
    for path in alignment_files(ali_dir):
        for utt, alignment in iter_alignment_file(path):
            if only is not None and utt not in only:
                continue
            reference = truth.get(utt)
            ours = [(names[p], s * frame_shift, e * frame_shift)
                    for p, s, e in aligned_phones(table, alignment) if names[p] not in silence]
            if not reference or [p for p, _, _ in ours] != [p for p, _, _ in reference]:
                left_out += 1
                continue
            errors.append(utterance_boundaries(ours) - utterance_boundaries(reference))
            labels += [p for p, _, _ in ours] + [END_LABEL]
            snr += [snr_of[utt]] * (len(ours) + 1)
            compared += 1
    return BoundaryErrors(np.concatenate(errors) if errors else np.zeros(0), labels,
                          np.asarray(snr, dtype=float), compared, left_out)


def summary(errors: np.ndarray) -> str:
    """Mean, median and share within 20 ms of the absolute errors, and the signed mean (ms)."""
    absolute = np.abs(errors)
    return (f"mean {1000 * absolute.mean():.1f} ms, median {1000 * np.median(absolute):.1f} ms, "
            f"within 20 ms {np.mean(absolute <= 0.02 + 1e-9):.1%}, signed mean "
            f"{1000 * errors.mean():+.1f} ms")


def errors_by_phone(errors: np.ndarray, labels: list[str]) -> dict[str, np.ndarray]:
    groups: dict[str, list[float]] = {}
    for label, error in zip(labels, errors):
        groups.setdefault(label, []).append(error)
    return {label: np.asarray(e) for label, e in groups.items()}


def without_phone_offsets(errors: np.ndarray, labels: list[str]) -> np.ndarray:
    """The errors less the median signed error of their phone (a per-phone convention)."""
    medians = {label: np.median(e) for label, e in errors_by_phone(errors, labels).items()}
    return errors - np.array([medians[label] for label in labels])


def snr_bands(result: BoundaryErrors, edges: list[float]) -> list[str]:
    """Lines for the boundaries of utterances in each SNR band [edges[i], edges[i+1])."""
    bounds = [-np.inf, *edges, np.inf]
    lines = []
    for low, high in zip(bounds[:-1], bounds[1:]):
        inside = (result.snr >= low) & (result.snr < high)
        if inside.any():
            lines.append(f"SNR [{low:g}, {high:g}) dB: boundaries {int(inside.sum())}: "
                         f"{summary(result.errors[inside])}")
    return lines


def worst_phones(errors: np.ndarray, labels: list[str], count: int) -> list[str]:
    """Lines for the `count` phones whose start boundaries add up to the most absolute error."""
    ranked = sorted(errors_by_phone(errors, labels).items(),
                    key=lambda item: -np.abs(item[1]).sum())[:count]
    total = np.abs(errors).sum()
    return [f"{label} boundaries {len(e)} ({np.abs(e).sum() / total:.1%} of the error): "
            f"{summary(e)}" for label, e in ranked]


@click.command("ali-boundary-error")
@click.option("--silence", default="sil", show_default=True,
              help="Comma-separated silence phones, left out of the comparison.")
@click.option("--frame-shift", type=float, default=0.01, show_default=True)
@click.option("--by-phone", type=int, default=0, show_default=True,
              help="Also print the N phones whose start boundaries carry the most error "
                   f"({END_LABEL}: utterance ends).")
@click.option("--phone-offsets", is_flag=True,
              help="Also print the error once each phone's median signed error is taken out "
                   "(what a per-phone timing convention of the synthesizer explains).")
@click.option("--by-snr", default="", help="Also print the error per band of the utterances' "
              "simulated SNR, between these edges in dB, e.g. '5 10 15'.")
@click.option("--common-with", multiple=True, type=click.Path(file_okay=False, exists=True),
              help="Compare only the utterances this alignment dir holds too (repeatable): "
                   "settings that fail on different utterances, measured on the same ones.")
@click.argument("ali_dir", type=click.Path(file_okay=False, exists=True))
@click.argument("phones", type=click.Path(dir_okay=False, exists=True))
@click.argument("timings", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
def boundary_error_cli(silence, frame_shift, by_phone, phone_offsets, by_snr, common_with,
                       ali_dir, phones, timings):
    """Mean phone-boundary error (ms) of the alignments in ALI_DIR against the synthesizer's
    TIMINGS (timings/<set>.jsonl files of the simulated corpus); PHONES is the lang's phones.txt.
    The signed mean (ours minus the synthesizer's) shows an offset of one against the other."""
    try:
        edges = [float(v) for v in by_snr.split()]
    except ValueError:
        raise click.BadParameter(f"'{by_snr}': expected SNR edges in dB, e.g. '5 10 15'",
                                 param_hint="--by-snr") from None
    try:
        only = None
        for other in common_with:
            utts = aligned_utterances(Path(other))
            only = utts if only is None else only & utts
        result = boundary_errors(Path(ali_dir), [Path(t) for t in timings], Path(phones),
                                 set(silence.split(",")), frame_shift, only)
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    if not result.compared:
        raise click.ClickException(f"no utterance of {ali_dir} has the phone sequence of "
                                   f"{timings} ({result.left_out} left out)")
    click.echo(f"utterances compared {result.compared}, left out {result.left_out}")
    click.echo(f"boundaries {len(result.errors)}")
    click.echo(f"boundary error {summary(result.errors)}")
    if phone_offsets:
        click.echo("without each phone's median offset "
                   f"{summary(without_phone_offsets(result.errors, result.labels))}")
    if edges:
        if np.isnan(result.snr).all():
            raise click.ClickException(f"{timings}: no utterance records its SNR "
                                       "(conditions.snr_db)")
        for line in snr_bands(result, edges):
            click.echo(line)
    for line in worst_phones(result.errors, result.labels, by_phone):
        click.echo(line)
