"""``emasr ali-info``: is an alignment dir sane? Utterances, frames, pdf counts, phone durations.

Phone durations come from the transition model: a phone instance starts at the first frame and
after every transition into the final state of a phone's HMM (Kaldi's SplitToPhones rule), and its
phone is the phone of its transition ids.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import click
import numpy as np

from emasr.kaldi.alignments import (ALI_TYPES, AlignmentDir, AlignmentError, iter_alignment_file,
                                  open_alignment_dir)
from emasr.io.table import TableError, read_table


@dataclass
class AlignmentStats:
    utterances: int = 0
    frames: int = 0
    shortest: int = 0
    longest: int = 0
    pdf_counts: np.ndarray | None = None
    phone_frames: dict[int, int] = field(default_factory=dict)     # phone -> total frames
    phone_instances: dict[int, int] = field(default_factory=dict)  # phone -> instances
    phone_one_frame: dict[int, int] = field(default_factory=dict)  # phone -> one-frame instances


def alignment_stats(ali: AlignmentDir) -> AlignmentStats:
    stats = AlignmentStats(pdf_counts=np.zeros(ali.num_pdfs, dtype=np.int64))
    lengths = []
    with_phones = ali.ali_type == "transition"
    for path in ali.files:
        for utt, raw in iter_alignment_file(path):
            pdfs = ali.to_pdfs(raw, str(path), utt)
            lengths.append(len(pdfs))
            stats.pdf_counts += np.bincount(pdfs, minlength=ali.num_pdfs)
            if with_phones:
                _add_phone_durations(ali, raw, stats)
    stats.utterances = len(lengths)
    stats.frames = int(sum(lengths))
    stats.shortest = min(lengths, default=0)
    stats.longest = max(lengths, default=0)
    return stats


def _add_phone_durations(ali: AlignmentDir, tids: np.ndarray, stats: AlignmentStats) -> None:
    if len(tids) == 0:
        return
    starts = np.flatnonzero(ali.transitions.phone_starts(tids))
    durations = np.diff(np.append(starts, len(tids)))
    phones = ali.transitions.id2phone[tids[starts]]
    for phone, duration in zip(phones.tolist(), durations.tolist()):
        stats.phone_frames[phone] = stats.phone_frames.get(phone, 0) + duration
        stats.phone_instances[phone] = stats.phone_instances.get(phone, 0) + 1
        if duration == 1:
            stats.phone_one_frame[phone] = stats.phone_one_frame.get(phone, 0) + 1


def read_phone_names(path: str | os.PathLike) -> dict[int, str]:
    """phones.txt (symbol id) -> {id: symbol}."""
    table = read_table(path)
    try:
        return {int(number): symbol for symbol, number in table.items()}
    except ValueError:
        raise TableError(f"{path}: expected 'symbol integer' lines") from None


def one_frame_line(stats: AlignmentStats, phone_names: dict[int, str],
                   silence: set[str]) -> str:
    """The share of non-silence phone instances that last a single frame: the sign of a topology
    that lets a phone pass in one frame collapsing phones (docs/gmm.md)."""
    speech = [p for p in stats.phone_instances if phone_names.get(p, str(p)) not in silence]
    total = sum(stats.phone_instances[p] for p in speech)
    single = sum(stats.phone_one_frame.get(p, 0) for p in speech)
    return (f"one-frame instances of non-silence phones {single} of {total} "
            f"({100 * single / max(total, 1):.2f}%)")


def report(ali: AlignmentDir, stats: AlignmentStats, phone_names: dict[int, str],
           silence: set[str]) -> list[str]:
    frame_ms = 10 * ali.frame_subsampling_factor
    kind = ("transition ids" if ali.ali_type == "transition" else "pdf ids")
    lines = [f"alignment dir {ali.path}: {len(ali.files)} file(s) of {kind}, {ali.num_pdfs} pdfs",
             f"utterances {stats.utterances}",
             f"frames {stats.frames} ({stats.frames * frame_ms / 1000:.1f} s at {frame_ms} ms); "
             f"per utterance min {stats.shortest} mean "
             f"{stats.frames / max(stats.utterances, 1):.1f} max {stats.longest}"]
    counts = stats.pdf_counts
    lowest, highest = int(np.argmin(counts)), int(np.argmax(counts))
    unseen = int(np.sum(counts == 0))
    lines.append(f"pdf counts: min {counts[lowest]} (pdf {lowest}), max {counts[highest]} "
                 f"(pdf {highest}), median {int(np.median(counts))}; "
                 f"{unseen} of {len(counts)} pdfs never seen")
    if stats.phone_instances:
        lines.append(one_frame_line(stats, phone_names, silence))
        lines.append("phone  instances  mean-frames  mean-ms")
        for phone in sorted(stats.phone_instances):
            mean = stats.phone_frames[phone] / stats.phone_instances[phone]
            name = phone_names.get(phone, str(phone))
            lines.append(f"{name}  {stats.phone_instances[phone]}  {mean:.1f}  "
                         f"{mean * frame_ms:.0f}")
    return lines


@click.command("ali-info")
@click.option("--ali-type", type=click.Choice(ALI_TYPES), default="transition",
              show_default=True, help="What the alignments hold (pdf ids give no phone durations).")
@click.option("--num-pdfs", type=int, default=None, help="Number of pdfs for --ali-type pdf.")
@click.option("--phones", type=click.Path(dir_okay=False, exists=True), default=None,
              help="phones.txt for phone names (default: ALI_DIR/phones.txt if present).")
@click.option("--silence", default="sil", show_default=True,
              help="Comma-separated silence phones, left out of the one-frame share.")
@click.argument("ali_dir", type=click.Path(file_okay=False))
def ali_info_cli(ali_type, num_pdfs, phones, silence, ali_dir):
    """Print the number of utterances and frames of ALI_DIR's alignments, the extremes of the pdf
    counts, the share of non-silence phone instances one frame long, and the mean duration of
    each phone (through ALI_DIR/final.mdl)."""
    try:
        ali = open_alignment_dir(ali_dir, ali_type, num_pdfs)
        stats = alignment_stats(ali)
        default_phones = Path(ali_dir) / "phones.txt"
        names = {}
        if phones or default_phones.is_file():
            names = read_phone_names(phones or default_phones)
    except (AlignmentError, TableError) as err:
        raise click.ClickException(str(err)) from None
    for line in report(ali, stats, names, set(silence.split(","))):
        click.echo(line)
