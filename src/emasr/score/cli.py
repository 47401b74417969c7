"""`emasr score-lattices` (Kaldi's steps/score_kaldi.sh and score_kaldi_cer.sh) and
`emasr best-wer` (utils/best_wer.sh).

For every LM weight LMWT and word insertion penalty WIP, the best path of each lattice under
`graph + acoustic / LMWT + WIP * #words` gives a hypothesis; references and hypotheses are
filtered (<UNK>, <SPOKEN_NOISE>, silence words) and scored. LM weights may be fractional
(`--lmwt-step 0.1`: a network decoded at acoustic scale 0.5 is best near LMWT 2, where Kaldi's
integer grid moves the acoustic scale by a third). An utterance of the data dir without a lattice
(its decode failed) is scored as all deletions, and the step fails when more than
`--max-failed-fraction` of the utterances have none. Files, as Kaldi writes them:
  <decode>/{wer,cer}_LMWT_WIP                 compute-wer output (%WER / %SER / Scored lines)
  <decode>/scoring_kaldi/test_filt.txt        filtered references
  <decode>/scoring_kaldi/utt2spk              each utterance's speaker (a pseudo-speaker's real
                                              one), which emasr report resamples as a cluster
  <decode>/scoring_kaldi/penalty_WIP/LMWT.txt hypotheses
  <decode>/scoring_kaldi/best_{wer,cer}       the best line and the file it came from
  <decode>/scoring_kaldi/{wer,cer}_details/   lmwt, wip, per_utt, per_spk for the best setting
"""
from __future__ import annotations

import glob
import logging
import os
import re
import sys
from typing import Iterable, Iterator

import click

from emasr.decode.lattice_best import best_paths_batch
from emasr.kaldi.lattice_io import LatticeArcs, read_lattices
from emasr.io.atomic import atomic_write
from emasr.io.table import read_table, write_table
from emasr.log import progress
from emasr.score.wer import (ErrorCounts, filter_words, per_spk_table, per_utt_lines, score_texts,
                             to_units, wer_lines)

logger = logging.getLogger(__name__)
# Arcs of the lattices whose best paths are found in one pass: enough to make numpy's per-call
# cost small (about 85 of the small profile's network lattices), few enough that the tables of
# arcs or states x (LM weight, penalty) pairs stay tens of MB.
ARCS_PER_BATCH = 100_000


def parse_penalties(text: str) -> list[str]:
    """'0.0,0.5,1.0' -> the strings as given (they name the files, as in Kaldi)."""
    values = [x.strip() for x in text.split(",") if x.strip()]
    for value in values:
        float(value)
    return values


def lm_weights(low: float, high: float, step: float) -> list[str]:
    """low, low + step, ..., high as file-name strings: '7', '8' for integers, '1.9', '2' for a
    fractional step (the names Kaldi's integer grid would give where they coincide)."""
    count = int(round((high - low) / step)) + 1
    values = [round(low + i * step, 6) for i in range(count)]
    return [f"{v:g}" for v in values if v <= high + 1e-9]


def decode_hypotheses(decode_dir: str, word_symbols: dict[int, str], lmwts: list[str],
                      penalties: list[str]) -> dict[tuple[str, str], dict[str, list[str]]]:
    """Best-path words of every lattice in <decode>/lat.*.gz for each (LMWT, WIP)."""
    paths = sorted(glob.glob(os.path.join(decode_dir, "lat.*.gz")))
    if not paths:
        raise click.ClickException(f"expected lattices {decode_dir}/lat.*.gz to exist")
    hyps: dict[tuple[str, str], dict[str, list[str]]] = {
        (lmwt, penalty): {} for lmwt in lmwts for penalty in penalties}
    for path in paths:
        for batch in batches(progress(read_lattices(path), logger=logger,
                                      desc=f"best paths {os.path.basename(path)}")):
            named = [(f"{path}: entry {utt}", arcs) for utt, arcs in batch]
            bests = best_paths_batch(named, [float(l) for l in lmwts],
                                     [float(p) for p in penalties])
            for (utt, _), best in zip(batch, bests):
                for lmwt in lmwts:
                    for penalty in penalties:
                        words = best[(float(lmwt), float(penalty))]
                        hyps[(lmwt, penalty)][utt] = filter_words([word_symbols.get(w, str(w))
                                                                   for w in words])
    return hyps


