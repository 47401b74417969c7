"""Data-dir edits with Kaldi's names and rules: fix, subset, copy (with id prefixes), combine.

Each function builds the result in memory first and writes only when it is complete, so a failure
leaves the existing files as they were; every file is written atomically (emasr.io.datadir).
"""
from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Iterable, Sequence

from emasr.io.datadir import (KNOWN_TABLES, PLAIN_FILES, DataDir, DataDirError, backup_files,
                              clear_dir, load_data_dir, read_id_list, read_pairs,
                              speaker_order_violation, write_data_dir)
from emasr.io.table import c_sort_key, read_lines

log = logging.getLogger(__name__)


# -- fix_data_dir --------------------------------------------------------------------------------

def load_for_fixing(path: Path, names: Iterable[str]) -> DataDir:
    """Read tables leniently: sort them and drop a repeated line, saying so; two different lines
    for one key are an error (which one is right is the user's to say, not ours to guess)."""
    data = DataDir()
    for name in names:
        if not (path / name).is_file():
            continue
        pairs = read_pairs(path / name)
        table: dict[str, str] = {}
        for key, value in pairs:
            if table.setdefault(key, value) != value:
                raise DataDirError(f"{path / name}: '{key}' has two different lines ('{key} "
                                   f"{table[key]}' and '{key} {value}'); expected one")
        ordered = dict(sorted(table.items(), key=lambda kv: c_sort_key(kv[0])))
        if list(ordered) != [k for k, _ in pairs]:
            log.info("file %s is not in sorted order or not unique, sorting it", path / name)
        data.tables[name] = ordered
    for name in PLAIN_FILES:
        if (path / name).is_file():
            data.plain[name] = (path / name).read_bytes()
    return data


def keep_keys(data: DataDir, name: str, keys: set[str]) -> None:
    """Restrict one table to `keys`, reporting how many lines went, as Kaldi's filter_file does."""
    if name not in data.tables:
        return
    table = data.tables[name]
    kept = {k: v for k, v in table.items() if k in keys}
    if len(kept) != len(table):
        log.info("filtered %s from %d to %d lines", name, len(table), len(kept))
    data.tables[name] = kept


def filter_recordings(data: DataDir, where: Path) -> None:
    """With segments: keep the recordings that both segments and wav.scp know."""
    if not data.has_segments:
        return
    if "wav.scp" not in data.tables:
        raise DataDirError(f"{where}/segments exists but {where}/wav.scp does not; expected both")
    segments = data.tables["segments"]
    recordings = data.recordings_of(segments) & set(data.tables["wav.scp"])
    if not recordings:
        raise DataDirError(f"{where}/segments: no recording of it is in wav.scp; "
                           "expected segments to refer to wav.scp's recordings")
    data.tables["segments"] = {u: v for u, v in segments.items()
                               if v.split() and v.split()[0] in recordings}
    if len(data.tables["segments"]) != len(segments):
        log.info("filtered segments from %d to %d lines", len(segments), len(data.tables["segments"]))
    for name in ("wav.scp", "reco2file_and_channel", "reco2dur"):
        keep_keys(data, name, recordings)


def filter_speakers(data: DataDir) -> None:
    """Keep the speakers that every speaker-indexed table (cmvn.scp, spk2gender ...) knows."""
    speakers = set(data.utt2spk.values())
    spk_tables = [n for n in data.tables if data.index_of(n) == "spk"]
    for name in ("cmvn.scp", "spk2gender"):
        if name in data.tables:
            speakers &= set(data.tables[name])
    data.tables["utt2spk"] = {u: s for u, s in data.utt2spk.items() if s in speakers}
    for name in spk_tables:
        keep_keys(data, name, speakers)


