"""What GMM training reads from a lang dir, and the per-utterance training graphs built from it.

A training graph is Kaldi's compile-train-graphs output: H o C o L o (the transcript as a linear
word acceptor), built by kaldi_hmm_gmm's TrainingGraphCompiler. As compile-train-graphs does, it is
compiled without transition probabilities (transition and self-loop scales 0); the aligner adds the
current model's probabilities each time (Kaldi's gmm-align-compiled), since they change every pass.
"""
from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from emasr.io.table import read_lines
from emasr.kaldi.fst import read_fst
from emasr.fst_stack import kaldi_hmm_gmm, kaldifst


log = logging.getLogger(__name__)


class TranscriptError(ValueError):
    """A transcript cannot become a training graph (e.g. a word missing from the lexicon)."""


def _require(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"expected file {path} to exist")
    return path


def read_int_sets(path: Path) -> list[list[int]]:
    """phones/sets.int, extra_questions.int: one set of integer ids per line."""
    return [[int(x) for x in line.split()] for line in read_lines(_require(path)) if line.split()]


def read_roots(path: Path) -> list[tuple[bool, bool, list[int]]]:
    """phones/roots.int lines ``shared|not-shared split|not-split phone...``
    -> [(shared, split, phones)]."""
    roots = []
    for number, line in enumerate(read_lines(_require(path)), 1):
        fields = line.split()
        if len(fields) < 3 or fields[0] not in ("shared", "not-shared") or \
                fields[1] not in ("split", "not-split"):
            raise ValueError(f"{path}:{number}: expected 'shared|not-shared split|not-split "
                             f"phone...', got '{line}'")
        roots.append((fields[0] == "shared", fields[1] == "split", [int(x) for x in fields[2:]]))
    return roots


@dataclass
class LangDir:
    """The parts of a Kaldi lang dir that GMM training uses."""
    path: Path
    words: dict[str, int]
    phones: dict[int, str]
    disambig: list[int]
    silence: list[int]
    topo_text: str
    oov: int | None = None            # oov.int: the word a transcript's unknown words map to
    oov_counts: Counter = field(default_factory=Counter, repr=False)   # unknown word -> times
    _topology: kaldi_hmm_gmm.HmmTopology | None = field(default=None, repr=False)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LangDir":
        path = Path(path)
        words = {w: int(i) for w, i in (line.split() for line in
                                        read_lines(_require(path / "words.txt")))}
        phones = {int(i): p for p, i in (line.split() for line in
                                         read_lines(_require(path / "phones.txt")))}
        disambig = [int(x) for x in read_lines(_require(path / "phones" / "disambig.int"))]
        silence = [int(x) for x in
                   read_lines(_require(path / "phones" / "silence.csl"))[0].split(":") if x]
        oov = int(read_lines(path / "oov.int")[0]) if (path / "oov.int").is_file() else None
        return cls(path, words, phones, disambig, silence, _require(path / "topo").read_text(), oov)

    @property
    def topology(self) -> kaldi_hmm_gmm.HmmTopology:
        if self._topology is None:
            topo = kaldi_hmm_gmm.HmmTopology()
            topo.read(self.topo_text)
            self._topology = topo
        return self._topology

    def word_ids(self, words: list[str]) -> list[int]:
        """The words' ids; a word not in words.txt maps to the lang's OOV word and is counted
        (Kaldi's `sym2int.pl --map-oov`), or without oov.int is a TranscriptError."""
        missing = [w for w in words if w not in self.words]
        if missing and self.oov is None:
            raise TranscriptError(f"word(s) not in {self.path}/words.txt and no "
                                  f"{self.path}/oov.int to map them to: {' '.join(missing)}")
        self.oov_counts.update(missing)
        return [self.words.get(w, self.oov) for w in words]

    def log_oov_summary(self) -> None:
        if self.oov_counts:
            first = ", ".join(f"{w} ({n})" for w, n in self.oov_counts.most_common(10))
            log.warning("%d occurrence(s) of %d word(s) not in %s/words.txt mapped to the OOV "
                        "word (oov.int %d): %s", sum(self.oov_counts.values()),
                        len(self.oov_counts), self.path, self.oov, first)

    def phone_sets(self, name: str) -> list[list[int]]:
        return read_int_sets(self.path / "phones" / name)


class GraphCompiler:
    """Training graphs for transcripts, for one transition model and tree.

    kaldi_hmm_gmm's TrainingGraphCompiler keeps references to the tree and L.fst without owning
    them: this object holds both for as long as the compiler lives (else Python crashes).
    """

    def __init__(self, lang: LangDir, transition_model, tree):
        self.lang = lang
        self._tree = tree
        self._lexicon = read_fst(lang.path / "L.fst")
        kaldifst.arcsort(self._lexicon, sort_type="olabel")
        self._transition_model = transition_model
        options = kaldi_hmm_gmm.TrainingGraphCompilerOptions()
        options.transition_scale = 0.0  # compile-train-graphs' defaults: the aligner adds them
        options.self_loop_scale = 0.0
        self._compiler = kaldi_hmm_gmm.TrainingGraphCompiler(
            transition_model, tree, self._lexicon, lang.disambig, options)

    def compile(self, transcript: str):
        """The graph of a transcript (space-separated words); TranscriptError for unknown words."""
        words = transcript.split()
        if not words:
            raise TranscriptError("empty transcript")
        graph = self._compiler.compile_graph_from_text(self.lang.word_ids(words))
        if graph.num_states == 0:
            raise TranscriptError("the transcript has no path through L.fst")
        return graph
