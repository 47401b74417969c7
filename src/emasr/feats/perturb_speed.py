"""Kaldi's utils/data/perturb_data_dir_speed.sh and perturb_data_dir_speed_3way.sh.

A copy of a data dir at speed F has Kaldi's ids and files: utterances, speakers and recordings
get the prefix `sp<F>-` (as typed: sp0.9-, sp1.1-), `wav.scp` pipes each recording through
`emasr speed-perturb-wav --factor F` (sox's `speed F`, without sox), `segments` times and
`utt2dur`/`reco2dur` are divided by F (so 0.9 lengthens by 1/0.9), `utt2uniq` maps each copy to
its original utterance, and `text`, `spk2gender`, `utt2lang` follow the new ids. Files that
describe features (`feats.scp`, `cmvn.scp`, `utt2num_frames`, `vad.scp`, `frame_shift`) are not
carried over: the audio changed. The 3-way version combines the original (unprefixed unless
--always-include-prefix) with the 0.9 and 1.1 copies. The source dir is only read: its durations
are computed in memory when it has no complete utt2dur (Kaldi writes one into it).
"""
from __future__ import annotations

import logging
import os
import shlex
from pathlib import Path

import click

from emasr.feats.speed import speed_ratio
from emasr.io.datadir import DataDir, DataDirError, clear_dir, load_data_dir, write_data_dir
from emasr.io.datadir_edit import check_distinct, merge_tables
from emasr.feats.utt2dur import format_seconds, utterance_durations

log = logging.getLogger(__name__)

# What a speed-perturbed copy keeps (renamed); everything else describes the old audio's features.
KEPT_TABLES = ("utt2spk", "text", "segments", "utt2lang", "utt2uniq", "spk2gender", "wav.scp",
               "reco2file_and_channel", "reco2dur")
THREE_WAY = ("0.9", "1.0", "1.1")


def perturbed_wav_entry(spec: str, factor: str) -> str:
    """The wav.scp value that plays `spec` (a path or a `command |`) at speed `factor`."""
    spec = spec.strip()
    if spec.endswith("|"):
        return f"{spec} emasr speed-perturb-wav --factor {factor} - - |"
    return f"emasr speed-perturb-wav --factor {factor} {shlex.quote(spec)} - |"


def _scaled_segment(value: str, reco_map: dict[str, str], factor: float) -> str:
    reco, start, end = value.split()
    end_s = float(end)
    new_end = f"{end_s / factor:.2f}" if end_s > 0 else end  # Kaldi's awk: %.2f, -1 stays
    return f"{reco_map.get(reco, reco)} {float(start) / factor:.2f} {new_end}"


def speed_copy(data: DataDir, durations: dict[str, float], factor: str,
               prefix: bool = True) -> DataDir:
    """The data dir at speed `factor` (a string such as "0.9", used in the prefix as typed)."""
    value = float(speed_ratio(float(factor)))
    pre = f"sp{factor}-" if prefix else ""
    utt_map = {u: pre + u for u in data.utt2spk}
    spk_map = {s: pre + s for s in set(data.utt2spk.values())}
    reco_map = utt_map  # without segments, wav.scp is keyed by utterance
    if data.has_segments:
        reco_map = {r: pre + r for r in data.recordings_of(data.utt2spk)}
    maps = {"utt": utt_map, "spk": spk_map, "reco": reco_map}
    out = DataDir()
    for name in KEPT_TABLES:
        if name not in data.tables:
            continue
        mapping = maps[data.index_of(name)]
        out.tables[name] = {mapping.get(k, k): v for k, v in data.tables[name].items()}
    out.tables["utt2spk"] = {utt_map[u]: spk_map[s] for u, s in data.utt2spk.items()}
    uniq = data.tables.get("utt2uniq", {})
    if prefix:
        out.tables["utt2uniq"] = {utt_map[u]: uniq.get(u, u) for u in data.utt2spk}
    out.tables["utt2dur"] = {utt_map[u]: format_seconds(d / value) for u, d in durations.items()}
    if value != 1:
        out.tables["wav.scp"] = {k: perturbed_wav_entry(v, factor)
                                 for k, v in out.tables["wav.scp"].items()}
        if "segments" in out.tables:
            out.tables["segments"] = {utt_map[u]: _scaled_segment(v, reco_map, value)
                                      for u, v in data.tables["segments"].items()}
        if "reco2dur" in out.tables:
            out.tables["reco2dur"] = {r: format_seconds(float(d) / value)
                                      for r, d in out.tables["reco2dur"].items()}
    return out


