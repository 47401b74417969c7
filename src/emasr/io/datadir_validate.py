"""validate_data_dir: the contract of a Kaldi data directory, checked file by file.

The checks follow Kaldi's utils/validate_data_dir.sh (same options, same rules) but stop at the
first problem with a message that names the file, the line and what was expected, instead of a
partial diff. Line numbers are 1-based; a table's n-th key is on line n because blank lines are
themselves an error.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from emasr.io.datadir import (DataDirError, speaker_order_violation,
                              utt2spk_to_spk2utt)
from emasr.io.table import c_sort_key, read_table

# Words that may not appear in a transcript: they are the LM's sentence markers and the
# back-off disambiguation symbol, so a transcript holding them breaks graph building.
RESERVED_WORDS = ("<s>", "</s>", "#0")
UTT_KEYED = ("vad.scp", "utt2lang", "utt2uniq", "utt2warp")
SPK_KEYED = ("cmvn.scp", "spk2gender", "spk2warp")


@dataclass
class ValidateOptions:
    no_feats: bool = False
    no_text: bool = False
    no_wav: bool = False
    no_spk_sort: bool = False


class Validator:
    """Checks one data dir; `run()` raises DataDirError at the first problem, returns warnings."""

    def __init__(self, path: str | os.PathLike, options: ValidateOptions | None = None):
        self.dir = Path(path)
        self.opts = options or ValidateOptions()
        self.warnings: list[str] = []
        self.tables: dict[str, dict[str, str]] = {}

    def file(self, name: str) -> Path:
        return self.dir / name

    def has(self, name: str) -> bool:
        return self.file(name).is_file()

    def fail(self, message: str) -> None:
        raise DataDirError(message)

    # -- reading ------------------------------------------------------------------------------
    def load(self, name: str) -> dict[str, str]:
        """Read a table, checking encoding, final newline, unique keys and C-locale order."""
        path = self.file(name)
        raw = path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            last_line = raw.count(b"\n") + 1
            self.fail(f"{path}:{last_line}: last line has no newline; "
                      "expected every line to end with '\\n'")
        table = read_table(path)
        keys = list(table)
        for number in range(1, len(keys)):
            if c_sort_key(keys[number]) < c_sort_key(keys[number - 1]):
                self.fail(f"{path}:{number + 1}: key '{keys[number]}' comes after "
                          f"'{keys[number - 1]}'; expected keys sorted as by LC_ALL=C sort "
                          "(utils/fix_data_dir.sh sorts them)")
        self.tables[name] = table
        return table

    def require(self, name: str, why: str = "") -> None:
        if not self.has(name):
            self.fail(f"{self.file(name)}: no such file{why}")

    # -- checks -------------------------------------------------------------------------------
    def run(self) -> list[str]:
        if not self.dir.is_dir():
            self.fail(f"{self.dir}: no such directory")
        self.check_speakers()
        if self.has("text"):
            self.check_text()
        elif not self.opts.no_text:
            self.fail(f"{self.file('text')}: no such file (if this is by design, use --no-text)")
        self.check_audio()
        if self.has("feats.scp"):
            self.check_same_keys("feats.scp", "utt2spk")
        elif not self.opts.no_feats:
            self.fail(f"{self.file('feats.scp')}: no such file "
                      "(if this is by design, use --no-feats)")
        for name in UTT_KEYED:
            if self.has(name):
                self.check_same_keys(name, "utt2spk")
        for name in SPK_KEYED:
            if self.has(name):
                self.check_same_keys(name, "spk2utt")
        self.check_values()
        return self.warnings

    def check_speakers(self) -> None:
        for name in ("utt2spk", "spk2utt"):
            self.require(name, "; expected every data dir to have utt2spk and spk2utt")
            if self.file(name).stat().st_size == 0:
                self.fail(f"{self.file(name)}: empty file; expected at least one "
                          f"{'utterance' if name == 'utt2spk' else 'speaker'}")
        utt2spk = self.load("utt2spk")
        for number, (utt, spk) in enumerate(utt2spk.items(), 1):
            if not spk or len(spk.split()) != 1:
                self.fail(f"{self.file('utt2spk')}:{number}: '{utt} {spk}' has "
                          f"{1 + len(spk.split())} fields; expected 'utterance speaker'")
        if not self.opts.no_spk_sort:
            self.check_speaker_order(utt2spk)
        self.check_spk2utt(utt2spk)
        if len(self.tables["spk2utt"]) == 1:
            self.warnings.append(f"{self.dir}: only one speaker; per-speaker CMVN and splitting "
                                 "into jobs need several (see Kaldi's data_prep documentation)")

    def check_speaker_order(self, utt2spk: dict[str, str]) -> None:
        """utt2spk must also be sorted by speaker, so each speaker's utterances are contiguous."""
        index = speaker_order_violation(utt2spk)
        if index is not None:
            items = list(utt2spk.items())
            (u0, s0), (u1, s1) = items[index - 1], items[index]
            self.fail(f"{self.file('utt2spk')}:{index + 1}: speaker '{s1}' of utterance '{u1}' "
                      f"sorts before speaker '{s0}' on the line above; expected utt2spk sorted "
                      "by speaker as well as by utterance (make speaker ids prefixes of "
                      "utterance ids, or use --no-spk-sort)")

    def check_spk2utt(self, utt2spk: dict[str, str]) -> None:
        spk2utt = self.load("spk2utt")
        expected = utt2spk_to_spk2utt(utt2spk)
        path = self.file("spk2utt")
        for number, (spk, utts) in enumerate(spk2utt.items(), 1):
            listed = utts.split()
            if not listed:
                self.fail(f"{path}:{number}: speaker '{spk}' lists no utterances; "
                          "expected 'speaker utt1 utt2 ...'")
            want = expected.get(spk)
            if want is None:
                self.fail(f"{path}:{number}: speaker '{spk}' is not in utt2spk; expected "
                          "spk2utt to agree with utt2spk (utils/utt2spk_to_spk2utt.pl)")
            if sorted(listed, key=c_sort_key) != sorted(want, key=c_sort_key):
                extra = sorted(set(listed) - set(want)) or sorted(set(want) - set(listed))
                where = "not in" if set(listed) - set(want) else "missing from"
                self.fail(f"{path}:{number}: utterance '{extra[0]}' of speaker '{spk}' is "
                          f"{where} this line according to utt2spk; expected spk2utt to agree "
                          "with utt2spk (utils/utt2spk_to_spk2utt.pl)")
        missing = [spk for spk in expected if spk not in spk2utt]
        if missing:
            self.fail(f"{path}: speaker '{missing[0]}' of utt2spk is missing; expected spk2utt to "
                      "agree with utt2spk (utils/utt2spk_to_spk2utt.pl)")

    def check_text(self) -> None:
        text = self.load("text")
        path = self.file("text")
        for number, (utt, words) in enumerate(text.items(), 1):
            if not words.strip():
                self.fail(f"{path}:{number}: utterance '{utt}' has an empty transcript; "
                          "expected at least one word (utils/fix_data_dir.sh drops such lines)")
            tokens = words.split()
            for word in RESERVED_WORDS:
                if word in tokens:
                    self.fail(f"{path}:{number}: utterance '{utt}' contains the reserved symbol "
                              f"'{word}'; expected ordinary words only")
            bad = next((c for c in words if not c.isprintable() and c not in " \t"), None)
            if bad is not None:
                self.fail(f"{path}:{number}: utterance '{utt}' contains the non-printing "
                          f"character U+{ord(bad):04X}; expected printable text")
        self.check_same_keys("text", "utt2spk")

    def check_audio(self) -> None:
        if self.has("segments") and not self.has("wav.scp"):
            self.fail(f"{self.file('wav.scp')}: no such file; expected it beside "
                      f"{self.file('segments')}")
        if not self.has("wav.scp"):
            if not self.opts.no_wav:
                self.fail(f"{self.file('wav.scp')}: no such file "
                          "(if this is by design, use --no-wav)")
            return
        wav = self.load("wav.scp")
        for number, (key, value) in enumerate(wav.items(), 1):
            if not value:
                self.fail(f"{self.file('wav.scp')}:{number}: '{key}' has no file or command; "
                          "expected 'id path-or-command |'")
            if value.startswith("~"):
                self.fail(f"{self.file('wav.scp')}:{number}: path starts with '~'; expected "
                          "an absolute or relative path (the shell does not expand ~ here)")
        if self.has("segments"):
            self.check_segments(wav)
            recordings_table = "wav.scp"
        else:
            self.check_same_keys("wav.scp", "utt2spk")
            recordings_table = "utt2spk"
        if self.has("reco2file_and_channel"):
            self.check_reco2file_and_channel(recordings_table)
        if self.has("reco2dur"):
            self.check_same_keys("reco2dur", recordings_table)
            self.check_numbers("reco2dur", integer=False)

    def check_segments(self, wav: dict[str, str]) -> None:
        segments = self.load("segments")
        path = self.file("segments")
        used = set()
        for number, (utt, rest) in enumerate(segments.items(), 1):
            fields = rest.split()
            if len(fields) != 3:
                self.fail(f"{path}:{number}: '{utt} {rest}' has {1 + len(fields)} fields; "
                          "expected 'utterance recording start end'")
            reco, start, end = fields[0], as_float(fields[1]), as_float(fields[2])
            if start is None or end is None or start < 0:
                self.fail(f"{path}:{number}: times '{fields[1]} {fields[2]}' of '{utt}' are not "
                          "numbers >= 0; expected start and end in seconds")
            if not start < end:
                self.fail(f"{path}:{number}: segment '{utt}' starts at {fields[1]} and ends at "
                          f"{fields[2]}; expected start < end")
            if reco not in wav:
                self.fail(f"{path}:{number}: recording '{reco}' of segment '{utt}' is not in "
                          f"{self.file('wav.scp')}; expected every recording to be in wav.scp")
            used.add(reco)
        self.check_same_keys("segments", "utt2spk")
        for number, reco in enumerate(wav, 1):
            if reco not in used:
                self.fail(f"{self.file('wav.scp')}:{number}: recording '{reco}' has no segments; "
                          "expected the recordings of segments and wav.scp to match "
                          "(utils/fix_data_dir.sh removes it)")

    def check_reco2file_and_channel(self, recordings_table: str) -> None:
        table = self.load("reco2file_and_channel")
        for number, (reco, rest) in enumerate(table.items(), 1):
            fields = rest.split()
            if len(fields) == 2 and fields[1] == "1":
                self.warnings.append(f"{self.file('reco2file_and_channel')}:{number}: channel "
                                     "'1'; Kaldi expects A or B")
            elif len(fields) != 2 or fields[1] not in ("A", "B"):
                self.fail(f"{self.file('reco2file_and_channel')}:{number}: '{reco} {rest}'; "
                          "expected 'recording file channel' with channel A or B")
        self.check_same_keys("reco2file_and_channel", recordings_table)

    def check_values(self) -> None:
        if self.has("utt2dur"):
            self.check_same_keys("utt2dur", "utt2spk")
            self.check_numbers("utt2dur", integer=False)
        if self.has("utt2num_frames"):
            self.check_same_keys("utt2num_frames", "utt2spk")
            self.check_numbers("utt2num_frames", integer=True)
        if self.has("spk2gender"):
            for number, (spk, gender) in enumerate(self.tables["spk2gender"].items(), 1):
                if gender not in ("m", "f"):
                    self.fail(f"{self.file('spk2gender')}:{number}: gender '{gender}' of "
                              f"speaker '{spk}'; expected m or f")
        if self.has("frame_shift"):
            content = self.file("frame_shift").read_text(encoding="utf-8", errors="replace")
            value = as_float(content.strip())
            if value is None or value <= 0 or len(content.split()) != 1:
                self.fail(f"{self.file('frame_shift')}:1: '{content.strip()}'; expected one "
                          "positive number of seconds, e.g. 0.01")

    def check_numbers(self, name: str, integer: bool) -> None:
        kind = "positive integer" if integer else "positive number"
        for number, (key, value) in enumerate(self.tables[name].items(), 1):
            parsed = as_float(value) if len(value.split()) == 1 else None
            if parsed is None or parsed <= 0 or (integer and not value.isdigit()):
                self.fail(f"{self.file(name)}:{number}: value '{value}' of '{key}'; "
                          f"expected one {kind}")

    def check_same_keys(self, name: str, reference: str) -> None:
        """The keys of `name` must be exactly those of `reference` (utt2spk, spk2utt or wav.scp)."""
        table = self.tables[name] if name in self.tables else self.load(name)
        ref = self.tables[reference]
        what = {"utt2spk": "utterances", "spk2utt": "speakers"}.get(reference, "recordings")
        for number, key in enumerate(table, 1):
            if key not in ref:
                self.fail(f"{self.file(name)}:{number}: '{key}' is not in {self.file(reference)}; "
                          f"expected the same {what} in {name} and {reference} "
                          "(utils/fix_data_dir.sh keeps the common ones)")
        for number, key in enumerate(ref, 1):
            if key not in table:
                self.fail(f"{self.file(name)}: '{key}' ({reference} line {number}) is missing; "
                          f"expected the same {what} in {name} and {reference} "
                          "(utils/fix_data_dir.sh keeps the common ones)")


def as_float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def validate_data_dir(path: str | os.PathLike, options: ValidateOptions | None = None) -> list[str]:
    """Check a data dir; raise DataDirError (or TableError) at the first problem. Returns warnings."""
    return Validator(path, options).run()
