"""Feature extraction jobs and their merge: the Python side of steps/make_{fbank,mfcc,mfcc_pitch,
fbank_pitch}.sh.

One job reads its part of a data dir (`wav.scp` [+ `segments`]), computes features utterance by
utterance and writes `raw_<type>_<set>.JOB.ark/.scp` plus `utt2num_frames.JOB` and `utt2dur.JOB`.
An utterance whose audio cannot be used is named in the log and skipped; as Kaldi's
compute-*-feats, the job fails only when no utterance succeeds. The merge then writes the data
dir's `feats.scp`, `utt2num_frames`, `utt2dur`, `frame_shift` and `conf/` copy, and fails when fewer
than 95% of the data dir's utterances have features (Kaldi's make_fbank.sh rule).
"""
from __future__ import annotations

import logging
import os
import shutil

import click

from emasr.feats.ark import ArkScpWriter
from emasr.feats.fbank import FbankExtractor
from emasr.feats.fbank_pitch import FbankPitchExtractor
from emasr.feats.kaldi_options import ConfigError, read_kaldi_config
from emasr.feats.mfcc import MfccExtractor
from emasr.feats.mfcc_pitch import MfccPitchExtractor
from emasr.feats.wav import WavError, iter_utterance_audio
from emasr.io.atomic import atomic_write
from emasr.io.table import read_table, write_table
from emasr.log import progress

log = logging.getLogger(__name__)

MIN_SUCCESS_FRACTION = 0.95


class TooManyFailures(RuntimeError):
    """Fewer than MIN_SUCCESS_FRACTION of a data dir's utterances got features."""


def extract_job(extractor, wav_scp: str, ark: str, scp: str, segments: str | None = None,
                compress: bool = False, utt2num_frames: str | None = None,
                utt2dur: str | None = None, log_every: int = 100,
                failures: list[tuple[str, str]] | None = None) -> tuple[int, int]:
    """Compute features for every utterance of wav_scp (or segments); return (done, failed).
    `failures` gets (utterance, reason) of each utterance skipped."""
    num_frames: dict[str, str] = {}
    durations: dict[str, str] = {}
    failed = 0
    total = len(read_table(segments or wav_scp))
    with ArkScpWriter(ark, scp, compress=compress) as writer:
        items = iter_utterance_audio(wav_scp, segments)
        for utt, audio in progress(items, total=total, desc=extractor.feat_type, every=log_every,
                                   logger=log):
            try:
                if isinstance(audio, WavError):
                    raise audio
                feats = extractor.compute(audio, source=utt)
            except WavError as err:
                failed += 1
                log.warning("skipping utterance %s: %s", utt, err)
                if failures is not None:
                    failures.append((utt, str(err)))
                continue
            writer.write(utt, feats)
            num_frames[utt] = str(len(feats))
            durations[utt] = f"{audio.duration:.4f}".rstrip("0").rstrip(".")
        if failed and not num_frames:
            writer.abandon()  # no 0-byte ark and empty scp that look like a finished job
    if utt2num_frames:
        write_table(utt2num_frames, num_frames)
    if utt2dur:
        write_table(utt2dur, durations)
    log.info("%s: done %d utterances, failed for %d", extractor.feat_type, len(num_frames), failed)
    return len(num_frames), failed


def merge_jobs(data: str, parts: list[str], part_tables: dict[str, list[str]],
               configs: list[str], frame_shift: float) -> None:
    """Write the data dir's feats.scp and friends from per-job files; fail below 95% coverage."""
    feats: dict[str, str] = {}
    for path in parts:
        feats.update(read_table(path))
    expected = read_table(os.path.join(data, "utt2spk"))
    missing = [utt for utt in expected if utt not in feats]
    if missing:
        log.warning("%d of %d utterances have no features (first: %s); see the job logs, and run "
                    "utils/fix_data_dir.sh %s", len(missing), len(expected), missing[0], data)
    if len(feats) < MIN_SUCCESS_FRACTION * len(expected):
        raise TooManyFailures(
            f"features for only {len(feats)} of {len(expected)} utterances in {data}: fewer than "
            f"{MIN_SUCCESS_FRACTION:.0%} succeeded, probably a serious error; nothing written")
    for name, paths in part_tables.items():
        merged: dict[str, str] = {}
        for path in paths:
            merged.update(read_table(path))
        write_table(os.path.join(data, name), merged)
    conf_dir = os.path.join(data, "conf")
    os.makedirs(conf_dir, exist_ok=True)
    for config in configs:
        with open(config, encoding="utf-8") as src, \
                atomic_write(os.path.join(conf_dir, os.path.basename(config))) as dst:
            shutil.copyfileobj(src, dst)
    with atomic_write(os.path.join(data, "frame_shift")) as f:
        f.write(f"{frame_shift:g}\n")
    write_table(os.path.join(data, "feats.scp"), feats)  # last: its presence means "done"
    log.info("wrote %s/feats.scp with %d utterances", data, len(feats))


