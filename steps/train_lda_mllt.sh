#!/usr/bin/env bash
# Triphone GMM-HMM training on LDA+MLLT features (Kaldi's steps/train_lda_mllt.sh, "tri2"): the
# CMVN'd features are spliced (+-3 frames), LDA estimated on them with the pdfs of the previous
# system's alignments as classes (silence weighted 0) reduces them to --dim dimensions (0.mat);
# a tree is built on the LDA features as train_deltas.sh builds it, and on --mllt-iters an MLLT
# (semi-tied covariance) matrix is estimated in the current space, the model means are rotated by
# it and it is composed into the transform (N.mat), so final.mat = MLLT_k ... MLLT_1 LDA.
# The work is `emasr acc-lda`, `est-lda`, `acc-tree-stats`, `sum-tree-stats`, `cluster-phones`,
# `build-tree`, `gmm-init-model`, `convert-ali`, `gmm-align`, `gmm-acc-mllt`, `est-mllt`,
# `gmm-transform-means`, `compose-transforms`, `gmm-acc-stats-ali` and `gmm-est`.
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
mllt_iters="2 4 6 12"
splice_opts="--left-context=3 --right-context=3"  # as Kaldi's recipes pass it
cmvn_opts=         # default: the ali dir's cmvn_opts
dim=40             # LDA output dimension (must be below the ali dir's number of pdfs)
beam=10
retry_beam=40
careful=false
boost_silence=1.0
power=0.25
cluster_thresh=-1  # merge tree leaves while the loss is below this (-1: the split threshold)
tree_thresh=300    # minimum log-likelihood gain of a tree split
tree_min_count=50  # minimum frames on each side of a tree split
max_failed=0.1     # a job fails when more than this fraction of its utterances cannot be used
stage=-5
# End configuration section.

