"""Kaldi data directories: which file is indexed by what, loading, selecting utterances, writing.

A data dir holds text tables keyed by utterance (`utt2spk text feats.scp ...`), by speaker
(`cmvn.scp spk2gender`) or by recording (`reco2file_and_channel`; and `wav.scp` when a `segments`
file maps utterances onto recordings). `utt2spk` is the primary speaker map; `spk2utt` is always
derived from it. Every table is written sorted in the C locale, UTF-8, through a temporary name and
a rename (emasr.io.atomic), so a reader never sees half a file.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from emasr.io.atomic import atomic_write
from emasr.io.table import (TableError, c_sort_key, read_lines, read_table, render_table,
                             split_key, write_table)

# Tables keyed by utterance id (wav.scp too, unless there is a segments file).
UTT_TABLES = ("utt2spk", "text", "feats.scp", "segments", "utt2dur", "utt2num_frames", "vad.scp",
              "utt2lang", "utt2uniq", "utt2warp")
# Tables keyed by speaker id (spk2utt is derived from utt2spk and handled apart).
SPK_TABLES = ("cmvn.scp", "spk2gender", "spk2warp")
# Tables keyed by recording id; wav.scp joins them when segments exists.
RECO_TABLES = ("reco2file_and_channel", "reco2dur")
# Small files copied verbatim (they describe the whole directory, not one key).
PLAIN_FILES = ("frame_shift",)
KNOWN_TABLES = UTT_TABLES + SPK_TABLES + RECO_TABLES + ("wav.scp",)


class DataDirError(ValueError):
    """A data directory is inconsistent; the message names the file, the line and what was expected."""


def read_pairs(path: str | os.PathLike) -> list[tuple[str, str]]:
    """All `(key, rest)` pairs of a table in file order, blank lines skipped, duplicates kept.

    Still strict about the encoding: invalid UTF-8 and CRLF raise TableError with the line number.
    """
    return [pair for pair in map(split_key, read_lines(path)) if pair[0]]


def utt2spk_to_spk2utt(utt2spk: Mapping[str, str]) -> dict[str, list[str]]:
    """Speaker -> utterances, speakers in C order, each speaker's utterances in utt2spk order."""
    spk2utt: dict[str, list[str]] = {}
    for utt, spk in utt2spk.items():
        spk2utt.setdefault(spk, []).append(utt)
    return {spk: spk2utt[spk] for spk in sorted(spk2utt, key=c_sort_key)}


def speaker_order_violation(utt2spk: Mapping[str, str]) -> int | None:
    """Index of the first utt2spk entry that breaks the (speaker, utterance) order, else None.

    Kaldi wants utt2spk sorted by speaker as well as by utterance (`sort -k2` leaves it unchanged),
    so that each speaker's utterances are contiguous; speaker ids that prefix the utterance ids
    guarantee it.
    """
    previous = None
    for index, (utt, spk) in enumerate(utt2spk.items()):
        current = (c_sort_key(spk), c_sort_key(utt))
        if previous is not None and current < previous:
            return index
        previous = current
    return None


def table_index(name: str, has_segments: bool) -> str:
    """What a table's keys are: 'utt', 'spk', 'reco', or '' for an unknown table (kept as is)."""
    if name == "wav.scp":
        return "reco" if has_segments else "utt"
    if name in UTT_TABLES:
        return "utt"
    if name in SPK_TABLES:
        return "spk"
    if name in RECO_TABLES:
        return "reco"
    return ""


