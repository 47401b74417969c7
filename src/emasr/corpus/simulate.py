"""`emasr simulate-corpus`: a simulated AISHELL-1 style Mandarin corpus of voice-search queries.

Writes, under --out:
  data_aishell/wav/{train,dev,test}/SXXXX/BAC009SXXXXWYYYY.wav   16 kHz 16-bit mono
  data_aishell/transcript/aishell_transcript_v0.8.txt            `utt word word ...`, all sets
  resource_aishell/lexicon.txt                                   `word initial final ...`
  resource_aishell/speaker.info                                  `0002 F`
  lm_text/query_log.txt                                          unsegmented queries, one a line
  timings/{train,dev,test}.jsonl                                 espeak phone timings per utterance
  simulation/                                                    config, babble clips, per-speaker parts

The main process draws every text and speaker from the seed; the audio is made per speaker, each
with its own generator seeded by (seed, speaker), so the output does not depend on --nj. A speaker's
part file is written after all of its wavs (each atomically), so a re-run skips finished speakers.

The training set depends only on the seed and the knobs other than the dev/test sizes: its speakers
are drawn first from their stream, its queries from a text stream of their own (before dev's and
test's, which must differ from them), its babble clips speak training queries only, and its
speakers' audio generators are numbered first. So --dev-speakers, --test-speakers and
--eval-utts-per-speaker change dev, test and the LM text, never a training wav
(tests/test_simulate.py).
"""
from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
from dataclasses import dataclass

import click
import numpy as np

from emasr.feats.audio import read_wav, to_int16, write_wav
from emasr.corpus.config import PROFILES, SimConfig, knob_options, profile_config
from emasr.corpus.espeak import process_espeak
from emasr.corpus.pinyin import check_han_words, split_syllable, word_phones, word_syllables
from emasr.corpus.speakers import SETS, Speaker, make_speakers, random_voice_speaker
from emasr.corpus.synth import SAMPLE_RATE, synthesize_utterance
from emasr.corpus.textgen import QueryGenerator, SlotPools, read_slot_words, template_words
from emasr.io.atomic import atomic_write
from emasr.io.table import c_sort_key
from emasr.log import progress

log = logging.getLogger(__name__)
FIRST_UTT_NUMBER = 121        # AISHELL's utterance numbers per speaker start around W0121
STREAM = {"speakers": 1, "text": 2, "lm": 3, "babble": 4, "audio": 5}


def rng_for(seed: int, stream: str, *keys: int) -> np.random.Generator:
    """An independent generator per purpose (and per speaker/clip), fixed by the seed."""
    return np.random.default_rng([seed, STREAM[stream], *keys])


@dataclass
class Plan:
    """Everything decided before any audio is made."""
    speakers: dict[str, list[Speaker]]
    utterances: dict[str, list[tuple[str, str, list[str]]]]   # set -> [(utt, speaker id, words)]
    lexicon: dict[str, list[str]]                              # word -> syllables
    lm_text: list[str]


class Speakability:
    """Whether espeak-ng reads every syllable of a word as Mandarin (cached per syllable)."""

    def __init__(self) -> None:
        self.cache: dict[str, bool] = {}

    def __call__(self, syllables: list[str]) -> bool:
        return all(self._syllable(s) for s in syllables)

    def _syllable(self, syllable: str) -> bool:
        if syllable not in self.cache:
            try:
                split_syllable(syllable)
                # espeak switches to English for letter strings it cannot read as pinyin.
                self.cache[syllable] = "(en)" not in process_espeak().phonemes(syllable)
            except ValueError:
                self.cache[syllable] = False
        return self.cache[syllable]


