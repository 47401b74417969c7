#!/usr/bin/env bash
# Decode a data dir with a GMM-HMM model (Kaldi's steps/decode.sh): features read as the model
# was trained (CMVN options from <srcdir>/cmvn_opts, then deltas, or splicing and final.mat when
# <srcdir> has final.mat: steps/lib/gmm_feats.sh), GMM log-likelihoods over pdfs, then Kaldi's
# lattice decoder against HCLG; lat.JOB.gz and hyp.JOB.txt per job, then scoring.
set -euo pipefail

# Begin configuration section.
nj=4
cmd=run.pl
stage=0
beam=13.0
lattice_beam=8.0
max_active=7000
min_active=200
prune_interval=25   # frames between lattice pruning passes (same lattice for any value)
acwt=0.083333    # Kaldi's GMM default (1/12)
decoder=lattice-faster  # bounded by --max-active; lattice-simple prunes by --beam only (with weak
                        # GMMs its search explodes). Both write lattices for LM-weight sweeps.
model=           # default: <srcdir>/final.mdl
delta_order=     # default: <srcdir>/delta_order if the training step left one, else 2
                 # (an LDA system, with final.mat, reads no deltas)
transform_dir=   # dir with trans.JOB: per-speaker (fMLLR) transforms applied after final.mat
skip_scoring=false
scoring_opts=
max_failed_fraction=0.05  # fail when more than this share of the utterances got no lattice
# End configuration section.

help_message="Usage: $0 [options] <graph-dir> <data-dir> <decode-dir>
e.g.: $0 --nj 4 exp/mono/graph data/test exp/mono/decode_test
The GMM exp dir (final.mdl, cmvn_opts) is the parent of <decode-dir> (Kaldi's layout).
Options:
  --nj <n> --cmd <run.pl|queue.pl ..> --stage <n>
  --beam <b> --lattice-beam <b> --max-active <n> --min-active <n> --prune-interval <n>
  --acwt <scale> --decoder <lattice-faster|lattice-simple> --model <final.mdl> --delta-order <n>
  --transform-dir <dir>       apply <dir>/trans.JOB (per speaker) after final.mat; its num_jobs = --nj
  --skip-scoring <true|false> --scoring-opts '<opts for local/score.sh>'
  --max-failed-fraction <f>   utterances whose decode failed are scored as deletions; more than
                              this share of them fails the step, naming them (default $max_failed_fraction)"

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"

if [ $# -ne 3 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
graphdir=$1; data=$2; dir=$3
lock_dirs "$dir"
srcdir=$(dirname "$dir")
[ -z "$model" ] && model=$srcdir/final.mdl

for f in "$graphdir/HCLG.fst" "$graphdir/words.txt" "$data/feats.scp" "$data/cmvn.scp" "$model"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
# A graph of another model (other pdfs, or another tree with the same phones) makes the C++
# decoder abort or decode nonsense: check before any work.
compat=(--model "$model" --graph "$graphdir")
[ -f "$(dirname "$model")/tree" ] && compat+=(--tree "$(dirname "$model")/tree")
emasr check-compatible "${compat[@]}" || exit 1
cmvn_opts=$(cat "$srcdir/cmvn_opts" 2>/dev/null || true)
delta_order_option=$delta_order
# shellcheck source=steps/lib/gmm_feats.sh
. "$(dirname "$0")/lib/gmm_feats.sh"
[ -n "$transform_dir" ] && check_transform_dir_jobs "$transform_dir" "$nj"
gmm_feat_opts "$srcdir" "$transform_dir"   # feat_type, delta_order, transform_opts
warn_unadapted_sat "$model" "$transform_dir"  # a SAT system is decoded by decode_fmllr.sh
if [ -n "$delta_order_option" ] && [ "$feat_type" = delta ]; then
  delta_order=$delta_order_option
fi
check_gmm_feat_dim "$model" "$data"
norm_vars=--no-norm-vars
case "$cmvn_opts" in *--norm-vars=true*) norm_vars=--norm-vars ;; esac

# the record of what the dir's outputs were made from goes first, whatever stage this starts
# at: it is written again once they are complete (utils/lib/inputs.sh)
remove_inputs_record "$dir"
mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
split_data.sh "$data" "$nj"
sdata=$data/split$nj

if [ "$stage" -le 0 ]; then
  # Temporary archives of a killed earlier run (or of a job that aborted) are removed here and
  # after a failure, so that a failed decode leaves only complete lat.N.gz / hyp.N.txt.
  rm -f "$dir"/lat.*.gz.tmp.* "$dir"/hyp.*.txt.tmp.*
  # an earlier decode's lattices and scores go first: a failed decode leaves none of them
  rm -rf "$dir"/lat.*.gz "$dir"/hyp.*.txt "$dir/scoring_kaldi" "$dir"/wer_* "$dir"/cer_*
  $cmd JOB=1:"$nj" "$dir/log/decode.JOB.log" \
    emasr gmm-decode --beam "$beam" --lattice-beam "$lattice_beam" --max-active "$max_active" \
      --min-active "$min_active" --prune-interval "$prune_interval" --acwt "$acwt" \
      --decoder "$decoder" $norm_vars \
      --delta-order "$delta_order" ${transform_opts[@]+"${transform_opts[@]}"} \
      --word-symbol-table "$graphdir/words.txt" \
      "$model" "$graphdir/HCLG.fst" "$sdata/JOB" "$dir/lat.JOB.gz" \
    || { rm -f "$dir"/lat.*.gz.tmp.* "$dir"/hyp.*.txt.tmp.*; exit 1; }
fi

if [ "$stage" -le 1 ] && [ "$skip_scoring" != true ]; then
  # As Kaldi: the recipe's local/score.sh (relative to the recipe dir), else the generic scorer.
  scorer=local/score.sh
  [ -x "$scorer" ] || scorer="$(dirname "$0")/score_kaldi.sh"
  # shellcheck disable=SC2086
  "$scorer" --max-failed-fraction "$max_failed_fraction" $scoring_opts "$data" "$graphdir" "$dir"
fi
# what these lattices and scores were made from (utils/lib/inputs.sh), written last
record_inputs "$dir" "$model" "$graphdir/HCLG.fst" "$graphdir/words.txt" "$data/feats.scp" \
  "$data/cmvn.scp" "$data/text" "$data/utt2spk" ${transform_dir:+"$transform_dir"/trans.*}
log "decoded $data into $dir"
