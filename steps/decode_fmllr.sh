#!/usr/bin/env bash
# Decode with a speaker-adapted (SAT) GMM system (Kaldi's steps/decode_fmllr.sh, two-pass form):
# 1. a speaker-independent decode with the alignment model (final.alimdl, else final.mdl) on the
#    SI features into <decode-dir>.si (steps/decode.sh; --si-dir takes an existing one);
# 2. per-speaker fMLLR from its lattices' posteriors (lattice-to-post at --acwt, silence weighted
#    --silence-weight; Gaussian posteriors of the alignment model, means and variances of the
#    adaptation model: Kaldi's gmm-post-to-gpost | gmm-est-fmllr-gpost);
# 3. the main decode with the adaptation model (final.mdl) on the adapted features
#    (steps/decode.sh --transform-dir);
# 4. (--second-pass true, as Kaldi) fMLLR again from those lattices, composed with the first,
#    and the lattices' acoustic costs rescored with the final model on the final features
#    (gmm-rescore-lattice);
# 5. scoring as steps/decode.sh scores.
# Writes <decode-dir>/{lat.JOB.gz,hyp.JOB.txt,trans.JOB,pre_trans.JOB,num_jobs} and the scores
# (pre_trans.JOB, the first-pass transforms, are kept so that any stage can be rerun); logs in
# <decode-dir>/log. The work is `emasr gmm-decode`, `lattice-to-post`, `gmm-est-fmllr`,
# `compose-transforms`, `gmm-rescore-lattice` and `score-lattices`.
set -euo pipefail

# Begin configuration section.
nj=4
cmd=run.pl
stage=0
first_beam=10.0       # beam of the speaker-independent pass
first_max_active=2000 # max-active of the speaker-independent pass
beam=13.0
lattice_beam=6.0
max_active=7000
acwt=0.083333         # acoustic scale of the decodes and of the fMLLR posteriors
silence_weight=0.01   # weight of silence in the fMLLR estimation (Kaldi's decode_fmllr.sh)
fmllr_update_type=full
fmllr_min_count=500  # fewer frames of a speaker: no transform (Kaldi's gmm-est-fmllr)
alignment_model=      # default: <srcdir>/final.alimdl, else final.mdl
adapt_model=          # default: <srcdir>/final.mdl
final_model=          # default: <srcdir>/final.mdl
si_dir=               # an existing speaker-independent decode of <data-dir> (skips pass 1)
second_pass=true      # a second fMLLR estimate from the adapted decode, then rescoring
skip_scoring=false
scoring_opts=
max_failed_fraction=0.05  # fail when more than this share of the utterances got no lattice
max_skipped=0.1       # fMLLR: fail when more than this share of a job's utterances has no lattice
# End configuration section.

help_message="Usage: $0 [options] <graph-dir> <data-dir> <decode-dir>
e.g.: $0 --nj 4 exp/tri3/graph data/test exp/tri3/decode_test
The SAT exp dir (final.mdl, final.alimdl, cmvn_opts, final.mat) is the parent of <decode-dir>.
Options:
  --nj <n> --cmd <run.pl|queue.pl ..>
  --stage <n>                 0 SI decode, 1 first fMLLR, 2 adapted decode, 3 second fMLLR,
                              4 rescoring, 5 scoring (default $stage)
  --first-beam <b> --first-max-active <n>   the SI pass (default $first_beam, $first_max_active)
  --beam <b> --lattice-beam <b> --max-active <n>   the adapted pass
  --acwt <scale>              acoustic scale (default $acwt)
  --silence-weight <w>        silence weight in fMLLR estimation (default $silence_weight)
  --fmllr-update-type <full|diag|offset|none>
  --fmllr-min-count <frames>       # below: the identity transform (default $fmllr_min_count)
  --alignment-model <mdl> --adapt-model <mdl> --final-model <mdl>
  --si-dir <dir>              use this SI decode (same data, num_jobs and tree) for pass 1
  --second-pass <true|false>  second fMLLR estimate and rescoring (default $second_pass)
  --skip-scoring <true|false> --scoring-opts '<opts>'
  --max-failed-fraction <f>   as steps/decode.sh (default $max_failed_fraction)"

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"

