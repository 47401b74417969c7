#!/usr/bin/env bash
# Decode a data dir with a trained network: `emasr nnet-forward` writes log-likelihoods
# (log-posterior - log-prior, with the feature pipeline and priors stored in final.pt / ema.pt)
# per data split, then `emasr decode-loglikes` (the decoder the GMM decode uses too) writes
# lat.JOB.gz and 1-best, then scoring. The network exp dir is the parent of <decode-dir> (Kaldi's
# layout) unless --srcdir is given.
set -euo pipefail

# Begin configuration section.
nj=4
cmd=run.pl
stage=0
model=final         # final (global model W_g) | ema | avg | lastk (averaged models, when kept)
srcdir=             # network exp dir (default: dirname of <decode-dir>)
trans_mdl=          # Kaldi final.mdl whose TransitionModel maps pdfs to the graph (default: $srcdir/final.mdl)
prior_scale=1.0
num_threads=1       # torch threads per nnet-forward job
beam=13.0
lattice_beam=8.0
max_active=7000
min_active=200
prune_interval=25   # frames between lattice pruning passes (same lattice for any value)
acwt=0.1            # acoustic scale for network log-likelihoods
decoder=lattice-faster  # bounded by --max-active; lattice-simple prunes by --beam only
frame_shift=0.03    # seconds per network frame (10 ms * stacking factor), for the real-time factor
keep_loglikes=false # keep loglikes.JOB.{ark,scp} after decoding
skip_scoring=false
scoring_opts=
max_failed_fraction=0.05  # fail when more than this share of the utterances got no lattice
# End configuration section.

help_message="Usage: $0 [options] <graph-dir> <data-dir> <decode-dir>
e.g.: $0 --nj 8 --model ema exp/dnn/graph data/test_fbank exp/dnn/decode_test_ema
Options:
  --nj <n> --cmd <run.pl|queue.pl ..> --stage <n> --model <final|ema|avg|lastk> --srcdir <nnet-exp-dir>
  --trans-mdl <final.mdl> --prior-scale <s> --num-threads <n>
  --beam <b> --lattice-beam <b> --max-active <n> --min-active <n> --prune-interval <n>
  --acwt <scale>
  --decoder <lattice-faster|lattice-simple> --frame-shift <s> --keep-loglikes <true|false>
  --skip-scoring <true|false> --scoring-opts '<opts for local/score.sh>'
  --max-failed-fraction <f>   utterances whose decode failed are scored as deletions; more than
                              this share of them fails the step, naming them (default $max_failed_fraction)"

utils_dir="$(cd "$(dirname "$0")/../../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"

if [ $# -ne 3 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
graphdir=$1; data=$2; dir=$3
lock_dirs "$dir"
[ -z "$srcdir" ] && srcdir=$(dirname "$dir")
[ -z "$trans_mdl" ] && trans_mdl=$srcdir/final.mdl

for f in "$srcdir/$model.pt" "$data/feats.scp" "$graphdir/HCLG.fst" "$graphdir/words.txt" \
         "$trans_mdl"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
# The network, the TransitionModel and the graph must have the same pdfs, the graph must be
# built with the model's tree (else the C++ decoder aborts), and the data dir must have the CMVN
# stats of every speaker where the network normalizes per speaker: check before any work.
compat=(--network "$srcdir/$model.pt" --model "$trans_mdl" --graph "$graphdir" --data "$data")
[ -f "$(dirname "$trans_mdl")/tree" ] && compat+=(--tree "$(dirname "$trans_mdl")/tree")
emasr check-compatible "${compat[@]}" || exit 1
# the record of what the dir's outputs were made from goes first, whatever stage this starts
# at: it is written again once they are complete (utils/lib/inputs.sh)
remove_inputs_record "$dir"
mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
split_data.sh "$data" "$nj"
sdata=$data/split$nj

# Temporary archives of a killed earlier run (or of a job that aborted) are removed before and
# after each stage's jobs, so that a failed decode leaves only complete files.
clean_tmp() { rm -f "$dir"/loglikes.*.tmp.* "$dir"/lat.*.gz.tmp.* "$dir"/hyp.*.txt.tmp.*; }
if [ "$stage" -le 1 ]; then
  # an earlier decode's lattices, hypotheses and scores go first: a failed decode leaves none
  rm -rf "$dir"/lat.*.gz "$dir"/hyp.*.txt "$dir/scoring_kaldi" "$dir"/wer_* "$dir"/cer_*
fi
if [ "$stage" -le 0 ]; then
  clean_tmp
  $cmd JOB=1:"$nj" "$dir/log/nnet_forward.JOB.log" \
    emasr nnet-forward --model "$model" --prior-scale "$prior_scale" --num-threads "$num_threads" \
      "$srcdir" "$sdata/JOB" "ark,scp:$dir/loglikes.JOB.ark,$dir/loglikes.JOB.scp" \
    || { clean_tmp; exit 1; }
fi

if [ "$stage" -le 1 ]; then
  clean_tmp
  $cmd JOB=1:"$nj" "$dir/log/decode.JOB.log" \
    emasr decode-loglikes --beam "$beam" --lattice-beam "$lattice_beam" \
      --max-active "$max_active" --min-active "$min_active" --prune-interval "$prune_interval" \
      --acwt "$acwt" --decoder "$decoder" \
      --frame-shift "$frame_shift" --word-symbol-table "$graphdir/words.txt" \
      "$trans_mdl" "$graphdir/HCLG.fst" "scp:$dir/loglikes.JOB.scp" "$dir/lat.JOB.gz" \
    || { clean_tmp; exit 1; }
  [ "$keep_loglikes" = true ] || rm -f "$dir"/loglikes.*.ark "$dir"/loglikes.*.scp
fi

if [ "$stage" -le 2 ] && [ "$skip_scoring" != true ]; then
  scorer=local/score.sh
  [ -x "$scorer" ] || scorer="$(dirname "$0")/../score_kaldi.sh"
  # shellcheck disable=SC2086
  "$scorer" --max-failed-fraction "$max_failed_fraction" $scoring_opts "$data" "$graphdir" "$dir"
fi
# what these lattices and scores were made from (utils/lib/inputs.sh), written last
record_inputs "$dir" "$srcdir/$model.pt" "$trans_mdl" "$graphdir/HCLG.fst" "$graphdir/words.txt" \
  "$data/feats.scp" "$data/cmvn.scp" "$data/text" "$data/utt2spk"
log "decoded $data with $srcdir/$model.pt into $dir"
