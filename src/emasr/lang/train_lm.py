"""Word-level n-gram LM from unsegmented Mandarin text (like a query log), for local/train_lms.sh.

1. Clean: keep lines of Chinese characters only (spaces are removed; lines with other characters
   are skipped and counted).
2. Word units: a sentencepiece unigram model trained on that text proposes the words (pieces);
   every line is segmented with it.
3. Lexicon: pieces the dict lacks get pypinyin pronunciations and are added to <dict>/lexicon.txt
   (the dict's phone lists are rebuilt from the lexicon); the added entries are listed in
   <dict>/lexicon_lm_words.txt so a re-run first removes them. Pieces without a pronunciation are
   mapped to the OOV word (<UNK>) and counted in the log.
4. A modified Kneser-Ney n-gram (emasr.lang.kneser_ney) over the lexicon's words is written to
   <lm>/<order>gram.arpa.gz; dev perplexity and OOV rate (dev text re-segmented by the same model)
   go to the log and to <lm>/dev_perplexity.
Run prepare_lang after this step, since the dict changed.
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import click

from emasr.io.atomic import atomic_write
from emasr.io.table import TableError
from emasr.lang.aishell_dict import dict_from_lexicon, pinyin_entries
from emasr.lang.arpa import perplexity, write_arpa
from emasr.lang.dictdir import DictError, load_dict_dir, write_dict_dir
from emasr.lang.kneser_ney import train_kneser_ney
from emasr.lang.pinyin import is_chinese_char

logger = logging.getLogger(__name__)

LM_WORDS_FILE = "lexicon_lm_words.txt"
NON_LM_WORDS = {"SIL"}  # lexicon words that are not spoken words


def read_lm_text(source: str | os.PathLike) -> tuple[list[str], int]:
    """Lines of a file, or of every *.txt in a directory, without spaces; (lines, skipped count)."""
    source = Path(source)
    files = sorted(source.glob("*.txt")) if source.is_dir() else [source]
    if not files:
        raise FileNotFoundError(f"{source}: no *.txt LM text files")
    lines, skipped = [], 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            for raw in f:
                line = re.sub(r"\s+", "", raw)
                if not line:
                    continue
                if all(is_chinese_char(c) for c in line):
                    lines.append(line)
                else:
                    skipped += 1
    if not lines:
        raise ValueError(f"{source}: no line of Chinese characters to train on")
    return lines, skipped


def train_word_units(lines: list[str], lm_dir: Path, vocab_size: int, max_word_length: int):
    """Train sentencepiece (unigram) on the lines; returns the loaded processor."""
    import sentencepiece as spm

    corpus = lm_dir / "text.clean"
    with atomic_write(corpus) as f:
        f.writelines(line + "\n" for line in lines)
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(lm_dir / "wordunits"), model_type="unigram",
        vocab_size=vocab_size, hard_vocab_limit=False, character_coverage=1.0,
        add_dummy_prefix=False, bos_id=-1, eos_id=-1, max_sentencepiece_length=max_word_length,
        num_threads=1, minloglevel=2)
    return spm.SentencePieceProcessor(model_file=str(lm_dir / "wordunits.model"))


def segment(processor, line: str) -> list[str]:
    return [p for p in processor.encode(line, out_type=str) if p and p != "▁"]


def extend_dict(dict_dir: Path, words: set[str]) -> tuple[set[str], list[str]]:
    """Add pypinyin entries for new words to the dict; returns (lexicon words, words that failed)."""
    d = load_dict_dir(dict_dir)
    previous = set()
    if (dict_dir / LM_WORDS_FILE).is_file():
        previous = set((dict_dir / LM_WORDS_FILE).read_text(encoding="utf-8").split())
    base = [e for e in d.lexicon if e.word not in previous]
    added, failed = pinyin_entries(sorted(words), {e.word for e in base})
    write_dict_dir(dict_from_lexicon(base + added), dict_dir)
    with atomic_write(dict_dir / LM_WORDS_FILE) as f:
        f.writelines(e.word + "\n" for e in added)
    logger.info("%s: added %d LM word(s) with pypinyin pronunciations", dict_dir, len(added))
    return {e.word for e in base + added}, failed


def map_oov(sentences: list[list[str]], vocab: set[str], oov_word: str) -> int:
    """Replace words outside vocab by oov_word in place; returns the number replaced."""
    count = 0
    for words in sentences:
        for i, w in enumerate(words):
            if w not in vocab:
                words[i] = oov_word
                count += 1
    return count


def dev_sentences(dev_text: str | os.PathLike, processor) -> list[list[str]]:
    """Kaldi text (utt words...) -> sentences re-segmented into the LM's word units."""
    with open(dev_text, encoding="utf-8") as f:
        return [segment(processor, "".join(line.split()[1:])) for line in f if line.split()[1:]]


