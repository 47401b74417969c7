#!/usr/bin/env bash
# Compute MFCC + Kaldi pitch features, the GMMs' input (Kaldi's steps/make_mfcc_pitch.sh interface).
# The work is `emasr compute-mfcc-pitch-feats` (one job per split) and `emasr merge-feats-jobs`.
set -euo pipefail

# Begin configuration section.
nj=4
cmd=run.pl
mfcc_config=conf/mfcc.conf
pitch_config=conf/pitch.conf
compress=true
write_utt2num_frames=true  # accepted for Kaldi compatibility: utt2num_frames is always written
write_utt2dur=true         # likewise utt2dur
# End configuration section.

help_message="Usage: $0 [options] <data-dir> [<log-dir> [<mfcc-dir>]]
e.g.: $0 data/train exp/make_mfcc/train mfcc
Note: <log-dir> defaults to <data-dir>/log, and <mfcc-dir> defaults to <data-dir>/data.
Options:
  --nj <nj>                  # number of parallel jobs (default $nj)
  --cmd <run.pl|queue.pl ..> # how to run jobs (default $cmd)
  --mfcc-config <file>       # Kaldi-syntax MFCC config (default $mfcc_config)
  --pitch-config <file>      # Kaldi-syntax pitch config (default $pitch_config)
  --compress <true|false>    # compress the matrices as Kaldi's --compress (default $compress)
Writes <mfcc-dir>/raw_mfcc_pitch_<set>.JOB.{ark,scp}, then <data-dir>/{feats.scp,utt2num_frames,
utt2dur,frame_shift,conf/}. Unusable utterances are named in the job logs and skipped; the step
fails if fewer than 95% of the utterances get features."

echo "$0 $*"
utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"  # run.pl, split_data.sh even when the caller's PATH lacks them

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  printf '%b\n' "$help_message" >&2; exit 1
fi
data=$1
logdir=${2:-$data/log}
featdir=${3:-$data/data}

for f in "$data/wav.scp" "$data/utt2spk" "$mfcc_config" "$pitch_config"; do
  [ -f "$f" ] || { echo "$0: expected file $f to exist" >&2; exit 1; }
done
name=$(basename "$data")
mkdir -p "$logdir" "$featdir"
featdir=$(cd "$featdir" && pwd)  # the scp files must name the arks by absolute path

validate_data_dir.sh --no-text --no-feats "$data"
if [ -f "$data/feats.scp" ]; then
  mkdir -p "$data/.backup"
  echo "$0: moving $data/feats.scp to $data/.backup"
  mv "$data/feats.scp" "$data/.backup/"
fi

split_data.sh --per-utt "$data" "$nj"
sdata=$data/split${nj}utt
segments_opt=()
[ -f "$data/segments" ] && segments_opt=(--segments "$sdata/JOB/segments")
compress_opt=--no-compress
[ "$compress" = true ] && compress_opt=--compress

$cmd JOB=1:"$nj" "$logdir/make_mfcc_pitch_${name}.JOB.log" \
  emasr compute-mfcc-pitch-feats --mfcc-config "$mfcc_config" --pitch-config "$pitch_config" \
    "$compress_opt" ${segments_opt[@]+"${segments_opt[@]}"} \
    --utt2num-frames "$logdir/utt2num_frames.JOB" --utt2dur "$logdir/utt2dur.JOB" \
    "$sdata/JOB/wav.scp" "$featdir/raw_mfcc_pitch_$name.JOB.ark" "$featdir/raw_mfcc_pitch_$name.JOB.scp" \
  || { echo "$0: computing MFCC + pitch failed; see $logdir/make_mfcc_pitch_${name}.*.log" >&2; exit 1; }

emasr merge-feats-jobs --nj "$nj" --scp-pattern "$featdir/raw_mfcc_pitch_$name.JOB.scp" \
  --log-dir "$logdir" --config "$mfcc_config" --config "$pitch_config" "$data"

echo "$0: succeeded making MFCC + pitch features for $name"
