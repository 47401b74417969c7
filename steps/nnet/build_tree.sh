#!/usr/bin/env bash
# The networks' own tree (Kaldi's steps/nnet3/chain/build_tree.sh): the GMM alignments of
# <gmm-ali-dir> (any topology: this toolkit's 3-state or skip GMMs, or Kaldi's) converted to a
# monophone model over <nnet-lang-dir>'s topology at 1/F of their frame rate; tree statistics from
# them on the GMM features of <data> subsampled by F; questions and the tree, as for a triphone GMM;
# a model initialized from the statistics (TransitionModel + one Gaussian per pdf) whose transition
# probabilities are then estimated from the alignments converted to the new tree, which are kept
# at the network's frame rate. Writes <exp-dir>/{tree,final.mdl,ali.JOB.gz,
# frame_subsampling_factor,num_jobs,phones.txt,questions.int,cmvn_opts,...} and logs in
# <exp-dir>/log. The work is `emasr gmm-init-mono`, `convert-ali`, `acc-tree-stats`,
# `sum-tree-stats`, `cluster-phones`, `build-tree`, `gmm-init-model` and `train-transitions`.
set -euo pipefail

# Begin configuration section.
frame_subsampling_factor=1  # F: the networks' frame rate is 1/F of the alignments' (3 for 30 ms)
subsample_at=centre         # centre | start: the 10 ms frame that stands for each window of F
                            # (centre: this toolkit's frame stacking and make-targets; start: Kaldi's)
cmd=run.pl
context_opts=               # Kaldi's; only the triphone context (--context-width=3
                            # --central-position=1) is supported, and it is the default
cluster_thresh=-1           # merge tree leaves while the loss is below this (-1: tree_thresh)
tree_thresh=300             # minimum log-likelihood gain of a tree split
tree_min_count=50           # minimum frames (at the network's rate) on each side of a split
max_failed=0.1              # a job fails when more than this fraction of its utterances is unusable
stage=-5
# End configuration section.

help_message="Usage: $0 [options] <num-leaves> <data-dir> <nnet-lang-dir> <gmm-ali-dir> <exp-dir>
e.g.: $0 --frame-subsampling-factor 3 2000 data/train data/lang_nnet exp/tri3_ali exp/nnet_tree
<data-dir> has the GMM features (feats.scp, cmvn.scp); <nnet-lang-dir> is utils/prepare_lang_nnet.sh's;
<gmm-ali-dir> has ali.JOB.gz, final.mdl, num_jobs (and cmvn_opts, delta_order or splice_opts +
final.mat, trans.JOB: the features are read as its model read them).
Then: steps/nnet/make_targets.sh <exp-dir> <fbank-data> <targets>; utils/mkgraph.sh <nnet-lang-test>
<exp-dir> <graph>; steps/nnet/train.sh --trans-mdl <exp-dir>/final.mdl ...
Options:
  --frame-subsampling-factor <F>  # networks' frame rate 1/F of the alignments' (default $frame_subsampling_factor)
  --subsample-at centre|start     # frame standing for a window of F (default $subsample_at)
  --cmd <run.pl|queue.pl ..>      # how to run jobs (default $cmd)
  --context-opts <opts>           # Kaldi's; only '--context-width=3 --central-position=1'
  --cluster-thresh <loss>         # leaf merging threshold (default $cluster_thresh)
  --tree-thresh <gain>            # minimum gain of a split (default $tree_thresh)
  --tree-min-count <frames>       # minimum frames per side of a split (default $tree_min_count)
  --stage <stage>                 # resume from this stage (default $stage)"

utils_dir="$(cd "$(dirname "$0")/../../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"

if [ $# -ne 5 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
num_leaves=$1; data=$2; lang=$3; alidir=$4; dir=$5
lock_dirs "$dir"

for f in "$data/feats.scp" "$lang/phones.txt" "$lang/topo" "$lang/phones/sets.int" \
         "$lang/phones/roots.int" "$lang/phones/context_indep.csl" "$alidir/final.mdl" \
         "$alidir/ali.1.gz"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
for opt in $context_opts; do
  case $opt in
    --context-width=3|--central-position=1) ;;
    *) die "--context-opts '$context_opts': only the triphone context" \
            "(--context-width=3 --central-position=1) is supported" ;;
  esac
done
if [ -f "$alidir/frame_subsampling_factor" ] && [ "$(cat "$alidir/frame_subsampling_factor")" != 1 ]; then
  die "$alidir is already at 1/$(cat "$alidir/frame_subsampling_factor") of the features'" \
    "frame rate: give the GMM's own (10 ms) alignments"
fi
[ "$frame_subsampling_factor" -ge 1 ] || die "--frame-subsampling-factor must be >= 1"
check_phones_compatible.sh "$lang/phones.txt" "$alidir/phones.txt"
if [ -f "$alidir/num_jobs" ]; then nj=$(cat "$alidir/num_jobs")
else nj=$(find "$alidir" -maxdepth 1 -name 'ali.*.gz' | wc -l); fi
for n in $(seq "$nj"); do
  [ -f "$alidir/ali.$n.gz" ] || die "expected file $alidir/ali.$n.gz to exist"
