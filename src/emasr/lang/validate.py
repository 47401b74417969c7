"""Check a lang dir the way Kaldi's utils/validate_lang.pl does (the checks that catch real errors).

Every problem found is reported (not only the first), each naming the file and what was expected:
symbol tables numbered 0..N-1 with <eps> = 0; words.txt has #0, <s>, </s>; phone lists agree with
their .int/.csl forms; silence, non-silence and disambiguation phones partition phones.txt; sets and
roots hold every phone exactly once; topo (read by kaldi_hmm_gmm) covers exactly the real phones;
L.fst/L_disambig.fst (and G.fst when present) are readable, sorted, and use only known labels.
"""
from __future__ import annotations

import logging
import math
import os
from pathlib import Path

import click

from emasr.io.table import TableError, read_lines
from emasr.kaldi.fst import read_fst
from emasr.kaldi.openfst_binary import FstFormatError
from emasr.lang.symbols import read_symbols
from emasr.fst_stack import kaldi_hmm_gmm, kaldifst


logger = logging.getLogger(__name__)


class LangError(ValueError):
    """A lang dir failed validation; the message lists every problem."""


class LangCheck:
    """Collects problems while checking one lang dir."""

    def __init__(self, lang: str | os.PathLike):
        self.lang = Path(lang)
        self.problems: list[str] = []

    def fail(self, message: str) -> None:
        self.problems.append(message)

    def path(self, name: str) -> Path | None:
        path = self.lang / name
        if not path.is_file():
            self.fail(f"{path}: expected file to exist")
            return None
        return path

    def lines(self, name: str) -> list[list[str]] | None:
        path = self.path(name)
        return None if path is None else [line.split() for line in read_lines(path)]

    def symbols(self, name: str) -> dict[str, int]:
        path = self.path(name)
        if path is None:
            return {}
        table = read_symbols(path)
        if sorted(table.values()) != list(range(len(table))) or table.get("<eps>") != 0:
            self.fail(f"{path}: expected ids 0..{len(table) - 1} without gaps and '<eps> 0'")
        return table


def check_phone_list(c: LangCheck, name: str, phones: dict[str, int], csl: bool = True
                     ) -> list[str]:
    """phones/<name>.txt (one phone per line) against its .int and .csl; returns the phones."""
    lines = c.lines(f"phones/{name}.txt")
    if lines is None:
        return []
    listed = [line[0] for line in lines if line]
    unknown = [p for p in listed if p not in phones]
    if unknown or any(len(line) != 1 for line in lines):
        c.fail(f"{c.lang}/phones/{name}.txt: expected one known phone per line (unknown: {unknown})")
        return [p for p in listed if p in phones]
    ints = c.lines(f"phones/{name}.int")
    if ints is not None and [line[0] for line in ints if line] != [str(phones[p]) for p in listed]:
        c.fail(f"{c.lang}/phones/{name}.int: does not match phones/{name}.txt through phones.txt")
    if csl:
        expected = ":".join(str(phones[p]) for p in listed)
        got = c.lines(f"phones/{name}.csl")
        if got is not None and (got[0] if got else [""]) != [expected]:
            c.fail(f"{c.lang}/phones/{name}.csl: expected '{expected}'")
    return listed


def check_partition(c: LangCheck, phones: dict[str, int], silence, nonsilence, disambig) -> None:
    real = set(silence) | set(nonsilence)
    if set(silence) & set(nonsilence):
        c.fail(f"{c.lang}/phones: phones both silence and non-silence: "
               f"{sorted(set(silence) & set(nonsilence))}")
    if set(disambig) & real or any(not p.startswith("#") for p in disambig):
        c.fail(f"{c.lang}/phones/disambig.txt: expected only #N symbols, none of them real phones")
    missing = set(phones) - {"<eps>"} - real - set(disambig)
    if missing:
        c.fail(f"{c.lang}/phones.txt: phones in no list (silence/nonsilence/disambig): "
               f"{sorted(missing)}")


def check_sets(c: LangCheck, name: str, real: set[str], skip: int = 0) -> None:
    """Every real phone exactly once in phones/<name>.txt (after `skip` leading words per line)."""
    lines = c.lines(f"phones/{name}.txt")
    if lines is None:
        return
    listed = [p for line in lines for p in line[skip:]]
    if sorted(listed) != sorted(real):
        c.fail(f"{c.lang}/phones/{name}.txt: expected every phone exactly once "
               f"(missing {sorted(real - set(listed))}, extra or repeated "
               f"{sorted({p for p in listed if listed.count(p) > 1 or p not in real})})")
    if skip and any(line[:2] not in (["shared", "split"], ["shared", "not-split"],
                                      ["not-shared", "split"], ["not-shared", "not-split"])
                    for line in lines):
        c.fail(f"{c.lang}/phones/{name}.txt: lines must start '(not-)shared (not-)split'")


