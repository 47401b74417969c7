"""Simulation settings: size knobs, voice knobs and augmentation knobs, with three size profiles.

Each field becomes a command-line option of `emasr simulate-corpus` (underscores become dashes) with
the help text given here, so `--help`, docs/corpus.md and the code cannot drift apart.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from emasr.corpus.augment import AugmentConfig


def knob(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass
class SimConfig:
    train_speakers: int = knob(44, "speakers in train")
    dev_speakers: int = knob(30, "speakers in dev")
    test_speakers: int = knob(30, "speakers in test")
    train_utts_per_speaker: int = knob(120, "utterances per train speaker")
    eval_utts_per_speaker: int = knob(20, "utterances per dev or test speaker")
    lm_sentences: int = knob(50000, "queries in the unsegmented LM text (none is a dev/test query)")
    babble_clips: int = knob(32, "clips of other talkers' speech mixed into babble noise")
    slot_words: int = knob(2000, "at most this many jieba words per slot type (most frequent first)")
    heldout_slot_fraction: float = knob(0.1, "share of slot words never spoken in train audio")
    heldout_slot_prob: float = knob(0.25, "chance that a dev/test/LM slot takes a held-out word")
    heldout_voice_fraction: float = knob(0.25, "share of voice variants used only by dev/test speakers")
    rate_min: int = knob(170, "slowest speaker rate, syllables per minute")
    rate_max: int = knob(270, "fastest speaker rate, syllables per minute")
    rate_jitter: float = knob(0.1, "per-utterance relative rate change, uniform in [-x, x]")
    pitch_jitter: int = knob(8, "per-utterance change of espeak pitch (0-100 scale), uniform in [-x, x]")
    silence_min: float = knob(0.1, "seconds of leading and of trailing silence, at least")
    silence_max: float = knob(0.5, "seconds of leading and of trailing silence, at most")
    augment: AugmentConfig = field(default_factory=AugmentConfig)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SimConfig":
        d = dict(d)
        augment = AugmentConfig(**d.pop("augment", {}))
        return cls(augment=augment, **d)


AUGMENT_HELP = {
    "clean_fraction": "share of utterances with no added noise",
    "snr_min": "lowest SNR in dB (uniform in [min, max])",
    "snr_max": "highest SNR in dB",
    "babble_talkers_min": "fewest simultaneous babble talkers",
    "babble_talkers_max": "most simultaneous babble talkers",
    "reverb_prob": "share of utterances reverberated by a synthetic room",
    "rt60_min": "shortest reverberation time RT60 in s",
    "rt60_max": "longest reverberation time RT60 in s",
    "drr_min": "lowest direct-to-reverberant ratio in dB",
    "drr_max": "highest direct-to-reverberant ratio in dB",
    "channel_order": "order of the random channel response (cepstral terms)",
    "channel_db": "largest channel cepstral term in dB",
    "band_limit_prob": "share of utterances through a 300 Hz to 3.4-7 kHz band",
    "level_min": "lowest output RMS level in dBFS",
    "level_max": "highest output RMS level in dBFS",
}

PROFILES: dict[str, dict] = {
    # A few minutes of audio: tests and CI. Small but learnable: a few dozen slot words per type so
    # syllables repeat across utterances, and mild augmentation (mostly clean, SNR 15-30 dB, little
    # reverberation) so that a GMM trained on a few hundred utterances beats chance.
    "tiny": dict(train_speakers=8, dev_speakers=2, test_speakers=2, train_utts_per_speaker=25,
                 eval_utts_per_speaker=15, lm_sentences=1000, babble_clips=8, slot_words=30,
                 heldout_slot_prob=0.1,
                 augment=dict(clean_fraction=0.5, snr_min=15.0, snr_max=30.0, reverb_prob=0.1,
                              rt60_max=0.4, band_limit_prob=0.1)),
    # The default recipe: >= 3 h train from >= 40 speakers; dev and test 600 utterances each from
    # 30 speakers (many speakers, few utterances each: the number of speakers, not of utterances,
    # bounds how well a test result speaks for other voices; docs/corpus.md).
    "small": {},
    # GPU runs: >= 50 h of training audio; dev and test 2000 utterances each from 40 speakers.
    # Changing only the dev/test sizes leaves the training set as it was (tests/test_simulate.py).
    "large": dict(train_speakers=420, dev_speakers=40, test_speakers=40, train_utts_per_speaker=200,
                  eval_utts_per_speaker=50, lm_sentences=300000, babble_clips=64, slot_words=5000),
}


def profile_config(profile: str, **overrides) -> SimConfig:
    """The settings of a profile with some knobs replaced (None means: keep the profile's)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile '{profile}'; expected one of {', '.join(PROFILES)}")
    config = SimConfig.from_dict(PROFILES[profile])   # a fresh AugmentConfig from the profile's dict
    augment_names = {f.name for f in fields(AugmentConfig)}
    for name, value in overrides.items():
        if value is None:
            continue
        setattr(config.augment if name in augment_names else config, name, value)
    return config


def knob_options() -> list[tuple[str, type, str, object]]:
    """(field name, type, help, small-profile default) for every knob, SimConfig's then AugmentConfig's."""
    sim, augment = SimConfig(), AugmentConfig()
    out = [(f.name, type(getattr(sim, f.name)), f.metadata["help"], getattr(sim, f.name))
           for f in fields(SimConfig) if f.name != "augment"]
    out += [(f.name, type(getattr(augment, f.name)), AUGMENT_HELP[f.name], getattr(augment, f.name))
            for f in fields(AugmentConfig)]
    return out