def combine(copies: list[tuple[str, DataDir]]) -> DataDir:
    """Union of the copies' tables; a table that some copies lack is dropped (Kaldi's
    combine_data.sh warns and skips it), except utt2uniq, which defaults to the identity."""
    names = set.intersection(*(set(d.tables) for _, d in copies))
    if any("utt2uniq" in d.tables for _, d in copies):
        for _, d in copies:
            d.tables.setdefault("utt2uniq", {u: u for u in d.utt2spk})
        names.add("utt2uniq")
    combined = DataDir()
    for name in sorted(names):
        combined.tables[name] = merge_tables(name, [(Path(label), d.tables[name])
                                                    for label, d in copies])
    return combined


def perturb_data_dir_speed(src: str | os.PathLike, dest: str | os.PathLike,
                           factors: tuple[str, ...], always_include_prefix: bool = True) -> int:
    """Write the speed-perturbed copies of src for every factor, combined, into dest.

    A factor of 1.0 keeps the original ids unless always_include_prefix. Returns the number of
    utterances written."""
    src, dest = Path(src), Path(dest)
    check_distinct(src, dest)
    if (dest / "feats.scp").is_file():
        raise DataDirError(f"{dest}/feats.scp already exists: refusing to overwrite a data dir "
                           "with features (delete it to rerun)")
    for factor in factors:
        try:
            speed_ratio(float(factor))
        except ValueError as err:
            raise DataDirError(f"bad speed factor '{factor}': {err}") from None
    data = load_data_dir(src)
    if "wav.scp" not in data.tables:
        raise DataDirError(f"{src}/wav.scp: no such file; expected the audio to perturb")
    durations = utterance_durations(src)
    copies = [(f"{src} at speed {f}",
               speed_copy(data, durations, f, always_include_prefix or float(f) != 1.0))
              for f in factors]
    result = combine(copies) if len(copies) > 1 else copies[0][1]
    if dest.is_dir():
        clear_dir(dest)
    write_data_dir(result, dest)
    total = sum(float(d) for d in result.tables["utt2dur"].values())
    log.info("speed factors %s: %d utterances, %.1f s of audio in %s", " ".join(factors),
             len(result.utt2spk), total, dest)
    return len(result.utt2spk)


@click.command("perturb-data-dir-speed")
@click.option("--factors", default=",".join(THREE_WAY), show_default=True,
              help="Comma-separated speed factors; each gives a copy prefixed sp<F>-.")
@click.option("--always-include-prefix/--no-always-include-prefix", default=False,
              help="Prefix the speed 1.0 copy too (sp1.0-), as Kaldi's option.")
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@click.argument("dest", type=click.Path(file_okay=False))
def perturb_data_dir_speed_cli(factors, always_include_prefix, src, dest):
    """Speed-perturbed copies of data dir SRC in DEST (Kaldi's perturb_data_dir_speed*.sh)."""
    from emasr.feats.wav import WavError
    from emasr.io.table import TableError

    try:
        perturb_data_dir_speed(src, dest, tuple(f.strip() for f in factors.split(",")),
                               always_include_prefix)
    except (DataDirError, TableError, WavError) as err:
        raise click.ClickException(str(err)) from None
