"""Simulated speakers: an espeak-ng voice variant with its own pitch, pitch range and rate.

Speaker ids follow AISHELL-1 (train from S0002, dev from S0724, test from S0764, as AISHELL-1's 40
dev speakers S0724-S0763 and 20 test speakers from S0764). A set that needs more ids than its range
holds continues after the previous set's last one (41 dev speakers push test to S0765), so the
sets never share an id; train's ids depend on the train count only. A share of each gender's voice
variants is kept for dev and test only, so evaluation speakers also have timbres that training never
heard.

Train's speakers are drawn first, so the dev and test counts change dev's and test's speakers only.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

# Variants of espeak-ng 1.52 (espeak-ng-data/voices/!v) that sound like one adult human, by gender
# (from their `gender` and `pitch` lines). Novelty voices (robots, whisper, demonic, child) are left
# out.
FEMALE_VARIANTS = ("Alicia", "Andrea", "Annie", "anika", "aunty", "belinda", "f1", "f2", "f3", "f4",
                   "f5", "grandma", "linda", "shelby", "steph", "steph2", "steph3")
MALE_VARIANTS = ("Andy", "Denis", "Diogo", "Gene", "Henrique", "Hugo", "Jacky", "Lee", "Mario",
                 "Michael", "Mike", "Storm", "antonio", "david", "ed", "edward", "grandpa", "gustave",
                 "ian", "iven", "iven2", "iven3", "john", "kaukovalta", "klatt", "klatt2", "klatt3",
                 "klatt4", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "marcelo", "michel",
                 "miguel", "mike2", "norbert", "pablo", "paul", "quincy", "rob", "robert", "sandro",
                 "travis", "victor")
FIRST_SPEAKER_NUMBER = {"train": 2, "dev": 724, "test": 764}
SETS = ("train", "dev", "test")


@dataclass(frozen=True)
class Speaker:
    id: str            # "S0002"
    gender: str        # "F" or "M"
    variant: str       # espeak voice name is "cmn+<variant>"
    pitch: int         # espeak base pitch 0..100
    pitch_range: int   # espeak pitch range 0..100
    rate: int          # syllables per minute (espeak "words" per minute; one syllable per word)

    @property
    def voice_name(self) -> str:
        return f"cmn+{self.variant}"

    def to_dict(self) -> dict:
        return asdict(self)


def split_variants(heldout_fraction: float, rng: np.random.Generator) -> dict[str, dict[str, list]]:
    """Per gender, the variants for training and those kept for dev/test."""
    split = {}
    for gender, variants in (("F", FEMALE_VARIANTS), ("M", MALE_VARIANTS)):
        shuffled = [variants[i] for i in rng.permutation(len(variants))]
        cut = max(1, int(round(heldout_fraction * len(shuffled))))
        split[gender] = {"eval": shuffled[:cut], "train": shuffled[cut:]}
    return split


def make_speakers(counts: dict[str, int], heldout_voice_fraction: float, rate_range: tuple[int, int],
                  rng: np.random.Generator) -> dict[str, list[Speaker]]:
    """Speakers per set (ids disjoint across sets); about half of them female."""
    variants = split_variants(heldout_voice_fraction, rng)
    speakers: dict[str, list[Speaker]] = {}
    next_number = 0
    for name in SETS:
        pool = "train" if name == "train" else "eval"
        number = max(FIRST_SPEAKER_NUMBER[name], next_number)
        speakers[name] = []
        for _ in range(counts[name]):
            gender = "F" if rng.random() < 0.5 else "M"
            choices = variants[gender][pool]
            pitch = int(rng.integers(40, 81) if gender == "F" else rng.integers(20, 66))
            speakers[name].append(Speaker(
                id=f"S{number:04d}", gender=gender, variant=choices[rng.integers(len(choices))],
                pitch=pitch, pitch_range=int(rng.integers(25, 86)),
                rate=int(rng.integers(rate_range[0], rate_range[1] + 1))))
            number += 1
        next_number = number
    if next_number > 9999:
        raise ValueError(f"{next_number - 1} speakers do not fit AISHELL's 4-digit speaker ids")
    return speakers


def random_voice_speaker(rng: np.random.Generator, rate_range: tuple[int, int]) -> Speaker:
    """A speaker for babble noise: any variant, any gender."""
    gender = "F" if rng.random() < 0.5 else "M"
    variants = FEMALE_VARIANTS if gender == "F" else MALE_VARIANTS
    return Speaker("babble", gender, variants[rng.integers(len(variants))],
                   int(rng.integers(20, 81)), int(rng.integers(25, 86)),
                   int(rng.integers(rate_range[0], rate_range[1] + 1)))
