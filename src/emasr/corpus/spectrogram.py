"""Spectrograms of one simulated utterance, clean and degraded, for the corpus documentation.

    python -m emasr.corpus.spectrogram docs/

writes `corpus_clean.png` (with the synthesizer's AISHELL phone boundaries drawn on it) and
`corpus_noisy.png` (the same utterance through a room, babble and coloured noise and a channel).
"""
from __future__ import annotations

import os
import sys

import numpy as np

from emasr.corpus.augment import AugmentConfig, degrade
from emasr.corpus.config import profile_config
from emasr.corpus.espeak import process_espeak
from emasr.corpus.pinyin import word_syllables
from emasr.corpus.speakers import Speaker
from emasr.corpus.synth import SAMPLE_RATE, synthesize_utterance

WORDS = ["导航", "到", "北京", "西站"]


def log_spectrogram(x: np.ndarray, frame: int = 400, hop: int = 160, n_fft: int = 512) -> np.ndarray:
    """Log power spectrogram [bins, frames] in dB, 25 ms Hamming windows every 10 ms."""
    num = 1 + max(0, len(x) - frame) // hop
    frames = np.stack([x[i * hop:i * hop + frame] for i in range(num)]) * np.hamming(frame)
    power = np.abs(np.fft.rfft(frames, n_fft)) ** 2
    return 10 * np.log10(power.T + 1e-10)


def plot(path: str, x: np.ndarray, title: str, phones: list | None = None) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = log_spectrogram(x)
    fig, ax = plt.subplots(figsize=(9, 3.2), dpi=80)
    ax.imshow(spec, origin="lower", aspect="auto", cmap="magma", vmin=spec.max() - 80, vmax=spec.max(),
              extent=(0, len(x) / SAMPLE_RATE, 0, SAMPLE_RATE / 2000))
    for name, start, end in phones or []:
        ax.axvline(start / SAMPLE_RATE, color="cyan", lw=0.6)
        ax.text((start + end) / 2 / SAMPLE_RATE, 7.4, name, color="white", ha="center", fontsize=8)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("frequency (kHz)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    config = profile_config("small")
    speaker = Speaker("S0002", "F", "f2", pitch=55, pitch_range=60, rate=220)
    syllables = [s for w in WORDS for s in word_syllables(w)]
    rng = np.random.default_rng(3)
    clean, record = synthesize_utterance(process_espeak(), speaker, syllables, [], config, rng,
                                         degrade_audio=False)
    babble = [synthesize_utterance(process_espeak(), Speaker("b", "M", variant, 40, 50, 230),
                                   [s for w in text.split() for s in word_syllables(w)], [], config,
                                   rng, degrade_audio=False)[0]
              for variant, text in (("m3", "上海 明天 会 下雨 吗"), ("f4", "播放 周杰伦 的 歌"),
                                    ("Andy", "附近 有 没有 银行"), ("m7", "什么 是 人工智能"))]
    heavy = AugmentConfig(clean_fraction=0, snr_min=5, snr_max=5, reverb_prob=1, rt60_min=0.5,
                          rt60_max=0.5, drr_min=3, drr_max=3, band_limit_prob=0)
    noisy, conditions = degrade(clean, babble, heavy, SAMPLE_RATE, np.random.default_rng(4))
    # Titles in pinyin: matplotlib's default font has no Chinese glyphs.
    plot(os.path.join(out_dir, "corpus_clean.png"), clean,
         f"clean: {' '.join(syllables)} (espeak-ng cmn+f2) with the AISHELL phone timings",
         record["phones"])
    plot(os.path.join(out_dir, "corpus_noisy.png"), noisy,
         f"degraded: RT60 {conditions['rt60']} s, SNR {conditions['snr_db']} dB "
         f"(babble share {conditions['babble_share']}, {conditions['babble_talkers']} talkers), "
         f"random channel")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs")
