#!/usr/bin/env bash
# Check that a Kaldi data directory is consistent (Kaldi's utils/validate_data_dir.sh, same options).
# The logic is `emasr validate-data-dir`; the first problem is reported with its file and line.
set -euo pipefail
. "$(dirname "$0")/lib/log.sh"   # log, die: the console format

usage="Usage: $0 [--no-feats] [--no-text] [--no-wav] [--no-spk-sort] [--quiet] <data-dir>
The --no-xxx options mean that xxx need not be present; it is still checked if it is.
--quiet: the check only, no warnings and no success line (for steps checking their input)
--no-spk-sort: do not require utt2spk to be sorted by speaker as well as by utterance
(which making speaker ids prefixes of utterance ids guarantees).
e.g.: $0 data/train"

opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-feats|--no-text|--no-wav|--no-spk-sort|--quiet) opts+=("$1"); shift ;;
    --help|-h) echo "$usage"; exit 0 ;;
    -*) echo "Error: $0: invalid option $1" >&2; echo "$usage" >&2; exit 1 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ]; then
  echo "$usage" >&2; exit 1
fi
data=$1
if [ ! -d "$data" ]; then
  die "no such directory $data"
fi

exec emasr validate-data-dir ${opts[@]+"${opts[@]}"} "$data"
