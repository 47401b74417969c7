#!/usr/bin/env bash
# Compute CMVN stats for a data dir (Kaldi's steps/compute_cmvn_stats.sh interface):
# per speaker into <cmvn-dir>/cmvn_<set>.{ark,scp} and <data-dir>/cmvn.scp, or with --global one
# matrix into <data-dir>/global_cmvn. The work is `emasr compute-cmvn-stats`.
set -euo pipefail

help_message="Usage: $0 [--fake] [--global] <data-dir> [<log-dir> [<cmvn-dir>]]
e.g.: $0 data/train exp/make_fbank/train fbank
Note: <log-dir> defaults to <data-dir>/log, and <cmvn-dir> defaults to <data-dir>/data.
Stats are Kaldi's 2 x (dim+1) double matrices (sums and count; sums of squares).
  --fake     write stats that make CMVN a no-op (mean 0, variance 1), as Kaldi's --fake
  --global   one matrix over all utterances in <data-dir>/global_cmvn instead of per speaker"

# Kaldi's --fake is a bare flag, read before the usual options; --global works the same way.
extra_opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --fake|--global) extra_opts+=("$1"); shift ;;
    *) break ;;
  esac
done
. "$(dirname "$0")/../utils/parse_options.sh"
# shellcheck source=steps/lib/require_writable.sh
. "$(dirname "$0")/lib/require_writable.sh"  # the read-only-dir check, shared with make_*.sh

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  printf '%b\n' "$help_message" >&2; exit 1
fi
data=$1
logdir=${2:-$data/log}
cmvndir=${3:-$data/data}
[ ! -d "$data" ] || lock_dirs "$data" "$cmvndir"

for f in "$data/feats.scp" "$data/spk2utt"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
name=$(basename "$data")
require_writable_dirs "$data" "$logdir" "$cmvndir" CMVN
cmvndir=$(cd "$cmvndir" && pwd)

emasr compute-cmvn-stats ${extra_opts[@]+"${extra_opts[@]}"} "$data" "$cmvndir" \
  2> "$logdir/cmvn_$name.log" \
  || { echo "Error: $0: error computing CMVN stats; see $logdir/cmvn_$name.log:" >&2;
       tail -n 5 "$logdir/cmvn_$name.log" >&2; exit 1; }

log "succeeded computing CMVN stats for $name"
