"""The networks' lang dir: a copy of a lang dir with the one-frame (skip) topology.

Kaldi's chain recipes keep the GMMs on the 3-state topology at 10 ms and give the networks, which
see one frame per 30 ms after 3-frame stacking, a lang dir of their own (``data/lang_chain``) whose
topology lets a phone pass in a single frame. ``emasr prepare-lang-nnet LANG OUT`` (and
``utils/prepare_lang_nnet.sh``) writes that lang dir: every file of LANG copied unchanged
(phones.txt, words.txt, L.fst, L_disambig.fst, G.fst when present, phones/ ...), and ``topo``
rewritten as emasr.lang.topo's ``skip`` topology for the same phones, with as many emitting states
per phone as LANG's topology has (3 and 5 for Kaldi's), unless told otherwise. ``tmp/`` (mkgraph's
cache) is not copied. OUT is built beside its final place and renamed into it.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import click

from emasr.kaldi.io import KaldiFormatError, KaldiReader
from emasr.kaldi.transitions import read_topology
from emasr.io.atomic import atomic_write
from emasr.lang.topo import make_topo

log = logging.getLogger(__name__)
NNET_TOPOLOGY = "skip"
NOT_COPIED = ("tmp",)  # mkgraph's LG/CLG cache


class NnetLangError(ValueError):
    """The source lang dir cannot be turned into a network lang dir."""


def read_phone_ints(path: Path) -> list[int]:
    if not path.is_file():
        raise NnetLangError(f"expected file {path} to exist")
    return [int(x) for x in path.read_text().split()]


def states_per_phone_class(lang: Path, phones: list[int], what: str) -> int | None:
    """The number of emitting states the lang's topology gives `phones` (one number for all)."""
    if not phones:
        return None
    try:
        topology = read_topology(KaldiReader.open(lang / "topo"))
        counts = {len(topology.entry_for(p)) - 1 for p in phones}
    except (KaldiFormatError, KeyError, OSError) as err:
        raise NnetLangError(f"{lang / 'topo'}: cannot read the {what} phones' states: "
                            f"{err}") from None
    if len(counts) != 1:
        raise NnetLangError(f"{lang / 'topo'}: the {what} phones have different numbers of "
                            f"states {sorted(counts)}; give --num-{what.replace('-', '')}-states")
    return counts.pop()


def nnet_topo(lang: Path, num_nonsil_states: int | None = None,
              num_sil_states: int | None = None) -> str:
    """The skip topology for the lang dir's phones (phones/{nonsilence,silence}.int)."""
    nonsilence = read_phone_ints(lang / "phones" / "nonsilence.int")
    silence = read_phone_ints(lang / "phones" / "silence.int")
    if not silence:
        raise NnetLangError(f"{lang}/phones/silence.int lists no phones")
    nonsil = num_nonsil_states or states_per_phone_class(lang, nonsilence, "non-silence") or 3
    sil = num_sil_states or states_per_phone_class(lang, silence, "silence")
    return make_topo(nonsilence, silence, nonsil, sil, topology=NNET_TOPOLOGY)


def prepare_lang_nnet(lang_dir: str | os.PathLike, out_dir: str | os.PathLike,
                      num_nonsil_states: int | None = None,
                      num_sil_states: int | None = None) -> None:
    """Write OUT = LANG with the skip topology (see the module doc); replaces OUT when done."""
    lang, out = Path(lang_dir), Path(out_dir)
    if not (lang / "phones.txt").is_file():
        raise NnetLangError(f"expected file {lang}/phones.txt to exist")
    if out.resolve() == lang.resolve():
        raise NnetLangError(f"<lang-dir> and <nnet-lang-dir> must differ ({lang})")
    topo = nnet_topo(lang, num_nonsil_states, num_sil_states)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out.name + ".tmp.", dir=out.parent))
    try:
        shutil.copytree(lang, staging, dirs_exist_ok=True,
                        ignore=lambda d, names: [n for n in names if Path(d) == lang
                                                 and n in NOT_COPIED])
        with atomic_write(staging / "topo") as f:
            f.write(topo)
        staging.chmod(0o755)
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("%s: copy of %s with the %s topology", out, lang, NNET_TOPOLOGY)


@click.command("prepare-lang-nnet")
@click.option("--num-nonsil-states", type=int, default=None,
              help="Emitting states of a non-silence phone (default: as in LANG_DIR's topo).")
@click.option("--num-sil-states", type=int, default=None,
              help="Emitting states of a silence phone (default: as in LANG_DIR's topo).")
@click.argument("lang_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
def prepare_lang_nnet_cli(num_nonsil_states, num_sil_states, lang_dir, out_dir):
    """Copy LANG_DIR to OUT_DIR with the one-frame (skip) topology: the networks' lang dir (Kaldi
    chain's data/lang_chain). Every other file is copied unchanged."""
    try:
        prepare_lang_nnet(lang_dir, out_dir, num_nonsil_states, num_sil_states)
    except NnetLangError as err:
        raise click.ClickException(str(err)) from None