def batches(lattices: Iterable[tuple[str, LatticeArcs]], max_arcs: int = ARCS_PER_BATCH
            ) -> Iterator[list[tuple[str, LatticeArcs]]]:
    """Consecutive lattices, as many as fit `max_arcs` arcs together (at least one)."""
    batch, arcs = [], 0
    for item in lattices:
        if batch and arcs + len(item[1].src) > max_arcs:
            yield batch
            batch, arcs = [], 0
        batch.append(item)
        arcs += len(item[1].src)
    if batch:
        yield batch


def best_line(lines: dict[str, str]) -> tuple[str, str]:
    """(file name, first line) with the lowest %WER among compute-wer outputs."""
    def rate(item):
        return float(item[1].split()[1])
    return min(lines.items(), key=rate)


def write_details(details_dir: str, lmwt: str, penalty: str, refs, hyps, utt2spk) -> None:
    os.makedirs(details_dir, exist_ok=True)
    with atomic_write(os.path.join(details_dir, "lmwt")) as f:
        f.write(f"{lmwt}\n")
    with atomic_write(os.path.join(details_dir, "wip")) as f:
        f.write(f"{penalty}\n")
    with atomic_write(os.path.join(details_dir, "per_utt")) as f:
        for utt in sorted(refs):
            f.write(per_utt_lines(utt, refs[utt], hyps.get(utt, [])))
    with atomic_write(os.path.join(details_dir, "per_spk")) as f:
        f.write(per_spk_table(refs, hyps, utt2spk))


def score_metric(metric: str, decode_dir: str, refs_words, hyps_words, utt2spk) -> str:
    """Write <metric>_LMWT_WIP files, best_<metric> and details; return the best line."""
    refs = {u: to_units(w, metric) for u, w in refs_words.items()}
    outputs = {}
    for (lmwt, penalty), hyps in hyps_words.items():
        counts: ErrorCounts = score_texts(refs, {u: to_units(w, metric) for u, w in hyps.items()})
        name = os.path.join(decode_dir, f"{metric}_{lmwt}_{penalty}")
        with atomic_write(name) as f:
            f.write(wer_lines(counts))
        outputs[name] = wer_lines(counts).splitlines()[0]
    name, line = best_line(outputs)
    scoring = os.path.join(decode_dir, "scoring_kaldi")
    with atomic_write(os.path.join(scoring, f"best_{metric}")) as f:
        f.write(f"{line} {name}\n")
    lmwt, penalty = re.fullmatch(rf"{metric}_([\d.]+)_(.+)", os.path.basename(name)).groups()
    best_hyps = hyps_words[(lmwt, penalty)]
    write_details(os.path.join(scoring, f"{metric}_details"), lmwt, penalty, refs,
                  {u: to_units(w, metric) for u, w in best_hyps.items()}, utt2spk)
    return f"{line} {name}"


class TooManyFailures(click.ClickException):
    """More utterances of the data dir have no lattice than the step allows."""


def check_failures(refs: dict, hyps: dict, max_fraction: float, decode_dir: str) -> None:
    """Log the utterances without a lattice; fail (naming the first few) above `max_fraction`."""
    failed = sorted(set(refs) - set(hyps))
    if not failed:
        return
    share = len(failed) / len(refs)
    first = ", ".join(failed[:5]) + (", ..." if len(failed) > 5 else "")
    if share > max_fraction:
        raise TooManyFailures(
            f"{decode_dir}: {len(failed)} of {len(refs)} utterances ({100 * share:.1f}%) have no "
            f"lattice (their decode failed; see {decode_dir}/log/decode.*.log), more than the "
            f"allowed {100 * max_fraction:g}% (--max-failed-fraction): {first}")
    logger.warning("%d of %d utterances have no lattice (their decode failed), scored as "
                   "deletions: %s", len(failed), len(refs), first)


PSEUDO_SPEAKER = re.compile(r"-\d{5}$")


def real_speaker(speaker: str) -> str:
    """The speaker behind a pseudo-speaker of utils/data/modify_speaker_info.sh (`S0764-00003`:
    one utterance of S0764, for per-utterance CMVN): the report resamples real speakers."""
    return PSEUDO_SPEAKER.sub("", speaker)