done
[ "$(cd "$alidir" && pwd -P)" != "$(mkdir -p "$dir" && cd "$dir" && pwd -P)" ] || die "<gmm-ali-dir> and <exp-dir> must differ"

# The features as the alignments' GMM read them (Kaldi's delta / lda feature types), then 1 in F.
cmvn_opts=$(cat "$alidir/cmvn_opts" 2>/dev/null || true)
# shellcheck source=steps/lib/gmm_feats.sh
. "$(dirname "$0")/../lib/gmm_feats.sh"
transform_dir=
[ -f "$alidir/trans.1" ] && transform_dir=$alidir   # a SAT system's per-speaker transforms
gmm_feat_opts "$alidir" "$transform_dir"
feat_opts=(--cmvn-opts "$cmvn_opts" --delta-order "$delta_order"
           ${transform_opts[@]+"${transform_opts[@]}"})
feat_type+="${transform_dir:+ + speaker transforms $alidir/trans.JOB}"
log "feature type $feat_type, 1 frame in $frame_subsampling_factor ($subsample_at)"
subsample_opts=(--frame-subsampling-factor "$frame_subsampling_factor" --subsample-at "$subsample_at")

mkdir -p "$dir/log"
rm -f "$dir/num_jobs"  # written last: a dir without it is incomplete
echo "$cmvn_opts" > "$dir/cmvn_opts"
for f in delta_order splice_opts final.mat; do
  if [ -f "$alidir/$f" ]; then cp "$alidir/$f" "$dir/$f"; else rm -f "$dir/$f"; fi
done
cp "$lang/phones.txt" "$dir/phones.txt"
split_data.sh "$data" "$nj"
sdata=$data/split$nj
. "$(dirname "$0")/../lib/build_tree.sh"   # questions_and_tree, init_tree_model

if [ "$stage" -le -5 ]; then
  log "initializing a monophone model over $lang/topo (for the alignment conversion)"
  $cmd "$dir/log/init_mono.log" \
    emasr gmm-init-mono --shared-phones "$lang/phones/sets.int" --num-utts 1 \
      --cmvn-opts "$cmvn_opts" --delta-order 0 "$lang/topo" "$data" "$dir/mono.mdl" "$dir/mono.tree"
fi

if [ "$stage" -le -4 ]; then
  log "accumulating tree stats at 1/$frame_subsampling_factor of the frame rate"
  $cmd JOB=1:"$nj" "$dir/log/convert_mono.JOB.log" \
    emasr convert-ali "${subsample_opts[@]}" --max-failed "$max_failed" \
      "$alidir/final.mdl" "$dir/mono.mdl" "$dir/mono.tree" "$alidir/ali.JOB.gz" \
      "$dir/mono_ali.JOB.gz"
  $cmd JOB=1:"$nj" "$dir/log/acc_tree.JOB.log" \
    emasr acc-tree-stats "${subsample_opts[@]}" "${feat_opts[@]}" \
      --max-skipped "$max_failed" --ci-phones "$lang/phones/context_indep.csl" \
      "$dir/mono.mdl" "$sdata/JOB" "$dir/mono_ali.JOB.gz" "$dir/JOB.treeacc"
  $cmd "$dir/log/sum_tree_acc.log" \
    emasr sum-tree-stats "$dir/treeacc" $(seq -f "$dir/%g.treeacc" 1 "$nj")
  rm -f "$dir"/*.treeacc "$dir"/mono_ali.*.gz
fi

if [ "$stage" -le -3 ]; then
  questions_and_tree
fi

if [ "$stage" -le -2 ]; then
  log "initializing the model"
  init_tree_model
fi

if [ "$stage" -le -1 ]; then
  log "converting alignments from $alidir to the new tree at 1/$frame_subsampling_factor" \
       "of the frame rate"
  $cmd JOB=1:"$nj" "$dir/log/convert.JOB.log" \
    emasr convert-ali "${subsample_opts[@]}" --max-failed "$max_failed" \
      "$alidir/final.mdl" "$dir/1.mdl" "$dir/tree" "$alidir/ali.JOB.gz" "$dir/ali.JOB.gz"
  log "estimating the transition probabilities from the converted alignments"
  $cmd "$dir/log/train_transitions.log" \
    emasr train-transitions "$dir/1.mdl" $(seq -f "$dir/ali.%g.gz" 1 "$nj") "$dir/final.mdl"
fi

emasr check-compatible --model "$dir/final.mdl" --tree "$dir/tree"
if [ "$frame_subsampling_factor" -gt 1 ]; then
  echo "$frame_subsampling_factor" > "$dir/frame_subsampling_factor"
else
  rm -f "$dir/frame_subsampling_factor"
fi
echo "$nj" > "$dir/num_jobs"
leaves=$(emasr gmm-info "$dir/final.mdl" | awk '/number of pdfs/ {print $NF}')
skipped=$({ grep -h "not converted" "$dir"/log/convert.*.log || true; } | wc -l)
log "done building the tree in $dir ($leaves pdfs; $skipped utterance(s) could not be" \
     "converted)"
