"""lang_test = lang + G.fst from an ARPA LM, as Kaldi's utils/format_lm.sh does.

G.fst comes from kaldilm's arpa2fst (Kaldi's own code) with `#0` on the back-off arcs and words.txt
as the symbol table, so <s> and </s> become epsilons. Two things happen before kaldilm sees the ARPA:
n-grams with a word that is not in words.txt are dropped (their count and the first words are
logged: a word missing from the lexicon cannot be recognised), and the file is rewritten with
correct header counts (kaldilm aborts the whole process on a wrong count). arpa2fst then runs in a
child process, which also keeps kaldilm out of this process's import order (docs/design.md,
"Known pitfalls").
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from emasr.io.table import TableError
from emasr.lang.arpa import BOS, EOS, ArpaError, read_arpa, write_arpa
from emasr.lang.dictdir import DictError, read_lexicon
from emasr.lang.prepare_lang import write_fst
from emasr.lang.symbols import read_symbols
from emasr.lang.validate import LangError, validate_lang
from emasr.fst_stack import kaldifst

logger = logging.getLogger(__name__)


def run_arpa2fst(arpa: Path, words: Path, out_text: Path) -> None:
    """kaldilm.arpa2fst in a child process; writes the FST in text form (integer labels)."""
    code = ("import sys; from emasr.fst_stack import import_kaldilm; "
            "text = import_kaldilm().arpa2fst(sys.argv[1], disambig_symbol='#0', "
            "read_symbol_table=sys.argv[2], max_arpa_warnings=10); "
            "open(sys.argv[3], 'w').write(text)")
    proc = subprocess.run([sys.executable, "-c", code, str(arpa), str(words), str(out_text)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ArpaError(f"arpa2fst failed on {arpa} (exit {proc.returncode}):\n{proc.stderr[-2000:]}")


def report_missing_words(arpa_words: set[str], lexicon_path: str | os.PathLike,
                         known: dict[str, int]) -> None:
    lexicon_words = {e.word for e in read_lexicon(lexicon_path)}
    for where, vocab in ((os.fspath(lexicon_path), lexicon_words), ("words.txt", known)):
        missing = sorted(w for w in arpa_words - {BOS, EOS} if w not in vocab)
        if missing:
            logger.warning("%d LM word(s) are not in %s (their n-grams are dropped from G.fst): %s%s",
                           len(missing), where, " ".join(missing[:20]),
                           " ..." if len(missing) > 20 else "")


def make_g_fst(arpa_path: str | os.PathLike, words_path: Path, work: Path):
    """Clean the ARPA against words.txt, run arpa2fst; returns (ilabel-sorted G, the cleaned
    model, the ARPA's words before cleaning)."""
    known = read_symbols(words_path)
    model = read_arpa(arpa_path)
    arpa_words = model.vocabulary()
    dropped = model.drop_words(set(known))
    if dropped:
        logger.warning("dropped %d n-gram(s) that use words outside words.txt", dropped)
    clean = work / "lm.arpa"
    write_arpa(model, clean)
    text = work / "G.txt"
    run_arpa2fst(clean, words_path, text)
    fst = kaldifst.compile(text.read_text(), acceptor=False)
    kaldifst.arcsort(fst, sort_type="ilabel")
    return fst, model, arpa_words


def format_lm(lang_dir: str | os.PathLike, arpa_path: str | os.PathLike,
              lexicon_path: str | os.PathLike, out_dir: str | os.PathLike) -> None:
    """Copy lang_dir to out_dir with G.fst; out_dir is replaced only when everything succeeded."""
    lang, out = Path(lang_dir), Path(out_dir)
    for name in ("words.txt", "phones.txt", "L.fst", "L_disambig.fst"):
        if not (lang / name).is_file():
            raise LangError(f"{lang}/{name}: expected file to exist")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out.name + ".tmp.", dir=out.parent))
    try:
        with tempfile.TemporaryDirectory(prefix="format_lm.") as work:
            fst, model, arpa_words = make_g_fst(arpa_path, lang / "words.txt", Path(work))
        report_missing_words(arpa_words, lexicon_path, read_symbols(lang / "words.txt"))
        shutil.copytree(lang, staging, dirs_exist_ok=True)
        write_fst(fst, staging / "G.fst")
        validate_lang(staging)
        staging.chmod(0o755)
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("%s: G.fst with %d states, %d arcs from %s (%s)", out, fst.num_states,
                sum(fst.num_arcs(s) for s in range(fst.num_states)), arpa_path,
                ", ".join(f"{len(t)} {n + 1}-grams" for n, t in enumerate(model.ngrams)))


@click.command("format-lm")
@click.argument("lang_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("arpa", type=click.Path(exists=True, dir_okay=False))
@click.argument("lexicon", type=click.Path(exists=True, dir_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
def format_lm_cli(lang_dir: str, arpa: str, lexicon: str, out_dir: str) -> None:
    """Make OUT_DIR (e.g. data/lang_test) = LANG_DIR + G.fst from the ARPA LM (plain or .gz).

    LM words missing from LEXICON / words.txt are reported and their n-grams dropped. G.fst has #0 on
    its back-off arcs (kaldilm's arpa2fst, Kaldi's code) and is checked with validate-lang.
    """
    try:
        format_lm(lang_dir, arpa, lexicon, out_dir)
    except (ArpaError, LangError, DictError, TableError) as err:
        raise click.ClickException(str(err)) from None
