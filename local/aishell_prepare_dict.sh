#!/usr/bin/env bash
# AISHELL dict preparation (Kaldi's egs/aishell/s5/local/aishell_prepare_dict.sh interface):
# <resource-dir>/lexicon.txt -> data/local/dict. The logic is `emasr aishell-prepare-dict`.
set -euo pipefail

# Begin configuration section.
dict_dir=data/local/dict
text=          # optional Kaldi text file(s), space-separated: their words missing from the
               # lexicon get pypinyin pronunciations (use training text only)
# End configuration section.

help_message="Usage: $0 [options] <resource-dir>
e.g.: $0 /export/a05/xna/data/resource_aishell
Options:
  --dict-dir <dir>      # output dict dir (default $dict_dir)
  --text '<files>'      # text files whose new words get pypinyin pronunciations
Writes lexicon.txt (with 'SIL sil' and '<UNK> sil'), nonsilence_phones.txt (the tones of one base
phone on one line), silence_phones.txt, optional_silence.txt, extra_questions.txt."

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"

if [ $# -ne 1 ]; then
  printf '%b\n' "$help_message" >&2; exit 1
fi
res_dir=$1
[ -f "$res_dir/lexicon.txt" ] || die "expected file $res_dir/lexicon.txt to exist"

text_opts=()
for f in $text; do
  [ -f "$f" ] || die "expected file $f to exist"
  text_opts+=(--text "$f")
done
emasr aishell-prepare-dict --dict-dir "$dict_dir" ${text_opts[@]+"${text_opts[@]}"} "$res_dir"
log "AISHELL dict preparation succeeded"
