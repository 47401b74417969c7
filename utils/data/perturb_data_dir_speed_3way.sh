#!/usr/bin/env bash
# The standard 3-way speed perturbation of a data dir (Kaldi's
# utils/data/perturb_data_dir_speed_3way.sh): the original utterances plus copies at speed 0.9 and
# 1.1 (ids prefixed sp0.9- and sp1.1-, see perturb_data_dir_speed.sh), with utt2dur and utt2uniq.
# The logic is `emasr perturb-data-dir-speed`.
set -euo pipefail

# Begin configuration section.
always_include_prefix=false  # true: the speed-1.0 copy gets the prefix sp1.0- too
# End configuration section.

help_message="Usage: $0 [options] <srcdir> <destdir>
Applies standard 3-way speed perturbation using factors of 0.9, 1.0 and 1.1.
e.g.: $0 data/train data/train_sp
Note: if <destdir>/feats.scp already exists, this will refuse to run.
Options:
  --always-include-prefix [true|false]   # default: false. If true, the prefix 'sp1.0-' is added to
                                         # utterance and speaker ids of the data at speed 1.0"

. "$(dirname "$0")/../parse_options.sh"

if [ $# -ne 2 ]; then
  echo "$help_message" >&2; exit 1
fi
srcdir=$1; destdir=$2
lock_dirs "$destdir"
[ -f "$srcdir/wav.scp" ] || die "expected file $srcdir/wav.scp to exist"
case "$always_include_prefix" in
  true) prefix_opt=--always-include-prefix ;;
  false) prefix_opt=--no-always-include-prefix ;;
  *) die "--always-include-prefix must be true or false, not '$always_include_prefix'" ;;
esac
emasr perturb-data-dir-speed --factors 0.9,1.0,1.1 "$prefix_opt" "$srcdir" "$destdir"
"$(dirname "$0")/../validate_data_dir.sh" --no-feats --no-text "$destdir"
log "generated 3-way speed-perturbed version of data in $srcdir, in $destdir"
