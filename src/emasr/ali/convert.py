"""Kaldi's convert-ali: alignments of one model and tree -> alignments of another model and tree.

Each utterance's alignment is split into phone instances (Kaldi's SplitToPhones) and checked to be a
path through the old model's HMMs; then each phone gets its new length and a path through the new
model's HMM for that phone, with the pdfs the new tree gives it in its context (the neighbouring
phones of the alignment, 0 beyond the utterance's ends: triphone context for a triphone tree).
The topologies may differ (e.g. Kaldi's 3-state GMM alignments -> the one-frame skip topology).

Lengths (Kaldi's ConvertAlignment / ComputeNewPhoneLengths):
- factor 1: unchanged;
- ``--frame-subsampling-factor F``: the phone boundaries b (cumulative 10 ms frame counts) map to
  ``floor((b + F - 1 - c) / F)`` where c is the 10 ms frame that represents each window of F:
  c = F // 2 with ``--subsample-at centre`` (this toolkit's stacking: the label of the centre frame,
  FeaturePipeline.subsample_labels), c = 0 with ``--subsample-at start`` (Kaldi's subsample-feats
  and convert-ali, i.e. ``ceil(b / F)``). The utterance's end maps to ``ceil(T / F)``, the length of
  the stacked features, so the new phone lengths sum to ``ceil(T / F)`` with either rule;
- ``--frame-upsampling-factor U`` (the way back, not in Kaldi): every length times U.
A phone whose new length is below its new topology's minimum (0 frames, or under 3 for a 3-state
phone) borrows one frame at a time from the nearest phone with a frame to spare, left or right
(Kaldi's rule); an utterance whose frames cannot hold all its phones is not converted.

Paths: when the phone's old and new HMMs are the same and its length is unchanged, the old HMM-state
path is kept (the plain convert-ali of a triphone system's first pass). Otherwise the path is the
one of the right length closest to an even split of the frames over the HMM's states (least squares
between each frame's and its state's relative position): Kaldi draws a random path instead
(GetRandomAlignmentForPhone); a deterministic one makes conversions reproducible. Output is
reordered (self-loops after the forward transition of their state) unless ``--reorder false``,
as Kaldi's.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import lru_cache

import click
import numpy as np

from emasr.feats.pipeline import SUBSAMPLE_AT
from emasr.kaldi.transitions import HmmState, TransitionTable

log = logging.getLogger(__name__)


class ConversionError(ValueError):
    """An alignment cannot be converted: models, tree and alignment do not belong together."""


class UnfitError(ConversionError):
    """An utterance has too few frames at the new rate for its phones' minimum lengths."""


@dataclass(frozen=True)
class PhoneSegment:
    """One phone instance of an alignment: the phone and the HMM state of each of its frames."""
    phone: int
    states: tuple[int, ...]


# -- reading the old alignment --

def split_phones(table: TransitionTable, alignment: np.ndarray) -> list[PhoneSegment]:
    """Phone instances of an alignment, checked to be paths through the table's HMMs."""
    alignment = np.asarray(alignment)
    if len(alignment) == 0:
        raise ConversionError("empty alignment")
    bad = table.check_ids(alignment)
    if bad is not None:
        raise ConversionError(f"transition id {int(alignment[bad])} at frame {bad} is outside the "
                              f"model's 1..{table.num_transition_ids}")
    hmm = _id2hmm_state(table)[alignment]
    loop = table.self_loop[alignment]
    phone = table.id2phone[alignment]
    phone_start = table.phone_starts(alignment)
    starts = np.flatnonzero(phone_start)
    ends = np.append(starts[1:], len(alignment))
    changed = np.flatnonzero(phone[1:] != np.repeat(phone[starts], ends - starts)[1:]) + 1
    if len(changed):
        t = int(changed[0])
        raise ConversionError(f"frame {t} has phone {int(phone[t])} inside an instance of phone "
                              f"{int(phone[t - 1])}: not a path through the model's HMMs")
    _check_state_paths(table, alignment, hmm, loop, phone_start)
    return [PhoneSegment(int(phone[a]), tuple(hmm[a:b].tolist())) for a, b in zip(starts, ends)]


