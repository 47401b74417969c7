#!/usr/bin/env bash
# Score lattices as Kaldi's steps/score_kaldi.sh: best paths for LM weights min..max and each word
# insertion penalty, filtered (<UNK>, <SPOKEN_NOISE>, silence), wer_LMWT_WIP with compute-wer's
# lines, scoring_kaldi/best_wer and wer_details/. With --cer true, also cer_LMWT_WIP and
# scoring_kaldi/best_cer (characters). The logic is `emasr score-lattices`.
set -euo pipefail

# Begin configuration section.
cmd=run.pl
stage=0
min_lmwt=7
max_lmwt=17
lmwt_step=1               # 0.1: fractional LM weights (networks at acoustic scale ~0.5)
max_failed_fraction=0.05  # fail when more utterances than this have no lattice
word_ins_penalty=0.0,0.5,1.0
cer=false
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-or-graph-dir> <decode-dir>
e.g.: $0 data/test exp/mono/graph exp/mono/decode_test
Options:
  --min-lmwt <n> --max-lmwt <n>        # LM weights to sweep (default $min_lmwt..$max_lmwt)
  --lmwt-step <s>                     # step of the LM-weight grid (default $lmwt_step)
  --max-failed-fraction <f>           # utterances without a lattice are scored as deletions;
                                      # fail when more than this share has none (default $max_failed_fraction)
  --word-ins-penalty <list>           # comma-separated penalties (default $word_ins_penalty)
  --cer <true|false>                  # also score characters (default $cer)
  --cmd <run.pl|...> --stage <n>      # accepted for Kaldi compatibility"

. "$(dirname "$0")/../utils/parse_options.sh"

if [ $# -ne 3 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
data=$1; lang_or_graph=$2; dir=$3
lock_dirs "$dir"

for f in "$data/text" "$lang_or_graph/words.txt"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
ls "$dir"/lat.*.gz > /dev/null 2>&1 || die "expected files $dir/lat.*.gz to exist"
metrics=(--metric wer)
[ "$cer" = true ] && metrics+=(--metric cer)
if [ "$stage" -le 0 ]; then
  # an earlier scoring's files (another LM-weight grid, another metric) must not survive beside
  # this one's: a glob of wer_* would read them
  rm -rf "$dir/scoring_kaldi" "$dir"/wer_* "$dir"/cer_*
  mkdir -p "$dir/scoring_kaldi/log"
  emasr --log-file "$dir/scoring_kaldi/log/score.log" score-lattices --min-lmwt "$min_lmwt" \
    --max-lmwt "$max_lmwt" --lmwt-step "$lmwt_step" \
    --max-failed-fraction "$max_failed_fraction" --word-ins-penalty "$word_ins_penalty" "${metrics[@]}" \
    "$data" "$lang_or_graph" "$dir"
fi