def check_topo(c: LangCheck, phones: dict[str, int], real: set[str]) -> None:
    path = c.path("topo")
    if path is None:
        return
    topo = kaldi_hmm_gmm.HmmTopology()
    try:
        topo.read(path.read_text())
        topo.check()
    except Exception as err:  # the binding raises RuntimeError on Kaldi errors
        c.fail(f"{path}: not a valid Kaldi topology ({err})")
        return
    if set(topo.phones) != {phones[p] for p in real}:
        c.fail(f"{path}: covers phones {sorted(topo.phones)}, expected exactly the silence and "
               f"non-silence phones {sorted(phones[p] for p in real)}")


def fst_labels(fst) -> tuple[list[tuple[int, int]], bool, bool]:
    """All (ilabel, olabel) pairs, and whether arcs are ilabel- and olabel-sorted at every state."""
    labels, isorted, osorted = [], True, True
    for state in kaldifst.StateIterator(fst):
        arcs = [(a.ilabel, a.olabel) for a in kaldifst.ArcIterator(fst, state)]
        labels += arcs
        isorted &= all(a[0] <= b[0] for a, b in zip(arcs, arcs[1:]))
        osorted &= all(a[1] <= b[1] for a, b in zip(arcs, arcs[1:]))
    return labels, isorted, osorted


def fst_problems(fst, path, in_ok: set[int], out_ok: set[int], sort: str
                 ) -> tuple[list[str], list[tuple[int, int]]]:
    """What is wrong with a lang dir's FST (labels outside the symbol tables, arcs not sorted as
    the lang dir's writer sorts them, arcs to states that do not exist, NaN weights: a damaged
    file that OpenFst still reads), and its (ilabel, olabel) pairs."""
    labels, isorted, osorted = fst_labels(fst)
    problems = []
    if (sort == "olabel" and not osorted) or (sort == "ilabel" and not isorted):
        problems.append(f"{path}: arcs are not {sort}-sorted (run fstarcsort --sort_type={sort})")
    bad_in = sorted({i for i, _ in labels} - in_ok)
    bad_out = sorted({o for _, o in labels} - out_ok)
    if bad_in or bad_out:
        problems.append(f"{path}: unexpected input labels {bad_in[:10]} / output labels "
                        f"{bad_out[:10]}; expected those of the lang dir's symbol tables")
    num_states = fst.num_states
    for state in kaldifst.StateIterator(fst):
        for arc in kaldifst.ArcIterator(fst, state):
            if not 0 <= arc.nextstate < num_states or math.isnan(float(arc.weight.value)):
                problems.append(f"{path}: state {state} has an arc to state {arc.nextstate} with "
                                f"weight {arc.weight.value}; expected one of its {num_states} "
                                "states and a number (the file is damaged: rebuild it)")
                return problems, labels
    return problems, labels


def check_fst(c: LangCheck, name: str, in_ok: set[int], out_ok: set[int], sort: str
              ) -> list[tuple[int, int]] | None:
    """Check one FST of the lang dir; its (ilabel, olabel) pairs, or None when it is absent or
    unreadable."""
    path = c.path(name)
    if path is None:
        return None
    try:
        fst = read_fst(path)
    except (FstFormatError, OSError) as err:
        c.fail(f"{path}: not readable as an OpenFst StdVectorFst ({err})")
        return None
    problems, labels = fst_problems(fst, path, in_ok, out_ok, sort)
    for problem in problems:
        c.fail(problem)
    return labels


def lexicon_problems(lang_dir: str | os.PathLike, fst, name: str = "L_disambig.fst") -> list[str]:
    """validate_lang's check of a lexicon FST, for a step that reads it without validating the
    whole lang dir (mkgraph): its labels must be phones of phones.txt (disambiguation symbols
    included) and words of words.txt, its states whole (the order of its arcs is the step's
    business: mkgraph sorts them itself)."""
    phones = read_symbols(Path(lang_dir) / "phones.txt")
    words = read_symbols(Path(lang_dir) / "words.txt")
    word_ids = set(words.values()) - {words.get("<s>"), words.get("</s>")}
    return fst_problems(fst, Path(lang_dir) / name, set(phones.values()), word_ids, "any")[0]


