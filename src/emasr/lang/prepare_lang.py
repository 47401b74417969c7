"""Build a Kaldi lang dir from a dict dir, as Kaldi's utils/prepare_lang.sh does.

Writes phones.txt (<eps>, silence phones, non-silence phones, #0..#N), words.txt (<eps>, the
lexicon's words in C order, #0, <s>, </s>), L.fst and L_disambig.fst (OpenFst binary, olabel-sorted),
oov.txt/oov.int, topo (see emasr.lang.topo), and phones/*.{txt,int,csl}. Optional word-position-
dependent phones (_B _E _I _S) follow Kaldi's scheme. The whole dir is built beside the target and
renamed into place, so a failed run leaves the previous lang dir untouched.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click

from emasr.kaldi.fst import write_fst
from emasr.io.atomic import atomic_write
from emasr.io.table import TableError, c_sort_key
from emasr.lang.dictdir import DictDir, DictError, LexiconEntry, load_dict_dir
from emasr.lang.disambig import add_lex_disambig
from emasr.lang.lexicon_fst import lexicon_fst
from emasr.lang.symbols import to_ints, write_symbols
from emasr.lang.topo import DEFAULT_TOPOLOGY, TOPOLOGIES, make_topo

logger = logging.getLogger(__name__)

POSITIONS = ("_B", "_E", "_I", "_S")
BOUNDARY_NAMES = {"_B": "begin", "_E": "end", "_I": "internal", "_S": "singleton"}


@dataclass
class LangOptions:
    position_dependent_phones: bool = False
    sil_prob: float = 0.5
    num_nonsil_states: int = 3
    num_sil_states: int = 5
    topology: str = DEFAULT_TOPOLOGY  # a name of emasr.lang.topo.TOPOLOGIES


def position_dependent_lexicon(lexicon: list[LexiconEntry]) -> list[LexiconEntry]:
    """Mark each phone with its position in the word: _S alone, else _B, _I..., _E."""
    out = []
    for e in lexicon:
        if len(e.phones) == 1:
            phones = [e.phones[0] + "_S"]
        else:
            phones = [e.phones[0] + "_B"] + [p + "_I" for p in e.phones[1:-1]] + [e.phones[-1] + "_E"]
        out.append(LexiconEntry(e.word, phones, e.prob))
    return out


def phone_map(d: DictDir, position_dependent: bool) -> dict[str, list[str]]:
    """Dict phone -> its lang phones (silence keeps a bare version for the optional silence)."""
    mapping = {}
    for line in d.silence_phones:
        for p in line:
            mapping[p] = [p] + [p + s for s in POSITIONS] if position_dependent else [p]
    for line in d.nonsilence_phones:
        for p in line:
            mapping[p] = [p + s for s in POSITIONS] if position_dependent else [p]
    return mapping


def map_lines(lines: list[list[str]], mapping: dict[str, list[str]]) -> list[list[str]]:
    return [[q for p in line for q in mapping[p]] for line in lines]


def extra_questions(d: DictDir, mapping: dict[str, list[str]], position_dependent: bool
                    ) -> list[list[str]]:
    """The dict's questions, plus (position-dependent) one question per word position."""
    questions = map_lines(d.extra_questions, mapping)
    if position_dependent:
        nonsil = [p for line in d.nonsilence_phones for p in line]
        sil = [p for line in d.silence_phones for p in line]
        questions += [[p + s for p in nonsil] for s in POSITIONS]
        questions += [[p + s for p in sil] for s in ("",) + POSITIONS]
    return questions


def word_boundary(phones: list[str]) -> list[list[str]]:
    return [[p, BOUNDARY_NAMES.get(p[-2:], "nonword")] for p in phones]


