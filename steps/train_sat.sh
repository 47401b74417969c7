#!/usr/bin/env bash
# Speaker-adaptive training (Kaldi's steps/train_sat.sh, "tri3"): a triphone system trained on
# fMLLR-adapted features. The speaker-independent (SI) features are the ali dir's pipeline
# (CMVN -> splice -> final.mat for an LDA system, else CMVN -> deltas); each speaker's affine
# transform (trans.JOB) is applied after them. The starting transforms are the ali dir's trans.*
# (an align_fmllr.sh dir) or, without them, estimated from its alignments and model. A tree is
# built on the adapted features as train_deltas.sh builds it; on --fmllr-iters each speaker's
# transform is re-estimated on the current adapted features (silence weighted 0) and composed
# with the previous one. At the end, final.alimdl: one pass of statistics of the SI features
# with the Gaussian posteriors of the final model on the adapted ones, the SI alignment model
# of align_fmllr.sh and decode_fmllr.sh, matching final.mdl Gaussian for Gaussian.
# The work is `emasr gmm-est-fmllr`, `compose-transforms`, `acc-tree-stats`, `sum-tree-stats`,
# `cluster-phones`, `build-tree`, `gmm-init-model`, `convert-ali`, `gmm-align`,
# `gmm-acc-stats-ali`, `gmm-est` and `gmm-acc-stats-twofeats`.
set -euo pipefail

# Begin configuration section.
num_leaves=2000    # target number of tree leaves (Kaldi's positional <num-leaves>)
totgauss=20000     # target number of Gaussians (Kaldi's positional <tot-gauss>)
cmd=run.pl
scale_opts="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 0.1"  # as Kaldi's
nj=                # accepted for symmetry with the other steps: the jobs are the ali dir's splits
num_iters=35
max_iter_inc=25    # the number of Gaussians grows until this iteration
realign_iters="10 20 30"
fmllr_iters="2 4 6 12"
fmllr_update_type=full
fmllr_min_count=500  # fewer frames of a speaker: no transform (Kaldi's gmm-est-fmllr)
silence_weight=0.0 # weight of silence frames in the fMLLR estimation
alimdl_update_flags=mvwt  # what final.alimdl re-estimates (Kaldi: gmm-est's default, all)
beam=10
retry_beam=40
careful=false
boost_silence=1.0
power=0.2
cluster_thresh=-1  # merge tree leaves while the loss is below this (-1: the split threshold)
tree_thresh=300    # minimum log-likelihood gain of a tree split
tree_min_count=50  # minimum frames on each side of a tree split
max_failed=0.1     # a job fails when more than this fraction of its utterances cannot be used
stage=-4
# End configuration section.

