"""The data-dir subcommands behind utils/*.sh and utils/*.pl (Kaldi's names and options).

Each command reports a bad input as one line `Error: <file>:<line>: <problem>; expected <what>` on
stderr (the console format, docs/reliability.md) and exits 1, without a traceback.
"""
from __future__ import annotations

import functools
import logging
import sys
from typing import Callable

import click

from emasr.io.datadir import DataDirError
from emasr.io.kaldi_lists import ListError
from emasr.io.table import TableError

DATA_DIR = click.Path(file_okay=False)
logger = logging.getLogger(__name__)


def reports_bad_input(func: Callable) -> Callable:
    """Turn the data-dir errors into a one-line message and exit status 1."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (DataDirError, TableError, ListError) as err:
            raise click.ClickException(str(err)) from None
        except OSError as err:
            raise click.ClickException(f"{err.filename}: {err.strerror}") from None

    return wrapper


@click.command("validate-data-dir")
@click.option("--no-feats", is_flag=True, help="Do not require feats.scp (still checked if present).")
@click.option("--no-text", is_flag=True, help="Do not require text (still checked if present).")
@click.option("--no-wav", is_flag=True, help="Do not require wav.scp (still checked if present).")
@click.option("--no-spk-sort", is_flag=True,
              help="Do not require utt2spk to be sorted by speaker as well as by utterance.")
@click.option("--quiet", is_flag=True,
              help="Only the check: no warnings, no success line (a step checking its input "
                   "repeats nothing the data prep's own validation said).")
@click.argument("data", type=DATA_DIR)
@reports_bad_input
def validate_data_dir_cli(no_feats, no_text, no_wav, no_spk_sort, quiet, data):
    """Check a Kaldi data dir: encoding (UTF-8, no CRLF), sorted unique keys, the same utterances in
    every utterance table, spk2utt agreeing with utt2spk, speaker-sorted utt2spk, segments sanity,
    non-empty transcripts. The first problem is reported with its file and line."""
    from emasr.io.datadir_validate import ValidateOptions, validate_data_dir

    opts = ValidateOptions(no_feats, no_text, no_wav, no_spk_sort)
    warnings = validate_data_dir(data, opts)
    if quiet:
        return
    for warning in warnings:
        logger.warning("%s", warning)
    logger.info("successfully validated data-directory %s", data)


@click.command("fix-data-dir")
@click.option("--utt-extra-files", default="", help="Extra utterance-indexed files to filter.")
@click.option("--spk-extra-files", default="", help="Extra speaker-indexed files to filter.")
@click.argument("data", type=DATA_DIR)
@reports_bad_input
def fix_data_dir_cli(utt_extra_files, spk_extra_files, data):
    """Sort and de-duplicate the tables of DATA and keep only the utterances present in all of them
    (and their speakers and recordings); spk2utt is regenerated. Originals go to DATA/.backup."""
    from emasr.io.datadir_edit import fix_data_dir

    fix_data_dir(data, utt_extra_files.split(), spk_extra_files.split())


@click.command("split-data")
@click.option("--per-utt", is_flag=True, help="Ignore speakers: contiguous, equal-sized chunks "
              "of utterances in DATA/split<N>utt.")
@click.argument("data", type=DATA_DIR)
@click.argument("num_parts", type=int)
@reports_bad_input
def split_data_cli(per_utt, data, num_parts):
    """Split DATA into NUM_PARTS parts DATA/split<N>/<1..N>, each speaker in one part (balanced by
    utterance count as Kaldi's split_scp.pl). Does nothing when the parts are newer than DATA."""
    from emasr.io.datadir_split import split_data

    split_data(data, num_parts, per_utt)


SUBSET_MODES = ("first", "last", "speakers", "per-spk", "shortest", "random")


@click.command("subset-data-dir")
@click.option("--mode", type=click.Choice(SUBSET_MODES + ("spread",)), default="spread",
              show_default=True, help="spread: NUM utterances spread evenly over the list (Kaldi's "
              "default); random: NUM at random (--seed); first/last: the first/last NUM; speakers: "
              "whole random speakers until NUM utterances; per-spk: NUM per speaker; shortest.")
@click.option("--utt-list", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Keep the utterances in this list (first field per line).")
@click.option("--spk-list", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Keep the speakers in this list (first field per line).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for random/speakers.")
@click.argument("args", nargs=-1, required=True)
@reports_bad_input
def subset_data_dir_cli(mode, utt_list, spk_list, seed, args):
    """SRC NUM DEST, or SRC DEST with --utt-list/--spk-list: write a subset of a data dir."""
    from emasr.io.datadir_edit import subset_data_dir

    if utt_list or spk_list:
        if len(args) != 2 or (utt_list and spk_list):
            raise click.UsageError("with --utt-list or --spk-list (one of them): SRC DEST")
        subset_data_dir(args[0], args[1], "utt-list" if utt_list else "spk-list",
                        id_list=utt_list or spk_list)
        return
    if len(args) != 3 or not args[1].lstrip("-").isdigit():
        raise click.UsageError("expected SRC NUM DEST with NUM an integer")
    subset_data_dir(args[0], args[2], mode, int(args[1]), seed=seed)


@click.command("copy-data-dir")
@click.option("--utt-prefix", default="", help="Prefix for utterance ids.")
@click.option("--utt-suffix", default="", help="Suffix for utterance ids.")
@click.option("--spk-prefix", default="", help="Prefix for speaker ids.")
@click.option("--spk-suffix", default="", help="Suffix for speaker ids.")
@click.argument("src", type=DATA_DIR)
@click.argument("dest", type=DATA_DIR)
@reports_bad_input
def copy_data_dir_cli(utt_prefix, utt_suffix, spk_prefix, spk_suffix, src, dest):
    """Copy SRC to DEST, renaming utterance and speaker ids (recording ids stay the same)."""
    from emasr.io.datadir_edit import copy_data_dir

    copy_data_dir(src, dest, utt_prefix, utt_suffix, spk_prefix, spk_suffix)


@click.command("combine-data")
@click.option("--extra-files", default="", help="More utterance-indexed files to combine.")
@click.option("--skip-fix", is_flag=True, help="Do not apply fix_data_dir to the result.")
@click.argument("dest", type=DATA_DIR)
@click.argument("sources", type=DATA_DIR, nargs=-1, required=True)
@reports_bad_input
def combine_data_cli(extra_files, skip_fix, dest, sources):
    """Combine the SOURCES data dirs into DEST (replaced). Tables missing from the first source
    are not combined; ids may repeat across sources only with identical lines."""
    from emasr.io.datadir_edit import combine_data

    combine_data(dest, sources, extra_files.split(), skip_fix)


def open_input(path: str):
    return sys.stdin.buffer if path == "-" else open(path, "rb")


@click.command("filter-scp")
@click.option("--exclude", is_flag=True, help="Print the lines whose id is NOT in ID_LIST.")
@click.option("-f", "field", type=click.IntRange(min=1), default=1, show_default=True,
              help="Which field (1-based) holds the id.")
@click.argument("id_list", type=click.Path(dir_okay=False, exists=True))
@click.argument("in_scp", default="-")
@reports_bad_input
def filter_scp_cli(exclude, field, id_list, in_scp):
    """Print the lines of IN_SCP (default stdin) whose FIELD-th field is in ID_LIST's first column,
    as Kaldi's utils/filter_scp.pl."""
    from emasr.io.kaldi_lists import filter_lines, read_ids, write_all

    with open(id_list, "rb") as f:
        ids = read_ids(f, id_list)
    with open_input(in_scp) as lines:
        write_all(sys.stdout.buffer, filter_lines(lines, ids, field, exclude, in_scp))


@click.command("utt2spk-to-spk2utt")
@click.argument("utt2spk", default="-")
@reports_bad_input
def utt2spk_to_spk2utt_cli(utt2spk):
    """Print spk2utt for UTT2SPK (default stdin), speakers in order of first appearance."""
    from emasr.io.kaldi_lists import utt2spk_to_spk2utt, write_all

    with open_input(utt2spk) as lines:
        write_all(sys.stdout.buffer, utt2spk_to_spk2utt(lines, utt2spk))


@click.command("spk2utt-to-utt2spk")
@click.argument("spk2utt", default="-")
@reports_bad_input
def spk2utt_to_utt2spk_cli(spk2utt):
    """Print utt2spk for SPK2UTT (default stdin), in input order."""
    from emasr.io.kaldi_lists import spk2utt_to_utt2spk, write_all

    with open_input(spk2utt) as lines:
        write_all(sys.stdout.buffer, spk2utt_to_utt2spk(lines, spk2utt))
