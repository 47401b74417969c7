"""Kaldi's HMM topology and transition model as plain Python data: no C++ bindings needed.

A transition model is a sorted list of tuples (phone, hmm_state, forward_pdf, self_loop_pdf), one
per *transition state*, over an HMM topology. Transition ids are numbered from 1 by walking the
tuples in order and giving each the ids of its topology state's outgoing transitions, in the
topology's order (Kaldi's TransitionModel::ComputeDerived). A self-loop transition id emits the
tuple's self-loop pdf, any other its forward pdf. This module reproduces that numbering so tools
that need only ``transition id -> pdf`` (alignment ingestion, ali-info) work from the file alone;
emasr.kaldi.model_io builds the kaldi_hmm_gmm objects on top of it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from emasr.kaldi.io import KaldiFormatError, KaldiReader, KaldiWriter

NO_PDF = -1


@dataclass(frozen=True)
class HmmState:
    """One state of a topology entry: its pdf classes and (destination, probability) arcs."""
    forward_pdf_class: int
    self_loop_pdf_class: int
    transitions: tuple[tuple[int, float], ...]


@dataclass
class Topology:
    """Kaldi's HmmTopology: entries of HMM states, and which entry each phone uses."""
    phones: list[int]
    phone2idx: list[int]
    entries: list[list[HmmState]]

    def entry_for(self, phone: int) -> list[HmmState]:
        if phone < 0 or phone >= len(self.phone2idx) or self.phone2idx[phone] < 0:
            raise KeyError(f"phone {phone} is not covered by the topology")
        return self.entries[self.phone2idx[phone]]

    def is_hmm(self) -> bool:
        """True when every state emits one pdf class (no separate self-loop pdf class)."""
        return all(s.forward_pdf_class == s.self_loop_pdf_class
                   for entry in self.entries for s in entry)

    def num_pdf_classes(self, phone: int) -> int:
        return 1 + max(max(s.forward_pdf_class, s.self_loop_pdf_class)
                       for s in self.entry_for(phone))

    def phones_of_entry(self, index: int) -> list[int]:
        return [p for p, i in enumerate(self.phone2idx) if i == index]

    def check(self, where: str = "topology") -> None:
        """The structural checks of Kaldi's HmmTopology::Check that matter for numbering."""
        if not self.entries or not self.phones:
            raise ValueError(f"{where}: empty topology")
        for phone in self.phones:
            self.entry_for(phone)
        for index, entry in enumerate(self.entries):
            if len(entry) < 2 or entry[-1].transitions or entry[-1].forward_pdf_class != NO_PDF:
                raise ValueError(f"{where}: entry {index} must end in one non-emitting final "
                                 "state without transitions")
            for number, state in enumerate(entry):
                for dest, prob in state.transitions:
                    if not 0 <= dest < len(entry) or prob <= 0:
                        raise ValueError(f"{where}: entry {index} state {number} has a bad "
                                         f"transition to {dest} with probability {prob}")

    def to_text(self) -> str:
        """The topology in Kaldi's text form (as in lang/topo), which kaldi_hmm_gmm can read."""
        writer = KaldiWriter(binary=False)
        write_topology(writer, self)
        return writer.getvalue().decode("utf-8")


@dataclass(frozen=True)
class TransitionTuple:
    phone: int
    hmm_state: int
    forward_pdf: int
    self_loop_pdf: int


