"""Alignments from the simulated corpus's phone timings (emasr ali-from-timings): the oracle.

Each utterance's phones in ``timings/<set>.jsonl`` (the synthesizer's, silence not listed) become
an alignment of a model and its tree. A boundary at time s falls on frame ``round(s /
frame_shift)``, the convention ``ali-boundary-error`` measures with (frame t at t * frame_shift),
so the oracle's own boundary error is at most half a frame. The silence phone fills the frames
before the first phone, after the last and every gap of a frame or more between two phones. A
phone shorter than its topology's minimum borrows frames from its neighbours (convert-ali's rule);
each phone's HMM-state path is convert-ali's even split of its frames.

Trained on these alignments without realignment, a GMM shows what a GMM aligner reaches on this
corpus when its labels are the synthesizer's; a network trained on them, what perfect labels buy
(docs/gmm.md).
"""
from __future__ import annotations

import logging
from pathlib import Path

import click

from emasr.ali.convert import AlignmentConverter, ConversionError, fit_lengths
from emasr.ali.boundary_error import read_timings, timed_phones
from emasr.io.table import read_lines, read_table

log = logging.getLogger(__name__)


def frame_segments(phones: list[tuple[str, float, float]], num_frames: int, frame_shift: float,
                   silence: str) -> list[tuple[str, int]]:
    """(phone, length in frames) covering the utterance's frames, silence in the gaps."""
    segments, at = [], 0
    for phone, start, end in phones:
        first = min(max(round(start / frame_shift), at), num_frames)
        last = min(max(round(end / frame_shift), first), num_frames)
        if first > at:
            segments.append((silence, first - at))
        segments.append((phone, last - first))
        at = last
    if num_frames > at:
        segments.append((silence, num_frames - at))
    return segments


def oracle_alignment(converter: AlignmentConverter, phone_ids: dict[str, int],
                     segments: list[tuple[str, int]]):
    """The alignment of the segments under the converter's (new) model and tree."""
    unknown = sorted({p for p, _ in segments if p not in phone_ids})
    if unknown:
        raise ConversionError(f"phones {unknown[:10]} are not in the lang's phones.txt")
    phones = [phone_ids[p] for p, _ in segments]
    entries = [tuple(converter.new.topology.entry_for(p)) for p in phones]
    lengths = fit_lengths([n for _, n in segments], entries)
    return converter.encode_phones(phones, lengths)


def write_oracle_alignments(model: str, tree: str, phones_txt: str, utt2num_frames: str,
                            ali_out: str, timings: list[str], frame_shift: float,
                            silence: str) -> int:
    """Write the oracle alignment of every utterance of `utt2num_frames`; their number."""
    from emasr.kaldi.alignments import AlignmentWriter
    from emasr.kaldi.model_io import read_tree
    from emasr.kaldi.transitions import load_transition_table

    table = load_transition_table(model)
    converter = AlignmentConverter(table, table, read_tree(tree))
    phone_ids = {p: int(i) for p, i in (line.split() for line in read_lines(phones_txt))}
    if silence not in phone_ids:
        raise ConversionError(f"{phones_txt}: no silence phone '{silence}'")
    records = read_timings([Path(t) for t in timings])
    writer, ok = AlignmentWriter(ali_out), False
    try:
        frames = read_table(utt2num_frames)
        for number, (utt, count) in enumerate(frames.items(), 1):
            if utt not in records:
                raise ConversionError(f"{utt2num_frames}: utterance {utt} has no timings in "
                                      f"{', '.join(timings)}")
            if not count.isdigit():
                raise ConversionError(f"{utt2num_frames}: utterance {utt}: '{count}' is not a "
                                      "number of frames")
            segments = frame_segments(timed_phones(records[utt]), int(count), frame_shift,
                                      silence)
            try:
                writer.write(utt, oracle_alignment(converter, phone_ids, segments))
            except ConversionError as err:
                raise ConversionError(f"utterance {utt}: {err}") from None
            if number % 2000 == 0:
                log.info("%d of %d utterances", number, len(frames))
        ok = True
    finally:
        writer.close(ok)
    return len(frames)


@click.command("ali-from-timings")
@click.option("--frame-shift", type=float, default=0.01, show_default=True)
@click.option("--silence-phone", default="sil", show_default=True,
              help="The phone that fills the frames no timed phone covers.")
@click.argument("model", type=click.Path(dir_okay=False, exists=True))
@click.argument("tree", type=click.Path(dir_okay=False, exists=True))
@click.argument("phones", type=click.Path(dir_okay=False, exists=True))
@click.argument("utt2num_frames", type=click.Path(dir_okay=False, exists=True))
@click.argument("ali_out", type=click.Path(dir_okay=False))
@click.argument("timings", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
def ali_from_timings_cli(frame_shift, silence_phone, model, tree, phones, utt2num_frames, ali_out,
                         timings):
    """Write ALI_OUT, the alignments of MODEL and TREE that follow the synthesizer's TIMINGS
    (timings/<set>.jsonl of the simulated corpus) for the utterances of UTT2NUM_FRAMES; PHONES is
    the lang's phones.txt. The oracle against which `ali-boundary-error` measures GMM alignments."""
    try:
        done = write_oracle_alignments(model, tree, phones, utt2num_frames, ali_out,
                                       list(timings), frame_shift, silence_phone)
    except (ConversionError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    log.info("wrote the oracle alignments of %d utterances to %s", done, ali_out)