# ---- click commands ----------------------------------------------------------------------------

def _job_options(func):
    for option in reversed([
        click.option("--segments", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="Kaldi segments file: cut utterances out of the wav.scp recordings."),
        click.option("--compress/--no-compress", default=False,
                     help="Compress matrices as Kaldi's --compress=true (kAutomaticMethod)."),
        click.option("--utt2num-frames", type=click.Path(dir_okay=False), default=None,
                     help="Also write `utt num_frames` for the utterances done."),
        click.option("--utt2dur", type=click.Path(dir_okay=False), default=None,
                     help="Also write `utt duration_seconds` for the utterances done."),
        click.option("--log-every", type=int, default=100, show_default=True,
                     help="Log a progress line every N utterances."),
        click.argument("wav_scp", type=click.Path(exists=True, dir_okay=False)),
        click.argument("ark", type=click.Path(dir_okay=False)),
        click.argument("scp", type=click.Path(dir_okay=False)),
    ]):
        func = option(func)
    return func


def _run_job(extractor, wav_scp, ark, scp, segments, compress, utt2num_frames, utt2dur,
             log_every) -> None:
    failures: list[tuple[str, str]] = []
    try:
        done, failed = extract_job(extractor, wav_scp, ark, scp, segments, compress,
                                   utt2num_frames, utt2dur, log_every, failures)
    except OSError as err:  # a full disk or a read-only dir: one line naming the file
        where = f"{err.filename}: " if err.filename else ""
        raise click.ClickException(f"{where}{err.strerror or err}") from None
    if done == 0 and failed > 0:
        # the reason, not only the count: when every utterance fails it is usually one reason
        # (sox missing, a wrong sample rate), which the console line should say
        utt, reason = failures[0]
        raise click.ClickException(f"no utterance of {wav_scp} succeeded ({failed} failed); the "
                                   f"first, {utt}: {reason}")


def _make(factory, *args):
    try:
        return factory(*args)
    except (ConfigError, OSError) as err:
        raise click.ClickException(str(err)) from None


