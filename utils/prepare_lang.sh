#!/usr/bin/env bash
# Build a lang dir from a dict dir (Kaldi's utils/prepare_lang.sh interface):
# phones.txt words.txt L.fst L_disambig.fst oov.{txt,int} topo phones/*.{txt,int,csl}.
# The logic is `emasr prepare-lang`; the result is checked with utils/validate_lang.sh.
set -euo pipefail

# Begin configuration section.
position_dependent_phones=false  # Mandarin default; true gives Kaldi's _B _E _I _S phones
sil_prob=0.5                     # optional-silence probability between words in L.fst
num_nonsil_states=3
num_sil_states=5
topology=                        # kaldi | skip; empty: emasr prepare-lang's default (one place:
                                 # emasr.lang.topo.DEFAULT_TOPOLOGY)
# End configuration section.

help_message="Usage: $0 [options] <dict-src-dir> <oov-dict-entry> <tmp-dir> <lang-dir>
e.g.: $0 data/local/dict '<UNK>' data/local/lang data/lang
<dict-src-dir> has lexicon.txt (or lexiconp.txt), silence_phones.txt, nonsilence_phones.txt,
optional_silence.txt and optionally extra_questions.txt.
Options:
  --position-dependent-phones (true|false)  # default $position_dependent_phones
  --sil-prob <prob>                         # default $sil_prob
  --num-nonsil-states <n>                   # default $num_nonsil_states
  --num-sil-states <n>                      # default $num_sil_states
  --topology (kaldi|skip)                   # HMM topology (default: emasr prepare-lang's)
kaldi: Kaldi's gen_topo.pl topology (strict left-to-right, a phone lasts >= 3 frames), for GMMs at
10 ms; skip: every phone can be traversed in one frame (for 30 ms networks after stacking)."

utils_dir="$(cd "$(dirname "$0")" && pwd)"
. "$utils_dir/parse_options.sh"

if [ $# -ne 4 ]; then
  printf '%b\n' "$help_message" >&2; exit 1
fi
srcdir=$1
oov_word=$2
tmpdir=$3
dir=$4
lock_dirs "$dir" "$tmpdir"
for f in lexicon.txt silence_phones.txt nonsilence_phones.txt optional_silence.txt; do
  if [ "$f" = lexicon.txt ] && [ -f "$srcdir/lexiconp.txt" ]; then continue; fi
  [ -f "$srcdir/$f" ] || die "expected file $srcdir/$f to exist"
done

topology_opts=()
[ -n "$topology" ] && topology_opts=(--topology "$topology")
emasr prepare-lang --position-dependent-phones "$position_dependent_phones" \
  --sil-prob "$sil_prob" --num-nonsil-states "$num_nonsil_states" \
  --num-sil-states "$num_sil_states" ${topology_opts[@]+"${topology_opts[@]}"} \
  "$srcdir" "$oov_word" "$tmpdir" "$dir"
"$utils_dir/validate_lang.sh" "$dir"