@dataclass
class TransitionTable:
    """A Kaldi TransitionModel's content plus its derived numbering (all arrays indexed by id).

    ``log_probs[tid]`` is the transition's log probability (entry 0 unused, as in Kaldi).
    """
    topology: Topology
    tuples: list[TransitionTuple]
    log_probs: np.ndarray
    state2id: np.ndarray = field(init=False)   # transition state (1-based) -> first id; + sentinel
    id2state: np.ndarray = field(init=False)   # transition id -> transition state (0 for id 0)
    id2pdf: np.ndarray = field(init=False)     # transition id -> pdf id (-1 for id 0)
    self_loop: np.ndarray = field(init=False)  # transition id -> is a self-loop
    dest_state: np.ndarray = field(init=False)  # transition id -> destination HMM state
    id2phone: np.ndarray = field(init=False)   # transition id -> phone (0 for id 0)
    final: np.ndarray = field(init=False)      # transition id -> enters the HMM's final state
    num_pdfs: int = field(init=False)

    def __post_init__(self) -> None:
        self._compute_derived()
        expected = self.num_transition_ids + 1
        if len(self.log_probs) != expected:
            raise ValueError(f"transition model has {self.num_transition_ids} transition ids but "
                             f"{len(self.log_probs)} log-probs (expected {expected}, entry 0 "
                             "unused)")
        probs = np.asarray(self.log_probs[1:])
        if not np.all(np.isfinite(probs)) or np.any(probs > 0):
            bad = int(np.flatnonzero(~np.isfinite(probs) | (probs > 0))[0]) + 1
            raise ValueError(f"transition id {bad} has log-prob {self.log_probs[bad]}; "
                             "expected a finite value <= 0 (Kaldi's TransitionModel::Check)")

    def _compute_derived(self) -> None:
        state2id = [0, 1]
        id2state, id2pdf, self_loop, dest = [0], [-1], [False], [-1]
        id2phone, final = [0], [False]
        num_pdfs = 0
        for tstate, tup in enumerate(self.tuples, 1):
            try:
                hmm_state = self.topology.entry_for(tup.phone)[tup.hmm_state]
            except (KeyError, IndexError):
                raise ValueError(f"transition tuple {tstate} {tup} does not match the "
                                 "topology (no such phone or HMM state)") from None
            num_pdfs = max(num_pdfs, tup.forward_pdf + 1, tup.self_loop_pdf + 1)
            num_states = len(self.topology.entry_for(tup.phone))
            for destination, _ in hmm_state.transitions:
                is_loop = destination == tup.hmm_state
                id2phone.append(tup.phone)
                final.append(destination == num_states - 1)
                id2state.append(tstate)
                id2pdf.append(tup.self_loop_pdf if is_loop else tup.forward_pdf)
                self_loop.append(is_loop)
                dest.append(destination)
            state2id.append(len(id2state))
        self.state2id = np.array(state2id, dtype=np.int32)
        self.id2state = np.array(id2state, dtype=np.int32)
        self.id2pdf = np.array(id2pdf, dtype=np.int32)
        self.self_loop = np.array(self_loop, dtype=bool)
        self.dest_state = np.array(dest, dtype=np.int32)
        self.id2phone = np.array(id2phone, dtype=np.int32)
        self.final = np.array(final, dtype=bool)
        self.num_pdfs = num_pdfs

    @property
    def num_transition_ids(self) -> int:
        return len(self.id2state) - 1

    @property
    def num_transition_states(self) -> int:
        return len(self.tuples)

    def is_reordered(self, alignment: np.ndarray) -> bool:
        """Whether an alignment puts each state's self-loops after its forward transition.

        Kaldi's graphs reorder by default, so a state's frames read "forward, loop, loop". Decided
        as Kaldi's IsReordered does: at the first change of transition state where either side is
        a self-loop, a self-loop before the change means reordered.
        """
        if len(alignment) == 0:
            return False
        loop = self.self_loop[alignment]
        tstate = self.id2state[alignment]
        change = np.flatnonzero(tstate[:-1] != tstate[1:])
        decisive = change[loop[change] | loop[change + 1]]
        if len(decisive):
            return bool(loop[decisive[0]])
        return bool(not loop[0] and loop[-1])

    def phone_starts(self, alignment: np.ndarray) -> np.ndarray:
        """Boolean mask of the frames where a phone instance starts (Kaldi's SplitToPhones).

        A phone ends with its transition into the HMM's final state; in a reordered alignment
        the self-loop frames that follow that transition still belong to the phone.
        """
        n = len(alignment)
        starts = np.zeros(n, dtype=bool)
        if n == 0:
            return starts
        finals = np.flatnonzero(self.final[alignment])
        if self.is_reordered(alignment):
            # first non-self-loop position at or after each index (n when there is none)
            positions = np.where(self.self_loop[alignment], n, np.arange(n))
            next_forward = np.append(np.minimum.accumulate(positions[::-1])[::-1], n)
            ends = next_forward[finals + 1]
        else:
            ends = finals + 1
        starts[0] = True
        starts[ends[ends < n]] = True
        return starts

    def check_ids(self, alignment: np.ndarray) -> int | None:
        """Index of the first transition id outside 1..num_transition_ids, or None."""
        bad = np.flatnonzero((alignment < 1) | (alignment > self.num_transition_ids))
        return int(bad[0]) if len(bad) else None


