#!/usr/bin/env python3
"""Feature extraction speed: the emasr job against kaldi-native-fbank called directly, same run.

Synthetic 16 kHz audio (noise with a pitched harmonic tone, so the pitch tracker has work to do) is
written as WAV files. For fbank and for MFCC+pitch it times
  - library: kaldi-native-fbank on samples already in memory (the reference), and
  - job: emasr's extraction job (read WAV from disk, compute, write the ark/scp), in this process,
and prints the speed in times real time for one job (one process, one core) and the ratio
job / library (targets: >= 0.90; fbank >= 200x real time). With --step it also times the whole
shell step (steps/make_fbank.sh --nj 1: process start-up, split, validation, merge) to show the
fixed per-run overhead. Each timing is the best of --repeats runs, interleaved; CPU time (this
process and its children) is reported beside wall time because it is stable on a shared machine.

Usage: . ./path.sh && python bench/features.py [--utts 40] [--seconds 5] [--repeats 3] [--step]
"""
from __future__ import annotations

import argparse
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import wave

import kaldi_native_fbank as knf
import numpy as np

from emasr.feats.extract import extract_job
from emasr.feats.fbank import FbankExtractor
from emasr.feats.mfcc_pitch import MfccPitchExtractor

RATE = 16000
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def synth(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    f0 = 120 + 40 * np.sin(2 * np.pi * 0.5 * t)  # a gliding voice-like pitch
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    tone = sum(np.sin(h * phase) / h for h in range(1, 6))
    return (3000 * tone + 300 * rng.standard_normal(len(t))).astype(np.int16)


def make_corpus(root: str, utts: int, seconds: float) -> tuple[str, list[np.ndarray]]:
    lines, audio = [], []
    for i in range(utts):
        samples = synth(seconds, i)
        path = os.path.join(root, "wav", f"utt{i:04d}.wav")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with wave.open(path, "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(RATE)
            w.writeframes(samples.tobytes())
        lines.append(f"utt{i:04d} {path}\n")
        audio.append(samples.astype(np.float32))
    os.makedirs(os.path.join(root, "data"), exist_ok=True)
    with open(os.path.join(root, "data", "wav.scp"), "w") as f:
        f.writelines(lines)
    with open(os.path.join(root, "data", "utt2spk"), "w") as f:
        f.writelines(f"utt{i:04d} utt{i:04d}\n" for i in range(utts))
    with open(os.path.join(root, "data", "spk2utt"), "w") as f:
        f.writelines(f"utt{i:04d} utt{i:04d}\n" for i in range(utts))
    return os.path.join(root, "data", "wav.scp"), audio


# The references call knf directly, in its fastest form: samples passed as a Python list (knf's
# bindings convert a numpy array element by element, which is slower), frames read with get_frame.
def library_fbank(extractor: FbankExtractor, audio: list[np.ndarray]) -> None:
    for samples in audio:
        online = knf.OnlineFbank(extractor.opts)
        online.accept_waveform(RATE, samples.tolist())
        online.input_finished()
        np.stack([online.get_frame(i) for i in range(online.num_frames_ready)])


def library_mfcc_pitch(extractor: MfccPitchExtractor, audio: list[np.ndarray]) -> None:
    for samples in audio:
        wave = samples.tolist()
        online = knf.OnlineMfcc(extractor.mfcc_opts)
        online.accept_waveform(RATE, wave)
        online.input_finished()
        np.stack([online.get_frame(i) for i in range(online.num_frames_ready)])
        knf.compute_and_process_kaldi_pitch(extractor.pitch_opts.extract,
                                            extractor.pitch_opts.process, wave)


def timed(func) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its children) spent in func()."""
    def cpu() -> float:
        usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
        return sum(u.ru_utime + u.ru_stime for u in usage)

    wall, start = time.perf_counter(), cpu()
    func()
    return time.perf_counter() - wall, cpu() - start


def run_step(root: str, conf: str) -> None:
    data = os.path.join(root, "data")
    for name in ("feats.scp", "split1utt"):
        shutil.rmtree(os.path.join(data, name), ignore_errors=True)
    subprocess.run([os.path.join(REPO, "steps", "make_fbank.sh"), "--nj", "1", "--fbank-config",
                    conf, data], check=True, capture_output=True, cwd=root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--utts", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--step", action="store_true", help="also time steps/make_fbank.sh --nj 1")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ["EMASR_NO_TQDM"] = "1"
    root = tempfile.mkdtemp(prefix="bench_features.")
    try:
        wav_scp, audio = make_corpus(root, args.utts, args.seconds)
        total = args.utts * args.seconds
        conf = {name: os.path.join(root, f"{name}.conf") for name in ("fbank", "mfcc", "pitch")}
        for name, text in (("fbank", "--num-mel-bins=80\n--dither=1.0\n"),
                           ("mfcc", "--use-energy=false\n--dither=1.0\n"),
                           ("pitch", "--sample-frequency=16000\n")):
            with open(conf[name], "w") as f:
                f.write(text)
        fbank = FbankExtractor(conf["fbank"])
        mfcc_pitch = MfccPitchExtractor(conf["mfcc"], conf["pitch"])
        out = os.path.join(root, "out")

        cases = {
            "fbank library": lambda: library_fbank(fbank, audio),
            "fbank job": lambda: extract_job(fbank, wav_scp, f"{out}/f.ark", f"{out}/f.scp",
                                             compress=True, log_every=10**9),
            "fbank job, no compression": lambda: extract_job(
                fbank, wav_scp, f"{out}/g.ark", f"{out}/g.scp", compress=False, log_every=10**9),
            "mfcc+pitch library": lambda: library_mfcc_pitch(mfcc_pitch, audio),
            "mfcc+pitch job": lambda: extract_job(mfcc_pitch, wav_scp, f"{out}/m.ark",
                                                  f"{out}/m.scp", compress=True, log_every=10**9),
        }
        if args.step:
            cases["fbank step (make_fbank.sh --nj 1)"] = lambda: run_step(root, conf["fbank"])
        wall = {name: float("inf") for name in cases}
        cpu = dict(wall)
        for _ in range(args.repeats):
            for name, func in cases.items():
                w, c = timed(func)
                wall[name], cpu[name] = min(wall[name], w), min(cpu[name], c)

        print(f"audio: {args.utts} utterances x {args.seconds:g} s = {total:g} s at {RATE} Hz; "
              f"best of {args.repeats}; one job = one process on one core")
        print(f"  {'':34s} {'wall s':>7s} {'xRT wall':>9s} {'CPU s':>7s} {'xRT CPU':>8s}")
        for name in cases:
            print(f"  {name:34s} {wall[name]:7.3f} {total / wall[name]:9.1f} "
                  f"{cpu[name]:7.3f} {total / cpu[name]:8.1f}")
        pairs = [("fbank library", "fbank job"), ("fbank library", "fbank job, no compression"),
                 ("mfcc+pitch library", "mfcc+pitch job")]
        if args.step:
            pairs.append(("fbank library", "fbank step (make_fbank.sh --nj 1)"))
        print("throughput ratio job / library (target >= 0.90), by CPU time and by wall time:")
        for library, job in pairs:
            print(f"  {job:34s} {cpu[library] / cpu[job]:.3f} (CPU)  "
                  f"{wall[library] / wall[job]:.3f} (wall)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