@dataclass
class DataDir:
    """The tables of a data dir in memory: file name -> {key: rest of line} in file order."""

    tables: dict[str, dict[str, str]] = field(default_factory=dict)
    plain: dict[str, bytes] = field(default_factory=dict)
    extra_index: dict[str, str] = field(default_factory=dict)  # extra table name -> 'utt'|'spk'

    @property
    def utt2spk(self) -> dict[str, str]:
        return self.tables["utt2spk"]

    @property
    def has_segments(self) -> bool:
        return "segments" in self.tables

    def index_of(self, name: str) -> str:
        return self.extra_index.get(name) or table_index(name, self.has_segments)

    def recordings_of(self, utts: Iterable[str]) -> set[str]:
        """Recording ids of the given utterances (through segments, else the utterances themselves)."""
        if not self.has_segments:
            return set(utts)
        segments = self.tables["segments"]
        return {segments[u].split()[0] for u in utts if u in segments and segments[u].split()}

    def select(self, utts: Iterable[str]) -> "DataDir":
        """A new DataDir with only these utterances, their speakers and their recordings."""
        keep_utts = set(utts)
        keep_spks = {spk for utt, spk in self.utt2spk.items() if utt in keep_utts}
        keep = {"utt": keep_utts, "spk": keep_spks, "reco": self.recordings_of(keep_utts)}
        tables = {}
        for name, table in self.tables.items():
            wanted = keep.get(self.index_of(name))
            tables[name] = dict(table) if wanted is None else {
                k: v for k, v in table.items() if k in wanted}
        return DataDir(tables, dict(self.plain), dict(self.extra_index))


def load_data_dir(path: str | os.PathLike, extra_utt_files: Iterable[str] = (),
                  extra_spk_files: Iterable[str] = ()) -> DataDir:
    """Read every known table of a data dir (utt2spk required). Raises TableError / DataDirError.

    Keys must be unique (a duplicate raises TableError naming the line); order is not checked here
    (validate_data_dir does that), since writing sorts anyway.
    """
    path = Path(path)
    if not path.is_dir():
        raise DataDirError(f"{path}: no such data directory")
    if not (path / "utt2spk").is_file():
        raise DataDirError(f"{path}/utt2spk: no such file; expected every data dir to have utt2spk")
    data = DataDir()
    extra = {**{n: "utt" for n in extra_utt_files}, **{n: "spk" for n in extra_spk_files}}
    for name in KNOWN_TABLES + tuple(extra):
        if (path / name).is_file():
            data.tables[name] = read_table(path / name)
    data.extra_index = extra
    for name in PLAIN_FILES:
        if (path / name).is_file():
            data.plain[name] = (path / name).read_bytes()
    return data


def write_data_dir(data: DataDir, path: str | os.PathLike, only_changed: bool = False,
                   remove_stale: bool = True) -> list[str]:
    """Write all tables sorted (and spk2utt derived from utt2spk), each atomically.

    With only_changed, files whose content would not change are left alone (their mtime too, which
    split_data.sh uses to decide whether to split again). With remove_stale, known data-dir files
    that `data` lacks are deleted, so an output dir never mixes old and new tables.
    Returns the names written.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tables = dict(data.tables)
    tables["spk2utt"] = {s: " ".join(u) for s, u in utt2spk_to_spk2utt(data.utt2spk).items()}
    written = []
    for name, table in tables.items():
        target = path / name
        if only_changed and target.is_file() and target.read_bytes() == render_table(table).encode("utf-8"):
            continue
        write_table(target, table)
        written.append(name)
    for name, content in data.plain.items():
        if only_changed and (path / name).is_file() and (path / name).read_bytes() == content:
            continue
        with atomic_write(path / name, "wb") as f:
            f.write(content)
        written.append(name)
    if remove_stale:
        for name in KNOWN_TABLES + PLAIN_FILES:
            if name not in tables and name not in data.plain and (path / name).is_file():
                (path / name).unlink()
    return written


LOCK_FILE = ".lock"   # the writing step's lock (utils/lib/lock.sh): it stays while the step runs


def clear_dir(path: str | os.PathLike) -> None:
    """Remove everything in `path` (about to be rewritten) except the writing step's lock file."""
    for entry in Path(path).iterdir():
        if entry.name == LOCK_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def backup_files(path: str | os.PathLike, names: Iterable[str]) -> Path:
    """Copy the named files of a data dir into <dir>/.backup (Kaldi's fix_data_dir.sh habit)."""
    path = Path(path)
    backup = path / ".backup"
    backup.mkdir(exist_ok=True)
    for name in names:
        if (path / name).is_file():
            with atomic_write(backup / name, "wb") as f, open(path / name, "rb") as src:
                shutil.copyfileobj(src, f)
    return backup


def read_id_list(path: str | os.PathLike) -> list[str]:
    """The first field of every non-blank line (an utterance or speaker list, as filter_scp.pl reads)."""
    return [key for key, _ in read_pairs(path)]