def filter_utterances(data: DataDir, where: Path) -> None:
    """Keep the utterances present in utt2spk and every table that must list them all."""
    index = speaker_order_violation(data.utt2spk)
    if index is not None:
        utt, spk = list(data.utt2spk.items())[index]
        raise DataDirError(f"{where}/utt2spk:{index + 1}: utterance '{utt}' of speaker '{spk}' "
                           "is out of order when sorted by speaker; expected utt2spk sorted by "
                           "speaker too (fix this by making speaker ids prefixes of utterance ids)")
    utts = set(data.utt2spk)
    required = ["feats.scp", "text", "segments", "utt2lang"] + ([] if data.has_segments else ["wav.scp"])
    for name in required:
        if name in data.tables:
            utts &= set(data.tables[name])
    if "text" in data.tables:
        empty = {u for u, words in data.tables["text"].items() if not words.strip()}
        if empty & utts:
            log.info("removing %d utterances with an empty transcript", len(empty & utts))
        utts -= empty
    if not utts:
        raise DataDirError(f"{where}: no utterances remained (none is in all of utt2spk, "
                           f"{', '.join(n for n in required if n in data.tables)}); not proceeding")
    old = len(data.utt2spk)
    if len(utts) != old:
        log.info("kept %d utterances out of %d", len(utts), old)
    else:
        log.info("kept all %d utterances.", old)
    for name in list(data.tables):
        if data.index_of(name) == "utt":
            keep_keys(data, name, utts)


def check_utt2spk_fields(path: Path) -> None:
    """'utterance speaker' on every line: a third field would become part of the speaker id and
    a corrupt spk2utt (validate_data_dir.sh refuses it the same way)."""
    for number, line in enumerate(read_lines(path / "utt2spk"), 1):
        fields = line.split()
        if fields and len(fields) != 2:
            raise DataDirError(f"{path}/utt2spk:{number}: '{line}' has {len(fields)} fields; "
                               "expected 'utterance speaker'")


def fix_data(data: DataDir, where: Path) -> DataDir:
    """Kaldi's fix_data_dir.sh order: recordings, speakers, utterances, speakers, recordings."""
    filter_recordings(data, where)
    filter_speakers(data)
    filter_utterances(data, where)
    filter_speakers(data)
    filter_recordings(data, where)
    return data


def fix_data_dir(path: str | os.PathLike, utt_extra_files: Sequence[str] = (),
                 spk_extra_files: Sequence[str] = ()) -> list[str]:
    """Sort, de-duplicate and filter a data dir in place; originals go to <dir>/.backup."""
    path = Path(path)
    if not path.is_dir():
        raise DataDirError(f"{path}: no such directory")
    if not (path / "utt2spk").is_file():
        raise DataDirError(f"{path}/utt2spk: no such file; expected every data dir to have utt2spk")
    check_utt2spk_fields(path)
    names = KNOWN_TABLES + ("spk2utt",) + tuple(utt_extra_files) + tuple(spk_extra_files)
    data = load_for_fixing(path, [n for n in names if n != "spk2utt"])
    data.extra_index = {**{n: "utt" for n in utt_extra_files}, **{n: "spk" for n in spk_extra_files}}
    fixed = fix_data(data, path)
    backup = backup_files(path, names)
    written = write_data_dir(fixed, path, only_changed=True, remove_stale=False)
    log.info("old files are kept in %s", backup)
    return written


# -- subset_data_dir -----------------------------------------------------------------------------

