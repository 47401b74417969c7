"""How far an alignment's phone boundaries are from the synthesizer's (emasr ali-boundary-error).

The simulated corpus records espeak's phone timings per utterance (``timings/<set>.jsonl``:
``"phones": [[phone, start_sample, end_sample], ...]`` in the lexicon's phone names). An alignment
dir's phones come from its transition ids, split into phone instances as Kaldi's SplitToPhones
does; silence phones are dropped. Where the two phone sequences agree, each phone start and the
last phone's end of the alignment (frame t at t * frame_shift) is compared with the synthesizer's;
the mean absolute difference is the boundary error. Utterances whose sequences differ are counted
and left out.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import click
import numpy as np

from emasr.ali.alignments import iter_alignment_file
from emasr.gmm.transitions import TransitionTable, load_transition_table
from emasr.io.table import read_lines

log = logging.getLogger(__name__)


def aligned_phones(table: TransitionTable, alignment: np.ndarray
                   ) -> list[tuple[int, int, int]]:
    """(phone, start frame, end frame) of each phone instance of an alignment."""
    starts = np.flatnonzero(table.phone_starts(alignment))
    ends = np.append(starts[1:], len(alignment))
    return [(int(table.id2phone[alignment[s]]), int(s), int(e)) for s, e in zip(starts, ends)]


def utterance_boundaries(segments: list[tuple[str, float, float]]) -> np.ndarray:
    """Phone starts plus the last phone's end, in seconds."""
    return np.array([s for _, s, _ in segments] + [segments[-1][2]])


def boundary_errors(ali_dir: Path, timings: list[Path], phones_txt: Path, silence: set[str],
                    frame_shift: float) -> tuple[np.ndarray, int, int]:
    """(absolute boundary errors in seconds, utterances compared, utterances left out)."""
    names = {int(i): p for p, i in (line.split() for line in read_lines(phones_txt))}
    table = load_transition_table(ali_dir / "final.mdl")
    truth = {}
    for timing_file in timings:
        with open(timing_file, encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                rate = float(record["sample_rate"])
                truth[record["utt"]] = [(p, s / rate, e / rate) for p, s, e in record["phones"]
                                        if p not in silence]
    errors, compared, left_out = [], 0, 0
    for path in sorted(ali_dir.glob("ali.*.gz")):
        for utt, alignment in iter_alignment_file(path):
            reference = truth.get(utt)
            ours = [(names[p], s * frame_shift, e * frame_shift)
                    for p, s, e in aligned_phones(table, alignment) if names[p] not in silence]
            if not reference or [p for p, _, _ in ours] != [p for p, _, _ in reference]:
                left_out += 1
                continue
            errors.append(np.abs(utterance_boundaries(ours) - utterance_boundaries(reference)))
            compared += 1
    return (np.concatenate(errors) if errors else np.zeros(0)), compared, left_out


@click.command("ali-boundary-error")
@click.option("--silence", default="sil", show_default=True,
              help="Comma-separated silence phones, left out of the comparison.")
@click.option("--frame-shift", type=float, default=0.01, show_default=True)
@click.argument("ali_dir", type=click.Path(file_okay=False, exists=True))
@click.argument("phones", type=click.Path(dir_okay=False, exists=True))
@click.argument("timings", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
def boundary_error_cli(silence, frame_shift, ali_dir, phones, timings):
    """Mean phone-boundary error (ms) of the alignments in ALI_DIR against the synthesizer's
    TIMINGS (timings/<set>.jsonl files of the simulated corpus); PHONES is the lang's phones.txt."""
    errors, compared, left_out = boundary_errors(Path(ali_dir), [Path(t) for t in timings],
                                                 Path(phones), set(silence.split(",")),
                                                 frame_shift)
    if not compared:
        raise click.ClickException(f"no utterance of {ali_dir} has the phone sequence of "
                                   f"{timings} ({left_out} left out)")
    click.echo(f"utterances compared {compared}, left out {left_out}")
    click.echo(f"boundaries {len(errors)}")
    click.echo(f"mean boundary error {1000 * errors.mean():.1f} ms, median "
               f"{1000 * np.median(errors):.1f} ms, within 20 ms {np.mean(errors <= 0.02):.1%}")