if [ $# -ne 3 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
graphdir=$1; data=$2; dir=${3%/}
lock_dirs "$dir"
srcdir=$(dirname "$dir")
steps=$(dirname "$0")

if [ -z "$alignment_model" ]; then
  alignment_model=$srcdir/final.mdl
  [ -f "$srcdir/final.alimdl" ] && alignment_model=$srcdir/final.alimdl
fi
[ -n "$adapt_model" ] || adapt_model=$srcdir/final.mdl
[ -n "$final_model" ] || final_model=$srcdir/final.mdl
for f in "$graphdir/HCLG.fst" "$graphdir/words.txt" "$graphdir/phones/silence.csl" \
         "$data/feats.scp" "$data/cmvn.scp" "$data/spk2utt" "$srcdir/tree" \
         "$alignment_model" "$adapt_model" "$final_model"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
check_phones_compatible.sh "$graphdir/phones.txt" "$srcdir/phones.txt"
for model in "$alignment_model" "$adapt_model" "$final_model"; do
  emasr check-compatible --model "$model" --graph "$graphdir" --tree "$srcdir/tree" || exit 1
done
if [ -n "$si_dir" ]; then
  si_nj=$(cat "$si_dir/num_jobs" 2>/dev/null || echo "")
  [ "$si_nj" = "$nj" ] || {
    echo "Error: $0: --si-dir $si_dir has num_jobs '$si_nj', this step runs $nj jobs (use --nj $si_nj)" >&2
    exit 1; }
  [ -f "$si_dir/lat.1.gz" ] || die "expected file $si_dir/lat.1.gz to exist"
fi
cmvn_opts=$(cat "$srcdir/cmvn_opts" 2>/dev/null || true)
silphonelist=$(cat "$graphdir/phones/silence.csl")
# shellcheck source=steps/lib/gmm_feats.sh
. "$(dirname "$0")/lib/gmm_feats.sh"
gmm_feat_opts "$srcdir"                   # the SI pipeline: feat_type, delta_order, transform_opts
for model in "$alignment_model" "$adapt_model" "$final_model"; do
  check_gmm_feat_dim "$model" "$data"
done
si_opts=(--cmvn-opts "$cmvn_opts" --delta-order "$delta_order"
         ${transform_opts[@]+"${transform_opts[@]}"})

mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
split_data.sh "$data" "$nj"
sdata=$data/split$nj
fmllr_est_opts "$silence_weight" "$max_skipped"
fmllr_opts+=(--spk2utt "$sdata/JOB/spk2utt")
decode_opts=(--nj "$nj" --cmd "$cmd" --acwt "$acwt" --scoring-opts "$scoring_opts"
             --max-failed-fraction "$max_failed_fraction")

if [ "$stage" -le 2 ]; then
  # an earlier decode's lattices, scores and record of its inputs go first: a failed decode
  # leaves none of them (steps/decode.sh records the inputs again at its end)
  remove_inputs_record "$dir"
  rm -rf "$dir"/lat.*.gz "$dir/scoring_kaldi" "$dir"/wer_* "$dir"/cer_*
fi
if [ -z "$si_dir" ]; then
  si_dir=$dir.si
  if [ "$stage" -le 0 ]; then
    log "speaker-independent decoding with $alignment_model into $si_dir"
    "$steps/decode.sh" "${decode_opts[@]}" --skip-scoring "$skip_scoring" \
      --beam "$first_beam" --max-active "$first_max_active" --model "$alignment_model" \
      "$graphdir" "$data" "$si_dir"
  fi
fi

gpost=()
[ "$alignment_model" = "$adapt_model" ] || gpost=(--gpost-model "$alignment_model")
if [ "$stage" -le 1 ]; then
  log "getting first-pass fMLLR transforms from the lattices of $si_dir"
  $cmd JOB=1:"$nj" "$dir/log/post_pass1.JOB.log" \
    emasr lattice-to-post --acoustic-scale "$acwt" "$si_dir/lat.JOB.gz" "$dir/post1.JOB.gz"
  $cmd JOB=1:"$nj" "$dir/log/fmllr_pass1.JOB.log" \
    emasr gmm-est-fmllr "${si_opts[@]}" ${gpost[@]+"${gpost[@]}"} "${fmllr_opts[@]}" --post \
      "$adapt_model" "$sdata/JOB" "$dir/post1.JOB.gz" "$dir/pre_trans.JOB"
  rm -f "$dir"/post1.*.gz
  log "first-pass fMLLR auxf improvement per frame: $(fmllr_gain "$dir/log/fmllr_pass1")"
  warn_identity_transforms "$dir/log/fmllr_pass1" "$fmllr_min_count"
fi

if [ "$stage" -le 2 ]; then
  log "decoding with $adapt_model on the adapted features"
  for n in $(seq "$nj"); do
    [ -f "$dir/pre_trans.$n" ] || die "expected file $dir/pre_trans.$n to exist (stage 1)"
    cp "$dir/pre_trans.$n" "$dir/trans.$n"
  done
  second_scoring=$skip_scoring
  [ "$second_pass" = true ] && second_scoring=true   # scored after the rescoring
  "$steps/decode.sh" "${decode_opts[@]}" --skip-scoring "$second_scoring" \
    --beam "$beam" --lattice-beam "$lattice_beam" --max-active "$max_active" \
    --model "$adapt_model" --transform-dir "$dir" "$graphdir" "$data" "$dir"
fi

if [ "$second_pass" = true ]; then
  if [ "$stage" -le 3 ]; then
    log "estimating fMLLR transforms a second time, from the adapted decode's lattices"
    $cmd JOB=1:"$nj" "$dir/log/post_pass2.JOB.log" \
      emasr lattice-to-post --acoustic-scale "$acwt" "$dir/lat.JOB.gz" "$dir/post2.JOB.gz"
    $cmd JOB=1:"$nj" "$dir/log/fmllr_pass2.JOB.log" \
      emasr gmm-est-fmllr "${si_opts[@]}" --speaker-transforms "ark:$dir/pre_trans.JOB" \
        "${fmllr_opts[@]}" --post "$adapt_model" "$sdata/JOB" "$dir/post2.JOB.gz" \
        "$dir/trans_tmp.JOB"
    $cmd JOB=1:"$nj" "$dir/log/compose_pass2.JOB.log" \
      emasr compose-transforms --b-is-affine true "ark:$dir/trans_tmp.JOB" \
        "ark:$dir/pre_trans.JOB" "ark:$dir/trans.JOB"
    rm -f "$dir"/post2.*.gz "$dir"/trans_tmp.*
    log "second-pass fMLLR auxf improvement per frame: $(fmllr_gain "$dir/log/fmllr_pass2")"
  fi
  if [ "$stage" -le 4 ]; then
    log "rescoring the lattices with $final_model on the final adapted features"
    $cmd JOB=1:"$nj" "$dir/log/acoustic_rescore.JOB.log" \
      emasr gmm-rescore-lattice "${si_opts[@]}" --speaker-transforms "ark:$dir/trans.JOB" \
        --acwt "$acwt" --word-symbol-table "$graphdir/words.txt" \
        "$final_model" "$dir/lat.JOB.gz" "$sdata/JOB" "$dir/lat.JOB.gz"
  fi
  if [ "$stage" -le 5 ] && [ "$skip_scoring" != true ]; then
    "$steps/decode.sh" "${decode_opts[@]}" --stage 1 --model "$final_model" \
      --transform-dir "$dir" "$graphdir" "$data" "$dir"
  fi
fi
check_trans_jobs "$dir" "$nj"
log "decoded $data into $dir (per-speaker fMLLR in $dir/trans.JOB)"
