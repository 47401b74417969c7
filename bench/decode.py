#!/usr/bin/env python3
"""Decoding speed: emasr's decode step against the bare Kaldi decoder call, same matrices, same run.

For each decoder (lattice-faster, lattice-simple) it times
  - bare: the C++ decoder on log-likelihoods already mapped to transition ids and scaled
    (UtteranceDecoder.run_decoder), nothing else;
  - step: emasr's whole per-job path (decode_job: checks, pdf -> transition-id mapping, decoding,
    best path, lattice written to lat.1.gz, 1-best table),
and prints the speed in times real time (frames x frame shift / seconds, one process, one core)
and the ratio bare_time / step_time (target >= 0.90), two ways: within each step (the time
the step spends in the decoder call over the step's whole time, both on the same clock in the
same run: the number that machine drift cannot move), and between the bare call and the step
timed back to back. --repeats rounds each time both (each round starting with the other one); the
speeds are medians over rounds, the ratios medians with their ranges, and the step's own work is
the median CPU time the step adds per utterance over the bare call. With
--reference-prune-interval the bare decoder at that prune interval is timed in the same rounds
too (the lattices are the same; only the speed differs).

Graph and likelihoods: --graph-dir (HCLG.fst) with --model (Kaldi final.mdl) and --loglikes
(an rspecifier) when given; otherwise a synthetic task: a lexicon of --words words over 40 phones
(3-state HMMs), a backoff bigram, a monophone model, and oracle log-likelihoods (the true pdf
favoured by --margin nats, Gaussian noise) for random 8-word sentences.

With --text (a reference transcript) it also prints the 1-best's CER, to weigh a faster setting
(e.g. a smaller --max-active) against what it costs.

Usage: . ./path.sh && python bench/decode.py [--words 3000] [--utts 20] [--repeats 5]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from emasr.decode.cli import decode_job, read_matrices  # noqa: E402
from emasr.decode.decoder import (DECODERS, PRUNE_INTERVAL, DecodeConfig,  # noqa: E402
                                  UtteranceDecoder)
from emasr.kaldi.fst import read_fst  # noqa: E402


def synthetic_task(workdir: str, num_words: int, num_utts: int, margin: float, seed: int):
    """(HCLG, TransitionModel, [(utt, loglikes)]) for a random lexicon and bigram."""
    from decode_toylang import (make_lang, monophone_model, oracle_loglikes, pdf_sequence,
                                random_bigram_text)
    from emasr.decode.graph import make_graph

    rng = np.random.default_rng(seed)
    phones = [f"p{i}" for i in range(40)]
    lexicon: dict[str, list[str]] = {}
    seen = set()
    while len(lexicon) < num_words:
        pron = tuple(rng.choice(phones, size=int(rng.integers(2, 6))))
        if pron not in seen:
            seen.add(pron)
            lexicon[f"w{len(lexicon)}"] = list(pron)
    lang = make_lang(os.path.join(workdir, "lang"), lexicon,
                     random_bigram_text(sorted(lexicon), 20, seed))
    trans_model, ctx_dep = monophone_model(lang.lang_dir)
    stats = make_graph(lang.lang_dir, os.path.join(workdir, "graph"), trans_model, ctx_dep)
    print(f"synthetic graph: {num_words} words, {stats.num_states} states, {stats.num_arcs} arcs, "
          f"{trans_model.num_pdfs} pdfs, built in {stats.seconds:.1f} s")
    utts = []
    for u in range(num_utts):
        words = rng.choice(sorted(lexicon), size=8)
        seq = [lang.phones["SIL"], *(lang.phones[p] for w in words for p in lexicon[w]),
               lang.phones["SIL"]]
        pdfs = pdf_sequence(trans_model, seq, frames_per_state=3)
        utts.append((f"utt{u:03d}", oracle_loglikes(pdfs, trans_model.num_pdfs, seed=u,
                                                      noise=3.0, margin=margin)))
    return read_fst(os.path.join(workdir, "graph", "HCLG.fst")), trans_model, utts


def timed(func) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    func()
    return time.perf_counter() - wall, time.process_time() - cpu


def interleaved_rounds(funcs, rounds: int) -> np.ndarray:
    """Seconds [rounds, len(funcs), 2 (wall, cpu)]. After one untimed warm-up call of each, every
    round times all functions back to back, starting with a different one each round: on a shared
    machine the speed drifts by tens of percent over seconds, and ratios within one round cancel
    most of the drift."""
    for func in funcs:
        func()
    times = np.zeros((rounds, len(funcs), 2))
    for r in range(rounds):
        for k in range(len(funcs)):
            index = (r + k) % len(funcs)
            times[r, index] = timed(funcs[index])
    return times


def ratio_text(ratios: np.ndarray) -> str:
    """Median and range of per-round ratios."""
    return f"{np.median(ratios):.3f} [{ratios.min():.3f}, {ratios.max():.3f}]"


def make_decoder(name: str, hclg, trans_model, args, prune_interval: int) -> UtteranceDecoder:
    return UtteranceDecoder(hclg, trans_model, DecodeConfig(
        beam=args.beam, lattice_beam=args.lattice_beam, acwt=args.acwt, decoder=name,
        max_active=args.max_active, prune_interval=prune_interval))


def bench_decoder(name: str, hclg, trans_model, utts, args, workdir: str) -> None:
    decoder = make_decoder(name, hclg, trans_model, args, args.prune_interval)
    mapped = [decoder.map_to_transition_ids(x) for _, x in utts]
    seconds = sum(len(x) for _, x in utts) * args.frame_shift

    def bare():
        for matrix in mapped:
            decoder.run_decoder(matrix)

    decoder_shares = []  # per step (the first is the warm-up): the decoder call's share of it

    def step():
        stats = decode_job(decoder, utts, os.path.join(workdir, f"lat.{name}.gz"),
                           os.path.join(workdir, f"hyp.{name}.txt"))
        assert stats.num_done == len(utts), stats.summary(args.frame_shift)
        decoder_shares.append(stats.decoder_seconds / stats.seconds)

    funcs = [bare, step]
    if args.reference_prune_interval:
        reference = make_decoder(name, hclg, trans_model, args, args.reference_prune_interval)
        funcs.append(lambda: [reference.run_decoder(matrix) for matrix in mapped])
    times = interleaved_rounds(funcs, args.repeats)
    speed = np.median(seconds / times, axis=0)       # [function, wall/cpu], x real time
    overhead_ms = 1000 * np.median(times[:, 1, 1] - times[:, 0, 1]) / len(utts)
    accuracy = f" | CER {char_error_rate(decoder, utts, args):.2f}%" if args.text else ""
    print(f"{name:15s} bare decoder {speed[0, 0]:6.1f}x real time (cpu {speed[0, 1]:.1f}x) | "
          f"decode step {speed[1, 0]:6.1f}x (cpu {speed[1, 1]:.1f}x) | step/bare speed ratio, "
          f"within each step {ratio_text(np.array(decoder_shares[1:]))} (target >= 0.90); "
          f"of separately timed runs {ratio_text(times[:, 0, 0] / times[:, 1, 0])} (cpu "
          f"{ratio_text(times[:, 0, 1] / times[:, 1, 1])}), step's own work "
          f"{overhead_ms:.1f} ms cpu per utterance{accuracy}")
    if args.reference_prune_interval:
        print(f"{'':15s} prune interval {args.prune_interval} against "
              f"{args.reference_prune_interval}: bare decoder {speed[0, 0]:.1f}x against "
              f"{speed[2, 0]:.1f}x real time, speed ratio "
              f"{ratio_text(times[:, 2, 0] / times[:, 0, 0])} (cpu "
              f"{ratio_text(times[:, 2, 1] / times[:, 0, 1])})")


def char_error_rate(decoder: UtteranceDecoder, utts, args) -> float:
    """CER of the 1-best at the decoding scale against --text, filtered and split into characters
    as local/score.sh does, so that a speed-up can be weighed against what it costs."""
    from emasr.score.wer import filter_words, score_texts, to_units

    names = dict(line.split()[::-1] for line in open(os.path.join(args.graph_dir, "words.txt")))
    refs = {line.split()[0]: to_units(filter_words(line.split()[1:]), "cer")
            for line in open(args.text)}
    hyps = {utt: to_units(filter_words([names[str(w)] for w in decoder.decode(utt, x).words]),
                          "cer") for utt, x in utts}
    return score_texts({utt: refs[utt] for utt in hyps}, hyps).rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=3000)
    parser.add_argument("--utts", type=int, default=20)
    parser.add_argument("--margin", type=float, default=30.0,
                        help="nats by which the oracle favours the true pdf (synthetic task)")
    parser.add_argument("--graph-dir", default=None)
    parser.add_argument("--model", default=None, help="Kaldi final.mdl (with --graph-dir)")
    parser.add_argument("--loglikes", default=None, help="rspecifier (with --graph-dir)")
    parser.add_argument("--text", default=None,
                        help="reference text (with --graph-dir): also print the 1-best's CER")
    parser.add_argument("--beam", type=float, default=13.0)
    parser.add_argument("--lattice-beam", type=float, default=8.0)
    parser.add_argument("--max-active", type=int, default=7000, help="(lattice-faster only)")
    parser.add_argument("--prune-interval", type=int, default=PRUNE_INTERVAL)
    parser.add_argument("--reference-prune-interval", type=int, default=0,
                        help="also time the bare decoder at this prune interval in the same "
                             "rounds (e.g. 100 against Kaldi's 25); 0: do not")
    parser.add_argument("--acwt", type=float, default=0.1)
    parser.add_argument("--frame-shift", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds")
    parser.add_argument("--decoders", default=",".join(DECODERS))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="bench_decode.") as workdir:
        if args.graph_dir:
            from emasr.kaldi.model_io import read_model

            hclg = read_fst(os.path.join(args.graph_dir, "HCLG.fst"))
            trans_model = read_model(args.model).transition_model
            utts = list(read_matrices(args.loglikes))
        else:
            hclg, trans_model, utts = synthetic_task(workdir, args.words, args.utts, args.margin,
                                                     args.seed)
        frames = sum(len(x) for _, x in utts)
        print(f"{len(utts)} utterances, {frames} frames ({frames * args.frame_shift:.1f} s), "
              f"beam {args.beam}, lattice beam {args.lattice_beam}, max-active {args.max_active} "
              f"(lattice-faster), prune interval {args.prune_interval}, acwt {args.acwt}")
        for name in args.decoders.split(","):
            bench_decoder(name, hclg, trans_model, utts, args, workdir)


if __name__ == "__main__":
    main()
