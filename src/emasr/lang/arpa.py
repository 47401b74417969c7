"""ARPA back-off n-gram models: read, write, score.

An ArpaModel holds, per order n, {n-gram tuple: (log10 prob, log10 back-off weight)}. Reading is
strict about malformed lines (file:line errors) but tolerant of a `\\data\\` header whose counts do
not match the sections (old tools wrote such files; the counts are recomputed on writing, since
kaldilm's arpa2fst aborts on them). Scoring follows the back-off rule:
P(w | h) = P*(w | h) if (h, w) is listed, else bow(h) * P(w | h minus its first word).
"""
from __future__ import annotations

import gzip
import io
import logging
import math
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from emasr.io.atomic import atomic_write

logger = logging.getLogger(__name__)

BOS, EOS, UNK = "<s>", "</s>", "<unk>"


class ArpaError(ValueError):
    """A malformed ARPA file; the message names the file and line."""


@dataclass
class ArpaModel:
    ngrams: list[dict[tuple[str, ...], tuple[float, float]]] = field(default_factory=list)

    @property
    def order(self) -> int:
        return len(self.ngrams)

    def vocabulary(self) -> set[str]:
        return {w for (w,) in self.ngrams[0]} if self.ngrams else set()

    def logprob(self, word: str, history: tuple[str, ...]) -> float:
        """log10 P(word | history) by back-off; history is truncated to order-1 words."""
        history = history[len(history) - self.order + 1:] if self.order > 1 else ()
        backoff = 0.0
        while True:
            entry = self.ngrams[len(history)].get(history + (word,))
            if entry is not None:
                return backoff + entry[0]
            if not history:
                return -math.inf
            context = self.ngrams[len(history) - 1].get(history)
            backoff += context[1] if context else 0.0
            history = history[1:]

    def drop_words(self, keep: set[str]) -> int:
        """Remove n-grams with a word outside `keep` (<s>, </s> always kept); returns how many."""
        keep = keep | {BOS, EOS}
        dropped = 0
        for table in self.ngrams:
            for gram in [g for g in table if any(w not in keep for w in g)]:
                del table[gram]
                dropped += 1
        return dropped


def open_text(path: str | os.PathLike) -> io.TextIOBase:
    path = os.fspath(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def utf8_lines(f: io.TextIOBase, path: str) -> Iterator[str]:
    """The lines of a text file, a line that is not UTF-8 (or a damaged gzip) named."""
    number = 0
    try:
        for number, line in enumerate(f, 1):
            yield line
    except (UnicodeDecodeError, EOFError, OSError, zlib.error) as err:
        raise ArpaError(f"{path}:{number + 1}: cannot read the line (expected UTF-8 text of an "
                        f"ARPA file): {type(err).__name__}: {err}") from None


def read_arpa(path: str | os.PathLike) -> ArpaModel:
    """Parse an ARPA file (plain or .gz)."""
    path = os.fspath(path)
    declared: dict[int, int] = {}
    model = ArpaModel()
    section = None  # "data", an order n, or "end"
    with open_text(path) as f:
        for number, raw in enumerate(utf8_lines(f, path), 1):
            line = raw.strip()
            if not line:
                continue
            where = f"{path}:{number}"
            if line == "\\data\\":
                section = "data"
            elif line == "\\end\\":
                section = "end"
                break
            elif re.fullmatch(r"\\(\d+)-grams:", line):
                section = int(line[1:line.index("-")])
                if section != model.order + 1:
                    raise ArpaError(f"{where}: section {line} out of order")
                model.ngrams.append({})
            elif section == "data":
                match = re.fullmatch(r"ngram\s+(\d+)\s*=\s*(\d+)", line)
                if not match:
                    raise ArpaError(f"{where}: expected 'ngram N=COUNT' in the \\data\\ section")
                declared[int(match.group(1))] = int(match.group(2))
            elif isinstance(section, int):
                parse_ngram_line(line, section, model.ngrams[-1], where)
            else:
                raise ArpaError(f"{where}: text outside any section; expected '\\data\\' first")
    if section != "end" or not model.ngrams:
        raise ArpaError(f"{path}: no \\end\\ or no n-gram section; truncated ARPA file?")
    for n, count in declared.items():
        found = len(model.ngrams[n - 1]) if n <= model.order else 0
        if found != count:
            logger.warning("%s: header declares %d %d-grams, found %d (using what was found)",
                           path, count, n, found)
    return model


def parse_ngram_line(line: str, order: int, table: dict, where: str) -> None:
    fields = line.split()
    if len(fields) not in (order + 1, order + 2):
        raise ArpaError(f"{where}: expected 'logprob w1..w{order} [backoff]', got '{line}'")
    try:
        logprob = float(fields[0])
        backoff = float(fields[order + 1]) if len(fields) == order + 2 else 0.0
    except ValueError:
        raise ArpaError(f"{where}: expected numbers for logprob/backoff in '{line}'") from None
    gram = tuple(fields[1:order + 1])
    if gram in table:
        raise ArpaError(f"{where}: duplicate n-gram '{' '.join(gram)}'")
    table[gram] = (logprob, backoff)


def write_arpa(model: ArpaModel, path: str | os.PathLike, with_backoff: Iterable = ()) -> None:
    """Write an ARPA file (gzip if the name ends in .gz), counts from the content, atomically.

    A back-off weight is written for every n-gram below the top order that is the context of a
    longer n-gram or that has a non-zero weight (SRILM/KenLM convention), and never at the top order.
    """
    contexts = {g[:-1] for table in model.ngrams[1:] for g in table} | set(with_backoff)
    lines = ["", "\\data\\"] + [f"ngram {n + 1}={len(t)}" for n, t in enumerate(model.ngrams)]
    for n, table in enumerate(model.ngrams):
        lines += ["", f"\\{n + 1}-grams:"]
        top = n + 1 == model.order
        for gram in sorted(table):
            logprob, backoff = table[gram]
            text = f"{logprob:.7g}\t{' '.join(gram)}"
            if not top and (gram in contexts or backoff != 0.0):
                text += f"\t{backoff:.7g}"
            lines.append(text)
    lines += ["", "\\end\\", ""]
    content = "\n".join(lines).encode("utf-8")
    with atomic_write(path, "wb") as f:
        f.write(gzip.compress(content, mtime=0) if os.fspath(path).endswith(".gz") else content)


@dataclass
class Perplexity:
    sentences: int = 0
    words: int = 0
    oovs: int = 0
    logprob: float = 0.0  # log10, over in-vocabulary words and </s>

    @property
    def perplexity(self) -> float:
        scored = self.words - self.oovs + self.sentences
        return 10 ** (-self.logprob / scored) if scored else math.inf

    @property
    def oov_rate(self) -> float:
        return self.oovs / self.words if self.words else 0.0


def perplexity(model: ArpaModel, sentences: Iterable[list[str]]) -> Perplexity:
    """SRILM-style perplexity: OOV words are counted and skipped (their context is reset), </s> is
    scored."""
    vocab = model.vocabulary()
    result = Perplexity()
    for words in sentences:
        result.sentences += 1
        history: tuple[str, ...] = (BOS,)
        for word in words + [EOS]:
            if word != EOS:
                result.words += 1
            if word not in vocab:
                result.oovs += 1
                history = ()
                continue
            result.logprob += model.logprob(word, history)
            history = history + (word,)
    return result
