#!/usr/bin/env bash
# Make a speed-perturbed copy of a data dir (Kaldi's utils/data/perturb_data_dir_speed.sh):
# utterance, speaker and recording ids get the prefix sp<factor>-, wav.scp plays each recording
# <factor> times faster through `emasr speed-perturb-wav` (sox's `speed` effect, without sox),
# segments and utt2dur are divided by <factor>, utt2uniq points to the original utterances.
# Features are not copied. The logic is `emasr perturb-data-dir-speed`.
set -euo pipefail

help_message="Usage: $0 <warping-factor> <srcdir> <destdir>
e.g.: $0 0.9 data/train data/train_sp0.9
Note: if <destdir>/feats.scp already exists, this will refuse to run."

. "$(dirname "$0")/../parse_options.sh"

if [ $# -ne 3 ]; then
  echo "$help_message" >&2; exit 1
fi
factor=$1; srcdir=$2; destdir=$3
lock_dirs "$destdir"
[ -f "$srcdir/wav.scp" ] || die "expected file $srcdir/wav.scp to exist"
emasr perturb-data-dir-speed --factors "$factor" --always-include-prefix "$srcdir" "$destdir"
"$(dirname "$0")/../validate_data_dir.sh" --no-feats --no-text "$destdir"
log "generated speed-perturbed version of data in $srcdir, in $destdir"
