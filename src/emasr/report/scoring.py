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

`read_sweep` reads every setting the scoring swept (each `cer_LMWT_WIP` with its
`penalty_WIP/LMWT.txt`) into per-utterance counts, with each utterance's speaker where the scoring
recorded them (`scoring_kaldi/utt2spk`): the report's bootstrap chooses the setting again on every
resample of dev and reads test at that choice.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field

import kaldialign
import numpy as np

from emasr.io.inputs_record import RECORD as INPUTS_RECORD, changed_inputs
from emasr.io.table import read_lines, read_table
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


def setting_name(lmwt: str, wip: str) -> str:
    """'11_0.5': a scoring setting as the cer_LMWT_WIP files name it."""
    return f"{lmwt}_{wip}"


@dataclass
class Sweep:
    """A decode dir's per-utterance character errors at every setting its scoring swept."""
    settings: tuple[str, ...]      # setting_name()s, LM weight then penalty ascending
    utts: tuple[str, ...]
    speakers: tuple[str, ...]      # '' where the scoring recorded no speaker
    chars: np.ndarray              # int [U]
    errors: np.ndarray             # int [settings, U]

    def __post_init__(self) -> None:
        if self.errors.shape != (len(self.settings), len(self.utts)) or \
                self.chars.shape != (len(self.utts),) or len(self.speakers) != len(self.utts):
            raise ScoringError(f"a sweep of {len(self.settings)} settings and {len(self.utts)} "
                               f"utterances cannot have counts of shapes {self.errors.shape} and "
                               f"{self.chars.shape}")

    def at(self, setting: str) -> dict[str, tuple[int, int]]:
        """utt -> (errors, chars) at one setting."""
        row = self.errors[self.settings.index(setting)]
        return {u: (int(e), int(n)) for u, e, n in zip(self.utts, row, self.chars)}


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
    sweep: Sweep | None = None     # the decode dir's counts at every setting (None: not read)

    @property
    def has_utterances(self) -> bool:
        return bool(self.utterances)

    @property
    def setting(self) -> str:
        return setting_name(self.lmwt, self.wip)

    def own_sweep(self) -> Sweep | None:
        """The counts of every setting read, else a sweep of this result's one setting (None:
        no per-utterance counts)."""
        if self.sweep is not None:
            return self.sweep
        if not self.has_utterances:
            return None
        utts = tuple(sorted(self.utterances))
        return Sweep((self.setting,), utts, ("",) * len(utts),
                     np.array([self.utterances[u][1] for u in utts], dtype=np.int64),
                     np.array([[self.utterances[u][0] for u in utts]], dtype=np.int64))


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


def read_decode_dir(path: str, setting: tuple[str, str] | None = None,
                    sweep: Sweep | None | bool = False) -> ScoredDecode | None:
    """The scored result of one decode dir, or None when it was not (yet) scored: the best one
    (scoring_kaldi/best_cer), or the one at `setting` = (LM weight, penalty) when given. `sweep`:
    True reads the counts of every setting (read_sweep), a Sweep uses the one given."""
    changed = changed_inputs(path)
    if changed:
        more = f"; {len(changed) - 1} more input(s) changed too" if len(changed) > 1 else ""
        raise ScoringError(f"{path} was decoded from another {changed[0]} than the one there now "
                           f"(its sha256 in {path}/{INPUTS_RECORD} differs{more}): its scores are "
                           "not this model's; decode it again (the experiment driver's stage 2 "
                           "does)")
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
    if sweep is True:
        sweep = read_sweep(path)
    decode.sweep = sweep or None
    if decode.sweep is not None and decode.setting in decode.sweep.settings:
        decode.utterances = decode.sweep.at(decode.setting)
    else:
        load_utterances(decode, scoring if os.path.isdir(scoring) else path, setting is None)
    check_counts(decode, source)
    return decode


def first_file(*candidates: str) -> str | None:
    return next((f for f in candidates if os.path.isfile(f)), None)


def read_sweep(path: str) -> Sweep | None:
    """Every setting's per-utterance counts of a decode dir scored by emasr score-lattices or
    Kaldi's score_kaldi.sh (None, with a warning, where a setting's best paths are missing):
    each setting's counts are checked against its cer_LMWT_WIP line."""
    scoring = os.path.join(path, "scoring_kaldi")
    ref_file = first_file(os.path.join(scoring, "test_filt.chars.txt"),
                          os.path.join(scoring, "test_filt.txt"))
    names = sorted(((m.group("lmwt"), m.group("wip") or "0.0", f) for f in os.listdir(path)
                    if f.startswith("cer_") and (m := BEST_NAME.search(f))),
                   key=lambda item: (float(item[0]), float(item[1])))
    if ref_file is None or not names:
        return None
    refs = read_texts(ref_file)
    utts = tuple(sorted(refs))
    aligned: dict[tuple[str, tuple[str, ...]], int] = {}   # the same best path at many settings
    rows = []
    for lmwt, wip, name in names:
        hyp_file = first_file(*(os.path.join(scoring, f"penalty_{wip}", f"{lmwt}{suffix}")
                                for suffix in (".chars.txt", ".txt")))
        if hyp_file is None:
            logger.warning("%s: no best paths for %s (looked for %s/penalty_%s/%s.txt): the "
                           "scoring setting is held fixed in the intervals", path, name, scoring,
                           wip, lmwt)
            return None
        hyps = read_texts(hyp_file)
        row = []
        for utt in utts:
            key = (utt, tuple(hyps.get(utt, ())))
            if key not in aligned:
                aligned[key] = int(kaldialign.edit_distance(refs[utt], list(key[1]))["total"])
            row.append(aligned[key])
        check_setting(os.path.join(path, name), sum(row), sum(len(refs[u]) for u in utts),
                      hyp_file)
        rows.append(row)
    spk_file = os.path.join(scoring, "utt2spk")
    utt2spk = read_table(spk_file) if os.path.isfile(spk_file) else {}
    return Sweep(tuple(setting_name(lmwt, wip) for lmwt, wip, _ in names), utts,
                 tuple(utt2spk.get(u, "") for u in utts),
                 np.array([len(refs[u]) for u in utts], dtype=np.int64),
                 np.array(rows, dtype=np.int64))


def check_setting(source: str, errors: int, chars: int, hyp_file: str) -> None:
    lines = [line for line in read_lines(source) if line.strip()]
    if not lines:
        raise ScoringError(f"{source}: empty; expected a Kaldi %WER line")
    numbers = parse_wer_line(lines[0], f"{source}:1")
    if (numbers["errors"], numbers["total"]) != (errors, chars):
        raise ScoringError(f"{source}: says {numbers['errors']} errors in {numbers['total']} "
                           f"characters, but {hyp_file} gives {errors} in {chars} against the "
                           "scoring's reference; expected the best paths of that setting "
                           "(rescore the decode dir)")


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
