"""Word and character error rates in Kaldi's formats (compute-wer, wer_per_utt_details.pl,
wer_per_spk_details.pl), with kaldialign for the edit distance and the alignment.

CER splits every word into its characters (Kaldi's aishell scoring does `split //`), so
`北京 天气` scores as 北 京 天 气.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import kaldialign

# Words Kaldi's scoring filters drop from both reference and hypothesis.
FILTERED_WORDS = frozenset({"<UNK>", "<unk>", "<SPOKEN_NOISE>", "<NOISE>", "<SIL>", "!SIL",
                            "<sil>", "SIL", "sil", "<eps>"})
EPS = "***"


def filter_words(words: list[str]) -> list[str]:
    return [w for w in words if w not in FILTERED_WORDS]


def to_units(words: list[str], metric: str) -> list[str]:
    """The scored units: words for WER, characters for CER."""
    if metric == "cer":
        return [c for w in words for c in w]
    return list(words)


@dataclass
class ErrorCounts:
    ins: int = 0
    dels: int = 0
    subs: int = 0
    ref_len: int = 0
    sents: int = 0
    sent_errors: int = 0
    absent: int = 0

    @property
    def errors(self) -> int:
        return self.ins + self.dels + self.subs

    @property
    def rate(self) -> float:
        return 100.0 * self.errors / self.ref_len if self.ref_len else 0.0

    def add(self, other: "ErrorCounts") -> None:
        for name in ("ins", "dels", "subs", "ref_len", "sents", "sent_errors", "absent"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def count_errors(ref: list[str], hyp: list[str]) -> ErrorCounts:
    stats = kaldialign.edit_distance(ref, hyp)
    errors = stats["ins"] + stats["del"] + stats["sub"]
    return ErrorCounts(stats["ins"], stats["del"], stats["sub"], len(ref), 1, int(errors > 0))


def score_texts(refs: Mapping[str, list[str]], hyps: Mapping[str, list[str]]) -> ErrorCounts:
    """Error counts over every reference utterance. An utterance without a hypothesis (its decode
    failed) is scored as all deletions and counted in `absent`: dropping it, as Kaldi's
    compute-wer --mode=present does, would make a decode that fails on hard utterances look
    better than one that gets them wrong."""
    total = ErrorCounts()
    for utt, ref in refs.items():
        total.add(count_errors(ref, hyps.get(utt, [])))
        if utt not in hyps:
            total.absent += 1
    return total


def absent_note(absent: int, sents: int) -> str:
    """The %WER line's note on failed decodes (emasr.report.scoring parses it back)."""
    return f" [{absent} of {sents} utterances without a hypothesis, scored as deletions]"


def wer_lines(counts: ErrorCounts) -> str:
    """compute-wer's output, e.g. `%WER 7.48 [ 7839 / 104765, 285 ins, 454 del, 7100 sub ]`; with
    utterances that have no hypothesis, the line says how many (they are in the counts)."""
    note = absent_note(counts.absent, counts.sents) if counts.absent else ""
    ser = 100.0 * counts.sent_errors / counts.sents if counts.sents else 0.0
    return (f"%WER {counts.rate:.2f} [ {counts.errors} / {counts.ref_len}, {counts.ins} ins, "
            f"{counts.dels} del, {counts.subs} sub ]{note}\n"
            f"%SER {ser:.2f} [ {counts.sent_errors} / {counts.sents} ]\n"
            f"Scored {counts.sents} sentences, {counts.absent} not present in hyp.\n")


def per_utt_lines(utt: str, ref: list[str], hyp: list[str]) -> str:
    """wer_per_utt_details.pl's four lines per utterance: ref, hyp, op and #csid."""
    pairs = kaldialign.align(ref, hyp, EPS)
    ops = ["C" if r == h else "I" if r == EPS else "D" if h == EPS else "S" for r, h in pairs]
    width = [max(len(r), len(h), 1) for r, h in pairs]
    row = lambda items: " ".join(x.ljust(w) for x, w in zip(items, width)).rstrip()  # noqa: E731
    counts = [ops.count(x) for x in "CSID"]
    return (f"{utt} ref  {row([r for r, _ in pairs])}\n{utt} hyp  {row([h for _, h in pairs])}\n"
            f"{utt} op   {row(ops)}\n{utt} #csid {' '.join(map(str, counts))}\n")


def per_spk_table(refs: Mapping[str, list[str]], hyps: Mapping[str, list[str]],
                  utt2spk: Mapping[str, str]) -> str:
    """wer_per_spk_details.pl's table: raw counts and percentages per speaker, then SUM."""
    by_speaker: dict[str, ErrorCounts] = {}
    for utt, ref in refs.items():
        by_speaker.setdefault(utt2spk.get(utt, utt), ErrorCounts()).add(
            count_errors(ref, hyps.get(utt, [])))
    total = ErrorCounts()
    for counts in by_speaker.values():
        total.add(counts)
    header = ("SPEAKER", "id", "#SENT", "#WORD", "Corr", "Sub", "Ins", "Del", "Err", "S.Err")
    lines = [f"{header[0]:<15}{header[1]:<9}" + "".join(f"{x:>9}" for x in header[2:])]
    for speaker, counts in [*sorted(by_speaker.items()), ("SUM", total)]:
        lines += [_spk_row(speaker, "raw", counts), _spk_row(speaker, "sys", counts)]
    return "\n".join(lines) + "\n"


def _spk_row(speaker: str, kind: str, c: ErrorCounts) -> str:
    correct = c.ref_len - c.subs - c.dels
    values = [correct, c.subs, c.ins, c.dels, c.errors, c.sent_errors]
    if kind == "sys":
        bases = [c.ref_len] * 5 + [c.sents]
        cells = [f"{100.0 * v / b if b else 0.0:.2f}" for v, b in zip(values, bases)]
    else:
        cells = [str(v) for v in values]
    return (f"{speaker:<15}{kind:<9}" + f"{c.sents:>9}{c.ref_len:>9}"
            + "".join(f"{x:>9}" for x in cells))
