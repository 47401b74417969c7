#!/usr/bin/env bash
# Triphone GMM-HMM training on delta features (Kaldi's steps/train_deltas.sh): tree statistics
# from the alignments of a previous system, questions from clustering the phone sets plus the
# dict's extra questions, a phonetic decision tree with up to num_leaves leaves, a model initialized
# from the tree statistics, the old alignments converted to it, then num_iters passes of MLE
# re-estimation with realignment on realign_iters and mixing up to totgauss Gaussians.
# The work is `emasr acc-tree-stats`, `sum-tree-stats`, `cluster-phones`, `build-tree`,
# `gmm-init-model`, `convert-ali`, `gmm-align`, `gmm-acc-stats-ali` and `gmm-est`.
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
beam=10
retry_beam=40
careful=false
boost_silence=1.0
power=0.25
cluster_thresh=-1  # merge tree leaves while the loss is below this (-1: the split threshold)
tree_thresh=300    # minimum log-likelihood gain of a tree split
tree_min_count=50  # minimum frames on each side of a tree split
max_failed=0.1     # a job fails when more than this fraction of its utterances cannot be used
stage=-4
# End configuration section.

help_message="Usage: $0 [options] [<num-leaves> <tot-gauss>] <data-dir> <lang-dir> <ali-dir> <exp-dir>
e.g.: $0 --num-leaves 2000 --totgauss 10000 data/train data/lang exp/mono_ali exp/tri1
The number of jobs is the alignment dir's num_jobs; its cmvn_opts are used.
Writes <exp-dir>/{final.mdl,final.occs,tree,questions.int,treeacc,num_jobs,cmvn_opts,phones.txt,
ali.JOB.gz} and logs in <exp-dir>/log.
Options:
  --num-leaves <n>           # target number of tree leaves (default $num_leaves)
  --totgauss <n>             # target number of Gaussians (default $totgauss)
  --cmd <run.pl|queue.pl ..> # how to run jobs (default $cmd)
  --num-iters <n>            # training iterations (default $num_iters)
  --realign-iters <'i j ..'> # iterations with realignment (default '$realign_iters')
  --boost-silence <factor>   # boost silence weights when aligning (default $boost_silence)
  --scale-opts <opts>        # alignment scales (default: '$scale_opts')
  --cluster-thresh <loss>    # leaf merging threshold (default $cluster_thresh)
  --stage <stage>            # resume from this stage (default $stage)"

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
         "$data/text" "$lang/phones/roots.int" "$lang/phones/sets.int" \
         "$lang/phones/context_indep.csl" "$lang/topo" "$lang/L.fst"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
check_phones_compatible.sh "$lang/phones.txt" "$alidir/phones.txt"
ali_nj=$(cat "$alidir/num_jobs")
if [ -n "$nj" ] && [ "$nj" != "$ali_nj" ]; then
  warn "--nj $nj ignored: using the $ali_nj jobs of $alidir (its alignment splits)"
fi
nj=$ali_nj
cmvn_opts=$(cat "$alidir/cmvn_opts" 2>/dev/null || true)
delta_order=$(cat "$alidir/delta_order" 2>/dev/null || echo 2)

mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
echo "$cmvn_opts" > "$dir/cmvn_opts"
echo "$delta_order" > "$dir/delta_order"
cp "$lang/phones.txt" "$dir/phones.txt"
split_data.sh "$data" "$nj"
sdata=$data/split$nj
feat_opts=(--cmvn-opts "$cmvn_opts" --delta-order "$delta_order")
read -r -a align_opts <<< "$scale_opts"
align_opts+=(--beam "$beam" --retry-beam "$retry_beam" --boost-silence "$boost_silence"
            --max-failed "$max_failed")
[ "$careful" = true ] && align_opts+=(--careful)
. "$(dirname "$0")/lib/build_tree.sh"   # tree_stats, questions_and_tree, init_tree_model, ...
. "$(dirname "$0")/lib/gmm_passes.sh"   # init_numgauss, gmm_training_passes, link_final

if [ "$stage" -le -3 ]; then
  tree_stats
fi

if [ "$stage" -le -2 ]; then
  questions_and_tree
  init_tree_model
fi

if [ "$stage" -le -1 ]; then
  convert_alignments
fi

no_transform() { :; }
init_numgauss
gmm_training_passes no_transform
link_final mdl occs
leaves=$(emasr gmm-info "$dir/final.mdl" | awk '/number of pdfs/ {print $NF}')
# the update log's message only (its lines are log lines of their own: not two in one)
like=$(grep -ho "overall avg like per frame = .*" "$dir/log/update.$((num_iters - 1)).log" | tail -n 1 || true)
log "final: ${like:-no likelihood in $dir/log/update.$((num_iters - 1)).log}"
log "done training the triphone system in $dir ($leaves pdfs)"