# -- Kaldi serialization (src/hmm/hmm-topology.cc, transition-model.cc) --

def read_topology(reader: KaldiReader) -> Topology:
    reader.expect_token("<Topology>")
    topology = _read_topology_binary(reader) if reader.binary else _read_topology_text(reader)
    try:
        topology.check(f"{reader.name}: topology")
    except ValueError as err:
        raise KaldiFormatError(str(err)) from None
    return topology


def _read_topology_binary(reader: KaldiReader) -> Topology:
    phones = reader.read_int_vector("the topology's phones")
    phone2idx = reader.read_int_vector("the topology's phone-to-entry map")
    num_entries = reader.read_int("the number of topology entries")
    is_hmm = num_entries != -1  # -1 announces the format with separate self-loop pdf classes
    if not is_hmm:
        num_entries = reader.read_int("the number of topology entries")
    entries = []
    for _ in range(num_entries):
        states = []
        for _ in range(reader.read_int("the number of HMM states")):
            forward = reader.read_int("a pdf class")
            self_loop = forward if is_hmm else reader.read_int("a self-loop pdf class")
            arcs = tuple((reader.read_int("a destination state"),
                          reader.read_float("a transition probability"))
                         for _ in range(reader.read_int("the number of transitions")))
            states.append(HmmState(forward, self_loop, arcs))
        entries.append(states)
    reader.expect_token("</Topology>")
    return Topology(phones, phone2idx, entries)


def _read_topology_text(reader: KaldiReader) -> Topology:
    phones: list[int] = []
    phone2idx: list[int] = []
    entries = []
    while reader.expect_token("<TopologyEntry>", "</Topology>") == "<TopologyEntry>":
        reader.expect_token("<ForPhones>")
        entry_phones = []
        while (word := reader.read_token()) != "</ForPhones>":
            try:
                entry_phones.append(int(word))
            except ValueError:
                raise reader.error(f"expected a phone id or </ForPhones>, got '{word}'") from None
        entries.append(_read_text_states(reader))
        for phone in entry_phones:
            if phone <= 0 or (phone < len(phone2idx) and phone2idx[phone] != -1):
                raise reader.error(f"phone {phone} is invalid or in two topology entries")
            phone2idx.extend([-1] * (phone + 1 - len(phone2idx)))
            phone2idx[phone] = len(entries) - 1
            phones.append(phone)
    return Topology(sorted(phones), phone2idx, entries)


def _read_text_states(reader: KaldiReader) -> list[HmmState]:
    states = []
    while reader.expect_token("<State>", "</TopologyEntry>") == "<State>":
        number = reader.read_int("a state number")
        if number != len(states):
            raise reader.error(f"states must be numbered in order: expected {len(states)}, "
                               f"got {number}")
        token = reader.read_token()
        forward = self_loop = NO_PDF
        if token == "<PdfClass>":
            forward = self_loop = reader.read_int("a pdf class")
            token = reader.read_token()
        elif token == "<ForwardPdfClass>":
            forward = reader.read_int("a forward pdf class")
            reader.expect_token("<SelfLoopPdfClass>")
            self_loop = reader.read_int("a self-loop pdf class")
            token = reader.read_token()
        arcs = []
        while token == "<Transition>":
            arcs.append((reader.read_int("a destination state"),
                         reader.read_float("a transition probability")))
            token = reader.read_token()
        if token != "</State>":
            raise reader.error(f"expected <Transition> or </State>, got '{token}'")
        states.append(HmmState(forward, self_loop, tuple(arcs)))
    return states


def write_topology(writer: KaldiWriter, topology: Topology) -> None:
    is_hmm = topology.is_hmm()
    writer.write_token("<Topology>")
    writer.newline()
    if writer.binary:
        writer.write_int_vector(topology.phones)
        writer.write_int_vector(topology.phone2idx)
        if not is_hmm:
            writer.write_int(-1)
        writer.write_int(len(topology.entries))
        for entry in topology.entries:
            writer.write_int(len(entry))
            for state in entry:
                writer.write_int(state.forward_pdf_class)
                if not is_hmm:
                    writer.write_int(state.self_loop_pdf_class)
                writer.write_int(len(state.transitions))
                for dest, prob in state.transitions:
                    writer.write_int(dest)
                    writer.write_float(prob)
    else:
        for index, entry in enumerate(topology.entries):
            _write_text_entry(writer, topology.phones_of_entry(index), entry, is_hmm)
    writer.write_token("</Topology>")
    writer.newline()


