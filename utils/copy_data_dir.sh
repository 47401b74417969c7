#!/usr/bin/env bash
# Copy a data directory, optionally adding a prefix or suffix to the utterance and/or speaker ids
# (recording ids stay the same), then validate the copy. Kaldi's utils/copy_data_dir.sh; the
# logic is `emasr copy-data-dir`.
set -euo pipefail

# Begin configuration section.
spk_prefix=
utt_prefix=
spk_suffix=
utt_suffix=
validate_opts=   # options for validate_data_dir.sh; should rarely be needed
# End configuration section.

help_message="Usage: $0 [options] <srcdir> <destdir>
e.g.: $0 --spk-prefix=1- --utt-prefix=1- data/train data/train_1
Options:
  --spk-prefix <prefix>     # prefix for speaker ids, default empty
  --utt-prefix <prefix>     # prefix for utterance ids, default empty
  --spk-suffix <suffix>     # suffix for speaker ids, default empty
  --utt-suffix <suffix>     # suffix for utterance ids, default empty
  --validate-opts <opts>    # options for validate_data_dir.sh, e.g. '--no-spk-sort'"

. "$(dirname "$0")/parse_options.sh"

if [ $# -ne 2 ]; then
  echo "$help_message" >&2; exit 1
fi
srcdir=$1
destdir=$2
lock_dirs "$destdir"
if [ ! -f "$srcdir/utt2spk" ]; then
  die "expected file $srcdir/utt2spk to exist"
fi

emasr copy-data-dir --utt-prefix "$utt_prefix" --utt-suffix "$utt_suffix" \
  --spk-prefix "$spk_prefix" --spk-suffix "$spk_suffix" "$srcdir" "$destdir"

[ -f "$srcdir/feats.scp" ] || validate_opts="$validate_opts --no-feats"
[ -f "$srcdir/text" ] || validate_opts="$validate_opts --no-text"
[ -f "$srcdir/wav.scp" ] || validate_opts="$validate_opts --no-wav"
# shellcheck disable=SC2086  # validate_opts is a list of options
"$(dirname "$0")/validate_data_dir.sh" $validate_opts "$destdir"