help_message="Usage: $0 [options] [<num-leaves> <tot-gauss>] <data> <lang> <ali-dir> <exp-dir>
e.g.: $0 2500 15000 data/train data/lang exp/tri2_ali exp/tri3
The number of jobs is the alignment dir's num_jobs; its cmvn_opts and feature pipeline
(final.mat and splice_opts, or delta_order) are used, and its trans.JOB, if any, are the
starting transforms. The fMLLR transforms are per speaker (the data dir's spk2utt).
Writes <exp-dir>/{final.mdl,final.alimdl,final.occs,trans.JOB,tree,questions.int,num_jobs,
cmvn_opts,phones.txt,ali.JOB.gz} and the ali dir's final.mat, full.mat, splice_opts or
delta_order; logs in <exp-dir>/log (fmllr.0.JOB, acc_tree.JOB, fmllr.N.JOB, compose.N.JOB,
acc.N.JOB, update.N, align.N.JOB, acc_alimdl.JOB, est_alimdl).
Options:
  --num-leaves <n>           # target number of tree leaves (default $num_leaves)
  --totgauss <n>             # target number of Gaussians (default $totgauss)
  --cmd <run.pl|queue.pl ..> # how to run jobs (default $cmd)
  --num-iters <n>            # training iterations (default $num_iters)
  --fmllr-iters <'i j ..'>   # iterations that re-estimate fMLLR (default '$fmllr_iters')
  --realign-iters <'i j ..'> # iterations with realignment (default '$realign_iters')
  --silence-weight <w>       # weight of silence in fMLLR estimation (default $silence_weight)
  --fmllr-update-type <full|diag|offset|none>  # (default $fmllr_update_type)
  --fmllr-min-count <frames>       # below: the identity transform (default $fmllr_min_count)
  --alimdl-update-flags <mvwt>     # what final.alimdl re-estimates (default $alimdl_update_flags)
  --boost-silence <factor>   # boost silence weights when aligning (default $boost_silence)
  --scale-opts <opts>        # alignment scales (default: '$scale_opts')
  --max-iter-inc <n>         # the number of Gaussians grows until this pass (default $max_iter_inc)
  --power <p>                # mixing up by occupancy^power (default $power)
  --cluster-thresh <loss>    # leaf merging threshold (default $cluster_thresh)
  --tree-thresh <gain> --tree-min-count <frames>  # tree splits (default $tree_thresh, $tree_min_count)
  --stage <stage>            # resume from this stage (default $stage): -4 first fMLLR, -3 tree
                             # stats, -2 tree and model, -1 convert alignments, N pass N,
                             # num-iters the alignment model"

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"

if [ $# -eq 6 ]; then  # Kaldi's calling form
  num_leaves=$1; totgauss=$2; shift 2
fi
if [ $# -ne 4 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
data=$1; lang=$2; alidir=$3; dir=$4
lock_dirs "$dir"

for f in "$alidir/final.mdl" "$alidir/ali.1.gz" "$alidir/num_jobs" "$data/feats.scp" \
         "$data/text" "$data/spk2utt" "$lang/phones/roots.int" "$lang/phones/sets.int" \
         "$lang/phones/silence.csl" "$lang/phones/context_indep.csl" "$lang/topo" \
         "$lang/L.fst"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
check_phones_compatible.sh "$lang/phones.txt" "$alidir/phones.txt"
ali_nj=$(cat "$alidir/num_jobs")
if [ -n "$nj" ] && [ "$nj" != "$ali_nj" ]; then
  warn "--nj $nj ignored: using the $ali_nj jobs of $alidir (its alignment splits)"
fi
nj=$ali_nj
cmvn_opts=$(cat "$alidir/cmvn_opts" 2>/dev/null || true)
silphonelist=$(cat "$lang/phones/silence.csl")
# shellcheck source=steps/lib/gmm_feats.sh
. "$(dirname "$0")/lib/gmm_feats.sh"
start_trans=
if [ -f "$alidir/trans.1" ]; then   # an fMLLR alignment dir: its transforms are the start
  check_transform_dir_jobs "$alidir" "$nj"
  check_trans_jobs "$alidir" "$nj"
  start_trans=$alidir
fi
gmm_feat_opts "$alidir" "$start_trans"   # feat_type, delta_order, transform_opts
check_gmm_feat_dim "$alidir/final.mdl" "$data"   # the ali dir's model fits its features

mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
echo "$cmvn_opts" > "$dir/cmvn_opts"
cp "$lang/phones.txt" "$dir/phones.txt"
for f in final.mat full.mat splice_opts; do   # the SI pipeline, read from here on
  if [ -f "$alidir/$f" ]; then
    [ "$alidir/$f" -ef "$dir/$f" ] || cp -L "$alidir/$f" "$dir/$f"
  else
    rm -f "$dir/$f"
  fi
done
if [ "$feat_type" = delta ]; then
  echo "$delta_order" > "$dir/delta_order"
else
  rm -f "$dir/delta_order"
fi
gmm_feat_opts "$dir"                     # the SI pipeline, now from $dir
si_opts=(--cmvn-opts "$cmvn_opts" --delta-order "$delta_order"
         ${transform_opts[@]+"${transform_opts[@]}"})
split_data.sh "$data" "$nj"
sdata=$data/split$nj
feat_opts=("${si_opts[@]}" --speaker-transforms "ark:$dir/trans.JOB")
read -r -a align_opts <<< "$scale_opts"
align_opts+=(--beam "$beam" --retry-beam "$retry_beam" --boost-silence "$boost_silence"
            --max-failed "$max_failed")
[ "$careful" = true ] && align_opts+=(--careful)
fmllr_est_opts "$silence_weight" "$max_failed"
. "$(dirname "$0")/lib/build_tree.sh"   # tree_stats, questions_and_tree, init_tree_model, ...
. "$(dirname "$0")/lib/gmm_passes.sh"   # init_numgauss, gmm_training_passes, link_final

if [ "$stage" -le -4 ]; then
  if [ -n "$start_trans" ]; then
    log "using the transforms of $alidir as the starting transforms"
    for n in $(seq "$nj"); do cp "$alidir/trans.$n" "$dir/trans.$n"; done
  else
    log "estimating the initial fMLLR transforms (none in $alidir)"
    $cmd JOB=1:"$nj" "$dir/log/fmllr.0.JOB.log" \
      emasr gmm-est-fmllr "${si_opts[@]}" "${fmllr_opts[@]}" --spk2utt "$sdata/JOB/spk2utt" \
        "$alidir/final.mdl" "$sdata/JOB" "$alidir/ali.JOB.gz" "$dir/trans.JOB"
    log "initial fMLLR auxf improvement per frame: $(fmllr_gain "$dir/log/fmllr.0")"
    warn_identity_transforms "$dir/log/fmllr.0" "$fmllr_min_count"
  fi
fi
check_trans_jobs "$dir" "$nj"

if [ "$stage" -le -3 ]; then
  tree_stats
fi

if [ "$stage" -le -2 ]; then
  questions_and_tree
  log "initializing the model"
  init_tree_model
fi

if [ "$stage" -le -1 ]; then
  convert_alignments
fi

fmllr_pass() {
  # on --fmllr-iters, before the pass's statistics: a transform per speaker on the current
  # adapted features, composed with the current one (trans.JOB = new . old)
  local x=$1
  pass_note=
  [[ " $fmllr_iters " == *" $x "* ]] || return 0
  [ "$stage" -le "$x" ] || return 0
  log "pass $x: estimating fMLLR transforms"
  $cmd JOB=1:"$nj" "$dir/log/fmllr.$x.JOB.log" \
    emasr gmm-est-fmllr "${feat_opts[@]}" "${fmllr_opts[@]}" --spk2utt "$sdata/JOB/spk2utt" \
      "$dir/$x.mdl" "$sdata/JOB" "$dir/ali.JOB.gz" "$dir/tmp_trans.JOB"
  $cmd JOB=1:"$nj" "$dir/log/compose.$x.JOB.log" \
    emasr compose-transforms --b-is-affine true "ark:$dir/tmp_trans.JOB" "ark:$dir/trans.JOB" \
      "ark:$dir/trans.JOB"
  rm -f "$dir"/tmp_trans.*
  pass_note="fMLLR auxf improvement $(fmllr_gain "$dir/log/fmllr.$x") per frame"
  warn_identity_transforms "$dir/log/fmllr.$x" "$fmllr_min_count"
}

init_numgauss
gmm_training_passes fmllr_pass

if [ "$stage" -le "$num_iters" ]; then
  # The alignment model: the SI features' statistics with the final model's Gaussian posteriors
  # on the adapted ones; low-count Gaussians keep their parameters (Gaussian for Gaussian).
  log "estimating the speaker-independent alignment model (final.alimdl)"
  x=$num_iters
  $cmd JOB=1:"$nj" "$dir/log/acc_alimdl.JOB.log" \
    emasr gmm-acc-stats-twofeats "${feat_opts[@]}" --max-skipped "$max_failed" \
      "$dir/$x.mdl" "$sdata/JOB" "$dir/ali.JOB.gz" "$dir/$x.JOB.acc"
  $cmd "$dir/log/est_alimdl.log" \
    emasr gmm-est --update-flags "$alimdl_update_flags" --remove-low-count-gaussians false \
      "$dir/$x.mdl" "$dir/$x.alimdl" $(seq -f "$dir/$x.%g.acc" 1 "$nj")
  rm -f "$dir/$x".*.acc
fi

link_final mdl occs alimdl
leaves=$(emasr gmm-info "$dir/final.mdl" | awk '/number of pdfs/ {print $NF}')
log "done training the SAT system in $dir ($leaves pdfs, $feat_type features + per-speaker" \
     "fMLLR in trans.1..$nj)"