def make_plan(config: SimConfig, seed: int) -> Plan:
    speakable = Speakability()
    slots = read_slot_words(config.slot_words, speakable)
    pools = SlotPools.split(slots, config.heldout_slot_fraction, rng_for(seed, "text", 0))
    speakers = make_speakers({"train": config.train_speakers, "dev": config.dev_speakers,
                              "test": config.test_speakers}, config.heldout_voice_fraction,
                             (config.rate_min, config.rate_max), rng_for(seed, "speakers"))
    seen: set[str] = set()
    utterances: dict[str, list] = {}
    for index, name in enumerate(SETS):
        per_speaker = config.train_utts_per_speaker if name == "train" else config.eval_utts_per_speaker
        heldout_prob = 0.0 if name == "train" else config.heldout_slot_prob
        generator = QueryGenerator(pools, heldout_prob, rng_for(seed, "text", index + 1))
        queries = generator.unique_queries(per_speaker * len(speakers[name]), seen, name)
        utterances[name] = [
            (f"BAC009{spk.id}W{FIRST_UTT_NUMBER + u:04d}", spk.id, queries[s * per_speaker + u])
            for s, spk in enumerate(speakers[name]) for u in range(per_speaker)]
    eval_texts = {"".join(words) for name in ("dev", "test") for _, _, words in utterances[name]}
    lm_generator = QueryGenerator(pools, config.heldout_slot_prob, rng_for(seed, "lm"))
    lm_text = ["".join(w) for w in lm_generator.unique_queries(config.lm_sentences, set(eval_texts), "LM")]
    words = template_words() | pools.all_words()
    lexicon = {}
    for word in sorted(words, key=c_sort_key):
        check_han_words([word], "lexicon")
        syllables = word_syllables(word)
        if not speakable(syllables):
            raise ValueError(f"template word '{word}' has a syllable espeak cannot say: {syllables}")
        lexicon[word] = syllables
    for name in SETS:
        for utt, _, words_ in utterances[name]:
            check_han_words(words_, f"utterance {utt}")
    train_words = {w for _, _, ws in utterances["train"] for w in ws}
    unseen = {w for name in ("dev", "test") for _, _, ws in utterances[name] for w in ws} - train_words
    log.info("%d words in the lexicon; %d dev/test words are never spoken in train", len(lexicon),
             len(unseen))
    return Plan(speakers, utterances, lexicon, lm_text)


# ---- writing the text files -------------------------------------------------------------------

def write_text_files(out: str, plan: Plan) -> None:
    rows = sorted((utt, words) for name in SETS for utt, _, words in plan.utterances[name])
    with atomic_write(os.path.join(out, "data_aishell/transcript/aishell_transcript_v0.8.txt")) as f:
        for utt, words in rows:
            f.write(f"{utt} {' '.join(words)}\n")
    with atomic_write(os.path.join(out, "resource_aishell/lexicon.txt")) as f:
        f.write("SIL sil\n<SPOKEN_NOISE> sil\n")      # as the first lines of AISHELL's lexicon
        for word, syllables in plan.lexicon.items():
            f.write(f"{word} {' '.join(word_phones(syllables))}\n")
    with atomic_write(os.path.join(out, "resource_aishell/speaker.info")) as f:
        for spk in sorted((s for name in SETS for s in plan.speakers[name]), key=lambda s: s.id):
            f.write(f"{spk.id[1:]} {spk.gender}\n")
    with atomic_write(os.path.join(out, "lm_text/query_log.txt")) as f:
        f.writelines(line + "\n" for line in plan.lm_text)
    with atomic_write(os.path.join(out, "simulation/speakers.json")) as f:
        json.dump({name: [s.to_dict() for s in plan.speakers[name]] for name in SETS}, f, indent=1,
                  ensure_ascii=False)


# ---- audio: babble bank, then one task per speaker --------------------------------------------

_babble: list[np.ndarray] = []


def _load_babble(paths: list[str]) -> None:
    global _babble
    _babble = [read_wav(p)[0].astype(np.float32) / 32768.0 for p in paths]


