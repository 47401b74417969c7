#!/usr/bin/env bash
# Sort a Kaldi data directory and keep only the utterances present in all of its files (and their
# speakers and recordings); spk2utt is regenerated from utt2spk. The original files are kept in
# <data-dir>/.backup. Kaldi's utils/fix_data_dir.sh; the logic is `emasr fix-data-dir`.
set -euo pipefail

# Begin configuration section.
utt_extra_files=   # more utterance-indexed files to filter, e.g. "utt2category"
spk_extra_files=   # more speaker-indexed files to filter
# End configuration section.

help_message="Usage: $0 [options] <data-dir>
e.g.: $0 data/train
Makes sure the files of a data directory are sorted and list the same utterances, e.g. removing
utterances that have no features (if feats.scp is present). Old files go to <data-dir>/.backup.
Options:
  --utt-extra-files '<f1 f2>'   # extra utterance-indexed files to filter
  --spk-extra-files '<f1 f2>'   # extra speaker-indexed files to filter"

. "$(dirname "$0")/parse_options.sh"

if [ $# -ne 1 ]; then
  echo "$help_message" >&2; exit 1
fi
data=$1
[ ! -d "$data" ] || lock_dirs "$data"
if [ ! -d "$data" ]; then
  die "no such directory $data"
fi
if [ ! -f "$data/utt2spk" ]; then
  die "expected file $data/utt2spk to exist"
fi

emasr fix-data-dir --utt-extra-files "$utt_extra_files" --spk-extra-files "$spk_extra_files" "$data"
