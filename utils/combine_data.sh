#!/usr/bin/env bash
# Combine several data directories into one (Kaldi's utils/combine_data.sh), then fix the result
# as utils/fix_data_dir.sh would. Files that the first source lacks are not combined. The logic is
# `emasr combine-data`.
set -euo pipefail

# Begin configuration section.
extra_files=   # more utterance-indexed files to combine, e.g. "utt2category"
skip_fix=false # skip the fix_data_dir step at the end
# End configuration section.

help_message="Usage: $0 [--extra-files 'file1 file2'] [--skip-fix true] <dest-data-dir> <src-data-dir1> <src-data-dir2> ...
Note, files that don't appear in first source dir will not be added even if they appear in later ones."

. "$(dirname "$0")/parse_options.sh"

if [ $# -lt 2 ]; then
  echo "$help_message" >&2; exit 1
fi
dest=$1
lock_dirs "$dest"
shift
for dir in "$@"; do
  if [ ! -f "$dir/utt2spk" ]; then
    die "expected file $dir/utt2spk to exist"
  fi
done

opts=()
if [ "$skip_fix" = true ]; then opts+=(--skip-fix); fi
emasr combine-data --extra-files "$extra_files" ${opts[@]+"${opts[@]}"} "$dest" "$@"
