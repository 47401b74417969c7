#!/usr/bin/env bash
# AISHELL-1 data preparation (Kaldi's egs/aishell/s5/local/aishell_data_prep.sh interface):
# data_aishell/wav + data_aishell/transcript -> data/{train,dev,test} in the current directory.
# The logic is `emasr aishell-data-prep`.
set -euo pipefail

# Begin configuration section.
out_dir=data        # where train/ dev/ test/ are written
sample_rate=16000   # every wav must be 16-bit mono at this rate
# End configuration section.

help_message="Usage: $0 [options] <audio-dir> <text-dir>
e.g.: $0 /export/a05/xna/data/data_aishell/wav /export/a05/xna/data/data_aishell/transcript
Options:
  --out-dir <dir>         # output parent dir (default $out_dir)
  --sample-rate <hz>      # expected sampling rate (default $sample_rate)
Speakers are the wav folders (S0002), utterance ids the file names (BAC009S0002W0122); wavs
without a transcript are skipped (counted in the log); transcripts with digits or Latin letters
and wavs that are not 16-bit mono are errors."

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"

if [ $# -ne 2 ]; then
  printf '%b\n' "$help_message" >&2; exit 1
fi
audio_dir=$1
text_dir=$2
for d in "$audio_dir" "$text_dir"; do
  [ -d "$d" ] || die "expected directory $d to exist"
done

emasr aishell-data-prep --out-dir "$out_dir" --sample-rate "$sample_rate" "$audio_dir" "$text_dir"
for x in train dev test; do
  validate_data_dir.sh --no-feats "$out_dir/$x"
done
log "AISHELL data preparation succeeded"