def score_decode_dir(data_dir: str, graph_dir: str, decode_dir: str, metrics: list[str],
                     lmwts: list[str], penalties: list[str],
                     max_failed_fraction: float = 0.05) -> list[str]:
    for path in (os.path.join(data_dir, "text"), os.path.join(graph_dir, "words.txt")):
        if not os.path.isfile(path):
            raise click.ClickException(f"expected file {path} to exist")
    word_symbols = {int(i): w for w, i in read_table(os.path.join(graph_dir, "words.txt")).items()}
    texts = read_table(os.path.join(data_dir, "text"))
    refs = {utt: filter_words(text.split()) for utt, text in texts.items()}
    utt2spk_path = os.path.join(data_dir, "utt2spk")
    utt2spk = read_table(utt2spk_path) if os.path.isfile(utt2spk_path) else {}
    hyps = decode_hypotheses(decode_dir, word_symbols, lmwts, penalties)
    check_failures(refs, next(iter(hyps.values())), max_failed_fraction, decode_dir)
    scoring = os.path.join(decode_dir, "scoring_kaldi")
    write_table(os.path.join(scoring, "test_filt.txt"), {u: " ".join(w) for u, w in refs.items()})
    if utt2spk:   # the report resamples speakers as clusters (emasr.report.intervals)
        write_table(os.path.join(scoring, "utt2spk"),
                    {u: real_speaker(utt2spk[u]) for u in refs if u in utt2spk})
    for (lmwt, penalty), table in hyps.items():
        write_table(os.path.join(scoring, f"penalty_{penalty}", f"{lmwt}.txt"),
                    {u: " ".join(w) for u, w in table.items()})
    return [score_metric(m, decode_dir, refs, hyps, utt2spk) for m in metrics]


@click.command("score-lattices")
@click.option("--min-lmwt", type=float, default=7, show_default=True)
@click.option("--max-lmwt", type=float, default=17, show_default=True)
@click.option("--lmwt-step", type=float, default=1.0, show_default=True,
              help="Step of the LM-weight grid (0.1: fractional weights, file names cer_1.9_0.5).")
@click.option("--max-failed-fraction", type=click.FloatRange(0, 1), default=0.05,
              show_default=True, help="Fail when more than this share of the data dir's "
                                      "utterances have no lattice (the rest are scored as "
                                      "deletions).")
@click.option("--word-ins-penalty", default="0.0,0.5,1.0", show_default=True,
              help="Comma-separated word insertion penalties.")
@click.option("--metric", "metrics", type=click.Choice(["wer", "cer"]), multiple=True,
              default=("wer",), show_default=True, help="Repeat for both (cer splits characters).")
@click.argument("data_dir", type=click.Path(file_okay=False))
@click.argument("graph_dir", type=click.Path(file_okay=False))
@click.argument("decode_dir", type=click.Path(file_okay=False))
def score_lattices_cli(min_lmwt, max_lmwt, lmwt_step, max_failed_fraction, word_ins_penalty,
                       metrics, data_dir, graph_dir, decode_dir):
    """Score DECODE_DIR/lat.*.gz against DATA_DIR/text for a range of LM weights and word
    insertion penalties; GRAPH_DIR (or a lang dir) gives words.txt."""
    if min_lmwt <= 0 or max_lmwt < min_lmwt or lmwt_step <= 0:
        raise click.BadParameter(f"need 0 < --min-lmwt <= --max-lmwt and --lmwt-step > 0, got "
                                 f"{min_lmwt:g}, {max_lmwt:g}, {lmwt_step:g}")
    try:
        penalties = parse_penalties(word_ins_penalty)
    except ValueError:
        raise click.BadParameter(f"expected numbers separated by commas, got '{word_ins_penalty}'",
                                 param_hint="--word-ins-penalty") from None
    for line in score_decode_dir(data_dir, graph_dir, decode_dir, list(metrics),
                                 lm_weights(min_lmwt, max_lmwt, lmwt_step), penalties,
                                 max_failed_fraction):
        logger.info("best: %s", line)   # the console format: a log line, not a bare one


@click.command("best-wer")
def best_wer_cli():
    """Read compute-wer lines (e.g. `grep WER dir/wer_*`) on stdin; print the lowest, with the
    file it came from last, as Kaldi's utils/best_wer.sh."""
    best = None
    for raw in sys.stdin:
        name, sep, rest = raw.strip().partition(":%WER")
        line = f"%WER{rest}" if sep else raw.strip()
        fields = line.split()
        if len(fields) < 2 or fields[0] != "%WER":
            continue
        entry = (float(fields[1]), f"{line} {name}" if sep else line)
        best = entry if best is None or entry[0] < best[0] else best
    if best is None:
        raise click.ClickException("no %WER lines on standard input")
    click.echo(best[1])