def _check_state_paths(table: TransitionTable, alignment: np.ndarray, hmm: np.ndarray,
                       loop: np.ndarray, phone_start: np.ndarray) -> None:
    """Each phone starts in state 0; each run of one state has one forward transition (first when
    reordered, else last), and it leads to the next run's state, or to the final state at the
    phone's end."""
    n = len(alignment)
    run_start = phone_start.copy()
    run_start[1:] |= hmm[1:] != hmm[:-1]
    runs = np.flatnonzero(run_start)
    run_end = np.append(runs[1:], n) - 1
    first_of_phone = phone_start[runs]
    if np.any(hmm[runs[first_of_phone]] != 0):
        t = int(runs[first_of_phone][hmm[runs[first_of_phone]] != 0][0])
        raise ConversionError(f"the phone instance at frame {t} starts in HMM state {int(hmm[t])}, "
                              "not 0: not a path through the model's HMMs")
    forwards = np.add.reduceat((~loop).astype(np.int64), runs)
    exit_at = runs if table.is_reordered(alignment) else run_end
    last_of_phone = np.append(first_of_phone[1:], True)
    next_state = np.append(hmm[runs[1:]], -1)
    ok = (forwards == 1) & ~loop[exit_at]
    ok &= np.where(last_of_phone, table.final[alignment[exit_at]],
                   table.dest_state[alignment[exit_at]] == next_state)
    if not ok.all():
        r = int(np.flatnonzero(~ok)[0])
        first = int(runs[r])
        raise ConversionError(f"frames {first}..{int(run_end[r])} (HMM state {int(hmm[first])} "
                              f"of phone {int(table.id2phone[alignment[first]])}) are not a path "
                              "through the model's HMMs")


def _id2hmm_state(table: TransitionTable) -> np.ndarray:
    states = np.array([-1] + [t.hmm_state for t in table.tuples], dtype=np.int32)
    return states[table.id2state]


# -- new lengths --