class LangWriter:
    """Writes the files of one lang dir, with their .int/.csl forms through the phone table."""

    def __init__(self, lang: Path):
        self.lang = lang
        (lang / "phones").mkdir(parents=True, exist_ok=True)
        self.phone_ids: dict[str, int] = {}
        self.word_ids: dict[str, int] = {}

    def lines(self, name: str, lines: list[list[str]]) -> None:
        with atomic_write(self.lang / name) as f:
            f.writelines(" ".join(line) + "\n" for line in lines)

    def phone_list(self, name: str, phones: list[str], csl: bool = True) -> None:
        """phones/<name>.txt one per line, .int, and (if csl) .csl."""
        ids = to_ints(phones, self.phone_ids, f"phones/{name}.txt")
        self.lines(f"phones/{name}.txt", [[p] for p in phones])
        self.lines(f"phones/{name}.int", [[str(i)] for i in ids])
        if csl:
            self.lines(f"phones/{name}.csl", [[":".join(map(str, ids))]])

    def phone_sets(self, name: str, sets: list[list[str]], prefix: list[str] = ()) -> None:
        """phones/<name>.txt with one set per line (after `prefix` words) and its .int."""
        where = f"phones/{name}.txt"
        self.lines(where, [list(prefix) + s for s in sets])
        self.lines(f"phones/{name}.int",
                   [list(prefix) + [str(i) for i in to_ints(s, self.phone_ids, where)] for s in sets])


def write_lang(d: DictDir, oov_word: str, tmp: Path, lang: Path, opts: LangOptions) -> None:
    """Write every file of the lang dir `lang` (which must exist) from the dict `d`."""
    pd = opts.position_dependent_phones
    lexicon = position_dependent_lexicon(d.lexicon) if pd else d.lexicon
    mapping = phone_map(d, pd)
    disambig_lexicon, max_disambig = add_lex_disambig(lexicon)
    ndisambig = max_disambig + 1          # one more for the silence in L_disambig
    write_tmp_files(tmp, lexicon, disambig_lexicon, ndisambig, mapping)

    w = LangWriter(lang)
    silence = [q for line in map_lines(d.silence_phones, mapping) for q in line]
    nonsilence = [q for line in map_lines(d.nonsilence_phones, mapping) for q in line]
    disambig = [f"#{n}" for n in range(ndisambig + 1)]
    w.phone_ids = write_symbols(lang / "phones.txt", ["<eps>"] + silence + nonsilence + disambig)
    words = sorted({e.word for e in lexicon}, key=c_sort_key)
    if oov_word not in words:
        raise DictError(f"OOV word '{oov_word}' is not in the lexicon; add e.g. '{oov_word} "
                        f"{d.optional_silence}' to lexicon.txt")
    w.word_ids = write_symbols(lang / "words.txt", ["<eps>"] + words + ["#0", "<s>", "</s>"])

    for name, phones in (("silence", silence), ("nonsilence", nonsilence),
                         ("optional_silence", [d.optional_silence]), ("disambig", disambig),
                         ("context_indep", silence)):
        w.phone_list(name, phones)
    w.phone_list("wdisambig", ["#0"], csl=False)
    w.lines("phones/wdisambig_phones.int", [[str(w.phone_ids["#0"])]])
    w.lines("phones/wdisambig_words.int", [[str(w.word_ids["#0"])]])
    sets = map_lines(d.silence_phones + d.nonsilence_phones, mapping)
    w.phone_sets("sets", sets)
    w.phone_sets("roots", sets, prefix=["shared", "split"])
    w.phone_sets("extra_questions", extra_questions(d, mapping, pd))
    if pd:
        boundary = word_boundary(silence + nonsilence)
        w.lines("phones/word_boundary.txt", boundary)
        w.lines("phones/word_boundary.int", [[str(w.phone_ids[p]), kind] for p, kind in boundary])
    write_align_lexicon(w, lexicon, d.optional_silence)
    w.lines("oov.txt", [[oov_word]])
    w.lines("oov.int", [[str(w.word_ids[oov_word])]])
    with atomic_write(lang / "topo") as f:
        f.write(make_topo(to_ints(nonsilence, w.phone_ids, "nonsilence"),
                          to_ints(silence, w.phone_ids, "silence"),
                          opts.num_nonsil_states, opts.num_sil_states, opts.topology))
    write_fst(lexicon_fst(lexicon, w.phone_ids, w.word_ids, opts.sil_prob, d.optional_silence),
              lang / "L.fst")
    write_fst(lexicon_fst(disambig_lexicon, w.phone_ids, w.word_ids, opts.sil_prob,
                          d.optional_silence, sil_disambig=f"#{ndisambig}",
                          wdisambig=("#0", "#0")), lang / "L_disambig.fst")


