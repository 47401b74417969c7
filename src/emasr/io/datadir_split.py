"""split_data: cut a data dir into N parts for N parallel jobs, as Kaldi's utils/split_data.sh.

Per speaker (the default) every speaker lands in exactly one part, so per-speaker CMVN and
adaptation stay within a job; parts are balanced by utterance count with Kaldi's split_scp.pl
rule (speakers dealt out in utt2spk order, then boundary speakers moved between neighbouring parts
while that narrows the size gap). With per_utt, the utterances are cut into N contiguous chunks
whose sizes differ by at most one (the first `total % N` parts get one more).
Parts go to <data>/split<N>/<1..N> (split<N>utt with per_utt) and are not rewritten when they are
already newer than every source file, so N jobs may all call split_data on the same dir.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from emasr.io.datadir import (KNOWN_TABLES, PLAIN_FILES, DataDir, DataDirError, load_data_dir,
                              write_data_dir)

log = logging.getLogger(__name__)


def split_evenly(items: list, num_parts: int) -> list[list]:
    """Contiguous chunks; the first len(items) % num_parts chunks get one item more."""
    size, remainder = divmod(len(items), num_parts)
    parts, start = [], 0
    for index in range(num_parts):
        end = start + size + (1 if index < remainder else 0)
        parts.append(items[start:end])
        start = end
    return parts


def split_speakers(speakers: list[str], counts: dict[str, int],
                   num_parts: int) -> list[list[str]]:
    """Kaldi's balanced per-speaker split: deal speakers out evenly, then move boundary speakers.

    Moving the last speaker of part i to part i+1 (or the first of part i+1 back to part i) is done
    whenever it reduces the absolute size difference of the two parts; each move lowers the sum of
    squared part sizes, so the loop ends.
    """
    parts: list[list[str]] = [[] for _ in range(num_parts)]
    for index, spk in enumerate(speakers):
        parts[index * num_parts // len(speakers)].append(spk)
    sizes = [sum(counts[s] for s in part) for part in parts]
    changed = True
    while changed:
        changed = False
        for i in range(num_parts):
            if i < num_parts - 1 and parts[i]:
                moved = counts[parts[i][-1]]
                if abs((sizes[i + 1] + moved) - (sizes[i] - moved)) < abs(sizes[i + 1] - sizes[i]):
                    parts[i + 1].insert(0, parts[i].pop())
                    sizes[i] -= moved
                    sizes[i + 1] += moved
                    changed = True
            if i > 0 and parts[i]:
                moved = counts[parts[i][0]]
                if abs((sizes[i] - moved) - (sizes[i - 1] + moved)) < abs(sizes[i] - sizes[i - 1]):
                    parts[i - 1].append(parts[i].pop(0))
                    sizes[i - 1] += moved
                    sizes[i] -= moved
                    changed = True
    return parts


def partition_utterances(data: DataDir, num_parts: int, per_utt: bool,
                         name: str = "data") -> list[list[str]]:
    """The utterance ids of each part, in utt2spk order."""
    utts = list(data.utt2spk)
    if not utts:
        raise DataDirError(f"{name}/utt2spk: no utterances; expected at least {num_parts}")
    if per_utt:
        if len(utts) < num_parts:
            raise DataDirError(f"{name}: cannot split {len(utts)} utterances into {num_parts} "
                               f"parts; expected at least {num_parts} utterances (use fewer jobs)")
        return split_evenly(utts, num_parts)
    speakers: list[str] = []
    by_speaker: dict[str, list[str]] = {}
    for utt, spk in data.utt2spk.items():
        if spk not in by_speaker:
            speakers.append(spk)
            by_speaker[spk] = []
        by_speaker[spk].append(utt)
    if len(speakers) < num_parts:
        raise DataDirError(
            f"{name}: cannot split into {num_parts} parts by speaker: it has only {len(speakers)} "
            f"speaker(s); expected at least {num_parts} (use fewer jobs, or split_data.sh "
            "--per-utt if per-speaker processing is not needed)")
    counts = {spk: len(u) for spk, u in by_speaker.items()}
    return [[u for spk in part for u in by_speaker[spk]]
            for part in split_speakers(speakers, counts, num_parts)]


def split_dir_name(data_dir: str | os.PathLike, num_parts: int, per_utt: bool) -> Path:
    return Path(data_dir) / f"split{num_parts}{'utt' if per_utt else ''}"


def is_up_to_date(data_dir: Path, split_dir: Path, num_parts: int) -> bool:
    """True when every part has every source file and none is older than its source (Kaldi's test)."""
    names = KNOWN_TABLES + ("spk2utt",) + PLAIN_FILES
    sources = [data_dir / name for name in names if (data_dir / name).is_file()]
    for part in range(1, num_parts + 1):
        for source in sources:
            target = split_dir / str(part) / source.name
            if not target.is_file() or target.stat().st_mtime_ns < source.stat().st_mtime_ns:
                return False
    return True


def split_data(data_dir: str | os.PathLike, num_parts: int, per_utt: bool = False) -> Path:
    """Write the N parts (unless up to date) and return <data>/split<N>[utt]."""
    if num_parts <= 0:
        raise DataDirError(f"invalid number of parts {num_parts}; expected a positive integer")
    data_dir = Path(data_dir)
    split_dir = split_dir_name(data_dir, num_parts, per_utt)
    data = load_data_dir(data_dir)
    if split_dir.is_dir() and is_up_to_date(data_dir, split_dir, num_parts):
        log.info("%s is newer than %s; not splitting again", split_dir, data_dir)
        return split_dir
    warn_on_count_mismatch(data, data_dir)
    parts = partition_utterances(data, num_parts, per_utt, str(data_dir))
    for index, utts in enumerate(parts, 1):
        write_data_dir(data.select(utts), split_dir / str(index))
    log.info("split %s into %d parts of %s utterances", data_dir, num_parts,
             ",".join(str(len(p)) for p in parts))
    return split_dir


def warn_on_count_mismatch(data: DataDir, data_dir: Path) -> None:
    num_utts = len(data.utt2spk)
    for name in ("feats.scp", "text"):
        if name in data.tables and len(data.tables[name]) != num_utts:
            log.warning("%s: %d lines but utt2spk has %d; utils/fix_data_dir.sh %s fixes this",
                        data_dir / name, len(data.tables[name]), num_utts, data_dir)
