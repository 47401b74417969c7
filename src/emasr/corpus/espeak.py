"""espeak-ng through ctypes: synthesize Mandarin and collect the audio and the phoneme events.

espeakng-loader ships the shared library and its data directory. The library keeps global state,
so there is one `Espeak` per process (multiprocessing workers each make their own). Parameters
(rate, pitch, range, volume, word gap) persist across voice changes, so `synthesize` sets every one
of them on every call; otherwise one utterance's jitter would leak into the next speaker.
The C API used here is espeak-ng's `speak_lib.h` (API revision 12).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

AUDIO_OUTPUT_SYNCHRONOUS = 2
INITIALIZE_PHONEME_EVENTS = 0x0001
CHARS_UTF8 = 1
POS_CHARACTER = 1
EVENT_LIST_TERMINATED, EVENT_WORD, EVENT_END, EVENT_MSG_TERMINATED, EVENT_PHONEME = 0, 1, 5, 6, 7
PARAM_RATE, PARAM_VOLUME, PARAM_PITCH, PARAM_RANGE, PARAM_WORDGAP = 1, 2, 3, 4, 7


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    """espeak_EVENT from speak_lib.h."""
    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint),
                ("text_position", ctypes.c_int), ("length", ctypes.c_int),
                ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", _EventId)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.POINTER(_Event))


class EspeakError(RuntimeError):
    """espeak-ng could not be loaded, did not know a voice, or failed to synthesize."""


@dataclass
class Voice:
    """Everything espeak needs for one utterance; all fields are set on every call."""
    name: str            # voice name, e.g. "cmn+m3"
    rate: int            # words (here: syllables) per minute, 80..450
    pitch: int           # base pitch 0..100
    pitch_range: int     # pitch range 0..100
    volume: int = 100
    word_gap: int = 0    # extra pause between words, units of 10 ms


@dataclass
class Synthesis:
    """Audio at `sample_rate` and the events: (kind, text position, sample, phoneme name)."""
    audio: np.ndarray            # int16
    sample_rate: int
    words: list[tuple[int, int]]             # (text position, 1-based; start sample)
    phonemes: list[tuple[str, int, int]]     # (espeak phoneme, text position, start sample)


class Espeak:
    """One espeak-ng instance (per process) in synchronous mode with phoneme events."""

    _instance_made = False

    def __init__(self) -> None:
        import espeakng_loader

        if Espeak._instance_made:
            raise EspeakError("espeak-ng keeps global state: make one Espeak per process")
        self._lib = ctypes.CDLL(espeakng_loader.get_library_path())
        self._lib.espeak_Initialize.restype = ctypes.c_int
        self._lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                                ctypes.c_int]
        self._lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint,
                                           ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
                                           ctypes.c_void_p, ctypes.c_void_p]
        self._lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self._lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self._lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        self.sample_rate = self._lib.espeak_Initialize(
            AUDIO_OUTPUT_SYNCHRONOUS, 0, espeakng_loader.get_data_path().encode(),
            INITIALIZE_PHONEME_EVENTS)
        if self.sample_rate <= 0:
            raise EspeakError("espeak_Initialize failed (data path from espeakng-loader)")
        self._callback = _CALLBACK(self._collect)  # keep a reference: C holds only the pointer
        self._lib.espeak_SetSynthCallback(self._callback)
        self._chunks: list[np.ndarray] = []
        self._words: list[tuple[int, int]] = []
        self._phonemes: list[tuple[str, int, int]] = []
        self._voice_name: str | None = None
        self._libc = ctypes.CDLL(None)   # espeak draws breath and aspiration noise from C rand()
        Espeak._instance_made = True

    def _collect(self, wav, num_samples, events) -> int:
        index = 0
        while events[index].type != EVENT_LIST_TERMINATED:
            event = events[index]
            if event.type == EVENT_WORD:
                self._words.append((event.text_position, event.sample))
            elif event.type == EVENT_PHONEME:
                name = bytes(event.id.string).split(b"\0")[0].decode("utf-8", "replace")
                self._phonemes.append((name, event.text_position, event.sample))
            index += 1
        if wav and num_samples > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(num_samples,)).copy())
        return 0

    def set_voice(self, voice: Voice) -> None:
        if voice.name != self._voice_name:
            if self._lib.espeak_SetVoiceByName(voice.name.encode()) != 0:
                raise EspeakError(f"espeak-ng has no voice '{voice.name}'")
            self._voice_name = voice.name
        for parameter, value in ((PARAM_RATE, voice.rate), (PARAM_VOLUME, voice.volume),
                                 (PARAM_PITCH, voice.pitch), (PARAM_RANGE, voice.pitch_range),
                                 (PARAM_WORDGAP, voice.word_gap)):
            self._lib.espeak_SetParameter(parameter, int(value), 0)

    def synthesize(self, text: str, voice: Voice, noise_seed: int = 1) -> Synthesis:
        """Speak `text` (UTF-8) with every parameter of `voice` set afresh.

        espeak_Initialize seeds its noise generators (its own and C rand()) from the clock, and
        voices with breath noise use them, so both are reseeded here for reproducible audio.
        """
        self._libc.srand(ctypes.c_uint(noise_seed))
        self._lib.espeak_ng_SetRandSeed(ctypes.c_long(noise_seed))
        self.set_voice(voice)
        self._chunks, self._words, self._phonemes = [], [], []
        data = text.encode("utf-8") + b"\0"
        status = self._lib.espeak_Synth(data, len(data), 0, POS_CHARACTER, 0, CHARS_UTF8, None, None)
        if status != 0:
            raise EspeakError(f"espeak_Synth failed with status {status} on '{text}'")
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        return Synthesis(audio, self.sample_rate, self._words, self._phonemes)

    def phonemes(self, text: str, voice_name: str = "cmn") -> str:
        """espeak's phoneme string for `text` (used to check that it reads a syllable as Mandarin)."""
        if voice_name != self._voice_name:
            self._lib.espeak_SetVoiceByName(voice_name.encode())
            self._voice_name = voice_name
        pointer = ctypes.c_char_p(text.encode("utf-8"))
        result = self._lib.espeak_TextToPhonemes(ctypes.byref(pointer), CHARS_UTF8, 0)
        return (result or b"").decode("utf-8", "replace")


_process_espeak: Espeak | None = None


def process_espeak() -> Espeak:
    """The one espeak-ng instance of this process, made on first use."""
    global _process_espeak
    if _process_espeak is None:
        _process_espeak = Espeak()
    return _process_espeak
