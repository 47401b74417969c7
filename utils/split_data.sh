#!/usr/bin/env bash
# Split a data directory into N parts for N parallel jobs (Kaldi's utils/split_data.sh):
# <data>/split<N>/{1..N}, each speaker in one part; with --per-utt, <data>/split<N>utt/{1..N},
# contiguous equal chunks of utterances. Nothing is rewritten when the parts are newer than the
# data files, so every job may call it. The logic is `emasr split-data`.
set -euo pipefail
. "$(dirname "$0")/lib/log.sh"   # log, die: the console format

usage="Usage: $0 [--per-utt] <data-dir> <num-to-split>
e.g.: $0 data/train 50
It creates its output in e.g. data/train/split50/{1,2,3,...50}, or if the --per-utt option was
given, in e.g. data/train/split50utt/{1,2,3,...50}.
This script will not split the data-dir if it detects that the output is newer than the input.
By default it splits per speaker (so each speaker is in only one split dir), but with the
--per-utt option it will ignore the speaker information while splitting."

opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --per-utt) opts+=(--per-utt); shift ;;
    --help|-h) echo "$usage"; exit 0 ;;
    -*) echo "Error: $0: invalid option $1" >&2; echo "$usage" >&2; exit 1 ;;
    *) break ;;
  esac
done
if [ $# -ne 2 ]; then
  echo "$usage" >&2; exit 1
fi
data=$1
numsplit=$2
if ! [[ "$numsplit" =~ ^[0-9]+$ ]] || [ "$numsplit" -le 0 ]; then
  die "invalid num-split argument '$numsplit'; expected a positive integer"
fi
if [ ! -f "$data/utt2spk" ]; then
  die "expected file $data/utt2spk to exist"
fi

exec emasr split-data ${opts[@]+"${opts[@]}"} "$data" "$numsplit"