def _write_text_entry(writer: KaldiWriter, phones: list[int], entry: list[HmmState],
                      is_hmm: bool) -> None:
    writer.write_token("<TopologyEntry>")
    writer.newline()
    writer.write_token("<ForPhones>")
    writer.newline()
    writer._text("".join(f"{p} " for p in phones) + "\n")
    writer.write_token("</ForPhones>")
    writer.newline()
    for number, state in enumerate(entry):
        writer.write_token("<State>")
        writer.write_int(number)
        if state.forward_pdf_class != NO_PDF:
            if is_hmm:
                writer.write_token("<PdfClass>")
                writer.write_int(state.forward_pdf_class)
            else:
                writer.write_token("<ForwardPdfClass>")
                writer.write_int(state.forward_pdf_class)
                writer.write_token("<SelfLoopPdfClass>")
                writer.write_int(state.self_loop_pdf_class)
        for dest, prob in state.transitions:
            writer.write_token("<Transition>")
            writer.write_int(dest)
            writer.write_float(prob)
        writer.write_token("</State>")
        writer.newline()
    writer.write_token("</TopologyEntry>")
    writer.newline()


def read_transition_table(reader: KaldiReader) -> TransitionTable:
    """Read a TransitionModel object (``<TransitionModel> ... </TransitionModel>``)."""
    reader.expect_token("<TransitionModel>")
    topology = read_topology(reader)
    kind = reader.expect_token("<Tuples>", "<Triples>")
    count = reader.read_int("the number of transition tuples")
    tuples = []
    for _ in range(count):
        phone = reader.read_int("a tuple's phone")
        hmm_state = reader.read_int("a tuple's HMM state")
        forward = reader.read_int("a tuple's pdf")
        self_loop = reader.read_int("a tuple's self-loop pdf") if kind == "<Tuples>" else forward
        tuples.append(TransitionTuple(phone, hmm_state, forward, self_loop))
    reader.expect_token("</Tuples>" if kind == "<Tuples>" else "</Triples>")
    if tuples != sorted(tuples, key=_tuple_key):
        raise reader.error("transition tuples are not sorted (Kaldi numbers ids over sorted "
                           "tuples)")
    reader.expect_token("<LogProbs>")
    log_probs = reader.read_float_vector("the transition log-probs").astype(np.float32)
    reader.expect_token("</LogProbs>")
    reader.expect_token("</TransitionModel>")
    try:
        return TransitionTable(topology, tuples, log_probs)
    except ValueError as err:
        raise KaldiFormatError(f"{reader.name}: {err}") from None


def _tuple_key(t: TransitionTuple) -> tuple[int, int, int, int]:
    return (t.phone, t.hmm_state, t.forward_pdf, t.self_loop_pdf)


def write_transition_table(writer: KaldiWriter, table: TransitionTable) -> None:
    is_hmm = table.topology.is_hmm()
    writer.write_token("<TransitionModel>")
    writer.newline()
    write_topology(writer, table.topology)
    writer.write_token("<Triples>" if is_hmm else "<Tuples>")
    writer.write_int(len(table.tuples))
    writer.newline()
    for t in table.tuples:
        writer.write_int(t.phone)
        writer.write_int(t.hmm_state)
        writer.write_int(t.forward_pdf)
        if not is_hmm:
            writer.write_int(t.self_loop_pdf)
        writer.newline()
    writer.write_token("</Triples>" if is_hmm else "</Tuples>")
    writer.newline()
    writer.write_token("<LogProbs>")
    writer.newline()
    writer.write_float_vector(np.asarray(table.log_probs, dtype=np.float32))
    writer.write_token("</LogProbs>")
    writer.newline()
    writer.write_token("</TransitionModel>")
    writer.newline()


def load_transition_table(path: str | os.PathLike) -> TransitionTable:
    """The transition model at the start of a Kaldi model file (final.mdl), bindings-free."""
    return read_transition_table(KaldiReader.open(path))
