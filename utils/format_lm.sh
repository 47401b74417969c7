#!/usr/bin/env bash
# lang_test = lang + G.fst from an ARPA LM (Kaldi's utils/format_lm.sh interface).
# The logic is `emasr format-lm` (kaldilm's arpa2fst with #0 on back-off arcs).
set -euo pipefail

help_message="Usage: $0 [options] <lang-dir> <arpa-LM> <lexicon> <out-dir>
e.g.: $0 data/lang data/local/lm/3gram.arpa.gz data/local/dict/lexicon.txt data/lang_test
<arpa-LM> may be gzipped. LM words missing from <lexicon> (and words.txt) are reported and their
n-grams dropped. The result is checked with utils/validate_lang.sh."

utils_dir="$(cd "$(dirname "$0")" && pwd)"
. "$utils_dir/parse_options.sh"

if [ $# -ne 4 ]; then
  printf '%b\n' "$help_message" >&2; exit 1
fi
lang_dir=$1
lm=$2
lexicon=$3
out_dir=$4
lock_dirs "$out_dir"
for f in "$lang_dir/words.txt" "$lang_dir/L.fst" "$lm" "$lexicon"; do
  [ -f "$f" ] || die "expected file $f to exist"
done

emasr format-lm "$lang_dir" "$lm" "$lexicon" "$out_dir"
log "succeeded in formatting $lm into $out_dir"
