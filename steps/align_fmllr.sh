#!/usr/bin/env bash
# Align a data dir with a speaker-adapted (SAT) GMM system (Kaldi's steps/align_fmllr.sh): a
# first alignment with the speaker-independent alignment model (final.alimdl, else final.mdl) on
# the SI features, per-speaker fMLLR transforms from it (silence weighted 0; with final.alimdl
# its Gaussian posteriors and final.mdl's means and variances, Kaldi's gmm-est-fmllr-gpost),
# then the final alignment with final.mdl on the adapted features. Writes an alignment dir in
# Kaldi's layout that carries the transforms (trans.JOB), so that train_sat.sh starts from them
# and steps/nnet/build_tree.sh reads adapted features. The work is `emasr gmm-align` and
# `gmm-est-fmllr`, one job per data split.
set -euo pipefail

# Begin configuration section.
stage=0
nj=4
cmd=run.pl
scale_opts="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 0.1"  # as Kaldi's
beam=10
retry_beam=40
careful=false
boost_silence=1.0  # factor on the silence Gaussians' weights when aligning
fmllr_update_type=full
fmllr_min_count=500  # fewer frames of a speaker: no transform (Kaldi's gmm-est-fmllr)
max_failed=0.1     # a job fails when more than this fraction of its utterances cannot be used
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir> <src-dir> <align-dir>
e.g.: $0 --nj 4 data/train data/lang exp/tri3 exp/tri3_ali
Writes <align-dir>/{ali.JOB.gz,trans.JOB,num_jobs,final.mdl,final.alimdl,final.occs,tree,
cmvn_opts,phones.txt} (and the src dir's final.mat, full.mat, splice_opts or delta_order); logs
<align-dir>/log/{align_pass1,fmllr,align_pass2}.JOB.log.
Options:
  --nj <nj>                  # number of parallel jobs (default $nj)
  --cmd <run.pl|queue.pl ..> # how to run jobs (default $cmd)
  --stage <n>                # 1 first alignment, 2 fMLLR, 3 final alignment (default $stage)
  --beam <beam>              # alignment beam (default $beam)
  --retry-beam <beam>        # beam of the retry for failed utterances (default $retry_beam)
  --boost-silence <factor>   # boost silence weights (default $boost_silence)
  --scale-opts <opts>        # alignment scales (default: '$scale_opts')
  --fmllr-update-type <full|diag|offset|none>  # (default $fmllr_update_type)
  --fmllr-min-count <frames>       # below: the identity transform (default $fmllr_min_count)
  --max-failed <fraction>    # allowed share of unaligned utterances per job (default $max_failed)"

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"

if [ $# -ne 4 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
data=$1; lang=$2; srcdir=$3; dir=$4
lock_dirs "$dir"

for f in "$data/feats.scp" "$data/text" "$data/spk2utt" "$lang/L.fst" "$lang/words.txt" \
         "$lang/phones/silence.csl" "$srcdir/final.mdl" "$srcdir/tree"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
check_phones_compatible.sh "$lang/phones.txt" "$srcdir/phones.txt"
mdl=$srcdir/final.mdl
alimdl=$srcdir/final.mdl
[ -f "$srcdir/final.alimdl" ] && alimdl=$srcdir/final.alimdl
cmvn_opts=$(cat "$srcdir/cmvn_opts" 2>/dev/null || true)
silphonelist=$(cat "$lang/phones/silence.csl")
# shellcheck source=steps/lib/gmm_feats.sh
. "$(dirname "$0")/lib/gmm_feats.sh"
gmm_feat_opts "$srcdir"                   # the SI pipeline: feat_type, delta_order, transform_opts
check_gmm_feat_dim "$alimdl" "$data"
check_gmm_feat_dim "$mdl" "$data"         # fMLLR is square: the adapted features have this dim
if [ "$alimdl" != "$mdl" ]; then          # final.alimdl must match final.mdl Gaussian for Gaussian
  emasr check-compatible --model "$alimdl" --tree "$srcdir/tree" || exit 1
fi

mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
echo "$cmvn_opts" > "$dir/cmvn_opts"
cp "$lang/phones.txt" "$dir/phones.txt"
cp "$srcdir/tree" "$dir/tree"
for f in final.mdl final.alimdl final.occs final.mat full.mat splice_opts delta_order; do
  if [ -f "$srcdir/$f" ]; then
    [ "$srcdir/$f" -ef "$dir/$f" ] || cp -L "$srcdir/$f" "$dir/$f"
  else
    rm -f "$dir/$f"
  fi
done
gmm_feat_opts "$dir"                      # from the copies
si_opts=(--cmvn-opts "$cmvn_opts" --delta-order "$delta_order"
         ${transform_opts[@]+"${transform_opts[@]}"})
[ "$alimdl" = "$mdl" ] || alimdl=$dir/final.alimdl
mdl=$dir/final.mdl
split_data.sh "$data" "$nj"
sdata=$data/split$nj
read -r -a align_opts <<< "$scale_opts"
align_opts+=(--beam "$beam" --retry-beam "$retry_beam" --boost-silence "$boost_silence"
            --max-failed "$max_failed")
[ "$careful" = true ] && align_opts+=(--careful)

if [ "$stage" -le 1 ]; then
  log "aligning data in $data using $alimdl and speaker-independent ($feat_type) features"
  $cmd JOB=1:"$nj" "$dir/log/align_pass1.JOB.log" \
    emasr gmm-align "${si_opts[@]}" "${align_opts[@]}" \
      "$alimdl" "$dir/tree" "$lang" "$sdata/JOB" "$dir/pre_ali.JOB.gz"
fi

if [ "$stage" -le 2 ]; then
  log "computing fMLLR transforms"
  fmllr_est_opts 0.0 "$max_failed"   # silence gets no weight in the alignment's estimate
  gpost=()
  [ "$alimdl" = "$mdl" ] || gpost=(--gpost-model "$alimdl")
  $cmd JOB=1:"$nj" "$dir/log/fmllr.JOB.log" \
    emasr gmm-est-fmllr "${si_opts[@]}" ${gpost[@]+"${gpost[@]}"} "${fmllr_opts[@]}" \
      --spk2utt "$sdata/JOB/spk2utt" "$mdl" "$sdata/JOB" "$dir/pre_ali.JOB.gz" "$dir/trans.JOB"
  warn_identity_transforms "$dir/log/fmllr" "$fmllr_min_count"
fi
check_trans_jobs "$dir" "$nj"

if [ "$stage" -le 3 ]; then
  log "doing final alignment"
  $cmd JOB=1:"$nj" "$dir/log/align_pass2.JOB.log" \
    emasr gmm-align "${si_opts[@]}" --speaker-transforms "ark:$dir/trans.JOB" \
      "${align_opts[@]}" "$mdl" "$dir/tree" "$lang" "$sdata/JOB" "$dir/ali.JOB.gz"
fi
rm -f "$dir"/pre_ali.*.gz

failed=$({ grep -h "skipping utterance" "$dir"/log/align_pass2.*.log || true; } | wc -l)
log "done aligning data ($failed utterance(s) could not be aligned)"
