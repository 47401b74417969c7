#!/usr/bin/env bash
# The networks' lang dir (Kaldi chain's data/lang_chain): a copy of <lang-dir> whose topology lets
# every phone pass in one frame (emasr.lang.topo's skip topology), for networks that see one frame
# per 30 ms. phones.txt, words.txt, L.fst, L_disambig.fst, G.fst (when present), phones/ and the
# rest are copied unchanged; the result is checked with utils/validate_lang.sh.
# The logic is `emasr prepare-lang-nnet`.
set -euo pipefail

# Begin configuration section.
num_nonsil_states=   # emitting states of a non-silence phone (default: as in <lang-dir>/topo)
num_sil_states=      # emitting states of a silence phone (default: as in <lang-dir>/topo)
# End configuration section.

help_message="Usage: $0 [options] <lang-dir> <nnet-lang-dir>
e.g.: $0 data/lang_test data/lang_test_nnet
<lang-dir> is any lang dir (utils/prepare_lang.sh's, format_lm.sh's lang_test, Kaldi's); the copy
gets the skip topology (one frame per phone possible), for steps/nnet/build_tree.sh and the
networks' HCLG (utils/mkgraph.sh).
Options:
  --num-nonsil-states <n>   # emitting states of a non-silence phone (default: as in <lang-dir>)
  --num-sil-states <n>      # emitting states of a silence phone (default: as in <lang-dir>)"

utils_dir="$(cd "$(dirname "$0")" && pwd)"
. "$utils_dir/parse_options.sh"

if [ $# -ne 2 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
lang=$1; dir=$2
lock_dirs "$dir"
for f in "$lang/phones.txt" "$lang/words.txt" "$lang/topo" "$lang/L.fst" \
         "$lang/phones/silence.int" "$lang/phones/nonsilence.int"; do
  [ -f "$f" ] || die "expected file $f to exist"
done

opts=()
[ -n "$num_nonsil_states" ] && opts+=(--num-nonsil-states "$num_nonsil_states")
[ -n "$num_sil_states" ] && opts+=(--num-sil-states "$num_sil_states")
emasr prepare-lang-nnet ${opts[@]+"${opts[@]}"} "$lang" "$dir"
"$utils_dir/validate_lang.sh" "$dir"
log "wrote $dir: $lang with the one-frame (skip) topology"