def train_lm(lm_text: str, dict_dir: str, dev_text: str, lm_dir: str, order: int = 3,
             vocab_size: int = 8000, oov_word: str = "<UNK>", max_word_length: int = 4
             ) -> dict[str, float]:
    out, dict_path = Path(lm_dir), Path(dict_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines, skipped = read_lm_text(lm_text)
    logger.info("LM text: %d lines (%d skipped: characters other than Chinese)", len(lines), skipped)
    processor = train_word_units(lines, out, vocab_size, max_word_length)
    sentences = [segment(processor, line) for line in lines]
    pieces = {w for words in sentences for w in words}
    lexicon_words, failed = extend_dict(dict_path, pieces)
    if oov_word not in lexicon_words:
        raise DictError(f"{dict_path}/lexicon.txt: OOV word {oov_word} missing; expected "
                        f"'{oov_word} sil'")
    vocab = lexicon_words - NON_LM_WORDS
    oovs = map_oov(sentences, vocab, oov_word)
    total = sum(map(len, sentences))
    logger.info("segmented LM text: %d tokens, %d word types; %d token(s) (%d type(s) without a "
                "pronunciation) mapped to %s", total, len(pieces), oovs, len(failed), oov_word)
    with atomic_write(out / "text.seg") as f:
        f.writelines(" ".join(words) + "\n" for words in sentences)
    model = train_kneser_ney(sentences, order, vocab)
    arpa = out / f"{order}gram.arpa.gz"
    write_arpa(model, arpa)
    dev = perplexity(model, dev_sentences(dev_text, processor))
    stats = {"perplexity": dev.perplexity, "oov_rate": dev.oov_rate, "tokens": dev.words}
    message = (f"dev perplexity {dev.perplexity:.2f} over {dev.sentences} sentences, "
               f"{dev.words} tokens; OOV rate {100 * dev.oov_rate:.2f}% ({dev.oovs} tokens)")
    logger.info("%s: %s", arpa, message)
    with atomic_write(out / "dev_perplexity") as f:
        f.write(message + "\n")
    return stats


@click.command("train-lm")
@click.argument("lm_text", type=click.Path(exists=True))
@click.argument("dict_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("dev_text", type=click.Path(exists=True, dir_okay=False))
@click.argument("lm_dir", type=click.Path(file_okay=False))
@click.option("--order", default=3, show_default=True, help="n-gram order.")
@click.option("--vocab-size", default=8000, show_default=True,
              help="sentencepiece vocabulary size (a soft limit on the word units).")
@click.option("--max-word-length", default=4, show_default=True,
              help="Longest word unit in characters (most Mandarin words have 1-4).")
@click.option("--oov-word", default="<UNK>", show_default=True,
              help="Word that stands for tokens without a pronunciation.")
def train_lm_cli(lm_text: str, dict_dir: str, dev_text: str, lm_dir: str, order: int,
                 vocab_size: int, max_word_length: int, oov_word: str) -> None:
    """Train an n-gram LM (modified Kneser-Ney) on unsegmented text LM_TEXT (file or dir of *.txt).

    Word units come from sentencepiece (unigram); new words get pypinyin pronunciations in
    DICT_DIR/lexicon.txt (re-run prepare_lang afterwards). Writes LM_DIR/<order>gram.arpa.gz and
    logs the perplexity and OOV rate on DEV_TEXT (a Kaldi text file).
    """
    try:
        train_lm(lm_text, dict_dir, dev_text, lm_dir, order, vocab_size, oov_word, max_word_length)
    except (DictError, TableError, ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
