"""The candidates dev chooses among, as the bootstrap's systems (emasr.report.intervals.System).

A row's model on one seed is chosen on dev twice over: among the models of its family the run
kept (the EMA per half-life) and among the scoring settings (LM weight, insertion penalty). Each
candidate is one kept model at one setting that both dev and test were scored at; the recorded
choice (the model `NetworkRun.chosen` picked, at its best dev setting) comes first, so that on the
data as they are the bootstrap chooses what the table shows (the first of equal dev errors).
Where a decode has no counts of every setting (an older scoring layout, counts of version 1), the
seed has one candidate: the recorded setting, held fixed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emasr.report.intervals import SetCounts, System
from emasr.report.scoring import Sweep
from emasr.report.systems import TunedDecodes


@dataclass(frozen=True)
class Pick:
    """One candidate on one set: a sweep and the index of one of its settings."""
    sweep: Sweep
    index: int


def sweep_pick(sweep: Sweep | None, setting: str) -> Pick | None:
    if sweep is None or setting not in sweep.settings:
        return None
    return Pick(sweep, sweep.settings.index(setting))


def rechoosable(tuned: TunedDecodes) -> bool:
    dev, test = tuned.dev, tuned.test
    return (dev is not None and test is not None and dev.sweep is not None
            and test.sweep is not None and dev.setting in dev.sweep.settings
            and dev.setting in test.sweep.settings)


def seed_picks(candidates: list[TunedDecodes]) -> list[tuple[Pick | None, Pick | None]]:
    """(dev, test) picks of one seed's candidates: every setting of every kept model dev and test
    were both scored at, the recorded choice first; else the recorded setting alone."""
    if not candidates:
        return []
    if not rechoosable(candidates[0]):
        first = candidates[0]
        dev = sweep_pick(first.dev.own_sweep(), first.dev.setting) if first.dev else None
        test = sweep_pick(first.test.own_sweep(), first.test.setting) if first.test else None
        return [(dev, test)] if dev or test else []
    picks = []
    for tuned in filter(rechoosable, candidates):
        dev, test = tuned.dev, tuned.test
        settings = [dev.setting] + [s for s in dev.sweep.settings
                                    if s != dev.setting and s in test.sweep.settings]
        picks += [(sweep_pick(dev.sweep, s), sweep_pick(test.sweep, s)) for s in settings]
    return picks


def set_counts(per_seed: list[list[Pick]]) -> SetCounts:
    """Every seed's candidates on one set, on the utterances all of them were scored on; an
    utterance without a recorded speaker is its own cluster."""
    sweeps = list({id(p.sweep): p.sweep for picks in per_seed for p in picks}.values())
    shared = set(sweeps[0].utts).intersection(*(s.utts for s in sweeps[1:]))
    utts = tuple(sorted(shared))

    def columns(sweep: Sweep) -> np.ndarray | slice:
        if sweep.utts == utts:
            return slice(None)
        index = {u: i for i, u in enumerate(sweep.utts)}
        return np.array([index[u] for u in utts], dtype=np.int64)

    first = sweeps[0]
    where = columns(first)
    speakers = np.asarray(first.speakers, dtype=object)[where]
    clusters = tuple(s or u for s, u in zip(speakers, utts))
    errors = tuple(np.stack([p.sweep.errors[p.index][columns(p.sweep)] for p in picks])
                   for picks in per_seed)
    return SetCounts(utts, clusters, first.chars[where], errors)


def tuned_system(seeded: list[tuple[int, list[TunedDecodes]]]) -> System | None:
    """The bootstrap's system of a row (or of one model): per seed, its candidates' decodes, the
    recorded choice first. None where some seed has no per-utterance counts at all."""
    picks = [(seed, seed_picks(candidates)) for seed, candidates in seeded]
    if not picks or any(not p for _, p in picks):
        return None
    sets = {}
    for position, name in enumerate(("dev", "test")):
        per_seed = [[pair[position] for pair in p] for _, p in picks]
        usable = all(all(pick is not None for pick in seed) for seed in per_seed)
        sets[name] = set_counts(per_seed) if usable else None
    if sets["dev"] is None and sets["test"] is not None:
        # nothing to choose with: each seed's recorded test setting alone
        sets["test"] = set_counts([[p[0][1]] for _, p in picks]) \
            if all(p[0][1] is not None for _, p in picks) else None
    if sets["dev"] is None and sets["test"] is None:
        return None
    return System(tuple(seed for seed, _ in seeded), sets["dev"], sets["test"])