def spread_selection(items: list[str], num: int) -> list[str]:
    """Kaldi's subset_scp.pl default: `num` items spread evenly over the list (halve, recurse)."""
    chosen: list[str] = []

    def select(start: int, end: int, needed: int) -> None:
        if end - start == 1:
            if needed > 0:
                chosen.append(items[start])
            return
        half = (end - start) // 2
        select(start, start + half, needed // 2)
        select(start + half, end, needed - needed // 2)

    if num > 0:
        select(0, len(items), num)
    return chosen


def speakers_totalling(data: DataDir, num_utts: int, seed: int) -> list[str]:
    """Whole speakers in a seeded random order until they hold at least num_utts utterances."""
    by_speaker: dict[str, list[str]] = {}
    for utt, spk in data.utt2spk.items():
        by_speaker.setdefault(spk, []).append(utt)
    speakers = sorted(by_speaker, key=c_sort_key)
    random.Random(seed).shuffle(speakers)
    chosen, total = [], 0
    for spk in speakers:
        if total >= num_utts:
            break
        chosen.extend(by_speaker[spk])
        total += len(by_speaker[spk])
    return chosen


def per_speaker_selection(data: DataDir, num: int) -> list[str]:
    """Up to `num` utterances of every speaker, evenly spaced through its utterances."""
    by_speaker: dict[str, list[str]] = {}
    for utt, spk in data.utt2spk.items():
        by_speaker.setdefault(spk, []).append(utt)
    chosen = []
    for utts in by_speaker.values():
        step = max(1, len(utts) // num)
        chosen.extend(utts[::step][:num])
    return chosen


def utterance_lengths(data: DataDir, where: Path) -> dict[str, float]:
    """Lengths for --shortest: utt2num_frames, else utt2dur, else the feature matrices' rows."""
    for name in ("utt2num_frames", "utt2dur"):
        if name in data.tables:
            return {u: float(v.split()[0]) for u, v in data.tables[name].items()}
    if (where / "feats.scp").is_file():
        import kaldiio

        with kaldiio.ReadHelper(f"scp:{where / 'feats.scp'}") as reader:
            return {utt: float(len(matrix)) for utt, matrix in reader}
    raise DataDirError(f"{where}: --shortest needs utt2num_frames, utt2dur or feats.scp; "
                       "none exists")


def choose_utterances(data: DataDir, where: Path, mode: str, num: int | None = None,
                      id_list: str | None = None, seed: int = 0) -> list[str]:
    """The utterances a subset_data_dir.sh mode selects (utt2spk order)."""
    utts = list(data.utt2spk)
    if mode == "utt-list":
        wanted = set(read_id_list(id_list))
        return [u for u in utts if u in wanted]
    if mode == "spk-list":
        wanted = set(read_id_list(id_list))
        return [u for u in utts if data.utt2spk[u] in wanted]
    assert num is not None
    if num <= 0:
        raise DataDirError(f"number of utterances {num}; expected a positive integer")
    if mode == "speakers":
        return speakers_totalling(data, num, seed)
    if mode == "per-spk":
        return per_speaker_selection(data, num)
    if num > len(utts):
        raise DataDirError(f"{where}: cannot subset to {num} utterances: it has only {len(utts)}; "
                           f"expected at most {len(utts)}")
    if mode == "first":
        return utts[:num]
    if mode == "last":
        return utts[len(utts) - num:]
    if mode == "random":
        return random.Random(seed).sample(utts, num)
    if mode == "shortest":
        lengths = utterance_lengths(data, where)
        return sorted(utts, key=lambda u: lengths.get(u, float("inf")))[:num]
    if mode == "spread":
        return spread_selection(utts, num)
    raise ValueError(f"unknown subset mode {mode}")


def check_distinct(src: Path, dest: Path) -> None:
    if src.resolve() == dest.resolve():
        raise DataDirError(f"{dest}: the destination is the source dir; expected a new directory")


def subset_data_dir(src: str | os.PathLike, dest: str | os.PathLike, mode: str,
                    num: int | None = None, id_list: str | None = None, seed: int = 0) -> int:
    """Write the chosen utterances (with their speakers and recordings) to dest; returns their count."""
    src, dest = Path(src), Path(dest)
    check_distinct(src, dest)
    data = load_data_dir(src)
    if not data.utt2spk:
        raise DataDirError(f"{src}/utt2spk: no utterances; expected at least one")
    chosen = choose_utterances(data, src, mode, num, id_list, seed)
    if not chosen:
        raise DataDirError(f"{src}: the selection is empty (no listed id is in {src}/utt2spk); "
                           "expected at least one utterance")
    write_data_dir(data.select(chosen), dest)
    log.info("reducing #utt from %d to %d", len(data.utt2spk), len(chosen))
    return len(chosen)


# -- copy_data_dir -------------------------------------------------------------------------------

def rename_ids(data: DataDir, utt_map: dict[str, str], spk_map: dict[str, str]) -> DataDir:
    """Apply the utterance and speaker maps to keys (and utt2spk's values); recordings keep ids."""
    maps = {"utt": utt_map, "spk": spk_map}
    out = DataDir(plain=dict(data.plain), extra_index=dict(data.extra_index))
    for name, table in data.tables.items():
        mapping = maps.get(data.index_of(name))
        out.tables[name] = table if mapping is None else {mapping.get(k, k): v for k, v in table.items()}
    out.tables["utt2spk"] = {u: spk_map.get(s, s) for u, s in out.utt2spk.items()}
    return out


def copy_data_dir(src: str | os.PathLike, dest: str | os.PathLike, utt_prefix: str = "",
                  utt_suffix: str = "", spk_prefix: str = "", spk_suffix: str = "") -> None:
    """Copy a data dir, adding prefixes/suffixes to utterance and speaker ids (Kaldi's options)."""
    src, dest = Path(src), Path(dest)
    check_distinct(src, dest)
    data = load_data_dir(src)
    utt_map = {u: f"{utt_prefix}{u}{utt_suffix}" for u in data.utt2spk}
    spk_map = {s: f"{spk_prefix}{s}{spk_suffix}" for s in set(data.utt2spk.values())}
    write_data_dir(rename_ids(data, utt_map, spk_map), dest)
    log.info("copied data from %s to %s", src, dest)


# -- combine_data --------------------------------------------------------------------------------

def merge_tables(name: str, sources: list[tuple[Path, dict[str, str]]]) -> dict[str, str]:
    """Union of one table over the sources, sorted; a key may repeat only with the same value."""
    merged: dict[str, str] = {}
    origin: dict[str, Path] = {}
    for src, table in sources:
        for key, value in table.items():
            if key in merged and merged[key] != value:
                raise DataDirError(
                    f"{src}/{name}: '{key}' is also in {origin[key]}/{name} with a different "
                    "value; expected distinct ids across the combined dirs (give each its own "
                    "prefix with utils/copy_data_dir.sh --utt-prefix/--spk-prefix)")
            merged.setdefault(key, value)
            origin.setdefault(key, src)
    return dict(sorted(merged.items(), key=lambda kv: c_sort_key(kv[0])))


def check_combined_speaker_order(utt2spk: dict[str, str], srcs: list[Path],
                                 loaded: list[DataDir]) -> None:
    """Sources that are each fine can still interleave badly (speaker ids not prefixing utt ids)."""
    index = speaker_order_violation(utt2spk)
    if index is None:
        return
    utt, spk = list(utt2spk.items())[index]
    src = next(s for s, d in zip(srcs, loaded) if utt in d.utt2spk)
    raise DataDirError(
        f"{src}/utt2spk: utterance '{utt}' of speaker '{spk}' falls at line {index + 1} of the "
        "combined utt2spk, out of order when sorted by speaker; expected speaker ids that prefix "
        "the utterance ids (utils/copy_data_dir.sh --utt-prefix X- --spk-prefix X- per source)")


def combine_data(dest: str | os.PathLike, sources: Sequence[str | os.PathLike],
                 extra_files: Sequence[str] = (), skip_fix: bool = False) -> None:
    """Combine data dirs into dest (replaced); tables that the first source lacks are skipped."""
    dest = Path(dest)
    srcs = [Path(s) for s in sources]
    for src in srcs:
        check_distinct(src, dest)
    loaded = [load_data_dir(src, extra_utt_files=extra_files) for src in srcs]
    combined = DataDir(extra_index={n: "utt" for n in extra_files})
    for name in loaded[0].tables:
        if name == "utt2uniq":
            continue  # combined below, with Kaldi's own rule
        lacking = [str(s) for s, d in zip(srcs, loaded) if name not in d.tables]
        if lacking:
            raise DataDirError(f"{lacking[0]}/{name}: no such file; expected it since "
                               f"{srcs[0]}/{name} exists (files of the first dir are combined)")
        combined.tables[name] = merge_tables(name, [(s, d.tables[name]) for s, d in zip(srcs, loaded)])
        log.info("combined %s", name)
    if any("utt2uniq" in d.tables for d in loaded):
        # Kaldi's rule: a dir without utt2uniq contributes the identity map.
        combined.tables["utt2uniq"] = merge_tables("utt2uniq", [
            (s, d.tables.get("utt2uniq") or {u: u for u in d.utt2spk}) for s, d in zip(srcs, loaded)])
    for name in PLAIN_FILES:
        values = {d.plain.get(name) for d in loaded}
        if len(values) == 1 and None not in values:
            combined.plain[name] = values.pop()
        elif values != {None}:
            log.warning("not combining %s: the source dirs disagree or some lack it", name)
    check_combined_speaker_order(combined.utt2spk, srcs, loaded)
    if not skip_fix:
        combined = fix_data(combined, dest)
    if dest.is_dir():
        clear_dir(dest)
    write_data_dir(combined, dest)
    log.info("combined %d dirs into %s: %d utterances", len(srcs), dest, len(combined.utt2spk))
