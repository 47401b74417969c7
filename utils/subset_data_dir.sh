#!/usr/bin/env bash
# Write a subset of a data directory (Kaldi's utils/subset_data_dir.sh, same options), with the
# matching speakers, recordings and per-speaker files. The logic is `emasr subset-data-dir`.
set -euo pipefail
. "$(dirname "$0")/lib/log.sh"   # log, die: the console format

usage="Usage:
  $0 [--speakers|--shortest|--first|--last|--per-spk|--random] [--seed S] <srcdir> <num-utt> <destdir>
  $0 --spk-list <speaker-list-file> <srcdir> <destdir>
  $0 --utt-list <utterance-list-file> <srcdir> <destdir>
By default, selects <num-utt> utterances spread evenly over the data directory (as Kaldi's
subset_scp.pl does; deterministic).
With --random, selects <num-utt> utterances at random (seeded by --seed, default 0).
With --speakers, selects whole speakers at random (--seed) until they have <num-utt> utterances.
With --per-spk, selects <num-utt> utterances per speaker, if available.
With --first, selects the first <num-utt> utterances; with --last, the last <num-utt>.
With --shortest, selects the shortest <num-utt> utterances.
With --spk-list / --utt-list, keeps the speakers / utterances listed in the file."

mode=spread
list_opt=()
seed=0
while [ $# -gt 0 ]; do
  case "$1" in
    --speakers|--shortest|--first|--last|--per-spk|--random) mode=${1#--}; shift ;;
    --spk-list|--utt-list)
      if [ $# -lt 2 ]; then die "option $1 needs a file"; fi
      list_opt=("$1" "$2"); shift 2 ;;
    --seed)
      if [ $# -lt 2 ]; then die "option --seed needs a value"; fi
      seed=$2; shift 2 ;;
    --help|-h) echo "$usage"; exit 0 ;;
    -*) echo "Error: $0: invalid option $1" >&2; echo "$usage" >&2; exit 1 ;;
    *) break ;;
  esac
done

if [ ${#list_opt[@]} -gt 0 ]; then
  if [ $# -ne 2 ]; then echo "$usage" >&2; exit 1; fi
  if [ ! -f "${list_opt[1]}" ]; then
    die "expected file ${list_opt[1]} to exist"
  fi
  srcdir=$1
  args=("$1" "$2")
else
  if [ $# -ne 3 ]; then echo "$usage" >&2; exit 1; fi
  srcdir=$1
  args=("$1" "$2" "$3")
fi
if [ ! -f "$srcdir/utt2spk" ]; then
  die "expected file $srcdir/utt2spk to exist"
fi

exec emasr subset-data-dir --mode "$mode" --seed "$seed" ${list_opt[@]+"${list_opt[@]}"} "${args[@]}"