def make_babble_clip(task: tuple) -> str:
    """One babble clip: three training-style queries by one random voice, clean."""
    out, index, config_dict, seed, queries = task
    path = os.path.join(out, "simulation/babble", f"babble_{index:04d}.wav")
    if not os.path.exists(path):
        config = SimConfig.from_dict(config_dict)
        rng = rng_for(seed, "babble", index)
        speaker = random_voice_speaker(rng, (config.rate_min, config.rate_max))
        pieces = []
        for words in queries:
            syllables = [s for w in words for s in word_syllables(w)]
            audio, _ = synthesize_utterance(process_espeak(), speaker, syllables, [], config, rng,
                                            degrade_audio=False)
            pieces.append(audio)
        write_wav(path, to_int16(np.concatenate(pieces)), SAMPLE_RATE)
    return path


def speaker_part_path(out: str, set_name: str, speaker_id: str) -> str:
    return os.path.join(out, "simulation/parts", set_name, f"{speaker_id}.jsonl")


def wav_path(out: str, set_name: str, speaker_id: str, utt: str) -> str:
    return os.path.join(out, "data_aishell/wav", set_name, speaker_id, f"{utt}.wav")


def make_speaker_audio(task: tuple) -> tuple[str, str, int, float]:
    """All utterances of one speaker; returns (set, speaker, utterances, seconds of audio)."""
    out, set_name, speaker_dict, number, utterances, config_dict, seed = task
    part = speaker_part_path(out, set_name, speaker_dict["id"])
    if os.path.exists(part) and all(os.path.exists(wav_path(out, set_name, speaker_dict["id"], u))
                                    for u, _ in utterances):
        return set_name, speaker_dict["id"], 0, 0.0
    config, speaker = SimConfig.from_dict(config_dict), Speaker(**speaker_dict)
    rng = rng_for(seed, "audio", number)
    records, seconds = [], 0.0
    for utt, words in utterances:
        syllables = [s for w in words for s in word_syllables(w)]
        audio, record = synthesize_utterance(process_espeak(), speaker, syllables, _babble, config, rng)
        write_wav(wav_path(out, set_name, speaker.id, utt), to_int16(audio), SAMPLE_RATE)
        records.append({"utt": utt, "speaker": speaker.id, "sample_rate": SAMPLE_RATE,
                        "words": words, **record})
        seconds += len(audio) / SAMPLE_RATE
    with atomic_write(part) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return set_name, speaker.id, len(records), seconds


def run_tasks(function, tasks: list, nj: int, initializer=None, initargs=(), desc: str = ""):
    """Run each task in a fresh process, at most nj at once.

    espeak-ng keeps hidden state between calls (the glottal source's phase and flutter, C rand()),
    so the same text comes out a few samples different after another utterance. A fresh process
    per task (forked from a server that has imported the code but never started espeak) makes each
    task's audio depend only on the task, whatever --nj is.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    with context.Pool(max(1, nj), initializer=initializer, initargs=initargs,
                      maxtasksperchild=1) as pool:
        yield from progress(pool.imap_unordered(function, tasks), total=len(tasks), desc=desc,
                            every=10)


def check_or_save_config(out: str, config: SimConfig, seed: int, force: bool) -> None:
    """Refuse to mix two different simulations in one directory (unless --force starts over)."""
    path = os.path.join(out, "simulation/config.json")
    wanted = {"seed": seed, "config": config.to_dict()}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
        if found != wanted and not force:
            raise click.ClickException(
                f"{path}: {out} was simulated with other settings or seed; use another --out, or "
                "--force to delete the old simulation there and start over")
        if found != wanted:
            for sub in ("data_aishell", "resource_aishell", "lm_text", "timings", "simulation"):
                shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
    with atomic_write(path) as f:
        json.dump(wanted, f, indent=1, sort_keys=True)


def merge_timings(out: str, plan: Plan) -> None:
    for name in SETS:
        with atomic_write(os.path.join(out, "timings", f"{name}.jsonl")) as f:
            for speaker in plan.speakers[name]:
                with open(speaker_part_path(out, name, speaker.id), encoding="utf-8") as part:
                    f.write(part.read())


def babble_tasks(out: str, plan: Plan, config: SimConfig, seed: int) -> list[tuple]:
    """make_babble_clip's tasks: three training queries per clip (never a dev or test one)."""
    config_dict = config.to_dict()
    train_words = [words for _, _, words in plan.utterances["train"]]
    pick = rng_for(seed, "babble", 1 << 30)
    return [(out, i, config_dict, seed, [train_words[j] for j in pick.integers(len(train_words), size=3)])
            for i in range(config.babble_clips)]


