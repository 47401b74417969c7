#!/usr/bin/env bash
# Align a data dir with a GMM-HMM system (Kaldi's steps/align_si.sh): Viterbi alignment of each
# utterance's transcript, beam 10 with a retry at beam 40, silence boosted as in training. Writes
# an alignment dir in Kaldi's layout. The work is `emasr gmm-align`, one job per data split.
# Features as Kaldi decides them: CMVN -> splice -> final.mat when <src-dir> has final.mat (an
# LDA system), else CMVN -> deltas; final.mat and splice_opts go into the alignment dir, so the
# system trained on it sees them (steps/lib/gmm_feats.sh).
set -euo pipefail

# Begin configuration section.
nj=4
cmd=run.pl
scale_opts="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 0.1"  # as Kaldi's
beam=10
retry_beam=40
careful=false
boost_silence=1.0  # factor on the silence Gaussians' weights when aligning
max_failed=0.1     # a job fails when more than this fraction of its utterances cannot be aligned
transform_dir=     # dir with trans.JOB: per-speaker (fMLLR) transforms applied after final.mat
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir> <src-dir> <align-dir>
e.g.: $0 data/train data/lang exp/tri1 exp/tri1_ali
Writes <align-dir>/{ali.JOB.gz,num_jobs,final.mdl,tree,cmvn_opts,phones.txt} (and, from an LDA
system, final.mat, full.mat and splice_opts; else delta_order; with --transform-dir, its
trans.JOB) and <align-dir>/log/align.JOB.log (each names the utterances it could not align).
A SAT system (train_sat.sh) is aligned by steps/align_fmllr.sh, which estimates the transforms.
Options:
  --nj <nj>                  # number of parallel jobs (default $nj)
  --cmd <run.pl|queue.pl ..> # how to run jobs (default $cmd)
  --beam <beam>              # alignment beam (default $beam)
  --retry-beam <beam>        # beam of the retry for failed utterances (default $retry_beam)
  --boost-silence <factor>   # boost silence weights (default $boost_silence)
  --scale-opts <opts>        # alignment scales (default: '$scale_opts')
  --max-failed <fraction>    # allowed fraction of unaligned utterances per job (default $max_failed)
  --transform-dir <dir>      # apply <dir>/trans.JOB (per speaker) last; <dir>'s num_jobs = --nj"

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"

if [ $# -ne 4 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
data=$1; lang=$2; srcdir=$3; dir=$4
lock_dirs "$dir"

for f in "$data/feats.scp" "$data/text" "$lang/L.fst" "$lang/words.txt" \
         "$srcdir/final.mdl" "$srcdir/tree"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
check_phones_compatible.sh "$lang/phones.txt" "$srcdir/phones.txt"
cmvn_opts=$(cat "$srcdir/cmvn_opts" 2>/dev/null || true)
# shellcheck source=steps/lib/gmm_feats.sh
. "$(dirname "$0")/lib/gmm_feats.sh"
[ -n "$transform_dir" ] && check_transform_dir_jobs "$transform_dir" "$nj"
gmm_feat_opts "$srcdir" "$transform_dir"   # feat_type, delta_order, transform_opts
warn_unadapted_sat "$srcdir/final.mdl" "$transform_dir"
check_gmm_feat_dim "$srcdir/final.mdl" "$data"

mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
echo "$cmvn_opts" > "$dir/cmvn_opts"
if [ "$feat_type" = lda ]; then  # as Kaldi: the next system reads them from the ali dir
  rm -f "$dir/delta_order"
  for f in final.mat full.mat splice_opts; do
    if [ -f "$srcdir/$f" ] && ! [ "$srcdir/$f" -ef "$dir/$f" ]; then
      cp -L "$srcdir/$f" "$dir/$f"
    fi
  done
else
  rm -f "$dir/final.mat" "$dir/full.mat" "$dir/splice_opts"  # of an earlier LDA system's run
  echo "$delta_order" > "$dir/delta_order"
fi
if [ -n "$transform_dir" ]; then  # the ali dir carries the transforms its features went through
  for n in $(seq "$nj"); do
    [ "$transform_dir/trans.$n" -ef "$dir/trans.$n" ] || cp "$transform_dir/trans.$n" "$dir/trans.$n"
  done
elif ! [ "$srcdir" -ef "$dir" ]; then
  rm -f "$dir"/trans.[0-9]*                 # of an earlier run with --transform-dir
fi
cp "$srcdir/tree" "$dir/tree"
cp -L "$srcdir/final.mdl" "$dir/final.mdl"
[ -f "$srcdir/final.occs" ] && cp -L "$srcdir/final.occs" "$dir/final.occs"
cp "$lang/phones.txt" "$dir/phones.txt"
split_data.sh "$data" "$nj"
sdata=$data/split$nj
extra=()
[ "$careful" = true ] && extra+=(--careful)

log "aligning data in $data using model from $srcdir ($feat_type features)," \
     "putting alignments in $dir"
$cmd JOB=1:"$nj" "$dir/log/align.JOB.log" \
  emasr gmm-align --cmvn-opts "$cmvn_opts" --delta-order "$delta_order" \
    ${transform_opts[@]+"${transform_opts[@]}"} \
    --beam "$beam" --retry-beam "$retry_beam" --boost-silence "$boost_silence" \
    $scale_opts \
    --max-failed "$max_failed" ${extra[@]+"${extra[@]}"} \
    "$dir/final.mdl" "$dir/tree" "$lang" "$sdata/JOB" "$dir/ali.JOB.gz" \
  || die "alignment failed; see $dir/log/align.*.log"
failed=$({ grep -h "skipping utterance" "$dir"/log/align.*.log || true; } | wc -l)
log "done aligning data ($failed utterance(s) could not be aligned)"