def subsampled_lengths(lengths: list[int], factor: int, subsample_at: str = "centre") -> list[int]:
    """Phone lengths at 1/factor of the frame rate (see the module doc for the rounding)."""
    if subsample_at not in SUBSAMPLE_AT:
        raise ValueError(f"subsample_at must be one of {SUBSAMPLE_AT}, got '{subsample_at}'")
    centre = factor // 2 if subsample_at == "centre" else 0
    bounds = np.cumsum([0] + list(lengths))
    new = (bounds + factor - 1 - centre) // factor
    new[-1] = -(-int(bounds[-1]) // factor)  # ceil(T / F): the stacked features' length
    return np.diff(new).tolist()


def ensure_min_lengths(lengths: list[int], minimum: list[int]) -> list[int] | None:
    """Kaldi's ComputeNewPhoneLengths repair: a phone below its minimum takes one frame at a time
    from the nearest phone (in frames between them) with one to spare, the left one on a tie;
    None when the utterance's frames cannot hold its phones."""
    lengths = list(lengths)
    if sum(lengths) < sum(minimum):
        return None
    changed = True
    while changed:
        changed = False
        for i in range(len(lengths)):
            while lengths[i] < minimum[i]:
                donor = _nearest_spare(lengths, minimum, i)
                if donor is None:
                    return None
                lengths[i] += 1
                lengths[donor] -= 1
                changed = True
    return lengths


def _nearest_spare(lengths: list[int], minimum: list[int], i: int) -> int | None:
    best, best_distance = None, None
    for direction in (-1, 1):
        distance, j = 0, i + direction
        while 0 <= j < len(lengths):
            if lengths[j] > minimum[j]:
                if best_distance is None or distance < best_distance:
                    best, best_distance = j, distance
                break
            distance += lengths[j]
            j += direction
    return best


def fit_lengths(lengths: list[int], entries: list[tuple[HmmState, ...]]) -> list[int]:
    """The lengths repaired so that each phone has its topology's minimum (ensure_min_lengths);
    UnfitError when the frames cannot hold the phones."""
    minimum = [min_length(list(e)) for e in entries]
    fitted = ensure_min_lengths(lengths, minimum)
    if fitted is None:
        raise UnfitError(f"{sum(lengths)} frames at the new rate cannot hold its {len(lengths)} "
                         f"phones, whose minimum lengths in the new topology sum to "
                         f"{sum(minimum)}")
    return fitted


# -- paths through an HMM --

def min_length(entry: list[HmmState]) -> int:
    """Fewest frames from state 0 to the final state (every transition of an emitting state is
    one frame)."""
    final = len(entry) - 1
    frontier, seen, frames = {0}, {0}, 0
    while frontier:
        frames += 1
        nxt = {d for s in frontier for d, _ in entry[s].transitions}
        if final in nxt:
            return frames
        frontier = nxt - seen
        seen |= nxt
    raise ConversionError("a topology entry has no path to its final state")


@lru_cache(maxsize=4096)
def even_state_path(entry: tuple[HmmState, ...], length: int) -> tuple[int, ...] | None:
    """The path of `length` frames from state 0 to the final state whose states' relative
    positions are closest (least squares) to the frames'; None when there is none."""
    final = len(entry) - 1
    successors = [[d for d, _ in s.transitions] for s in entry[:final]]
    target = (np.arange(final) + 0.5) / final
    position = (np.arange(length) + 0.5) / length
    cost = np.full((length, final), np.inf)
    back = np.full((length, final), -1, dtype=np.int64)
    cost[0, 0] = (position[0] - target[0]) ** 2
    for t in range(1, length):
        for s in np.flatnonzero(np.isfinite(cost[t - 1])):
            for d in successors[s]:
                if d == final:
                    continue
                value = cost[t - 1, s] + (position[t] - target[d]) ** 2
                if value < cost[t, d] - 1e-12:
                    cost[t, d], back[t, d] = value, s
    ends = [s for s in range(final) if final in successors[s] and np.isfinite(cost[-1, s])]
    if not ends:
        return None
    state = min(ends, key=lambda s: cost[-1, s])
    path = [state]
    for t in range(length - 1, 0, -1):
        state = int(back[t, state])
        path.append(state)
    return tuple(reversed(path))


# -- the converter --

class AlignmentConverter:
    """Converts alignments of the `old` transition model to the `new` one and its `tree`."""

    def __init__(self, old: TransitionTable, new: TransitionTable, tree, subsample: int = 1,
                 upsample: int = 1, subsample_at: str = "centre", reorder: bool = True,
                 phone_map: dict[int, int] | None = None):
        if subsample < 1 or upsample < 1 or (subsample > 1 and upsample > 1):
            raise ConversionError(f"frame subsampling factor {subsample} and upsampling factor "
                                  f"{upsample}: each must be >= 1, and at most one above 1")
        if subsample_at not in SUBSAMPLE_AT:
            raise ConversionError(f"--subsample-at must be one of {SUBSAMPLE_AT}")
        self.old, self.new, self.tree = old, new, tree
        self.subsample, self.upsample, self.subsample_at = subsample, upsample, subsample_at
        self.reorder = reorder
        self.phone_map = phone_map if phone_map is not None else self._identity_map()
        unknown = sorted(set(self.phone_map.values()) - set(new.topology.phones))
        if unknown:
            raise ConversionError(f"the phone map gives phones {unknown[:10]}, which the new "
                                  "model's topology does not have")
        if tree.num_pdfs != new.num_pdfs:
            raise ConversionError(f"the new tree has {tree.num_pdfs} pdfs but the new model "
                                  f"{new.num_pdfs}: the tree is not the new model's")
        self.width, self.central = tree.context_width, tree.central_position
        self.tstate = {(t.phone, t.hmm_state, t.forward_pdf, t.self_loop_pdf): i
                       for i, t in enumerate(new.tuples, 1)}
        self._encoders: dict[tuple[int, ...], dict[tuple[int, int], int]] = {}

    def _identity_map(self) -> dict[int, int]:
        old, new = set(self.old.topology.phones), set(self.new.topology.phones)
        if old != new:
            only_old, only_new = sorted(old - new), sorted(new - old)
            raise ConversionError(
                f"the phone sets differ: phones {only_old[:10]} are only in the old model, "
                f"{only_new[:10]} only in the new one (give a phone map)")
        return {p: p for p in old}

    def convert(self, alignment: np.ndarray) -> np.ndarray:
        """The new alignment; ConversionError (UnfitError when the frames cannot hold the
        phones) with what went wrong."""
        try:
            segments = split_phones(self.old, alignment)
        except ConversionError as err:
            raise ConversionError(f"{err}; the alignment does not match the old model") from None
        phones = []
        for seg in segments:
            if seg.phone not in self.phone_map:
                raise ConversionError(f"phone {seg.phone} has no entry in the phone map")
            phones.append(self.phone_map[seg.phone])
        entries = [tuple(self.new.topology.entry_for(p)) for p in phones]
        lengths = self.new_lengths([len(s.states) for s in segments], entries)
        kept = [seg.states if (length == len(seg.states)
                               and tuple(self.old.topology.entry_for(seg.phone)) == entry)
                else None for seg, entry, length in zip(segments, entries, lengths)]
        return self.encode_phones(phones, lengths, kept)

    def new_lengths(self, lengths: list[int], entries: list[tuple[HmmState, ...]]) -> list[int]:
        if self.subsample > 1:
            new = subsampled_lengths(lengths, self.subsample, self.subsample_at)
        else:
            new = [n * self.upsample for n in lengths]
        return fit_lengths(new, entries)

    def encode_phones(self, phones: list[int], lengths: list[int],
                      paths: list[tuple[int, ...] | None] | None = None) -> np.ndarray:
        """The new model's alignment of `phones` with these lengths: each phone's HMM-state path
        from `paths` where one is given (not None), else the even split of its frames."""
        out: list[int] = []
        for i, (phone, length) in enumerate(zip(phones, lengths)):
            window = [phones[j] if 0 <= j < len(phones) else 0
                      for j in range(i - self.central, i - self.central + self.width)]
            path = paths[i] if paths is not None else None
            if path is None:
                path = even_state_path(tuple(self.new.topology.entry_for(phone)), length)
            out.extend(self.encode(window, path))
        return np.asarray(out, dtype=np.int32)

    def encode(self, window: list[int], path: tuple[int, ...]) -> list[int]:
        """Transition ids of an HMM-state path of the window's central phone."""
        tids = self._encoder(tuple(window))
        final = len(self.new.topology.entry_for(window[self.central])) - 1
        out: list[int] = []
        start = 0
        while start < len(path):
            state = path[start]
            end = start
            while end + 1 < len(path) and path[end + 1] == state:
                end += 1
            following = path[end + 1] if end + 1 < len(path) else final
            loops = [tids[(state, state)]] * (end - start)
            forward = tids[(state, following)]
            out.extend([forward] + loops if self.reorder else loops + [forward])
            start = end + 1
        return out

    def _encoder(self, window: tuple[int, ...]) -> dict[tuple[int, int], int]:
        """(HMM state, destination) -> new transition id, for the central phone in its window."""
        if window in self._encoders:
            return self._encoders[window]
        phone = window[self.central]
        mapping = {}
        for number, state in enumerate(self.new.topology.entry_for(phone)[:-1]):
            pdfs = []
            for pdf_class in (state.forward_pdf_class, state.self_loop_pdf_class):
                ok, pdf = self.tree.compute(list(window), pdf_class)
                if not ok:
                    raise ConversionError(f"the new tree has no pdf for phone {phone} in context "
                                          f"{list(window)}, pdf class {pdf_class}")
                pdfs.append(pdf)
            tstate = self.tstate.get((phone, number, pdfs[0], pdfs[1]))
            if tstate is None:
                raise ConversionError(f"the new model has no transition state for phone {phone}, "
                                      f"HMM state {number}, pdfs {pdfs}: the tree is not the new "
                                      "model's")
            first = int(self.new.state2id[tstate])
            for index, (dest, _) in enumerate(state.transitions):
                mapping[(number, dest)] = first + index
        self._encoders[window] = mapping
        return mapping


def read_phone_map(path: str | os.PathLike) -> dict[int, int]:
    """Kaldi's --phone-map file: lines ``old-phone new-phone`` (integers)."""
    mapping = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 2 or not all(x.isdigit() for x in fields):
                raise ConversionError(f"{path}:{number}: expected 'old-phone new-phone', got "
                                      f"'{line.strip()}'")
            mapping[int(fields[0])] = int(fields[1])
    return mapping


# -- command line --

def convert_file(converter: AlignmentConverter, ali_in: str, ali_out: str,
                 max_failed: float) -> tuple[int, int]:
    """Convert one archive; (converted, not converted). An utterance whose frames cannot hold
    its phones is logged and left out; any other problem stops with the file and utterance."""
    from emasr.kaldi.alignments import AlignmentError, iter_alignment_file
    from emasr.kaldi.alignments import AlignmentWriter

    writer = AlignmentWriter(ali_out)
    done, failed, ok = 0, 0, False
    try:
        for utt, alignment in iter_alignment_file(ali_in):
            try:
                writer.write(utt, converter.convert(alignment))
                done += 1
            except UnfitError as err:
                log.warning("%s: utterance %s not converted: %s", ali_in, utt, err)
                failed += 1
            except ConversionError as err:
                raise ConversionError(f"{ali_in}: utterance {utt}: {err}") from None
        total = done + failed
        if total == 0:
            raise ConversionError(f"{ali_in}: no alignments")
        if failed > max_failed * total or done == 0:
            raise ConversionError(f"{ali_in}: {failed} of {total} utterances could not be "
                                  f"converted (more than --max-failed {max_failed:g}); see the "
                                  "warnings above")
        ok = True
    except AlignmentError as err:
        raise ConversionError(str(err)) from None
    finally:
        writer.close(ok)
    return done, failed


@click.command("convert-ali")
@click.option("--frame-subsampling-factor", "subsample", type=int, default=1, show_default=True,
              help="Write the alignments at 1/F of the old frame rate (e.g. 3 for 30 ms).")
@click.option("--frame-upsampling-factor", "upsample", type=int, default=1, show_default=True,
              help="Write them at U times the old frame rate (the way back from 30 ms).")
@click.option("--subsample-at", type=click.Choice(SUBSAMPLE_AT), default="centre",
              show_default=True, help="Which 10 ms frame of each window of F stands for it: the "
              "centre (this toolkit's frame stacking) or the start (Kaldi's subsample-feats).")
@click.option("--reorder", type=click.BOOL, default=True, show_default=True,
              help="Write self-loops after the forward transition of their state, as Kaldi's "
              "graphs do.")
@click.option("--phone-map", type=click.Path(dir_okay=False, exists=True), default=None,
              help="File of 'old-phone new-phone' lines (needed when the phone sets differ).")
@click.option("--max-failed", type=float, default=0.1, show_default=True,
              help="Fail when more than this fraction of the utterances cannot be converted.")
@click.argument("old_model", type=click.Path(dir_okay=False, exists=True))
@click.argument("new_model", type=click.Path(dir_okay=False, exists=True))
@click.argument("new_tree", type=click.Path(dir_okay=False, exists=True))
@click.argument("ali_in", type=click.Path(dir_okay=False, exists=True))
@click.argument("ali_out", type=click.Path(dir_okay=False))
def convert_ali_cli(subsample, upsample, subsample_at, reorder, phone_map, max_failed,
                    old_model, new_model, new_tree, ali_in, ali_out):
    """Convert the alignments ALI_IN of OLD_MODEL to NEW_MODEL and NEW_TREE (Kaldi's convert-ali;
    the topologies may differ), optionally at another frame rate."""
    from emasr.kaldi.io import KaldiFormatError
    from emasr.kaldi.model_io import read_tree
    from emasr.kaldi.transitions import load_transition_table

    try:
        converter = AlignmentConverter(
            load_transition_table(old_model), load_transition_table(new_model),
            read_tree(new_tree), subsample, upsample, subsample_at, reorder,
            read_phone_map(phone_map) if phone_map else None)
        done, failed = convert_file(converter, ali_in, ali_out, max_failed)
    except (ConversionError, KaldiFormatError) as err:
        raise click.ClickException(f"{err} (old model {old_model}, new model {new_model})"
                                   ) from None
    log.info("converted %d alignments (%d could not be converted) from %s to %s", done, failed,
             ali_in, ali_out)