def speaker_tasks(out: str, plan: Plan, config: SimConfig, seed: int) -> list[tuple]:
    """make_speaker_audio's tasks, one per speaker: train's first, so that a train speaker's audio
    generator (its number) does not depend on the dev/test sizes."""
    config_dict = config.to_dict()
    tasks, number = [], 0
    for name in SETS:
        by_speaker: dict[str, list] = {}
        for utt, speaker_id, words in plan.utterances[name]:
            by_speaker.setdefault(speaker_id, []).append((utt, words))
        for speaker in plan.speakers[name]:
            number += 1
            tasks.append((out, name, speaker.to_dict(), number, by_speaker[speaker.id], config_dict, seed))
    return tasks


def simulate(out: str, config: SimConfig, seed: int = 1, nj: int = 1, force: bool = False) -> Plan:
    """Make the whole corpus under `out`; returns the plan (texts and speakers)."""
    os.makedirs(out, exist_ok=True)
    check_or_save_config(out, config, seed, force)
    plan = make_plan(config, seed)
    write_text_files(out, plan)
    babble_paths = sorted(run_tasks(make_babble_clip, babble_tasks(out, plan, config, seed), nj,
                                    desc="babble clips"))
    made, seconds, skipped = 0, 0.0, 0
    for _, _, count, duration in run_tasks(make_speaker_audio, speaker_tasks(out, plan, config, seed),
                                           nj, _load_babble, (babble_paths,), desc="speakers"):
        made, seconds, skipped = made + count, seconds + duration, skipped + (count == 0)
    merge_timings(out, plan)
    log.info("made %d utterances (%.2f h of audio) in %s; %d speakers were already complete",
             made, seconds / 3600, out, skipped)
    return plan


# ---- command line -----------------------------------------------------------------------------

def _knob_options(function):
    """One option per knob; unset options keep the profile's value."""
    for name, kind, help_text, default in reversed(knob_options()):
        function = click.option(f"--{name.replace('_', '-')}", name, type=kind, default=None,
                                help=f"{help_text} [small: {default}]")(function)
    return function


@click.command("simulate-corpus")
@click.option("--profile", type=click.Choice(sorted(PROFILES)), default="small", show_default=True,
              help="size profile: tiny (minutes, tests/CI), small (default recipe, >3 h train), "
                   "large (>50 h); any knob below overrides it")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="output directory (the AISHELL-1 corpus root)")
@click.option("--nj", type=int, default=1, show_default=True, help="parallel processes")
@click.option("--seed", type=int, default=1, show_default=True,
              help="fixes texts, speakers and augmentation")
@click.option("--force", is_flag=True, help="delete an earlier simulation with other settings in --out")
@_knob_options
def simulate_corpus_cli(profile: str, out: str, nj: int, seed: int, force: bool, **knobs) -> None:
    """Synthesize a Mandarin voice-search corpus in the AISHELL-1 layout with espeak-ng.

    Speech is espeak-ng's Mandarin voice reading pypinyin's tone-numbered syllables (the same
    syllables the lexicon holds), degraded by reverberation, babble and coloured noise, a random
    channel and level. Re-running into the same --out with the same settings skips finished
    speakers. See docs/corpus.md for the layout and every knob.
    """
    config = profile_config(profile, **knobs)
    simulate(out, config, seed=seed, nj=nj, force=force)