@click.command("compute-fbank-feats")
@click.option("--config", "config", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Kaldi-syntax fbank config, e.g. conf/fbank.conf (--num-mel-bins=80 ...).")
@_job_options
def compute_fbank_cli(config, wav_scp, ark, scp, segments, compress, utt2num_frames, utt2dur,
                      log_every):
    """Compute log-mel fbank features (as Kaldi's compute-fbank-feats) for WAV_SCP into ARK/SCP.

    WAV_SCP lines are `utt path.wav` or `utt command |` (16-bit PCM mono). Unusable utterances
    are logged and skipped; exits non-zero only if none succeeds. ARK and SCP are written
    atomically (the SCP last). Usually called by steps/make_fbank.sh, one job per split.
    """
    _run_job(_make(FbankExtractor, config), wav_scp, ark, scp, segments, compress,
             utt2num_frames, utt2dur, log_every)


@click.command("compute-mfcc-pitch-feats")
@click.option("--mfcc-config", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Kaldi-syntax MFCC config, e.g. conf/mfcc.conf.")
@click.option("--pitch-config", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Kaldi-syntax pitch config, e.g. conf/pitch.conf (extraction and "
                   "post-processing options of compute-and-process-kaldi-pitch-feats).")
@_job_options
def compute_mfcc_pitch_cli(mfcc_config, pitch_config, wav_scp, ark, scp, segments, compress,
                           utt2num_frames, utt2dur, log_every):
    """Compute MFCC + Kaldi pitch features (13 + 3 dims by default) for WAV_SCP into ARK/SCP.

    As Kaldi's make_mfcc_pitch.sh: MFCC and pitch are computed with the same frame geometry and
    pasted (lengths may differ by up to 2 frames; the longer is cut). Usually called by
    steps/make_mfcc_pitch.sh, one job per split.
    """
    _run_job(_make(MfccPitchExtractor, mfcc_config, pitch_config), wav_scp, ark, scp, segments,
             compress, utt2num_frames, utt2dur, log_every)


@click.command("compute-mfcc-feats")
@click.option("--config", "config", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Kaldi-syntax MFCC config, e.g. conf/mfcc.conf (--use-energy=false ...).")
@_job_options
def compute_mfcc_cli(config, wav_scp, ark, scp, segments, compress, utt2num_frames, utt2dur,
                     log_every):
    """Compute plain MFCC features (as Kaldi's compute-mfcc-feats) for WAV_SCP into ARK/SCP.

    13 cepstra by default (--num-ceps). Usually called by steps/make_mfcc.sh, one job per split.
    """
    _run_job(_make(MfccExtractor, config), wav_scp, ark, scp, segments, compress,
             utt2num_frames, utt2dur, log_every)


@click.command("compute-fbank-pitch-feats")
@click.option("--fbank-config", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Kaldi-syntax fbank config, e.g. conf/fbank.conf.")
@click.option("--pitch-config", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Kaldi-syntax pitch config, e.g. conf/pitch.conf.")
@_job_options
def compute_fbank_pitch_cli(fbank_config, pitch_config, wav_scp, ark, scp, segments, compress,
                            utt2num_frames, utt2dur, log_every):
    """Compute fbank + Kaldi pitch features (80 + 3 dims with conf/) for WAV_SCP into ARK/SCP.

    As Kaldi's make_fbank_pitch.sh: both with the same frame geometry, pasted (lengths may differ
    by up to 2 frames; the longer is cut). Usually called by steps/make_fbank_pitch.sh.
    """
    _run_job(_make(FbankPitchExtractor, fbank_config, pitch_config), wav_scp, ark, scp, segments,
             compress, utt2num_frames, utt2dur, log_every)


@click.command("merge-feats-jobs")
@click.option("--nj", type=int, required=True, help="Number of jobs whose outputs to merge.")
@click.option("--scp-pattern", required=True,
              help="Per-job feature scp, JOB standing for the job number, "
                   "e.g. fbank/raw_fbank_train.JOB.scp")
@click.option("--log-dir", type=click.Path(file_okay=False), required=True,
              help="Where the jobs wrote utt2num_frames.JOB and utt2dur.JOB.")
@click.option("--config", "configs", multiple=True, type=click.Path(exists=True, dir_okay=False),
              required=True, help="Feature config(s) to copy into DATA/conf/ (repeatable).")
@click.argument("data", type=click.Path(exists=True, file_okay=False))
def merge_feats_jobs_cli(nj, scp_pattern, log_dir, configs, data):
    """Merge per-job feature outputs into DATA: feats.scp, utt2num_frames, utt2dur, frame_shift.

    Fails (writing nothing) when features exist for fewer than 95% of DATA/utt2spk.
    """
    jobs = range(1, nj + 1)
    parts = [scp_pattern.replace("JOB", str(j)) for j in jobs]
    absent = [p for p in parts if not os.path.isfile(p)]
    if absent:
        raise click.ClickException(f"expected file {absent[0]} to exist (did job "
                                   f"{parts.index(absent[0]) + 1} fail? see its log)")
    tables = {name: [os.path.join(log_dir, f"{name}.{j}") for j in jobs]
              for name in ("utt2num_frames", "utt2dur")}
    shift_ms = float(read_kaldi_config(configs[0]).get("frame-shift", "10"))
    try:
        merge_jobs(data, parts, tables, list(configs), shift_ms / 1000.0)
    except TooManyFailures as err:
        raise click.ClickException(str(err)) from None