def grammar_problems(labels: list[tuple[int, int]], words: dict[str, int], where: str
                     ) -> list[str]:
    """What in a G.fst's (ilabel, olabel) pairs does not fit words.txt as arpa2fst (and
    format_lm) write it: word arcs w:w on words, backoff arcs #0:<eps>. A G built with another
    words.txt has its #0 elsewhere, so its backoff arcs carry another label: caught here (by
    validate_lang and before mkgraph composes) instead of inside the decoder."""
    backoff = words.get("#0")
    plain_words = set(words.values()) - {words.get(w) for w in ("#0", "<s>", "</s>")}
    problems = []
    other = sorted({(i, o) for i, o in labels if i != o and (i, o) != (backoff, 0)})
    if other:
        problems.append(
            f"{where}: {len(other)} kind(s) of arc whose labels are neither a word w:w nor the "
            f"backoff #0:<eps> (#0 is {backoff} in words.txt), e.g. "
            f"{', '.join(f'{i}:{o}' for i, o in other[:5])}: was it built with another "
            "words.txt? Rebuild it with utils/format_lm.sh")
    unknown = sorted({i for i, o in labels if i == o and i != 0 and i not in plain_words})
    if unknown:
        problems.append(f"{where}: word arcs with labels {unknown[:10]} that are not words of "
                        "words.txt (not in it, or a disambiguation symbol or sentence mark)")
    return problems


def validate_lang(lang_dir: str | os.PathLike) -> None:
    """Raise LangError listing every problem of the lang dir (nothing when it is valid)."""
    c = LangCheck(lang_dir)
    phones, words = c.symbols("phones.txt"), c.symbols("words.txt")
    for w in ("#0", "<s>", "</s>"):
        if words and w not in words:
            c.fail(f"{c.lang}/words.txt: expected the symbol {w}")
    silence = check_phone_list(c, "silence", phones)
    nonsilence = check_phone_list(c, "nonsilence", phones)
    disambig = check_phone_list(c, "disambig", phones)
    optional = check_phone_list(c, "optional_silence", phones)
    check_phone_list(c, "context_indep", phones)
    if len(optional) != 1 or optional[0] not in silence:
        c.fail(f"{c.lang}/phones/optional_silence.txt: expected one silence phone")
    check_partition(c, phones, silence, nonsilence, disambig)
    real = set(silence) | set(nonsilence)
    check_sets(c, "sets", real)
    check_sets(c, "roots", real, skip=2)
    for line in c.lines("phones/extra_questions.txt") or []:
        if set(line) - real:
            c.fail(f"{c.lang}/phones/extra_questions.txt: unknown phones {sorted(set(line) - real)}")
    if (c.lang / "phones/word_boundary.txt").is_file():
        kinds = {line[0]: line[1] for line in c.lines("phones/word_boundary.txt") if len(line) == 2}
        if set(kinds) != real or set(kinds.values()) - {"begin", "end", "internal", "singleton",
                                                       "nonword"}:
            c.fail(f"{c.lang}/phones/word_boundary.txt: expected every phone with begin/end/"
                   "internal/singleton/nonword")
    oov = c.lines("oov.txt")
    if oov is not None and (len(oov) != 1 or oov[0][0] not in words):
        c.fail(f"{c.lang}/oov.txt: expected one word of words.txt")
    check_topo(c, phones, real)
    real_ids = {phones[p] for p in real} | {0}
    word_ids = set(words.values()) - {words.get("<s>"), words.get("</s>")}
    plain_words = word_ids - {words.get("#0")}
    check_fst(c, "L.fst", real_ids, plain_words, "olabel")
    check_fst(c, "L_disambig.fst", real_ids | {phones[p] for p in disambig}, word_ids, "olabel")
    grammar = (check_fst(c, "G.fst", word_ids, word_ids, "ilabel")
               if (c.lang / "G.fst").is_file() else None)   # G.fst is optional
    if grammar is not None:
        for problem in grammar_problems(grammar, words, f"{c.lang}/G.fst"):
            c.fail(problem)
    if c.problems:
        raise LangError(f"{c.lang}: {len(c.problems)} problem(s):\n  " + "\n  ".join(c.problems))


@click.command("validate-lang")
@click.argument("lang_dir", type=click.Path(exists=True, file_okay=False))
def validate_lang_cli(lang_dir: str) -> None:
    """Check LANG_DIR (and its G.fst if present); exit 1 listing every problem found."""
    try:
        validate_lang(lang_dir)
    except (LangError, TableError) as err:
        raise click.ClickException(str(err)) from None
    logger.info("%s: OK", lang_dir)