help_message="Usage: $0 [options] [<num-leaves> <tot-gauss>] <data> <lang> <ali-dir> <exp-dir>
e.g.: $0 2500 15000 data/train data/lang exp/tri1_ali exp/tri2
The number of jobs is the alignment dir's num_jobs; its cmvn_opts are used unless --cmvn-opts.
The LDA classes are the ali dir's pdfs (silence frames weighted 0): --dim must be below their
number (yesno's 11 monophone pdfs allow at most 10).
Writes <exp-dir>/{final.mdl,final.occs,final.mat,full.mat,splice_opts,cmvn_opts,tree,
questions.int,num_jobs,phones.txt,ali.JOB.gz}; N.mat is the transform from pass N on, final.mat
the last; logs in <exp-dir>/log (lda_acc.JOB, lda_est, acc_tree.JOB, macc.N.JOB, mupdate.N,
acc.N.JOB, update.N, align.N.JOB).
Options:
  --num-leaves <n>           # target number of tree leaves (default $num_leaves)
  --totgauss <n>             # target number of Gaussians (default $totgauss)
  --cmd <run.pl|queue.pl ..> # how to run jobs (default $cmd)
  --num-iters <n>            # training iterations (default $num_iters)
  --mllt-iters <'i j ..'>    # iterations that re-estimate MLLT (default '$mllt_iters')
  --realign-iters <'i j ..'> # iterations with realignment (default '$realign_iters')
  --splice-opts <opts>       # frames spliced before LDA (default '$splice_opts')
  --dim <n>                  # LDA output dimension (default $dim)
  --cmvn-opts <opts>         # CMVN options (default: the ali dir's)
  --boost-silence <factor>   # boost silence weights when aligning (default $boost_silence)
  --scale-opts <opts>        # alignment scales (default: '$scale_opts')
  --max-iter-inc <n>         # the number of Gaussians grows until this pass (default $max_iter_inc)
  --power <p>                # mixing up by occupancy^power (default $power)
  --cluster-thresh <loss>    # leaf merging threshold (default $cluster_thresh)
  --tree-thresh <gain> --tree-min-count <frames>  # tree splits (default $tree_thresh, $tree_min_count)
  --stage <stage>            # resume from this stage (default $stage): -5 LDA, -4 tree stats,
                             # -3 tree, -2 model, -1 convert alignments, N pass N"

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
[ -n "$cmvn_opts" ] || cmvn_opts=$(cat "$alidir/cmvn_opts" 2>/dev/null || true)
silphonelist=$(cat "$lang/phones/silence.csl")
[ -f "$alidir/final.mat" ] && \
  log "note: LDA is estimated afresh on spliced features; $alidir/final.mat is not used"

mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
echo "$cmvn_opts" > "$dir/cmvn_opts"
echo "$splice_opts" > "$dir/splice_opts"  # later steps splice as training did (gmm_feats.sh)
rm -f "$dir/delta_order"                    # the features are final.mat's, not deltas
cp "$lang/phones.txt" "$dir/phones.txt"
split_data.sh "$data" "$nj"
sdata=$data/split$nj
spliced_opts=(--cmvn-opts "$cmvn_opts" --delta-order 0 --splice-opts "$splice_opts")
cur_mat=0
feat_opts=("${spliced_opts[@]}" --transform "$dir/$cur_mat.mat")
read -r -a align_opts <<< "$scale_opts"
align_opts+=(--beam "$beam" --retry-beam "$retry_beam" --boost-silence "$boost_silence"
            --max-failed "$max_failed")
[ "$careful" = true ] && align_opts+=(--careful)
. "$(dirname "$0")/lib/build_tree.sh"   # tree_stats, questions_and_tree, init_tree_model, ...
. "$(dirname "$0")/lib/gmm_passes.sh"   # init_numgauss, gmm_training_passes, link_final
silence_opts=(--silence-phones "$silphonelist" --silence-weight 0.0)

if [ "$stage" -le -5 ]; then
  log "accumulating LDA statistics"
  $cmd JOB=1:"$nj" "$dir/log/lda_acc.JOB.log" \
    emasr acc-lda "${spliced_opts[@]}" "${silence_opts[@]}" --max-skipped "$max_failed" \
      "$alidir/final.mdl" "$sdata/JOB" "$alidir/ali.JOB.gz" "$dir/lda.JOB.acc"
  $cmd "$dir/log/lda_est.log" \
    emasr est-lda --dim "$dim" --write-full-matrix "$dir/full.mat" "$dir/0.mat" \
      $(seq -f "$dir/lda.%g.acc" 1 "$nj")
  rm -f "$dir"/lda.*.acc
fi
[ -f "$dir/0.mat" ] || die "expected file $dir/0.mat to exist (stage -5)"

if [ "$stage" -le -4 ]; then
  tree_stats
fi

if [ "$stage" -le -3 ]; then
  questions_and_tree
fi

if [ "$stage" -le -2 ]; then
  log "initializing the model"
  init_tree_model
fi

if [ "$stage" -le -1 ]; then
  convert_alignments
fi

mllt_pass() {
  # on --mllt-iters, before the pass's statistics: MLLT in the current space, the model's means
  # rotated by it, and x.mat = MLLT cur.mat, the features of this pass on
  local x=$1
  [[ " $mllt_iters " == *" $x "* ]] || return 0
  if [ "$stage" -le "$x" ]; then
    log "pass $x: estimating MLLT"
    $cmd JOB=1:"$nj" "$dir/log/macc.$x.JOB.log" \
      emasr gmm-acc-mllt "${feat_opts[@]}" "${silence_opts[@]}" --max-skipped "$max_failed" \
        "$dir/$x.mdl" "$sdata/JOB" "$dir/ali.JOB.gz" "$dir/$x.JOB.macc"
    $cmd "$dir/log/mupdate.$x.log" \
      emasr est-mllt "$dir/$x.mat.new" $(seq -f "$dir/$x.%g.macc" 1 "$nj")
    $cmd "$dir/log/transform_means.$x.log" \
      emasr gmm-transform-means "$dir/$x.mat.new" "$dir/$x.mdl" "$dir/$x.mdl"
    $cmd "$dir/log/compose.$x.log" \
      emasr compose-transforms "$dir/$x.mat.new" "$dir/$cur_mat.mat" "$dir/$x.mat"
    rm -f "$dir/$x".*.macc
  fi
  cur_mat=$x
  feat_opts=("${spliced_opts[@]}" --transform "$dir/$cur_mat.mat")
  pass_note="transform $cur_mat.mat"
}

init_numgauss
pass_note="transform $cur_mat.mat"
gmm_training_passes mllt_pass

link_final mdl occs
rm -f "$dir/final.mat"
ln -s "$cur_mat.mat" "$dir/final.mat"
leaves=$(emasr gmm-info "$dir/final.mdl" | awk '/number of pdfs/ {print $NF}')
mat_dims=$(emasr feat-to-dim "${spliced_opts[@]}" --transform "$dir/final.mat" "$data" ||
           echo "?")
log "done training the LDA+MLLT system in $dir ($leaves pdfs, $mat_dims-dim features" \
     "through final.mat = $cur_mat.mat)"
