#!/usr/bin/env bash
# Flat-start monophone GMM-HMM training (Kaldi's steps/train_mono.sh): initialize from a data
# subset, equal alignment, then num_iters passes of MLE re-estimation (GMMs and transitions) with
# Viterbi realignment on realign_iters and mixing up to totgauss Gaussians. Jobs run over data
# splits; each writes its statistics, and gmm-est sums them. The work is `emasr gmm-init-mono`,
# `emasr gmm-align`, `emasr gmm-acc-stats-ali` and `emasr gmm-est`.
set -euo pipefail

# Begin configuration section.
nj=4
cmd=run.pl
scale_opts="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 0.1"  # as Kaldi's
num_iters=40       # number of training iterations
max_iter_inc=30    # the number of Gaussians grows until this iteration
totgauss=1000      # target number of Gaussians
careful=false      # Kaldi's --careful alignment
boost_silence=1.0  # factor on the silence Gaussians' weights when aligning
realign_iters="1 2 3 4 5 6 7 8 9 10 12 14 16 18 20 23 26 29 32 35 38"
power=0.25         # exponent of the occupancy when allocating Gaussians to pdfs
init_utts=10       # the Gaussians start from the global statistics of this many utterances
cmvn_opts=         # e.g. "--norm-vars=true"; stored in <exp-dir>/cmvn_opts
delta_order=2      # deltas and delta-deltas, as Kaldi's add-deltas
max_failed=0.1     # a job fails when more than this fraction of its utterances cannot be used
stage=-4
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir> <exp-dir>
e.g.: $0 data/train_2k data/lang exp/mono
Writes <exp-dir>/{final.mdl,final.occs,tree,num_jobs,cmvn_opts,phones.txt,ali.JOB.gz} and logs in
<exp-dir>/log (acc.N.JOB.log and update.N.log give the log-likelihood per frame of iteration N).
Options:
  --nj <nj>                  # number of parallel jobs (default $nj)
  --cmd <run.pl|queue.pl ..> # how to run jobs (default $cmd)
  --num-iters <n>            # training iterations (default $num_iters)
  --totgauss <n>             # target number of Gaussians (default $totgauss)
  --boost-silence <factor>   # boost silence weights when aligning (default $boost_silence)
  --scale-opts <opts>        # alignment scales (default: '$scale_opts')
  --cmvn-opts <opts>         # CMVN options, e.g. '--norm-vars=true' (default '$cmvn_opts')
  --max-failed <fraction>    # allowed fraction of unusable utterances per job (default $max_failed)
  --stage <stage>            # resume from this stage (default $stage)"

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"

if [ $# -ne 3 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
data=$1; lang=$2; dir=$3
lock_dirs "$dir"

for f in "$data/feats.scp" "$data/text" "$data/utt2spk" "$lang/L.fst" "$lang/topo" \
         "$lang/words.txt" "$lang/phones.txt" "$lang/phones/sets.int" "$lang/phones/silence.csl"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
case " $cmvn_opts " in
  *"--norm-means=false"*) ;;
  *) [ -f "$data/cmvn.scp" ] || die "expected file $data/cmvn.scp to exist" ;;
esac

mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
echo "$cmvn_opts" > "$dir/cmvn_opts"
echo "$delta_order" > "$dir/delta_order"
cp "$lang/phones.txt" "$dir/phones.txt"
split_data.sh "$data" "$nj"
sdata=$data/split$nj
feat_opts=(--cmvn-opts "$cmvn_opts" --delta-order "$delta_order")
read -r -a align_opts <<< "$scale_opts"
align_opts+=(--max-failed "$max_failed")
[ "$careful" = true ] && align_opts+=(--careful)

if [ "$stage" -le -3 ]; then
  log "initializing the monophone system"
  $cmd "$dir/log/init.log" emasr gmm-init-mono --shared-phones "$lang/phones/sets.int" \
    --num-utts "$init_utts" "${feat_opts[@]}" "$lang/topo" "$sdata/1" "$dir/0.mdl" "$dir/tree"
fi
numgauss=$(emasr gmm-info "$dir/0.mdl" | awk '/number of gaussians/ {print $NF}')
incgauss=$(( (totgauss - numgauss) / max_iter_inc ))

if [ "$stage" -le -1 ]; then
  log "aligning the data equally (pass 0)"
  $cmd JOB=1:"$nj" "$dir/log/align.0.JOB.log" \
    emasr gmm-align --equal "${feat_opts[@]}" --max-failed "$max_failed" \
      "$dir/0.mdl" "$dir/tree" "$lang" "$sdata/JOB" "$dir/ali.JOB.gz"
  $cmd JOB=1:"$nj" "$dir/log/acc.0.JOB.log" \
    emasr gmm-acc-stats-ali "${feat_opts[@]}" --max-skipped "$max_failed" \
      "$dir/0.mdl" "$sdata/JOB" "$dir/ali.JOB.gz" "$dir/0.JOB.acc"
fi

if [ "$stage" -le 0 ]; then
  # Few Gaussians have enough data on the equal alignment: a lower occupancy floor (Kaldi's 3).
  $cmd "$dir/log/update.0.log" \
    emasr gmm-est --min-gaussian-occupancy 3 --mix-up "$numgauss" --power "$power" \
      "$dir/0.mdl" "$dir/1.mdl" $(seq -f "$dir/0.%g.acc" 1 "$nj")
  rm -f "$dir"/0.*.acc
fi

beam=6  # 10 after the first realignment, as in Kaldi
x=1
while [ "$x" -lt "$num_iters" ]; do
  log "pass $x"
  if [ "$stage" -le "$x" ]; then
    if [[ " $realign_iters " == *" $x "* ]]; then
      log "aligning data"
      $cmd JOB=1:"$nj" "$dir/log/align.$x.JOB.log" \
        emasr gmm-align "${feat_opts[@]}" "${align_opts[@]}" --beam "$beam" \
          --retry-beam $((beam * 4)) --boost-silence "$boost_silence" \
          "$dir/$x.mdl" "$dir/tree" "$lang" "$sdata/JOB" "$dir/ali.JOB.gz"
    fi
    $cmd JOB=1:"$nj" "$dir/log/acc.$x.JOB.log" \
      emasr gmm-acc-stats-ali "${feat_opts[@]}" --max-skipped "$max_failed" \
        "$dir/$x.mdl" "$sdata/JOB" "$dir/ali.JOB.gz" "$dir/$x.JOB.acc"
    $cmd "$dir/log/update.$x.log" \
      emasr gmm-est --seed "$x" --write-occs "$dir/$((x + 1)).occs" --mix-up "$numgauss" --power "$power" \
        "$dir/$x.mdl" "$dir/$((x + 1)).mdl" $(seq -f "$dir/$x.%g.acc" 1 "$nj")
    rm -f "$dir/$x.mdl" "$dir"/$x.*.acc "$dir/$x.occs"
  fi
  if [ "$x" -le "$max_iter_inc" ]; then
    numgauss=$((numgauss + incgauss))
  fi
  beam=10
  x=$((x + 1))
done

ln -sf "$x.mdl" "$dir/final.mdl"
ln -sf "$x.occs" "$dir/final.occs"
# the update log's message only (its lines are log lines of their own: not two in one)
like=$(grep -ho "overall avg like per frame = .*" "$dir/log/update.$((x - 1)).log" | tail -n 1 || true)
log "final: ${like:-no likelihood in $dir/log/update.$((x - 1)).log}"
log "done training the monophone system in $dir"
