"""Read a scored decode dir in Kaldi's layout: the best CER and the per-utterance texts behind it.

Kaldi's scoring (steps/score_kaldi.sh, local/score.sh) leaves in `<decode>/scoring_kaldi/`:
`best_cer` (one `%WER 7.48 [ 7839 / 104765, 285 ins, 454 del, 7100 sub ] <decode>/cer_11_0.5` line,
naming the LM weight and insertion penalty that won), the filtered reference `test_filt.txt`
(`test_filt.chars.txt` with one character per token) and the best paths per penalty and LM weight
`penalty_<wip>/<lmwt>.txt` (`.chars.txt`), and `wer_details/per_utt` / `cer_details/per_utt`
(`utt ref ...` / `utt hyp ...` lines, `***` for a gap). Any of these per-utterance forms gives
each utterance's character errors and reference length (the counts the report's intervals and
its committed counts are made of); without one the CER is still reported, without an interval.

`read_decode_dir(path, setting)` reads the result at a given (LM weight, penalty) instead of the
best one: the report applies the setting chosen on dev to test (`<decode>/cer_LMWT_WIP` and its
`penalty_WIP/LMWT.txt`). A `%WER` line may end in a note on utterances without a hypothesis
(`[3 of 600 utterances without a hypothesis, scored as deletions]`, emasr.score.wer).
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field

import kaldialign

from emasr.io.table import read_lines
from emasr.score.wer import filter_words, to_units

logger = logging.getLogger(__name__)

WER_LINE = re.compile(
    r"%WER\s+(?P<rate>[-\d.]+|-?nan|inf)\s*\[\s*(?P<errors>\d+)\s*/\s*(?P<total>\d+)\s*,"
    r"\s*(?P<ins>\d+)\s*ins\s*,\s*(?P<dels>\d+)\s*del\s*,\s*(?P<subs>\d+)\s*sub\s*\]"
    r"(?:\s*\[(?:(?P<absent>\d+) of \d+ utterances without a hypothesis[^\]]*|PARTIAL)\])?"
    r"\s*(?P<source>\S*)")
BEST_NAME = re.compile(r"(?:cer|wer)_(?P<lmwt>\d+(?:\.\d+)?)(?:_(?P<wip>[-\d.]+))?$")


class ScoringError(ValueError):
    """A scoring file is malformed; the message names the file and line."""


@dataclass
class ScoredDecode:
    path: str
    cer: float                      # percent, as in best_cer
    errors: int
    total: int
    ins: int
    dels: int
    subs: int
    lmwt: str = ""                  # the LM weight and insertion penalty of this result
    wip: str = ""
    failed: int = 0                 # utterances without a hypothesis (scored as deletions)
    lmwts: list[str] = field(default_factory=list)   # the LM weights the scoring swept
    # utt -> (character errors, reference characters) at this result's setting
    utterances: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def has_utterances(self) -> bool:
        return bool(self.utterances)


def utterance_counts(refs: dict[str, list[str]], hyps: dict[str, list[str]]
                     ) -> dict[str, tuple[int, int]]:
    """utt -> (edit distance of its hypothesis, reference length), in characters; an utterance
    without a hypothesis is all deletions."""
    return {utt: (int(kaldialign.edit_distance(ref, hyps.get(utt, []))["total"]), len(ref))
            for utt, ref in refs.items()}


def parse_wer_line(line: str, where: str) -> dict:
    """Kaldi's `%WER r [ e / n, i ins, d del, s sub ] [source]` -> its numbers."""
    match = WER_LINE.search(line)
    if not match:
        raise ScoringError(f"{where}: expected a Kaldi '%WER r [ e / n, i ins, d del, s sub ]' "
                           f"line, got {line.strip()!r}")
    out = {k: int(match.group(k)) for k in ("errors", "total", "ins", "dels", "subs")}
    out["rate"] = float(match.group("rate")) if "nan" not in match.group("rate") else float("nan")
    out["absent"] = int(match.group("absent") or 0)
    out["source"] = match.group("source")
    return out


def to_characters(words: list[str]) -> list[str]:
    """CER units, as the scoring counts them: filtered words split into characters."""
    return to_units(filter_words(words), "cer")


def read_texts(path: str) -> dict[str, list[str]]:
    """A Kaldi text file (utt word word ...) -> utt -> characters (an utterance may be empty)."""
    texts: dict[str, list[str]] = {}
    for number, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            continue
        if parts[0] in texts:
            raise ScoringError(f"{path}:{number}: duplicate utterance '{parts[0]}'")
        texts[parts[0]] = to_characters(parts[1:])
    return texts


