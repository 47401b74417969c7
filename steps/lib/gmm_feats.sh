# The GMM feature pipeline of a model dir, decided as Kaldi's align_si.sh and decode.sh decide it:
# a dir with final.mat (an LDA system, steps/train_lda_mllt.sh) reads CMVN -> splice-feats
# $splice_opts -> transform-feats final.mat; any other reads CMVN -> add-deltas (its delta_order,
# default 2). Sourced by align_si.sh, decode.sh and train_lda_mllt.sh; docs/gmm.md.

# gmm_feat_opts DIR [TRANSFORM_DIR]: sets feat_type (lda or delta), delta_order and the array
# transform_opts (emasr's options after --cmvn-opts and --delta-order). With TRANSFORM_DIR, the
# per-speaker affine transforms TRANSFORM_DIR/trans.JOB (fMLLR, keyed by speaker or utterance)
# are applied last; JOB is the job's number, so TRANSFORM_DIR must have the caller's num_jobs.
gmm_feat_opts() {
  local dir=$1 transform_dir=${2:-} splice_opts
  transform_opts=()
  if [ -f "$dir/final.mat" ]; then
    feat_type=lda
    delta_order=0
    splice_opts=$(cat "$dir/splice_opts" 2>/dev/null || true)
    # Kaldi's splice-feats without options splices 4 frames on each side
    [ -n "$splice_opts" ] || splice_opts="--left-context=4 --right-context=4"
    transform_opts=(--splice-opts "$splice_opts" --transform "$dir/final.mat")
  else
    feat_type=delta
    delta_order=$(cat "$dir/delta_order" 2>/dev/null || echo 2)
  fi
  if [ -n "$transform_dir" ]; then
    [ -f "$transform_dir/trans.1" ] || {
      echo "$0: expected file $transform_dir/trans.1 to exist (--transform-dir)" >&2; exit 1; }
    transform_opts+=(--speaker-transforms "ark:$transform_dir/trans.JOB")
  fi
}

# check_transform_dir_jobs TRANSFORM_DIR NJ: its trans.JOB must be split as the caller's jobs.
check_transform_dir_jobs() {
  local tnj
  tnj=$(cat "$1/num_jobs" 2>/dev/null || echo "")
  if [ "$tnj" != "$2" ]; then
    echo "$0: --transform-dir $1 has num_jobs '$tnj', this step runs $2 jobs: its trans.JOB" \
         "would not match the data splits (use --nj $tnj)" >&2
    exit 1
  fi
}

# check_gmm_feat_dim MODEL DATA: before any work, the features of DATA after the pipeline set by
# gmm_feat_opts must have MODEL's dimension; otherwise exit 1 with a message naming the files.
check_gmm_feat_dim() {
  local opts=()
  [ ${#transform_opts[@]} -gt 0 ] && opts=("${transform_opts[@]//JOB/1}")
  emasr feat-to-dim --delta-order "$delta_order" ${opts[@]+"${opts[@]}"} --model "$1" "$2" \
    > /dev/null || exit 1
}
