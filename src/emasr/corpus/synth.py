"""One simulated utterance: espeak-ng speech from tone-numbered pinyin, resampled, padded, degraded,
with its phone timings taken from espeak's phoneme events.

Timings are in samples at 16 kHz in the written wav. A syllable spans from its espeak word event
(which includes a stop's closure) to the next syllable's word event, or for the last one to the
first pause after it. Within a syllable, the AISHELL initial (or pseudo-initial) spans up to the
first vowel phoneme event and the tonal final the rest; a zero-initial syllable that espeak starts
without a glide gets a zero-length pseudo-initial.
"""
from __future__ import annotations

import numpy as np

from emasr.feats.audio import resample
from emasr.corpus.augment import degrade
from emasr.corpus.espeak import Espeak, Synthesis, Voice
from emasr.corpus.pinyin import syllable_phones
from emasr.corpus.speakers import Speaker

SAMPLE_RATE = 16000
VOWEL_LETTERS = set("aeiouyAEIOU@")


def is_vowel_event(name: str) -> bool:
    return name[:1] in ("'", ",") or any(ch in VOWEL_LETTERS for ch in name)


def utterance_voice(speaker: Speaker, rate_jitter: float, pitch_jitter: int,
                    rng: np.random.Generator) -> Voice:
    rate = speaker.rate * (1 + rng.uniform(-rate_jitter, rate_jitter))
    pitch = speaker.pitch + rng.integers(-pitch_jitter, pitch_jitter + 1)
    return Voice(speaker.voice_name, rate=int(np.clip(round(rate), 80, 450)),
                 pitch=int(np.clip(pitch, 0, 100)), pitch_range=speaker.pitch_range)


def syllable_timings(synthesis: Synthesis, syllables: list[str]) -> list[dict]:
    """Per syllable: espeak sample span and its phoneme events, at espeak's own rate."""
    position_to_index, position = {}, 1
    for index, syllable in enumerate(syllables):
        position_to_index[position] = index
        position += len(syllable) + 1
    starts: dict[int, int] = {}
    for text_position, sample in synthesis.words:
        if text_position in position_to_index:
            starts.setdefault(position_to_index[text_position], sample)
    if len(starts) != len(syllables):
        raise RuntimeError(f"espeak gave word events for {len(starts)} of {len(syllables)} "
                           f"syllables in '{' '.join(syllables)}'")
    events: list[list[tuple[str, int]]] = [[] for _ in syllables]
    for name, text_position, sample in synthesis.phonemes:
        index = position_to_index.get(text_position)
        if index is not None:
            events[index].append((name, sample))
    out = []
    for index, syllable in enumerate(syllables):
        start = starts[index]
        sounding = [(n, s) for n, s in events[index] if not n.startswith("_")]
        pauses = [s for n, s in events[index] if n.startswith("_") and sounding and s >= sounding[-1][1]]
        end = starts[index + 1] if index + 1 < len(syllables) else (
            min(pauses) if pauses else len(synthesis.audio))
        vowel = next((s for n, s in sounding if is_vowel_event(n)), start)
        out.append({"syllable": syllable, "start": start, "vowel": max(start, min(vowel, end)),
                    "end": end, "espeak": sounding})
    return out


def synthesize_utterance(espeak: Espeak, speaker: Speaker, syllables: list[str],
                         babble_clips: list[np.ndarray], config, rng: np.random.Generator,
                         degrade_audio: bool = True) -> tuple[np.ndarray, dict]:
    """Float audio at 16 kHz and the utterance's timing record."""
    voice = utterance_voice(speaker, config.rate_jitter, config.pitch_jitter, rng)
    synthesis = espeak.synthesize(" ".join(syllables), voice, noise_seed=int(rng.integers(1 << 31)))
    timings = syllable_timings(synthesis, syllables)
    clean = resample(synthesis.audio.astype(np.float32) / 32768.0, synthesis.sample_rate, SAMPLE_RATE)
    lead = int(rng.uniform(config.silence_min, config.silence_max) * SAMPLE_RATE)
    trail = int(rng.uniform(config.silence_min, config.silence_max) * SAMPLE_RATE)
    clean = np.concatenate([np.zeros(lead, np.float32), clean, np.zeros(trail, np.float32)])
    scale = SAMPLE_RATE / synthesis.sample_rate

    def at16k(sample: int) -> int:
        return lead + int(round(sample * scale))

    phones, syllable_spans, espeak_events = [], [], []
    for t in timings:
        initial, final = syllable_phones(t["syllable"])
        start, vowel, end = at16k(t["start"]), at16k(t["vowel"]), at16k(t["end"])
        syllable_spans.append([t["syllable"], start, end])
        phones += [[initial, start, vowel], [final, vowel, end]]
        espeak_events += [[name, at16k(sample)] for name, sample in t["espeak"]]
    record = {"num_samples": len(clean), "voice": {"name": voice.name, "rate": voice.rate,
              "pitch": voice.pitch, "range": voice.pitch_range},
              "syllables": syllable_spans, "phones": phones, "espeak": espeak_events}
    if degrade_audio:
        audio, record["conditions"] = degrade(clean, babble_clips, config.augment, SAMPLE_RATE, rng)
    else:
        audio = clean
    return audio, record

