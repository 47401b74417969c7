#!/usr/bin/env python3
"""Speed of the corpus simulator per process, and the audio hours each profile makes.

Synthesizes --utts queries of the tiny profile's plan in this one process (one espeak instance)
and reports, in times real time (seconds of audio made per second of wall clock):
  espeak   espeak-ng synthesis alone (22050 Hz)
  full     synthesis + resampling to 16 kHz + degradation (what each --nj worker does per utterance)
Target: full >= 100x. Then, from the mean measured duration per utterance, the audio hours of
train/dev/test for every profile.

Usage: python bench/simulate.py [--utts 60] [--seed 1]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from emasr.corpus.config import PROFILES, profile_config
from emasr.corpus.espeak import process_espeak
from emasr.corpus.pinyin import word_syllables
from emasr.corpus.simulate import make_plan, rng_for
from emasr.corpus.speakers import SETS
from emasr.corpus.synth import SAMPLE_RATE, synthesize_utterance, utterance_voice


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--utts", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    config = profile_config("tiny")
    plan = make_plan(config, args.seed)
    speakers = {s.id: s for name in SETS for s in plan.speakers[name]}
    jobs = [(speakers[spk], [s for w in words for s in word_syllables(w)])
            for name in SETS for _, spk, words in plan.utterances[name]][:args.utts]
    espeak, rng = process_espeak(), rng_for(args.seed, "audio", 0)
    babble = [np.random.default_rng(i).standard_normal(SAMPLE_RATE * 5).astype(np.float32) * 0.1
              for i in range(8)]   # stand-in clips: the babble mixing cost, not its content

    start, espeak_seconds = time.perf_counter(), 0.0
    for speaker, syllables in jobs:
        synthesis = espeak.synthesize(" ".join(syllables), utterance_voice(speaker, 0.1, 8, rng))
        espeak_seconds += len(synthesis.audio) / synthesis.sample_rate
    espeak_wall = time.perf_counter() - start

    start, full_seconds = time.perf_counter(), 0.0
    for speaker, syllables in jobs:
        audio, _ = synthesize_utterance(espeak, speaker, syllables, babble, config, rng)
        full_seconds += len(audio) / SAMPLE_RATE
    full_wall = time.perf_counter() - start

    mean = full_seconds / len(jobs)
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(speeds are per process and drop when other jobs share the CPUs)")
    print(f"utterances: {len(jobs)}, mean duration {mean:.2f} s (with leading/trailing silence)")
    print(f"espeak only : {espeak_seconds / espeak_wall:7.1f}x real time per process")
    print(f"full (16 kHz, degraded): {full_seconds / full_wall:7.1f}x real time per process "
          f"(target >= 100x)")
    print(f"{'profile':8s} {'train h':>8s} {'dev min':>8s} {'test min':>9s} {'spk tr/dv/ts':>14s}")
    for name in PROFILES:
        c = profile_config(name)
        train = c.train_speakers * c.train_utts_per_speaker * mean / 3600
        dev = c.dev_speakers * c.eval_utts_per_speaker * mean / 60
        test = c.test_speakers * c.eval_utts_per_speaker * mean / 60
        print(f"{name:8s} {train:8.2f} {dev:8.1f} {test:9.1f} "
              f"{c.train_speakers:>6d}/{c.dev_speakers}/{c.test_speakers}")


if __name__ == "__main__":
    main()