def read_per_utt(path: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Kaldi's wer_details/per_utt: `utt ref ...`, `utt hyp ...` ('***' marks a gap)."""
    refs: dict[str, list[str]] = {}
    hyps: dict[str, list[str]] = {}
    for line in read_lines(path):
        parts = line.split()
        if len(parts) >= 2 and parts[1] in ("ref", "hyp"):
            tokens = to_characters([t for t in parts[2:] if t != "***"])
            (refs if parts[1] == "ref" else hyps)[parts[0]] = tokens
    return refs, hyps


def per_utterance_sources(scoring: str, lmwt: str, wip: str, best: bool = True
                          ) -> list[tuple[str, str | None]]:
    """(reference file, hypothesis file) candidates, best first; hypothesis None means per_utt.
    Only the best setting's result may come from the other layouts (per_utt is the best's)."""
    out = []
    wip_dirs = [f"penalty_{wip}"] if wip else []
    for wip_dir in wip_dirs + (["penalty_0.0", "."] if best or not wip else []):
        for suffix in (".chars.txt", ".txt"):
            out.append((os.path.join(scoring, f"test_filt{suffix}"),
                        os.path.join(scoring, wip_dir, f"{lmwt}{suffix}")))
    if best:
        for details in ("cer_details", "wer_details"):
            out.append((os.path.join(scoring, details, "per_utt"), None))
    return out


def load_utterances(decode: ScoredDecode, scoring: str, best: bool = True) -> None:
    for ref_file, hyp_file in per_utterance_sources(scoring, decode.lmwt, decode.wip, best):
        if hyp_file is None and os.path.isfile(ref_file):
            refs, hyps = read_per_utt(ref_file)
            if set(refs) != set(hyps):
                continue
        elif hyp_file is not None and os.path.isfile(ref_file) and os.path.isfile(hyp_file):
            # an utterance the decoder produced nothing for is an empty hypothesis (all deletions)
            refs, hyps = read_texts(ref_file), read_texts(hyp_file)
        else:
            continue
        decode.utterances = utterance_counts(refs, hyps)
        if decode.has_utterances:
            return
    decode.utterances = {}
    logger.warning("%s: no per-utterance best paths found (looked for %s/test_filt.txt with "
                   "penalty_*/LMWT.txt, or */per_utt): CER without an interval",
                   decode.path, scoring)


def scored_lm_weights(path: str) -> list[str]:
    """The LM weights of the `cer_LMWT_WIP` files in a decode dir, ascending."""
    names = (BEST_NAME.search(f) for f in os.listdir(path) if f.startswith("cer_"))
    return sorted({m.group("lmwt") for m in names if m}, key=float)


def read_decode_dir(path: str, setting: tuple[str, str] | None = None) -> ScoredDecode | None:
    """The scored result of one decode dir, or None when it was not (yet) scored: the best one
    (scoring_kaldi/best_cer), or the one at `setting` = (LM weight, penalty) when given."""
    scoring = os.path.join(path, "scoring_kaldi")
    if setting is None:
        source = next((f for f in (os.path.join(scoring, "best_cer"),
                                   os.path.join(path, "best_cer")) if os.path.isfile(f)), None)
    else:
        source = os.path.join(path, f"cer_{setting[0]}_{setting[1]}")
        if not os.path.isfile(source):
            raise ScoringError(f"expected file {source} to exist: the setting chosen on dev (LM "
                               f"weight {setting[0]}, penalty {setting[1]}) must be scored on "
                               "this set too (score it with the same --scoring-opts)")
    if source is None:
        return None
    lines = [line for line in read_lines(source) if line.strip()]
    if not lines:
        raise ScoringError(f"{source}: empty; expected a Kaldi %WER line")
    numbers = parse_wer_line(lines[0], f"{source}:1")
    best = BEST_NAME.search(os.path.basename(numbers["source"] or source))
    decode = ScoredDecode(path=path, cer=numbers["rate"], errors=numbers["errors"],
                          total=numbers["total"], ins=numbers["ins"], dels=numbers["dels"],
                          subs=numbers["subs"], lmwt=best.group("lmwt") if best else "",
                          wip=(best.group("wip") or "") if best else "",
                          failed=numbers["absent"], lmwts=scored_lm_weights(path))
    load_utterances(decode, scoring if os.path.isdir(scoring) else path, setting is None)
    check_counts(decode, source)
    return decode


def check_counts(decode: ScoredDecode, source: str) -> None:
    """The per-utterance counts must add up to the %WER line they stand for: the intervals and
    the committed counts are made of them, the table's CER of the line."""
    if not decode.has_utterances:
        return
    errors = sum(e for e, _ in decode.utterances.values())
    chars = sum(n for _, n in decode.utterances.values())
    if (errors, chars) != (decode.errors, decode.total):
        raise ScoringError(f"{source}: says {decode.errors} errors in {decode.total} characters, "
                           f"but the per-utterance texts of {decode.path} give {errors} in "
                           f"{chars}; expected the best paths and the reference of that "
                           "setting (rescore the decode dir)")