def write_align_lexicon(w: LangWriter, lexicon: list[LexiconEntry], sil_phone: str) -> None:
    """phones/align_lexicon.{txt,int}: `word word phones...`, plus `<eps> <eps> sil`, sorted unique."""
    rows = {("<eps>", "<eps>", sil_phone)} | {(e.word, e.word, *e.phones) for e in lexicon}
    rows_sorted = sorted(rows, key=lambda r: c_sort_key(" ".join(r)))
    w.lines("phones/align_lexicon.txt", [list(r) for r in rows_sorted])
    w.lines("phones/align_lexicon.int",
            [[str(w.word_ids[r[0]]), str(w.word_ids[r[1]])]
             + [str(i) for i in to_ints(list(r[2:]), w.phone_ids, "align_lexicon")]
             for r in rows_sorted])


def write_tmp_files(tmp: Path, lexicon, disambig_lexicon, ndisambig: int, mapping) -> None:
    """Kaldi's intermediate files in <tmp>, for inspection (lexiconp*, lex_ndisambig, phone_map)."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name, entries in (("lexiconp.txt", lexicon), ("lexiconp_disambig.txt", disambig_lexicon)):
        with atomic_write(tmp / name) as f:
            f.writelines(f"{e.word} {e.prob:g}\t{' '.join(e.phones)}\n" for e in entries)
    with atomic_write(tmp / "lex_ndisambig") as f:
        f.write(f"{ndisambig}\n")
    with atomic_write(tmp / "phone_map.txt") as f:
        f.writelines(f"{p} {' '.join(v)}\n" for p, v in mapping.items())


def prepare_lang(dict_dir: str | os.PathLike, oov_word: str, tmp_dir: str | os.PathLike,
                 lang_dir: str | os.PathLike, opts: LangOptions = LangOptions()) -> None:
    """Build `lang_dir` from `dict_dir`; replaces any previous lang dir only when all succeeded."""
    d = load_dict_dir(dict_dir)
    lang = Path(lang_dir)
    lang.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=lang.name + ".tmp.", dir=lang.parent))
    try:
        write_lang(d, oov_word, Path(tmp_dir), staging, opts)
        staging.chmod(0o755)
        if lang.exists():
            shutil.rmtree(lang)
        os.replace(staging, lang)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("%s: %d dict phones (%s), %d words", lang, len(d.phones()),
                "position-dependent" if opts.position_dependent_phones else "position-independent",
                len(d.words()))


@click.command("prepare-lang")
@click.argument("dict_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("oov_word")
@click.argument("tmp_dir", type=click.Path(file_okay=False))
@click.argument("lang_dir", type=click.Path(file_okay=False))
@click.option("--position-dependent-phones", type=click.BOOL, default=False, show_default=True,
              help="Split phones by word position (_B _E _I _S), as Kaldi's default English setup.")
@click.option("--sil-prob", default=0.5, show_default=True,
              help="Probability of optional silence between words in L.fst.")
@click.option("--num-nonsil-states", default=3, show_default=True, help="HMM states per phone.")
@click.option("--num-sil-states", default=5, show_default=True, help="HMM states of silence.")
@click.option("--topology", type=click.Choice(sorted(TOPOLOGIES)), default=DEFAULT_TOPOLOGY,
              show_default=True, help="kaldi: gen_topo.pl's strict left-to-right HMMs (GMMs at "
              "10 ms); skip: every phone can be passed in one frame (networks at 30 ms).")
def prepare_lang_cli(dict_dir: str, oov_word: str, tmp_dir: str, lang_dir: str,
                     position_dependent_phones: bool, sil_prob: float, num_nonsil_states: int,
                     num_sil_states: int, topology: str) -> None:
    """Build a lang dir (phones.txt words.txt L.fst L_disambig.fst topo phones/ ...) from DICT_DIR.

    OOV_WORD (e.g. "<UNK>") must be in the lexicon; TMP_DIR receives intermediate files. --topology
    chooses the HMM topology (see docs/lang.md).
    """
    opts = LangOptions(position_dependent_phones, sil_prob, num_nonsil_states, num_sil_states,
                       topology)
    try:
        prepare_lang(dict_dir, oov_word, tmp_dir, lang_dir, opts)
    except (DictError, TableError, ValueError) as err:  # ValueError: e.g. a bad state count
        raise click.ClickException(str(err)) from None
